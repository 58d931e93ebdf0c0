// The scheduler: from a validated graph, a topology (devices and links) and
// what is already resident where, to a plan saying where each node runs, in
// which order, which tensors move between devices, and why.
//
// A pure library over the graph IR: deterministic (the same inputs give the
// same plan, bit for bit), no threads, no I/O. Device profiles come from
// each device backend's calibration (exec/backend.hpp), which may keep its
// measurements in the profile cache (profile_cache.hpp). Four stages, each
// usable on its own (analysis.hpp, cost.hpp, placement in plan.cpp), tied
// together by plan_graph():
//
//   1. semantic analysis: stage (prefill / decode / vision ...) from the
//      annotations, else inferred from the graph; attention, MLP,
//      conv-norm-activation, residual, embedding and LM-head patterns; KV
//      caches (annotated, or found from the graph itself).
//   2. cost model: FLOPs and bytes per node; predicted seconds on a device
//      (roofline: max(compute at the op class's rate, memory) + a per-op
//      overhead), per remote stage (its GraphSubmit round trip) and per
//      transfer (the runtime's request round trips + bytes / bandwidth);
//      stages run one after another, as the runtime runs them.
//   3. placement: list scheduling over every device of every node,
//      minimising the predicted completion time of the serial stage
//      sequence, then merging a stage into its neighbour's device when that
//      is cheaper (fewer cuts), under co-location rules (a KV cache stays with
//      the decode attention that reads it; a resident weight stays where it
//      is; a tensor never goes to a device it cannot fit).
//   4. memory-aware ordering: a topological order that frees tensors early,
//      the per-device peak from tensor lifetimes, checked against budgets.
//
// docs/scheduler.md explains the model, the rules and the JSON of
// Plan::explain_json.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/graph.hpp"
#include "sched/analysis.hpp"
#include "sched/cost.hpp"
#include "sched/learned_cost.hpp"
#include "sched/profile_cache.hpp"

namespace genie::sched {

// ---------------------------------------------------------------------------
// Topology
// ---------------------------------------------------------------------------

// One device of one node. Devices are referred to by their index in
// Topology::devices everywhere in a plan.
struct DeviceProfile {
  std::string node_id;              // the node (process) holding it; "" = this process
  std::string device;               // "cpu:0", "cuda:1"
  double peak_flops = 0;            // FLOP/s of GEMM-like ops (matmul, linear, attention, conv), > 0
  // FLOP/s that element-wise, normalisation, softmax and reduction kernels
  // reach (scalar/short-vector loops, far below the GEMM rate; the cost
  // model's FLOP counts of those ops, cost.cpp); 0 = peak_flops.
  double vector_flops = 0;
  double mem_bw_bytes_per_s = 0;    // bytes/s of the device memory, > 0
  uint64_t mem_capacity_bytes = 0;  // physical memory of the device
  uint64_t mem_budget_bytes = 0;    // what plans may use of it; 0 = the capacity
  double op_overhead_s = 2e-6;      // fixed cost of launching one node
  // Corrections learned from measured runs on this device model
  // (learned_cost.hpp), shared by every profile of the model in the process;
  // null: the model's figures as they are. Not part of the plan-cache key: a
  // cached plan is re-planned when its runs drift from it (PlanCache::report).
  std::shared_ptr<CostLearner> learned;

  uint64_t budget() const { return mem_budget_bytes ? mem_budget_bytes : mem_capacity_bytes; }
  // "node-b/cuda:1", or "cpu:0" for this process.
  std::string qualified_name() const { return node_id.empty() ? device : node_id + "/" + device; }
};

// A network path between two nodes (used in both directions unless the
// reverse is given too). Devices of one node exchange tensors through memory
// at the slower of the two devices' bandwidths, unless a link from the node
// to itself says otherwise.
//
// The figures price requests as the multi-node runtime makes them
// (docs/scheduler.md, "Stages and requests"): every request on the link
// costs rtt_s + request_s, a stage run on the far node one GraphSubmit
// round trip (rtt_s + dispatch_s + dispatch_per_node_s per node) besides its
// compute, and a tensor moved
// over it its requests plus bytes / bandwidth.
struct LinkProfile {
  std::string from_node, to_node;
  double bandwidth_bytes_per_s = 0;  // > 0
  double rtt_s = 0;                  // network round trip
  double request_s = 0;              // handling of one tensor request (alloc, write, read) beyond the RTT
  double dispatch_s = 0;             // handling of one stage's GraphSubmit beyond the RTT (decode, validate, reply)
  double dispatch_per_node_s = 0;    // and per node of the stage (its JSON, graph building, checks), beyond op_overhead_s
};

// The node of devices[0] is the coordinator: the process that runs the
// plan (the master). It runs its own stages itself and sends every other
// node's stages to that node, one after another; tensors between two other
// nodes go through it (what src/control/multinode.cpp does).
struct Topology {
  std::vector<DeviceProfile> devices;
  std::vector<LinkProfile> links;
  // Bumped by whoever owns the topology whenever devices, links or budgets
  // change: part of the plan-cache key.
  uint64_t version = 0;

