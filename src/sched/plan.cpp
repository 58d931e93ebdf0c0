// Placement, memory-aware ordering and plans (docs/scheduler.md).
#include "sched/plan.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <queue>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "core/error.hpp"
#include "sched/cost.hpp"
#include "sched/graph_view.hpp"

namespace genie::sched {

const char* rule_name(Rule r) {
  switch (r) {
    case Rule::OnlyDevice: return "only_device";
    case Rule::MinFinishTime: return "min_finish_time";
    case Rule::KvCacheColocation: return "kv_cache_colocation";
    case Rule::ResidentWeight: return "resident_weight";
    case Rule::StageMerge: return "stage_merge";
  }
  return "unknown";
}

void Topology::check() const {
  genie::check(!devices.empty(), GENIE_ERR_INVALID_ARGUMENT, "the topology has no devices");
  std::unordered_set<std::string> names;
  for (size_t i = 0; i < devices.size(); ++i) {
    const DeviceProfile& d = devices[i];
    const std::string name = d.qualified_name();
    genie::check(!d.device.empty(), GENIE_ERR_INVALID_ARGUMENT, "device ", i, " has no name");
    genie::check(d.peak_flops > 0 && std::isfinite(d.peak_flops), GENIE_ERR_INVALID_ARGUMENT, "device '", name,
          "': peak_flops must be positive");
    genie::check(d.vector_flops >= 0 && std::isfinite(d.vector_flops), GENIE_ERR_INVALID_ARGUMENT, "device '", name,
          "': vector_flops must be >= 0");
    genie::check(d.mem_bw_bytes_per_s > 0 && std::isfinite(d.mem_bw_bytes_per_s), GENIE_ERR_INVALID_ARGUMENT, "device '",
          name, "': mem_bw_bytes_per_s must be positive");
    genie::check(d.op_overhead_s >= 0 && std::isfinite(d.op_overhead_s), GENIE_ERR_INVALID_ARGUMENT, "device '", name,
          "': op_overhead_s must be >= 0");
    genie::check(d.budget() > 0, GENIE_ERR_INVALID_ARGUMENT, "device '", name, "' has no memory (capacity and budget 0)");
    genie::check(names.insert(name).second, GENIE_ERR_INVALID_ARGUMENT, "device '", name,
                 "' is listed twice");
  }
  for (const LinkProfile& l : links) {
    genie::check(l.bandwidth_bytes_per_s > 0 && std::isfinite(l.bandwidth_bytes_per_s), GENIE_ERR_INVALID_ARGUMENT,
          "link ", l.from_node, " -> ", l.to_node, ": bandwidth must be positive");
    genie::check(l.rtt_s >= 0 && std::isfinite(l.rtt_s), GENIE_ERR_INVALID_ARGUMENT, "link ", l.from_node, " -> ",
          l.to_node, ": rtt must be >= 0");
    genie::check(l.request_s >= 0 && std::isfinite(l.request_s) && l.dispatch_s >= 0 && std::isfinite(l.dispatch_s) &&
                     l.dispatch_per_node_s >= 0 && std::isfinite(l.dispatch_per_node_s),
          GENIE_ERR_INVALID_ARGUMENT, "link ", l.from_node, " -> ", l.to_node,
          ": request and dispatch overheads must be >= 0");
  }
}

namespace {

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t fnv(const std::string& s, uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

constexpr double kInf = std::numeric_limits<double>::infinity();

// The nodes of a topology, numbered in the order their first device is
// listed (devices[0]'s node, the coordinator, is 0), and the links between
// them: the last link listed from a to b, else the last from b to a (links
// naming no listed node are never used). Built once per plan: a large
// cluster (a thousand nodes) costs lookups, not a scan of every link for
// every pair of devices.
struct NodeIndex {
  std::vector<int> node_of;               // per device
  std::vector<std::string> names;         // per node
  std::vector<std::vector<int>> devices;  // per node, in index order
  std::unordered_map<uint64_t, const LinkProfile*> links;

  explicit NodeIndex(const Topology& t) {
    std::unordered_map<std::string, int> index;
    for (size_t d = 0; d < t.devices.size(); ++d) {
      const auto [it, fresh] = index.emplace(t.devices[d].node_id, static_cast<int>(names.size()));
      if (fresh) {
        names.push_back(t.devices[d].node_id);
        devices.emplace_back();
      }
      node_of.push_back(it->second);
      devices[static_cast<size_t>(it->second)].push_back(static_cast<int>(d));
    }
    for (const LinkProfile& l : t.links) {
      const auto a = index.find(l.from_node), b = index.find(l.to_node);
      if (a != index.end() && b != index.end()) links[key(a->second, b->second)] = &l;
    }
  }
  static uint64_t key(int a, int b) {
    return static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32 | static_cast<uint32_t>(b);
  }
  const LinkProfile* link(int a, int b) const {
    auto it = links.find(key(a, b));
    if (it == links.end()) it = links.find(key(b, a));
    return it == links.end() ? nullptr : it->second;
  }
};

// Seconds to move `bytes` from device a to device b: over their nodes'
// link (half its RTT, then its bandwidth), or, on one node without a link
// to itself, at the slower of the two devices' memory bandwidths.
struct LinkMatrix {
  const Topology& t;
  const NodeIndex& nodes;

  double seconds(int a, int b, uint64_t bytes) const {
    if (a == b) return 0;
    const int na = nodes.node_of[static_cast<size_t>(a)], nb = nodes.node_of[static_cast<size_t>(b)];
    double lat = 0, bw = 0;
    if (const LinkProfile* l = nodes.link(na, nb)) {
      lat = l->rtt_s / 2;
      bw = l->bandwidth_bytes_per_s;
    } else if (na == nb) {
      bw = std::min(t.devices[static_cast<size_t>(a)].mem_bw_bytes_per_s,
                    t.devices[static_cast<size_t>(b)].mem_bw_bytes_per_s);
    }
    if (bw <= 0) return kInf;
    return lat + static_cast<double>(bytes) / bw;
  }
};

// A topological order that prefers, among ready nodes, the one that grows
// live memory least (outputs allocated minus inputs it is the last reader
// of), ties broken by the graph's own topological position.
std::vector<NodeId> memory_aware_order(const GraphView& v, const std::vector<uint64_t>& vbytes) {
  const Graph& g = v.g;
  const size_t n = g.nodes().size();
  std::vector<int32_t> indeg(n, 0);
  for (size_t i = 0; i < n; ++i)
    for (ValueId in : g.nodes()[i].inputs)
      if (in != kNone && v.producer(in) != kNone) ++indeg[i];
  std::vector<int32_t> remaining(g.values().size());
  for (size_t x = 0; x < remaining.size(); ++x) remaining[x] = v.n_consumers(static_cast<ValueId>(x));

  auto score = [&](NodeId id) {
    int64_t s = 0;
    const Node& nd = g.node(id);
    for (ValueId o : nd.outputs) s += static_cast<int64_t>(vbytes[o]);
    for (ValueId in : nd.inputs)
      if (in != kNone && v.producer(in) != kNone && !v.is_output[in] && remaining[in] == 1)
        s -= static_cast<int64_t>(vbytes[in]);
    return s;
  };
  using Item = std::pair<int64_t, int32_t>;  // (score, topo position)
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> ready;
  const std::vector<NodeId>& topo = g.topo_order();
  for (size_t i = 0; i < n; ++i)
    if (indeg[i] == 0) ready.push({score(static_cast<NodeId>(i)), v.topo_pos[i]});
  std::vector<NodeId> order;
  order.reserve(n);
  while (!ready.empty()) {
    const NodeId id = topo[static_cast<size_t>(ready.top().second)];
    ready.pop();
    order.push_back(id);
    for (ValueId in : g.node(id).inputs)
      if (in != kNone) --remaining[in];
    for (ValueId o : g.node(id).outputs)
      for (const NodeId* c = v.consumers_begin(o); c != v.consumers_end(o); ++c)
        if (--indeg[*c] == 0) ready.push({score(*c), v.topo_pos[*c]});
  }
  return order;
}

// Prices every move the multi-node runtime makes (src/control/multinode.cpp):
// the coordinator (devices[0]'s node) runs its own stages and sends each
// other node's stage as one GraphSubmit; a tensor goes from the coordinator
// to a node by a TensorAlloc and a TensorWrite, comes back by a TensorRead,
// and goes between two other nodes through the coordinator (a read, then an
// alloc and a write). Each request costs the link's RTT plus its request
// handling; the bytes cost bytes / bandwidth. Devices of one node share
// memory (LinkMatrix). Stages run one after another.
struct Routes {
  struct Hop {
    bool ok = false;
    double request = 0, dispatch = 0, bandwidth = 0;  // request, dispatch: seconds incl. the RTT
    double per_node = 0;
  };
  const std::vector<int>& node_of;  // per device: index of its node; the coordinator is 0
  std::vector<Hop> to_coord;  // per node: its link with the coordinator
  const LinkMatrix& direct;
  bool all_linked = true;  // every node but the coordinator has a link with it

  Routes(const NodeIndex& nodes, const LinkMatrix& m) : node_of(nodes.node_of), direct(m) {
    to_coord.resize(nodes.names.size());
    for (size_t k = 1; k < nodes.names.size(); ++k) {
      const LinkProfile* link = nodes.link(0, static_cast<int>(k));
      if (!link) {
        all_linked = false;
        continue;
      }
      Hop& h = to_coord[k];
      h.ok = true;
      h.request = link->rtt_s + link->request_s;
      h.dispatch = link->rtt_s + link->dispatch_s;
      h.bandwidth = link->bandwidth_bytes_per_s;
      h.per_node = link->dispatch_per_node_s;
    }
  }
  bool remote(int d) const { return node_of[static_cast<size_t>(d)] != 0; }
  // A stage on device d: its GraphSubmit round trip (0 on the coordinator,
  // or when no link to the node is known).
  double dispatch(int d) const {
    const Hop& h = to_coord[static_cast<size_t>(node_of[static_cast<size_t>(d)])];
    return remote(d) && h.ok ? h.dispatch : 0;
  }
  // Each node of a stage on device d: its share of the GraphSubmit.
  double per_node(int d) const {
    const Hop& h = to_coord[static_cast<size_t>(node_of[static_cast<size_t>(d)])];
    return remote(d) && h.ok ? h.per_node : 0;
  }
  // Moving `bytes` from device a to device b; `via_coord` says whether the
  // coordinator already holds a copy (a read from a skipped). Sets *relayed
  // when the move leaves a copy on the coordinator.
  double move(int a, int b, uint64_t bytes, bool via_coord, bool* relayed) const {
    if (a == b) return 0;
    const int na = node_of[static_cast<size_t>(a)], nb = node_of[static_cast<size_t>(b)];
    if (na == nb) return direct.seconds(a, b, bytes);
    const double B = static_cast<double>(bytes);
    const Hop& ha = to_coord[static_cast<size_t>(na)];
    const Hop& hb = to_coord[static_cast<size_t>(nb)];
    if (na == 0) return hb.ok ? 2 * hb.request + B / hb.bandwidth : kInf;  // alloc + write
    if (nb == 0) return ha.ok ? ha.request + B / ha.bandwidth : kInf;      // read
    if (ha.ok && hb.ok) {                                                  // read to the coordinator, then write
      if (relayed) *relayed = true;
      return (via_coord ? 0 : ha.request + B / ha.bandwidth) + 2 * hb.request + B / hb.bandwidth;
    }
    const double d = direct.seconds(a, b, bytes);  // a direct path the runtime does not use (other runtimes may)
    return std::isfinite(d) ? d : kInf;
  }
};

class Placer {
 public:
  Placer(const GraphView& v, const Topology& t, const Residency& r, const std::vector<const Shape*>& shapes)
      : v_(v), g_(v.g), t_(t), nodes_(t), links_{t, nodes_}, routes_(nodes_, links_), nd_(t.devices.size()) {
    const size_t nv = g_.values().size(), nn = g_.nodes().size();
    vbytes_.resize(nv);
    for (size_t x = 0; x < nv; ++x) vbytes_[x] = value_bytes(g_.value(static_cast<ValueId>(x)).dtype, *shapes[x]);
    resident_home_.assign(nv, -1);
    movable_.assign(nv, 0);
    for (const auto& [name, dev] : r.value_device) {
      const ValueId x = g_.find_value(name);
      check(x != kNone && g_.value(x).kind == ValueKind::Input, GENIE_ERR_INVALID_ARGUMENT, "residency names '",
            name, "', which is not an input of the graph");
      check(dev >= 0 && static_cast<size_t>(dev) < nd_, GENIE_ERR_INVALID_ARGUMENT, "residency puts '", name,
            "' on device ", dev, ", but the topology has ", nd_, " devices");
      resident_home_[x] = dev;
    }
    costs_.resize(nn);
    for (size_t i = 0; i < nn; ++i) costs_[i] = op_cost(g_, static_cast<NodeId>(i), v.code[i], shapes);
    // Learned corrections only where every device has them: a device priced
    // as measured beside one priced by the bare model would win or lose
    // nodes for the difference between the two, not between the devices.
    bool learned = true;
    for (const DeviceProfile& d : t_.devices) learned &= d.learned != nullptr;
    gap_.assign(nd_, 0);
    stage_.assign(nd_, -1);
    const uint64_t graph = learned ? cost_signature(costs_) : 0;
    learned_stages_possible_ = learned;
    if (learned) {
      for (size_t d = 0; d < nd_; ++d) {
        const CostLearner& l = *t_.devices[d].learned;
        gap_[d] = l.gap_s(graph);
        // A stage's overhead is the multi-node runtime's: a plan over one
        // node runs as one graph.
        if (l.stage_known() && nodes_.names.size() > 1) stage_[d] = l.stage_s();
      }
    }
    classify();
    compute_.resize(nn * profiles_.size());
    for (size_t i = 0; i < nn; ++i)
      for (size_t c = 0; c < profiles_.size(); ++c) {
        const DeviceProfile& p = t_.devices[static_cast<size_t>(profiles_[c])];
        compute_[i * profiles_.size() + c] = learned ? predict_seconds(costs_[i], p, graph, i) : model_seconds(costs_[i], p);
      }
  }

  // Places every node in `order` into `plan` (node_device, decisions,
  // transfers, predicted figures, peaks). `forced`, when given, names each
  // node's device (a trial of the stage-merging pass): returns false, instead
  // of throwing, when that assignment breaks a rule or a budget.
  bool run(const std::vector<NodeId>& order, const Analysis& a, Plan& plan, const std::vector<int>* forced = nullptr) {
    reset(a);
    plan_ = &plan;
    const size_t nn = g_.nodes().size();
    plan.node_device.assign(nn, -1);
    plan.predicted_node_s.assign(nn, 0);
    plan.decisions.assign(nn, {});
    plan.transfers.clear();
    plan.predicted_total_s = 0;
    for (NodeId id : order)
      if (!place(id, a, forced ? (*forced)[static_cast<size_t>(id)] : -1)) return false;
    plan.peak_bytes_per_device = peak_;
    plan.predicted_total_s = clock_;
    return true;
  }
  // Learned stage overheads price a placement made without them (they do
  // not steer it): each is a residual of whole stages on a device, which
  // also takes up what the planned moves into its stages missed, so it
  // says what a stage there costs, not whether a node should go there.
  // Stages run one after another, so each stage of the chosen placement
  // (a run of consecutive nodes of `order` on one device) moves the
  // predicted total by its device's learned overhead less the figure it was
  // placed with.
  void price_learned_stages(const std::vector<NodeId>& order, Plan& plan) const {
    int cur = -1;
    for (NodeId id : order) {
      const int d = plan.node_device[static_cast<size_t>(id)];
      if (d == cur) continue;
      cur = d;
      if (stage_[static_cast<size_t>(d)] >= 0) plan.predicted_total_s += stage_[static_cast<size_t>(d)] - routes_.dispatch(d);
    }
  }

  // A multi-node plan whose coordinator learns: its predicted total scaled
  // by what whole runs of this graph took against their parts' sum.
  void correct_total(Plan& plan) const {
    plan.predicted_parts_s = plan.predicted_total_s;
    plan.graph_signature = cost_signature(costs_);
    if (!learned_stages_possible_ || nodes_.names.size() < 2) return;
    plan.predicted_total_s *= t_.devices[0].learned->total_factor(plan.graph_signature);
  }

  void finish(Plan& plan) { plan.node_cost = std::move(costs_); }
  // Resident weights that no longer keep their nodes (pull_modules): their
  // nodes are placed by finish time, the weights moved where they run.
  void set_movable(std::vector<uint8_t> m) { movable_ = std::move(m); }
  bool multi_node() const { return nodes_.names.size() > 1; }
  bool same_node(int a, int b) const {
    return nodes_.node_of[static_cast<size_t>(a)] == nodes_.node_of[static_cast<size_t>(b)];
  }
  const std::vector<uint64_t>& vbytes() const { return vbytes_; }

 private:
  void reset(const Analysis& a) {
    const size_t nv = g_.values().size();
    home_ = resident_home_;
    where_.resize(nv);
    for (auto& w : where_) w.clear();
    on_coord_.assign(nv, 0);
    live_.assign(nd_, 0);
    node_touched_.assign(nodes_.names.size(), 0);
    touched_.clear();
    cursor_.assign(members_.size(), 0);
    if (prune_) touch(0);  // the coordinator's devices: always weighed one by one
    for (size_t x = 0; x < nv; ++x)
      if (home_[x] >= 0) {
        where_[x].push_back(home_[x]);
        touch(home_[x]);
        live_[static_cast<size_t>(home_[x])] += vbytes_[x];  // resident tensors occupy their device throughout
        if (!routes_.remote(home_[x])) on_coord_[x] = 1;
      }
    peak_ = live_;
    remaining_.resize(nv);
    for (size_t x = 0; x < nv; ++x) remaining_[x] = v_.n_consumers(static_cast<ValueId>(x));
    kv_home_.assign(a.kv_caches.size(), -1);
    for (size_t k = 0; k < a.kv_caches.size(); ++k)
      if (resident_home_[a.kv_caches[k].value] >= 0) kv_home_[k] = resident_home_[a.kv_caches[k].value];
    node_kv_.assign(g_.nodes().size(), -1);
    for (size_t k = 0; k < a.kv_caches.size(); ++k)
      for (NodeId id : a.kv_caches[k].nodes)
        if (node_kv_[id] < 0) node_kv_[id] = static_cast<int32_t>(k);
    clock_ = 0;
    cur_dev_ = -1;
  }

  bool present(ValueId x, int d) const {
    for (int w : where_[x])
      if (w == d) return true;
    return false;
  }
  void make_present(ValueId x, int d) {
    where_[x].push_back(d);
    touch(d);
  }
  double compute(NodeId id, int d) const {
    return compute_[static_cast<size_t>(id) * profiles_.size() +
                    static_cast<size_t>(profile_of_[static_cast<size_t>(d)])];
  }

  // Devices alike for placement: the same figures (compute, memory, budget)
  // and the same link with the coordinator. Until something of the plan
  // touches its node (a value or an allocation there), a device of a class
  // prices every node exactly as the class's other untouched devices do,
  // so that place() weighs only the first two of them (the best and the
  // runner-up among equals are the first two in index order): with a
  // thousand alike nodes, a decision weighs tens of devices, not thousands.
  // Only where every node has a link with the coordinator (else moves take
  // direct paths that differ by node) and for topologies of 32 devices and
  // more; smaller ones are weighed device by device.
  void classify() {
    // Devices with learners of their own price apart (their corrections differ).
    using Figures = std::tuple<double, double, double, double, const void*>;
    std::map<Figures, int> profile;
    using Alike = std::tuple<int, uint64_t, double, double, double, double, double>;
    std::map<Alike, int> alike;
    prune_ = nd_ >= 32 && routes_.all_linked;
    profile_of_.resize(nd_);
    class_of_.assign(nd_, -1);
    for (size_t d = 0; d < nd_; ++d) {
      const DeviceProfile& p = t_.devices[d];
      const auto [it, fresh] =
          profile.emplace(Figures{p.peak_flops, p.vector_flops, p.mem_bw_bytes_per_s, p.op_overhead_s,
                                  static_cast<const void*>(p.learned.get())},
                          static_cast<int>(profiles_.size()));
      if (fresh) profiles_.push_back(static_cast<int>(d));
      profile_of_[d] = it->second;
      const int node = nodes_.node_of[d];
      if (!prune_ || node == 0) continue;
      const Routes::Hop& h = routes_.to_coord[static_cast<size_t>(node)];
      const auto [c, added] =
          alike.emplace(Alike{it->second, p.budget(), h.request, h.dispatch, h.bandwidth, h.per_node, stage_[d]},
                        static_cast<int>(members_.size()));
      if (added) members_.emplace_back(), class_start_.push_back(0);
      members_[static_cast<size_t>(c->second)].push_back(static_cast<int>(d));
      class_of_[d] = c->second;
    }
  }
  // The class whose untouched devices price alike that d is one of, or -1.
  int untouched_class(int d) const {
    const int c = class_of_[static_cast<size_t>(d)];
    return c >= 0 && !node_touched_[static_cast<size_t>(nodes_.node_of[static_cast<size_t>(d)])] ? c : -1;
  }
  // Something of the plan is on device d: every device of its node is
  // weighed one by one from now on.
  void touch(int d) {
    const size_t node = static_cast<size_t>(nodes_.node_of[static_cast<size_t>(d)]);
    if (!prune_ || node_touched_[node]) return;
    node_touched_[node] = 1;
    for (int x : nodes_.devices[node]) touched_.push_back(x);
  }
  // Sets candidates_ to the devices place() weighs, in index order: all of
  // them, or (pruning) the touched ones, the first two untouched of each
  // class and `forced`.
  void candidates(int forced) {
    candidates_.clear();
    if (!prune_) {
      for (size_t d = 0; d < nd_; ++d) candidates_.push_back(static_cast<int>(d));
      return;
    }
    candidates_ = touched_;
    for (size_t c = 0; c < members_.size(); ++c) {
      const std::vector<int>& m = members_[c];
      auto untouched = [&](size_t j) {
        return !node_touched_[static_cast<size_t>(nodes_.node_of[static_cast<size_t>(m[j])])];
      };
      size_t& j = cursor_[c];
      while (j < m.size() && !untouched(j)) ++j;
      int found = 0;
      for (size_t k = j; k < m.size() && found < 2; ++k)
        if (untouched(k)) candidates_.push_back(m[k]), ++found;
    }
    if (forced >= 0) candidates_.push_back(forced);
    std::sort(candidates_.begin(), candidates_.end());
    candidates_.erase(std::unique(candidates_.begin(), candidates_.end()), candidates_.end());
  }

  // Bytes node `id` would newly allocate on device d (its outputs, copies of
  // inputs not yet there, first uploads of host inputs).
  uint64_t new_bytes(NodeId id, int d) const {
    const Node& n = g_.node(id);
    uint64_t b = 0;
    for (ValueId o : n.outputs) b += vbytes_[o];
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const ValueId x = n.inputs[i];
      if (x == kNone || present(x, d)) continue;
      bool dup = false;
      for (size_t j = 0; j < i; ++j) dup |= n.inputs[j] == x;
      if (!dup) b += vbytes_[x];
    }
    return b;
  }

  // Seconds to bring input x to device d (kInf if unreachable).
  double move_s(ValueId x, int d) const {
    if (home_[x] < 0 || present(x, d)) return 0;  // a host input or constant: uploaded straight to its first reader
    return routes_.move(home_[x], d, vbytes_[x], on_coord_[x] != 0, nullptr);
  }

  // Serial seconds from now until node `id` would start computing on d: the
  // dispatch of a new stage and the moves of its inputs (kInf if unreachable).
  double lead_s(NodeId id, int d) const {
    const Node& n = g_.node(id);
    double s = (d == cur_dev_ ? 0 : routes_.dispatch(d)) + routes_.per_node(d);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const ValueId x = n.inputs[i];
      if (x == kNone) continue;
      bool dup = false;
      for (size_t j = 0; j < i; ++j) dup |= n.inputs[j] == x;
      if (!dup) s += move_s(x, d);
    }
    return s;
  }

