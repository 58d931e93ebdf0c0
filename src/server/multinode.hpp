// The master's side of multi-node execution (docs/multinode.md).
//
// Workers are `genie serve` processes that joined this one (WorkerRegister).
// The master holds one client session on each (RemoteClient), through which
// it allocates, writes and reads tensors there and runs sub-graphs. For
// every graph submitted while workers are live, it builds the topology (its
// own CPU and each worker's devices, with the measured link to each), the
// residency (where each bound tensor lives), plans the graph with
// sched::plan_graph (through a PlanCache), splits the plan into per-device
// stages at the cut edges, and runs them in order: its own stages on its
// executor, the others on their worker; the tensors of the cut edges move
// between the master and the worker directly, never through the client.
// Outputs stay where they were produced.
//
// Threads: the registry and counters are thread-safe. join(), explain()
// and the start of run() block (remote calls, local execution): the server
// calls them on its task thread, never on its loop thread. A run waits for
// its workers' stages on no thread (StageWaits): what follows a stage runs
// on a task thread posted when its reply, its deadline or the stop comes.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "control/client.hpp"
#include "control/remote_tensor.hpp"
#include "core/tensor_data.hpp"
#include "exec/executor.hpp"
#include "graph/graph.hpp"
#include "sched/plan.hpp"
#include "server/stage_waits.hpp"

namespace genie {

class ClusterMaster;

// A tensor bound to (or produced by) a multi-node graph: on this server or on
// a worker. Exactly one is set (explain() also takes neither: an input not
// resident anywhere yet).
struct Held {
  TensorPtr local;
  RemoteTensorPtr remote;

  DType dtype() const { return local ? local->dtype() : remote->dtype; }
  const Shape& shape() const { return local ? local->shape() : remote->shape; }
};

struct MultiResult {
  genie_status_t status = GENIE_OK;
  std::string detail;
  std::vector<Held> outputs;  // per graph output, mark order
  uint64_t exec_ns = 0;
};

class MultiNode {
 public:
  struct Stats {
    uint32_t workers = 0;
    uint64_t multinode_graphs = 0;
    uint64_t transfer_bytes = 0;
    std::map<std::string, uint64_t> transfer_bytes_by_role;
    // Of transfer_bytes, those moved between two workers directly (never
    // through this server).
    uint64_t direct_transfer_bytes = 0;
    uint64_t plan_hits = 0, plan_misses = 0;
    // The last graph run: predicted completion of its plan, and measured
    // time of its stages (transfers included, planning excluded).
    uint64_t last_predicted_ns = 0, last_measured_ns = 0;
  };
  struct Worker {
    std::string node_id;
    std::string host;
    int port = 0;
    std::vector<sched::DeviceProfile> devices;
    std::shared_ptr<RemoteClient> client;  // the master's session on the worker
    double rtt_s = 0;
    std::string rtt_source;  // "probe" (the cluster layer's) or "server_info"
    double bandwidth_bytes_per_s = 0;
    // Handling beyond the RTT of one tensor request, of one stage's
    // GraphSubmit (a one-node graph) and per further node (a 16-node chain,
    // less the worker's op_overhead_s), measured at join: the scheduler prices
    // remote stages and transfers with them (sched::LinkProfile).
    double request_s = 0, dispatch_s = 0, dispatch_per_node_s = 0;
    const void* registered_by = nullptr;  // the worker's own session on the master
  };

  // `cfg` is what the master's clients of its workers use (auth token,
  // timeout); `node_id` the master's own. `cluster` (may be null) says
  // which workers are alive and measures their RTT; `self_instance` is the
  // server's own instance (Welcome.server_instance), so that a worker whose
  // Welcome carries it (this server, reached through its own address or a
  // relay) is refused; `stage_timeout_ms` is how long a stage sent to a
  // worker may take (ServerOptions::stage_timeout_ms), and bounds each
  // call to a worker (the sessions on workers time out by then).
  // `session_max_stages`: how many stages one session may have waiting on
  // workers at once (ServerOptions::session_max_stages): a stage past it
  // fails at once with OUT_OF_MEMORY naming the bound, so that a tenant
  // whose workers stall holds a bounded share of this server.
  MultiNode(std::string node_id, Config cfg, Executor& exec, ClusterMaster* cluster = nullptr,
            std::string self_instance = {}, int64_t stage_timeout_ms = 600000,
            size_t session_max_stages = 16);