  // Throws Error(INVALID_ARGUMENT) naming the bad field: no devices, a
  // non-positive rate, duplicate device names.
  void check() const;
};

// Where graph inputs already live (tensors bound to a submission that stay
// resident: weights, KV caches, earlier outputs). Inputs absent from the map
// (host tensors, constants) are sent by the client straight to the device of
// their first reader; they are never planned as transfers from elsewhere.
struct Residency {
  std::unordered_map<std::string, int> value_device;  // graph input name -> device index

  // Order-independent digest of the map: part of the plan-cache key.
  uint64_t signature() const;
};

// ---------------------------------------------------------------------------
// Plans
// ---------------------------------------------------------------------------

// A tensor copied from one device to another before `consumer` runs
// (server-to-server over the data plane; never through the client).
struct Transfer {
  std::string value;       // value name in the planned graph
  ValueId value_id = kNone;
  int from_device = -1;
  int to_device = -1;
  uint64_t bytes = 0;
  double predicted_s = 0;
  NodeId consumer = kNone;  // the first node on to_device that reads it
};

// The rule that decided where a node runs (explain_json names it).
enum class Rule : int32_t {
  OnlyDevice = 0,      // one device can run it (the only one, or the others cannot fit it)
  MinFinishTime = 1,   // the device with the earliest predicted finish, transfers included
  KvCacheColocation = 2,  // reads a KV cache: runs where the cache lives
  ResidentWeight = 3,  // reads a resident weight: runs where the weight lives
  StageMerge = 4,      // moved into a neighbouring stage's device: the whole plan finishes earlier (fewer cuts)
};
// "only_device", "min_finish_time", "kv_cache_colocation", "resident_weight", "stage_merge"
const char* rule_name(Rule r);

// Why node i went where it did, with the figures behind the decision.
struct NodeDecision {
  Rule rule = Rule::MinFinishTime;
  double start_s = 0, finish_s = 0;  // predicted compute start and end on the serial stage timeline
  int runner_up = -1;                // the best other feasible device, -1 if none
  double runner_up_finish_s = 0;     // its predicted finish (transfers included)
  ValueId pinned_by = kNone;         // the resident / KV value behind a co-location rule
};

struct Plan {
  uint64_t graph_hash = 0;               // plan_hash() of the planned graph
  uint64_t topology_version = 0;
  uint64_t residency_signature = 0;      // Residency::signature() of the planned residency
  std::vector<int> node_device;          // per NodeId: index into Topology::devices
  std::vector<NodeId> order;             // every node exactly once, dependencies first
  std::vector<Transfer> transfers;       // in the order the consumers run
  std::vector<double> predicted_node_s;  // per NodeId: compute time on its device
  std::vector<OpCost> node_cost;         // per NodeId: FLOPs and bytes
  double predicted_total_s = 0;          // predicted completion: stages, dispatches and transfers in series
  // A multi-node plan's predicted_total_s before the coordinator's learned
  // correction of whole runs (CostLearner::total_factor): what its runs are
  // reported against (CostLearner::observe_total). Else predicted_total_s.
  double predicted_parts_s = 0;
  uint64_t graph_signature = 0;          // cost_signature() of the planned graph's costs
  std::vector<uint64_t> peak_bytes_per_device;  // per device: peak of live tensors in `order`
  std::vector<NodeDecision> decisions;   // per NodeId
  std::vector<std::string> device_names; // per device: qualified_name(), for explain
  std::vector<uint64_t> budget_per_device;
  Analysis analysis;                     // what the graph means (patterns, stage, KV caches)