  std::string largest_live(int d) const {
    std::vector<std::pair<uint64_t, ValueId>> live;
    for (size_t x = 0; x < vbytes_.size(); ++x)
      if (present(static_cast<ValueId>(x), d) && !freed(static_cast<ValueId>(x)))
        live.push_back({vbytes_[x], static_cast<ValueId>(x)});
    std::sort(live.begin(), live.end(), [](auto& a, auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
    std::string s;
    for (size_t i = 0; i < live.size() && i < 3; ++i)
      s += cat(i ? ", " : "", "'", g_.value(live[i].second).name, "' (", live[i].first, " bytes)");
    return s.empty() ? "none" : s;
  }
  bool freed(ValueId x) const {
    return remaining_[x] == 0 && g_.value(x).kind == ValueKind::NodeOutput && !v_.is_output[x];
  }

  [[noreturn]] void no_room(NodeId id, int pinned, ValueId pinned_by) const {
    const Node& n = g_.node(id);
    std::string detail = cat("the plan does not fit: node '", n.name, "' (", n.op, ")");
    auto dev_line = [&](int d) {
      return cat(t_.devices[d].qualified_name(), " has ", live_[d], " of ", t_.devices[d].budget(),
                 " bytes in use and would need ", new_bytes(id, d), " more (largest live: ", largest_live(d), ")");
    };
    if (pinned >= 0) {
      detail += cat(" must run on ", t_.devices[pinned].qualified_name(), " with '", g_.value(pinned_by).name,
                    "', but ", dev_line(pinned));
    } else {
      detail += " fits on no device:";
      for (size_t d = 0; d < nd_; ++d) detail += cat(d ? "; " : " ", dev_line(static_cast<int>(d)));
    }
    fail(GENIE_ERR_OUT_OF_MEMORY, detail);
  }

  bool place(NodeId id, const Analysis& a, int forced) {
    const Node& n = g_.node(id);
    NodeDecision dec;
    int pinned = -1;
    // KV cache co-location first, then resident weights (largest wins).
    if (const int32_t k = node_kv_[id]; k >= 0 && kv_home_[k] >= 0) {
      dec.rule = Rule::KvCacheColocation;
      dec.pinned_by = a.kv_caches[k].value;
      pinned = kv_home_[k];
    }
    if (dec.rule != Rule::KvCacheColocation) {
      uint64_t best = 0;
      for (ValueId x : n.inputs)
        if (x != kNone && resident_home_[x] >= 0 && g_.value(x).role == TensorRole::Weight && !movable_[x] &&
            (pinned < 0 || vbytes_[x] > best)) {
          best = vbytes_[x];
          pinned = resident_home_[x];
          dec.rule = Rule::ResidentWeight;
          dec.pinned_by = x;
        }
    }
    if (forced >= 0 && pinned >= 0 && forced != pinned) return false;

    int choice = -1, runner = -1, feasible = 0, forced_ok = 0;
    double choice_finish = kInf, runner_finish = kInf, choice_start = 0, forced_start = 0;
    if (pinned >= 0)
      candidates_.assign(1, pinned);
    else
      candidates(forced);
    // An untouched device's start is its class's: priced once per class.
    priced_.assign(members_.size(), 0);
    for (const int d : candidates_) {
      const int c = pinned >= 0 ? -1 : untouched_class(d);
      double start = kInf;
      if (c >= 0 && priced_[static_cast<size_t>(c)]) {
        start = class_start_[static_cast<size_t>(c)];
      } else {
        if (live_[d] + new_bytes(id, d) <= t_.devices[d].budget()) start = clock_ + lead_s(id, d);
        if (c >= 0) priced_[static_cast<size_t>(c)] = 1, class_start_[static_cast<size_t>(c)] = start;
      }
      if (!std::isfinite(start)) continue;
      ++feasible;
      const double finish = start + compute(id, d);
      if (d == forced) forced_ok = 1, forced_start = start;
      if (finish < choice_finish) {
        runner = choice;
        runner_finish = choice_finish;
        choice = d;
        choice_finish = finish;
        choice_start = start;
      } else if (finish < runner_finish) {
        runner = d;
        runner_finish = finish;
      }
    }
    if (forced >= 0) {
      if (!forced_ok) return false;
      if (forced != choice) {
        // The whole plan is faster with this node in its neighbours' stage
        // than where it would finish earliest on its own.
        runner = choice;
        runner_finish = choice_finish;
        choice = forced;
        choice_start = forced_start;
        choice_finish = forced_start + compute(id, forced);
        if (pinned < 0) dec.rule = Rule::StageMerge;
      }
    }
    if (choice < 0) {
      // Either no room, or no device can reach the inputs.
      bool room = false;
      for (size_t d = 0; d < nd_; ++d)
        if ((pinned < 0 || static_cast<int>(d) == pinned) && live_[d] + new_bytes(id, static_cast<int>(d)) <= t_.devices[d].budget())
          room = true;
      if (!room) no_room(id, pinned, dec.pinned_by);
      fail(GENIE_ERR_UNSUPPORTED, "node '", n.name, "' (", n.op,
           "): no device can receive its inputs (the topology has no link between their nodes)");
    }
    if (pinned < 0 && dec.rule != Rule::StageMerge) dec.rule = feasible == 1 ? Rule::OnlyDevice : Rule::MinFinishTime;
    if (const int32_t k = node_kv_[id]; k >= 0 && kv_home_[k] < 0) kv_home_[k] = choice;
    dec.start_s = choice_start;
    dec.finish_s = choice_finish;
    dec.runner_up = runner;
    dec.runner_up_finish_s = runner >= 0 ? runner_finish : 0;

    // Commit: allocations, transfers (in the order the runtime makes them),
    // frees.
    const int d = choice;
    live_[d] += new_bytes(id, d);
    peak_[d] = std::max(peak_[d], live_[d]);
    touch(d);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const ValueId x = n.inputs[i];
      if (x == kNone || present(x, d)) continue;
      make_present(x, d);
      if (home_[x] < 0) {
        home_[x] = d;  // host input or constant: lives where it is first read
        if (!routes_.remote(d)) on_coord_[x] = 1;
        continue;
      }
      Transfer tr;
      tr.value = g_.value(x).name;
      tr.value_id = x;
      tr.from_device = home_[x];
      tr.to_device = d;
      tr.bytes = vbytes_[x];
      bool relayed = false;
      tr.predicted_s = routes_.move(home_[x], d, vbytes_[x], on_coord_[x] != 0, &relayed);
      tr.consumer = id;
      if (relayed || !routes_.remote(d)) on_coord_[x] = 1;
      plan_->transfers.push_back(std::move(tr));
    }
    for (ValueId o : n.outputs) {
      home_[o] = d;
      make_present(o, d);
      if (!routes_.remote(d)) on_coord_[o] = 1;
    }
    clock_ = choice_finish + gap_[static_cast<size_t>(d)];  // the executor's hand-off to the next node
    cur_dev_ = d;
    plan_->node_device[id] = d;
    plan_->predicted_node_s[id] = compute(id, d);
    plan_->decisions[id] = dec;
    // Free every copy of a node output whose last reader has run.
    for (ValueId x : n.inputs)
      if (x != kNone && --remaining_[x] == 0 && freed(x))
        for (int w : where_[x]) live_[static_cast<size_t>(w)] -= vbytes_[x];
    for (ValueId o : n.outputs)
      if (remaining_[o] == 0 && freed(o)) live_[d] -= vbytes_[o];
    return true;
  }

  const GraphView& v_;
  const Graph& g_;
  const Topology& t_;
  NodeIndex nodes_;
  LinkMatrix links_;
  Routes routes_;
  Plan* plan_ = nullptr;
  const size_t nd_;
  std::vector<uint64_t> vbytes_;
  std::vector<int> resident_home_, home_;
  std::vector<uint8_t> movable_;         // per value: a resident weight that does not pin its nodes
  std::vector<std::vector<int>> where_;  // per value: the devices it is present on
  std::vector<uint8_t> on_coord_;
  std::vector<OpCost> costs_;
  std::vector<int> profiles_;    // per profile (alike compute figures): its first device
  std::vector<int> profile_of_;  // per device
  std::vector<double> compute_;  // per node x profile: predicted compute seconds
  bool prune_ = false;
  std::vector<std::vector<int>> members_;  // per class: its devices, in index order
  std::vector<int> class_of_;              // per device: its class, -1 weighed one by one
  std::vector<uint8_t> priced_;            // per class, in one place(): class_start_ is set
  std::vector<double> class_start_;        // per class: an untouched member's start (kInf: no room)
  std::vector<size_t> cursor_;             // per class: no untouched member before it
  std::vector<uint8_t> node_touched_;      // per node
  std::vector<int> touched_, candidates_;
  std::vector<uint64_t> live_, peak_;
  std::vector<int32_t> remaining_, node_kv_;
  std::vector<int> kv_home_;
  double clock_ = 0;
  std::vector<double> gap_;    // per device: learned time between nodes (CostLearner::gap_s)
  std::vector<double> stage_;  // per device: learned overhead of a stage (CostLearner::stage_s), -1 unknown
  bool learned_stages_possible_ = false;  // every device has a learner
  int cur_dev_ = -1;
};

// Takes a trial placement (Placer::run) as the plan.
void adopt(Plan& plan, Plan&& trial) {
  plan.node_device = std::move(trial.node_device);
  plan.predicted_node_s = std::move(trial.predicted_node_s);
  plan.decisions = std::move(trial.decisions);
  plan.transfers = std::move(trial.transfers);
  plan.peak_bytes_per_device = std::move(trial.peak_bytes_per_device);
  plan.predicted_total_s = trial.predicted_total_s;
}

// Stage merging: the list scheduler decides one node at a time, so it can
// send a node to another node's device for a small gain and pay the way
// back later. While that helps (at most kMaxTrials whole-plan evaluations),
// move every node of one stage (a run of consecutive nodes on one device)
// to the device of the stage before or after it, and keep the plan if its
// predicted total is lower and it keeps every rule and budget.
void merge_stages(Placer& placer, const std::vector<NodeId>& order, const Analysis& a, Plan& plan) {
  constexpr int kMaxTrials = 16;
  int trials = 0;
  bool improved = true;
  while (improved && trials < kMaxTrials) {
    improved = false;
    std::vector<std::pair<size_t, size_t>> stages;  // [begin, end) in order
    for (size_t i = 0; i < order.size(); ++i)
      if (i == 0 || plan.node_device[order[i]] != plan.node_device[order[i - 1]]) stages.push_back({i, i + 1});
      else stages.back().second = i + 1;
    if (stages.size() < 2) return;
    for (size_t s = 0; s < stages.size() && !improved && trials < kMaxTrials; ++s) {
      const int here = plan.node_device[order[stages[s].first]];
      bool pinned = false;
      for (size_t i = stages[s].first; i < stages[s].second && !pinned; ++i) {
        const Rule r = plan.decisions[order[i]].rule;
        pinned = r == Rule::KvCacheColocation || r == Rule::ResidentWeight;
      }
      if (pinned) continue;
      int to[2] = {s > 0 ? plan.node_device[order[stages[s - 1].first]] : -1,
                   s + 1 < stages.size() ? plan.node_device[order[stages[s + 1].first]] : -1};
      if (to[1] == to[0]) to[1] = -1;
      for (int k = 0; k < 2 && !improved && trials < kMaxTrials; ++k) {
        if (to[k] < 0 || to[k] == here) continue;
        std::vector<int> forced = plan.node_device;
        for (size_t i = stages[s].first; i < stages[s].second; ++i) forced[order[i]] = to[k];
        Plan trial;
        ++trials;
        if (placer.run(order, a, trial, &forced) && trial.predicted_total_s < plan.predicted_total_s * (1 - 1e-9)) {
          adopt(plan, std::move(trial));
          improved = true;
        }
      }
    }
  }
}

// Moving a module to its inputs. The resident-weight rule keeps each node
// with its largest resident weight: right while the weights outweigh what
// the nodes read and return, wrong for a module whose inputs are the larger
// (a vision encoder's weights on a worker, a high-resolution image where
// the request arrives). For each module (nodes sharing a module path, as
// annotated) kept on one device by resident weights, at most kMaxTrials of
// them, plan again with those weights free to move (their nodes then go
// where they finish first, the weights moved there) and keep the plan if
// its predicted total is lower and every node of the module left the
// weights' node (a move to another device beside the weights is not what
// this is for: the weights stay resident where they were put). Graphs
// without module paths are unchanged.
void pull_modules(Placer& placer, const Graph& g, const std::vector<NodeId>& order, const Analysis& a,
                  Plan& plan) {
  constexpr size_t kMaxTrials = 8;
  if (!placer.multi_node()) return;  // nowhere else for a module to go
  std::vector<std::pair<int, std::string>> groups;
  for (NodeId id : order) {
    const std::string& module = g.node(id).ann.module_path;
    const std::pair<int, std::string> key{plan.node_device[id], module};
    if (plan.decisions[id].rule == Rule::ResidentWeight && !module.empty() &&
        std::find(groups.begin(), groups.end(), key) == groups.end())
      groups.push_back(key);
  }
  if (groups.size() > kMaxTrials) groups.resize(kMaxTrials);
  std::vector<std::vector<ValueId>> weights(groups.size());
  std::vector<std::vector<NodeId>> members(groups.size());
  for (NodeId id : order)
    for (size_t k = 0; k < groups.size(); ++k)
      if (plan.node_device[id] == groups[k].first && g.node(id).ann.module_path == groups[k].second) {
        members[k].push_back(id);
        for (ValueId x : g.node(id).inputs)
          if (x != kNone && g.value(x).role == TensorRole::Weight) weights[k].push_back(x);
      }
  std::vector<uint8_t> movable(g.values().size(), 0);
  bool pulled = false;
  for (size_t k = 0; k < groups.size(); ++k) {
    std::vector<uint8_t> trial_movable = movable;
    for (ValueId x : weights[k]) trial_movable[x] = 1;
    placer.set_movable(trial_movable);
    Plan trial;
    try {
      if (!placer.run(order, a, trial) || trial.predicted_total_s >= plan.predicted_total_s * (1 - 1e-9))
        continue;
    } catch (const Error&) {
      continue;  // e.g. the weights do not fit where the inputs are
    }
    bool left = true;
    for (NodeId id : members[k]) left &= !placer.same_node(trial.node_device[id], groups[k].first);
    if (!left) continue;
    adopt(plan, std::move(trial));
    movable = std::move(trial_movable);
    pulled = true;
  }
  placer.set_movable(std::move(movable));
  if (pulled) merge_stages(placer, order, a, plan);
}

}  // namespace

uint64_t Residency::signature() const {
  uint64_t s = 0x5eed;
  for (const auto& [name, dev] : value_device) s += mix64(fnv(name) ^ mix64(static_cast<uint64_t>(dev) + 1));
  return mix64(s + value_device.size());
}

Plan plan_graph(const Graph& g, const Topology& topo, const Residency& residency,
                const std::unordered_map<ValueId, Shape>* bound_shapes, PlanTimings* timings) {
  using Clock = std::chrono::steady_clock;
  auto lap = [&, last = Clock::now()](double PlanTimings::*field) mutable {
    if (!timings) return;
    const Clock::time_point now = Clock::now();
    timings->*field = std::chrono::duration<double>(now - last).count();
    last = now;
  };
  check(g.validated(), GENIE_ERR_INVALID_ARGUMENT, "the graph must be validated before it is planned");
  topo.check();
  Plan plan;
  plan.graph_hash = plan_hash(g, bound_shapes);
  plan.topology_version = topo.version;
  plan.residency_signature = residency.signature();
  for (const DeviceProfile& d : topo.devices) {
    plan.device_names.push_back(d.qualified_name());
    plan.budget_per_device.push_back(d.budget());
  }
  lap(&PlanTimings::hash_s);
  const GraphView view(g);
  const std::vector<const Shape*> shapes = value_shapes(g, bound_shapes);
  for (ValueId in : g.inputs()) {
    for (int64_t d : *shapes[in]) {
      if (d < 0)
        fail(GENIE_ERR_INVALID_ARGUMENT, "input '", g.value(in).name, "' has dynamic shape ",
             shape_str(*shapes[in]), ": pass the shapes it is bound to");
    }
  }
  plan.analysis = analyze(view, shapes);
  lap(&PlanTimings::analysis_s);
  Placer placer(view, topo, residency, shapes);  // FLOPs, bytes, sizes and compute times
  lap(&PlanTimings::cost_s);
  plan.order = memory_aware_order(view, placer.vbytes());
  placer.run(plan.order, plan.analysis, plan);
  merge_stages(placer, plan.order, plan.analysis, plan);
  pull_modules(placer, g, plan.order, plan.analysis, plan);
  placer.price_learned_stages(plan.order, plan);
  placer.correct_total(plan);
  placer.finish(plan);
  lap(&PlanTimings::placement_s);
  return plan;
}

}  // namespace genie::sched