  // Blocking: connects to the worker at host:port, measures the link (RTT
  // from the cluster role's Probe round trips when it measures one,
  // else the best of a few ServerInfo round trips; bandwidth from one
  // 1 MiB write; request and stage-dispatch handling from the best of a few
  // TensorAlloc and one-node GraphSubmit round trips), and adds it, replacing a worker of the same node id.
  // Throws the connection's errors.
  void join(const std::string& node_id, const std::string& host, int port,
            std::vector<sched::DeviceProfile> devices, const void* registered_by);
  // The worker registered by this session, if any, leaves (`why`: what its
  // users are told, "worker 'X' is gone (why)"); returns its client (closed
  // by whoever drops the last reference: it may block).
  std::shared_ptr<RemoteClient> leave(const void* registered_by,
                                      const std::string& why = "its session with this master closed");
  // The session on a worker work may be placed on: registered and not
  // marked lost by the cluster layer. Otherwise throws CONNECTION when the
  // node is (or was) a worker, lost or gone, UNSUPPORTED when it never
  // was one (naming the workers there are).
  std::shared_ptr<RemoteClient> client_of(const std::string& node_id) const;
  // Workers registered and not marked lost.
  bool has_workers() const;
  std::vector<std::string> worker_names() const;
  // Closes every worker session (blocking).
  void close_all();
  // The server is stopping: every stage waiting on a worker ends now
  // (SHUTDOWN), and no stage is sent from now on.
  void cancel();

  // What a copy this server makes of a worker's value costs (the server
  // charges it to the submitting session's quota and to its memory budget):
  // called with its byte count and a description before the copy is made;
  // returns what holds the charge until dropped, or throws
  // Error(OUT_OF_MEMORY) when it does not fit. Empty: not charged.
  using Charge =
      std::function<std::shared_ptr<void>(uint64_t bytes, const std::function<std::string()>& what)>;

  // Runs `task` on a thread of the server's task pool, after the tasks of
  // the same session posted before it; false (not run) once the pool stops.
  using Post = std::function<bool(std::function<void()>)>;
  using Done = std::function<void(MultiResult&&)>;

  // Plans and runs a graph validated with `shapes`; inputs per graph input
  // in declaration order; `session` is the submitting session's key (its
  // bound on stages waiting). Runs on the calling thread up to the first
  // stage sent to a worker; the rest runs on task threads through `post`
  // once that stage's reply comes. A stage that fails or is not answered
  // by its deadline (TIMEOUT naming the worker and the deadline), or the
  // server's stop (SHUTDOWN), fails the graph. The values read back from
  // workers into this server's memory (inputs of its own stages, relays
  // between workers) and the outputs and intermediates of its own stages
  // (their peak) are charged through `charge` first and held until the
  // graph ends; one that does not fit fails the graph with OUT_OF_MEMORY
  // naming the value or stage. Each call to a worker for a stage (moving
  // its inputs there) must be answered by the stage deadline (TIMEOUT
  // naming the worker). Never throws: `done` is called exactly once, with
  // the outputs or the failure, on the calling thread, a task thread, or
  // (when the pool has stopped) the thread that ended the wait.
  void run(std::shared_ptr<const Graph> g, std::vector<Held> inputs,
           std::unordered_map<ValueId, Shape> shapes, Charge charge, uint64_t session, Post post, Done done);
  // The plan run() would follow, as sched::Plan::explain_json. Throws.
  std::string explain(const Graph& g, const std::vector<Held>& inputs,
                      const std::unordered_map<ValueId, Shape>& shapes);

