// Placement, memory-aware ordering and plans (docs/scheduler.md).
#include "sched/plan.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <queue>

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
  }
  return "unknown";
}

void Topology::check() const {
  genie::check(!devices.empty(), GENIE_ERR_INVALID_ARGUMENT, "the topology has no devices");
  for (size_t i = 0; i < devices.size(); ++i) {
    const DeviceProfile& d = devices[i];
    const std::string name = d.qualified_name();
    genie::check(!d.device.empty(), GENIE_ERR_INVALID_ARGUMENT, "device ", i, " has no name");
    genie::check(d.peak_flops > 0 && std::isfinite(d.peak_flops), GENIE_ERR_INVALID_ARGUMENT, "device '", name,
          "': peak_flops must be positive");
    genie::check(d.mem_bw_bytes_per_s > 0 && std::isfinite(d.mem_bw_bytes_per_s), GENIE_ERR_INVALID_ARGUMENT, "device '",
          name, "': mem_bw_bytes_per_s must be positive");
    genie::check(d.op_overhead_s >= 0 && std::isfinite(d.op_overhead_s), GENIE_ERR_INVALID_ARGUMENT, "device '", name,
          "': op_overhead_s must be >= 0");
    genie::check(d.budget() > 0, GENIE_ERR_INVALID_ARGUMENT, "device '", name, "' has no memory (capacity and budget 0)");
    for (size_t j = 0; j < i; ++j)
      genie::check(devices[j].qualified_name() != name, GENIE_ERR_INVALID_ARGUMENT, "device '", name, "' is listed twice");
  }
  for (const LinkProfile& l : links) {
    genie::check(l.bandwidth_bytes_per_s > 0 && std::isfinite(l.bandwidth_bytes_per_s), GENIE_ERR_INVALID_ARGUMENT,
          "link ", l.from_node, " -> ", l.to_node, ": bandwidth must be positive");
    genie::check(l.rtt_s >= 0 && std::isfinite(l.rtt_s), GENIE_ERR_INVALID_ARGUMENT, "link ", l.from_node, " -> ",
          l.to_node, ": rtt must be >= 0");
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

// Seconds to move `bytes` from device a to device b.
struct LinkMatrix {
  size_t n = 0;
  std::vector<double> latency, bandwidth;  // n x n; bandwidth 0 = unreachable

  explicit LinkMatrix(const Topology& t) : n(t.devices.size()), latency(n * n, 0), bandwidth(n * n, 0) {
    for (size_t a = 0; a < n; ++a)
      for (size_t b = 0; b < n; ++b) {
        const DeviceProfile& da = t.devices[a];
        const DeviceProfile& db = t.devices[b];
        double lat = 0, bw = 0;
        if (a == b) {
          bw = kInf;
        } else {
          const LinkProfile* link = nullptr;
          for (const LinkProfile& l : t.links)
            if (l.from_node == da.node_id && l.to_node == db.node_id) link = &l;
          if (!link)
            for (const LinkProfile& l : t.links)
              if (l.from_node == db.node_id && l.to_node == da.node_id) link = &l;
          if (link) {
            lat = link->rtt_s / 2;
            bw = link->bandwidth_bytes_per_s;
          } else if (da.node_id == db.node_id) {
            bw = std::min(da.mem_bw_bytes_per_s, db.mem_bw_bytes_per_s);
          }
        }
        latency[a * n + b] = lat;
        bandwidth[a * n + b] = bw;
      }
  }
  double seconds(int a, int b, uint64_t bytes) const {
    if (a == b) return 0;
    const size_t i = static_cast<size_t>(a) * n + static_cast<size_t>(b);
    if (bandwidth[i] <= 0) return kInf;
    return latency[i] + static_cast<double>(bytes) / bandwidth[i];
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

class Placer {
 public:
  Placer(const GraphView& v, const Topology& t, const Residency& r, const std::vector<const Shape*>& shapes,
         Plan& plan)
      : v_(v), g_(v.g), t_(t), links_(t), plan_(plan), nd_(t.devices.size()) {
    const size_t nv = g_.values().size(), nn = g_.nodes().size();
    vbytes_.resize(nv);
    for (size_t x = 0; x < nv; ++x) vbytes_[x] = value_bytes(g_.value(static_cast<ValueId>(x)).dtype, *shapes[x]);
    home_.assign(nv, -1);
    ready_.assign(nv, 0);
    arrival_.assign(nv * nd_, -1);
    resident_.assign(nv, 0);
    for (const auto& [name, dev] : r.value_device) {
      const ValueId x = g_.find_value(name);
      check(x != kNone && g_.value(x).kind == ValueKind::Input, GENIE_ERR_INVALID_ARGUMENT, "residency names '",
            name, "', which is not an input of the graph");
      check(dev >= 0 && static_cast<size_t>(dev) < nd_, GENIE_ERR_INVALID_ARGUMENT, "residency puts '", name,
            "' on device ", dev, ", but the topology has ", nd_, " devices");
      home_[x] = dev;
      resident_[x] = 1;
      arrival_[static_cast<size_t>(x) * nd_ + static_cast<size_t>(dev)] = 0;
    }
    costs_.resize(nn);
    for (size_t i = 0; i < nn; ++i) costs_[i] = op_cost(g_, static_cast<NodeId>(i), v.code[i], shapes);
    live_.assign(nd_, 0);
    peak_.assign(nd_, 0);
    dev_free_.assign(nd_, 0);
    remaining_.resize(nv);
    for (size_t x = 0; x < nv; ++x) remaining_[x] = v.n_consumers(static_cast<ValueId>(x));
    // Resident tensors occupy their device for the whole plan.
    for (size_t x = 0; x < nv; ++x)
      if (resident_[x]) live_[home_[x]] += vbytes_[x];
    peak_ = live_;
  }

  void run(const std::vector<NodeId>& order, const Analysis& a) {
    kv_home_.assign(a.kv_caches.size(), -1);
    for (size_t k = 0; k < a.kv_caches.size(); ++k)
      if (resident_[a.kv_caches[k].value]) kv_home_[k] = home_[a.kv_caches[k].value];
    node_kv_.assign(g_.nodes().size(), -1);
    for (size_t k = 0; k < a.kv_caches.size(); ++k)
      for (NodeId id : a.kv_caches[k].nodes)
        if (node_kv_[id] < 0) node_kv_[id] = static_cast<int32_t>(k);

    const size_t nn = g_.nodes().size();
    plan_.node_device.assign(nn, -1);
    plan_.predicted_node_s.assign(nn, 0);
    plan_.decisions.assign(nn, {});
    finish_.assign(nd_, 0);
    alloc_.assign(nd_, 0);
    for (NodeId id : order) place(id, a);
    plan_.peak_bytes_per_device = peak_;
    plan_.node_cost = std::move(costs_);
  }

 private:
  // Bytes node `id` would newly allocate on device d (its outputs, copies of
  // inputs not yet there, first uploads of host inputs).
  uint64_t new_bytes(NodeId id, int d) const {
    const Node& n = g_.node(id);
    uint64_t b = 0;
    for (ValueId o : n.outputs) b += vbytes_[o];
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const ValueId x = n.inputs[i];
      if (x == kNone || arrival_[static_cast<size_t>(x) * nd_ + static_cast<size_t>(d)] >= 0) continue;
      bool dup = false;
      for (size_t j = 0; j < i; ++j) dup |= n.inputs[j] == x;
      if (!dup) b += vbytes_[x];
    }
    return b;
  }

  // When input x can be on device d (kInf if unreachable).
  double arrival(ValueId x, int d) const {
    const double at = arrival_[static_cast<size_t>(x) * nd_ + static_cast<size_t>(d)];
    if (at >= 0) return at;
    if (home_[x] < 0) return 0;  // a host input or constant: uploaded straight to its first reader
    return ready_[x] + links_.seconds(home_[x], d, vbytes_[x]);
  }

  std::string largest_live(int d) const {
    std::vector<std::pair<uint64_t, ValueId>> live;
    for (size_t x = 0; x < vbytes_.size(); ++x)
      if (arrival_[x * nd_ + static_cast<size_t>(d)] >= 0 && !freed(static_cast<ValueId>(x)))
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

  void place(NodeId id, const Analysis& a) {
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
        if (x != kNone && resident_[x] && g_.value(x).role == TensorRole::Weight && (pinned < 0 || vbytes_[x] > best)) {
          best = vbytes_[x];
          pinned = home_[x];
          dec.rule = Rule::ResidentWeight;
          dec.pinned_by = x;
        }
    }

    int choice = -1, runner = -1, feasible = 0;
    double choice_finish = kInf, runner_finish = kInf, choice_start = 0;
    for (size_t dd = 0; dd < nd_; ++dd) {
      const int d = static_cast<int>(dd);
      if (pinned >= 0 && d != pinned) continue;
      if (live_[d] + new_bytes(id, d) > t_.devices[d].budget()) continue;
      double start = dev_free_[d];
      for (ValueId x : n.inputs)
        if (x != kNone) start = std::max(start, arrival(x, d));
      if (!std::isfinite(start)) continue;
      ++feasible;
      const double finish = start + predict_seconds(costs_[id], t_.devices[d]);
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
    if (pinned < 0) dec.rule = feasible == 1 ? Rule::OnlyDevice : Rule::MinFinishTime;
    if (const int32_t k = node_kv_[id]; k >= 0 && kv_home_[k] < 0) kv_home_[k] = choice;
    dec.start_s = choice_start;
    dec.finish_s = choice_finish;
    dec.runner_up = runner;
    dec.runner_up_finish_s = runner >= 0 ? runner_finish : 0;

    // Commit: allocations, transfers, frees.
    const int d = choice;
    live_[d] += new_bytes(id, d);
    peak_[d] = std::max(peak_[d], live_[d]);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const ValueId x = n.inputs[i];
      if (x == kNone) continue;
      double& at = arrival_[static_cast<size_t>(x) * nd_ + static_cast<size_t>(d)];
      if (at >= 0) continue;
      if (home_[x] < 0) {
        home_[x] = d;  // host input or constant: lives where it is first read
        at = 0;
        continue;
      }
      Transfer tr;
      tr.value = g_.value(x).name;
      tr.value_id = x;
      tr.from_device = home_[x];
      tr.to_device = d;
      tr.bytes = vbytes_[x];
      tr.predicted_s = links_.seconds(home_[x], d, vbytes_[x]);
      tr.consumer = id;
      at = ready_[x] + tr.predicted_s;
      plan_.transfers.push_back(std::move(tr));
    }
    for (ValueId o : n.outputs) {
      home_[o] = d;
      ready_[o] = choice_finish;
      arrival_[static_cast<size_t>(o) * nd_ + static_cast<size_t>(d)] = choice_finish;
    }
    dev_free_[d] = choice_finish;
    plan_.node_device[id] = d;
    plan_.predicted_node_s[id] = predict_seconds(costs_[id], t_.devices[d]);
    plan_.predicted_total_s = std::max(plan_.predicted_total_s, choice_finish);
    plan_.decisions[id] = dec;
    // Free every copy of a node output whose last reader has run.
    for (ValueId x : n.inputs)
      if (x != kNone && --remaining_[x] == 0 && freed(x))
        for (size_t dd = 0; dd < nd_; ++dd)
          if (arrival_[static_cast<size_t>(x) * nd_ + dd] >= 0) live_[dd] -= vbytes_[x];
    for (ValueId o : n.outputs)
      if (remaining_[o] == 0 && freed(o)) live_[d] -= vbytes_[o];
  }

  const GraphView& v_;
  const Graph& g_;
  const Topology& t_;
  LinkMatrix links_;
  Plan& plan_;
  const size_t nd_;
  std::vector<uint64_t> vbytes_;
  std::vector<int> home_;
  std::vector<double> ready_, arrival_;  // arrival_: per value x device, -1 = not there
  std::vector<uint8_t> resident_;
  std::vector<OpCost> costs_;
  std::vector<uint64_t> live_, peak_;
  std::vector<double> dev_free_, finish_;
  std::vector<uint64_t> alloc_;
  std::vector<int32_t> remaining_, node_kv_;
  std::vector<int> kv_home_;

 public:
  const std::vector<uint64_t>& vbytes() const { return vbytes_; }
};

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
  for (const DeviceProfile& d : topo.devices) {
    plan.device_names.push_back(d.qualified_name());
    plan.budget_per_device.push_back(d.budget());
  }
  lap(&PlanTimings::hash_s);
  const GraphView view(g);
  const std::vector<const Shape*> shapes = value_shapes(g, bound_shapes);
  for (ValueId in : g.inputs())
    for (int64_t d : *shapes[in])
      check(d >= 0, GENIE_ERR_INVALID_ARGUMENT, "input '", g.value(in).name, "' has dynamic shape ",
            shape_str(*shapes[in]), ": pass the shapes it is bound to");
  plan.analysis = analyze(view, shapes);
  lap(&PlanTimings::analysis_s);
  Placer placer(view, topo, residency, shapes, plan);  // FLOPs, bytes and sizes of every node and value
  lap(&PlanTimings::cost_s);
  plan.order = memory_aware_order(view, placer.vbytes());
  placer.run(plan.order, plan.analysis);
  lap(&PlanTimings::placement_s);
  return plan;
}

}  // namespace genie::sched