  // JSON: where each node went and why (docs/scheduler.md). `g` must be the
  // planned graph or one with the same plan_hash().
  std::string explain_json(const Graph& g) const;
};

// Plans a validated graph (Graph::validate with the same bound shapes).
// `bound_shapes` resolves dynamic (-1) input dimensions as at submission.
// Throws Error:
//   INVALID_ARGUMENT  graph not validated, bad topology, residency naming an
//                     unknown input or a device index out of range;
//   OUT_OF_MEMORY     the plan cannot fit: a tensor larger than every device
//                     allowed to hold it, or a device's peak over its budget
//                     (the detail names the device, the peak, the budget and
//                     the largest tensors alive at the peak);
//   UNSUPPORTED       a node has no device that can reach its inputs (no
//                     link between two nodes).
// `timings`, when given, receives the seconds spent in each stage (for
// benchmarks).
struct PlanTimings {
  double hash_s = 0, analysis_s = 0, cost_s = 0, placement_s = 0;
};
Plan plan_graph(const Graph& g, const Topology& topo, const Residency& residency,
                const std::unordered_map<ValueId, Shape>* bound_shapes = nullptr, PlanTimings* timings = nullptr);

// The plan-cache key's graph part: ops, edges, value names, dtypes, shapes
// (bound shapes for dynamic inputs), roles, annotations, and attributes
// except floating-point values (a scale or an epsilon changes no plan, so a
// delta that changes one still hits). Never constant bytes, addresses or
// object identities: stable across runs, processes and machines.
uint64_t plan_hash(const Graph& g, const std::unordered_map<ValueId, Shape>* bound_shapes = nullptr);

// Plans by key, so that a repeated graph skips analysis and placement.
// Thread-safe; bounded (least recently used plans are dropped).
class PlanCache {
 public:
  struct Key {
    uint64_t graph_hash = 0;  // plan_hash()
    uint64_t topology_version = 0;
    uint64_t residency = 0;   // Residency::signature()
    bool operator==(const Key& o) const {
      return graph_hash == o.graph_hash && topology_version == o.topology_version && residency == o.residency;
    }
  };
  static Key key_of(const Graph& g, const Topology& topo, const Residency& residency,
                    const std::unordered_map<ValueId, Shape>* bound_shapes = nullptr);

  explicit PlanCache(size_t capacity = 256);

  // The cached plan for `key`, or null. Counts a hit or a miss.
  std::shared_ptr<const Plan> find(const Key& key);
  void insert(const Key& key, std::shared_ptr<const Plan> plan);
  // find, else plan_graph + insert (planning runs outside the lock).
  std::shared_ptr<const Plan> get_or_plan(const Graph& g, const Topology& topo, const Residency& residency,
                                          const std::unordered_map<ValueId, Shape>* bound_shapes = nullptr);
  void clear();

  // A run of `plan` (a plan this cache handed out) took `measured_s`
  // against its predicted_total_s. After kDriftRuns runs in a row more than
  // kDriftRatio times off the prediction (either way) the plan is dropped,
  // so that the next get_or_plan plans again with what the devices' learners
  // (DeviceProfile::learned) know by then. A run within the ratio resets
  // the count. Returns true when this report dropped the plan; a plan no
  // longer cached is ignored. A plan that predicts what the one dropped
  // for its key predicted (planning again learned nothing new: devices
  // without learners) is kept, so that it is not planned on every few runs.
  //
  // A smaller, lasting drift counts too: once kSettleRuns runs are in, a
  // plan whose runs' exponentially weighted mean of log(measured /
  // predicted) (weight kSettleAlpha) lies more than kSettleRatio off is
  // dropped the same way (the learners have moved on since it was made; a
  // single slow run moves that mean by little).
  static constexpr int kDriftRuns = 3;
  static constexpr double kDriftRatio = 2.0;
  static constexpr int kSettleRuns = 8;
  static constexpr double kSettleRatio = 1.25;
  static constexpr double kSettleAlpha = 0.25;
  bool report(const Plan& plan, double measured_s);

  size_t size() const;
  uint64_t hits() const;
  uint64_t misses() const;
  uint64_t replans() const;  // plans dropped by report()

 private:
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return static_cast<size_t>(k.graph_hash ^ (k.topology_version * 0x9e3779b97f4a7c15ull) ^
                                 (k.residency * 0xc2b2ae3d27d4eb4full));
    }
  };
  struct Entry {
    Key key;
    std::shared_ptr<const Plan> plan;
    int drifted = 0;        // runs in a row off the prediction (report)
    int runs = 0;           // runs reported since it was planned
    double log_drift = 0;   // their exponentially weighted mean of log(measured / predicted)
  };
  mutable std::mutex mu_;
  size_t capacity_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<Key, std::list<Entry>::iterator, KeyHash> index_;
  std::unordered_map<Key, double, KeyHash> dropped_;  // predicted_total_s of the plan report() dropped
  uint64_t hits_ = 0, misses_ = 0, replans_ = 0;
};

}  // namespace genie::sched