  Stats stats() const;
  // This server's CPU as the planner sees it (calibrated once, cached).
  const sched::DeviceProfile& local_profile();
  // local_profile() when it has been calibrated already, else null (never
  // calibrates). Any thread.
  const sched::DeviceProfile* local_profile_if_ready() const;
  // Writes what was learned of the workers' stages and of this server's own
  // (at most every few seconds unless `now`). Any thread.
  void save_learned(bool now = false);

 private:
  struct Planned {
    sched::Topology topo;
    std::vector<std::string> device_node;  // per device: "" (this server) or a worker's node id
    std::shared_ptr<const sched::Plan> plan;
  };
  Planned plan(const Graph& g, const std::vector<Held>& inputs,
               const std::unordered_map<ValueId, Shape>& shapes);
  // What this master learns of a worker's devices of one kind ("cpu",
  // "cuda"): their op classes' corrections, from the time the worker reports
  // for each stage, and the stage overhead (sched::CostLearner), kept beside
  // this server's own learner in the profile cache
  // ("worker-<node>-<hash>-<kind>.learned.json"); null when this server
  // learns nothing (no profile cache). Under mu_.
  std::shared_ptr<sched::CostLearner> worker_learner(const std::string& node, const std::string& device);
  // Counts bytes moved between servers for a value of `role` (direct: from
  // one worker to another without passing here).
  void count(const std::string& role, uint64_t bytes, bool direct = false);
  // Moves src's bytes into dst (tensors on two workers) directly from
  // worker to worker (TensorExport/TensorImport). False when the
  // destination cannot reach the source (the pair is then remembered and
  // not tried again until one of them joins again): relay instead. Throws
  // other errors. `tag`: the value's, which the destination fetches with.
  bool move_direct(const RemoteTensor& src, const RemoteTensor& dst, const dataplane::SemanticTag& tag);
  bool alive(const std::string& node) const;
  class GraphRun;  // multinode_run.cpp
  // Submits one graph to worker `node` and waits for its completion on this
  // thread until the stage deadline (TIMEOUT naming the worker) or cancel()
  // (SHUTDOWN): join()'s link probe.
  RemoteResult run_probe(RemoteClient& c, const std::string& node, const std::string& json,
                         const std::vector<std::pair<std::string, uint64_t>>& bindings);
  // Worker `node` answered something its plan rules out (a result of
  // another dtype or shape): it gets no more work until it registers again,
  // and its session is closed (by whoever drops the returned client).
  std::shared_ptr<RemoteClient> drop_unhealthy(const std::string& node, const std::string& why);

  const std::string node_id_;
  const Config cfg_;
  Executor& exec_;
  ClusterMaster* const cluster_;
  const std::string self_instance_;
  const int64_t stage_timeout_ms_;
  sched::PlanCache plans_;

  std::atomic<bool> cancelled_{false};
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const Worker>> workers_;  // by node id
  uint64_t version_ = 1;
  std::vector<std::string> lost_;            // registered workers the last plan left out (marked lost)
  std::map<std::string, std::string> left_;  // workers that left: why
  std::atomic<bool> have_local_{false};
  sched::DeviceProfile local_;
  std::map<std::string, std::shared_ptr<sched::CostLearner>> worker_learned_;  // by "<node>/<kind>"
  std::atomic<int64_t> learned_saved_ns_{0};
  uint64_t multinode_graphs_ = 0;
  uint64_t transfer_bytes_ = 0;
  uint64_t direct_bytes_ = 0;
  std::set<std::pair<std::string, std::string>> direct_refused_;  // (source, destination) node ids
  uint64_t last_predicted_ns_ = 0, last_measured_ns_ = 0;
  std::map<std::string, uint64_t> by_role_;
  // Last: ended (stop) before the rest goes.
  StageWaits waits_;
};

}  // namespace genie
