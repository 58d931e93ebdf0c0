// The plan-cache key's graph part (plan.hpp, plan_hash). Like
// Graph::structural_hash it hashes a canonical stream with a final
// avalanche, fixed little-endian, free of addresses and identities;
// unlike it, it names values (a plan names them), uses bound input shapes,
// and leaves out floating-point attribute values.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>

#include "core/error.hpp"
#include "core/metrics.hpp"
#include "core/trace.hpp"
#include "sched/plan.hpp"

namespace genie::sched {

namespace {

// Word-at-a-time: each 64-bit word is folded in with a multiply and a
// shift, strings as their length then 8-byte little-endian chunks (the last
// one zero-padded). One multiply per word instead of one per byte keeps the
// key of a 60-node graph at a few microseconds.
class Hasher {
 public:
  void u64(uint64_t v) {
    h_ = (h_ ^ v) * 0x9e3779b97f4a7c15ull;
    h_ ^= h_ >> 29;
  }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void str(const std::string& s) {
    u64(s.size());
    const unsigned char* p = reinterpret_cast<const unsigned char*>(s.data());
    size_t n = s.size();
    for (; n >= 8; p += 8, n -= 8) u64(load(p, 8));
    if (n) u64(load(p, n));
  }
  void ints(const std::vector<int64_t>& v) {
    u64(v.size());
    for (int64_t x : v) i64(x);
  }
  uint64_t digest() const {
    uint64_t z = h_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  static uint64_t load(const unsigned char* p, size_t n) {  // little-endian, whatever the host
    uint64_t w = 0;
    for (size_t i = 0; i < n; ++i) w |= static_cast<uint64_t>(p[i]) << (8 * i);
    return w;
  }
  uint64_t h_ = 0xcbf29ce484222325ull;
};

}  // namespace

uint64_t plan_hash(const Graph& g, const std::unordered_map<ValueId, Shape>* bound_shapes) {
  Hasher h;
  h.str("genie.plan/1");
  const std::vector<Value>& values = g.values();
  // Inputs, then constants (each in declaration order), as the JSON codec
  // groups them; node outputs follow from the nodes.
  for (const ValueKind kind : {ValueKind::Input, ValueKind::Constant}) {
    h.u64(static_cast<uint64_t>(kind));
    for (size_t i = 0; i < values.size(); ++i) {
      const Value& v = values[i];
      if (v.kind != kind) continue;
      h.str(v.name);
      h.i64(static_cast<int64_t>(v.dtype));
      const Shape* shape = &v.shape;
      if (bound_shapes)
        if (auto it = bound_shapes->find(static_cast<ValueId>(i)); it != bound_shapes->end()) shape = &it->second;
      h.ints(*shape);
      h.i64(static_cast<int64_t>(v.role));
    }
  }
  h.u64(g.nodes().size());
  for (const Node& n : g.nodes()) {
    h.str(n.op);
    h.u64(n.input_names.size());
    for (const std::string& in : n.input_names) h.str(in);
    h.u64(n.outputs.size());
    for (ValueId out : n.outputs) {
      h.str(values[out].name);
      h.i64(static_cast<int64_t>(values[out].role));
    }
    h.u64(n.attrs.all().size());
    for (const auto& [key, value] : n.attrs.all()) {
      h.str(key);
      h.u64(value.index());
      if (auto* i = std::get_if<int64_t>(&value)) h.i64(*i);
      if (auto* s = std::get_if<std::string>(&value)) h.str(*s);
      if (auto* is = std::get_if<std::vector<int64_t>>(&value)) h.ints(*is);
      if (auto* ds = std::get_if<std::vector<double>>(&value)) h.u64(ds->size());  // the count, not the values
    }
    h.i64(static_cast<int64_t>(n.ann.phase));
    h.str(n.ann.module_path);
    h.i64(n.ann.layer);
    h.i64(static_cast<int64_t>(n.ann.modality));
  }
  h.u64(g.output_names().size());
  for (const std::string& out : g.output_names()) h.str(out);
  return h.digest();
}

PlanCache::Key PlanCache::key_of(const Graph& g, const Topology& topo, const Residency& residency,
                                 const std::unordered_map<ValueId, Shape>* bound_shapes) {
  return Key{plan_hash(g, bound_shapes), topo.version, residency.signature()};
}

PlanCache::PlanCache(size_t capacity) : capacity_(capacity ? capacity : 1) {}

std::shared_ptr<const Plan> PlanCache::find(const Key& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) {
    ++misses_;
    metrics::add(metrics::Id::PlanCacheMisses);
    return nullptr;
  }
  ++hits_;
  metrics::add(metrics::Id::PlanCacheHits);
  if (it->second != lru_.begin()) lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->plan;
}

void PlanCache::insert(const Key& key, std::shared_ptr<const Plan> plan) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) {
    it->second->plan = std::move(plan);
    it->second->drifted = 0;
    it->second->runs = 0;
    lru_.splice(lru_.begin(), lru_, it->second);
    return;
  }
  lru_.push_front(Entry{key, std::move(plan)});
  index_[key] = lru_.begin();
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }
}

bool PlanCache::report(const Plan& plan, double measured_s) {
  if (!(measured_s > 0) || !(plan.predicted_total_s > 0)) return false;
  const double ratio = measured_s / plan.predicted_total_s;
  const bool off = ratio > kDriftRatio || ratio < 1.0 / kDriftRatio;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(Key{plan.graph_hash, plan.topology_version, plan.residency_signature});
  if (it == index_.end() || it->second->plan.get() != &plan) return false;  // replaced or dropped meanwhile
  Entry& e = *it->second;
  e.drifted = off ? e.drifted + 1 : 0;
  const double x = std::log(ratio);
  e.log_drift = e.runs++ == 0 ? x : e.log_drift + kSettleAlpha * (x - e.log_drift);
  const bool settled_off = e.runs >= kSettleRuns && std::abs(e.log_drift) > std::log(kSettleRatio);
  if (e.drifted < kDriftRuns && !settled_off) return false;
  e.drifted = 0;
  e.runs = 0;
  const Key key = e.key;
  if (auto d = dropped_.find(key); d != dropped_.end() && d->second == plan.predicted_total_s) return false;
  if (dropped_.size() >= capacity_) dropped_.clear();
  dropped_[key] = plan.predicted_total_s;
  lru_.erase(it->second);
  index_.erase(it);
  ++replans_;
  return true;
}

// The scheduler's decision as a span of the trace (docs/observability.md):
// how long it took, where the nodes went, the predicted cost.
static void trace_decision(const Graph& g, const Plan& plan, bool cached,
                           std::chrono::steady_clock::time_point t0,
                           std::chrono::steady_clock::time_point t1) {
  // Where the nodes went: "device(nodes)" in the order of first use.
  std::vector<int> count(plan.device_names.size(), 0);
  std::vector<int> seen;
  for (int d : plan.node_device) {
    if (d < 0 || static_cast<size_t>(d) >= count.size()) continue;
    if (count[static_cast<size_t>(d)]++ == 0) seen.push_back(d);
  }
  std::string placement;
  for (int d : seen)
    placement += cat(placement.empty() ? "" : ", ", plan.device_names[static_cast<size_t>(d)], " (",
                     count[static_cast<size_t>(d)], " nodes)");
  uint64_t transfer_bytes = 0;
  for (const Transfer& t : plan.transfers) transfer_bytes += t.bytes;
  trace::Event e;
  e.name = cat("schedule ", g.name().empty() ? "graph" : g.name());
  e.cat = "scheduler";
  const auto ns = [](std::chrono::steady_clock::time_point t) {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
  };
  e.ts_us = trace::ts_us(ns(t0));
  e.dur_us = static_cast<double>(ns(t1) - ns(t0)) / 1e3;
  e.pid = ::getpid();
  e.tid = trace::kSchedulerTid;
  e.args = {{"placement", placement}, {"plan_cache", cached ? "hit" : "miss"}, {"graph", g.name()}};
  e.num_args = {{"predicted_ms", plan.predicted_total_s * 1e3},
                {"transfers", static_cast<double>(plan.transfers.size())},
                {"transfer_bytes", static_cast<double>(transfer_bytes)},
                {"nodes", static_cast<double>(plan.node_device.size())}};
  trace::record(std::move(e), "scheduler");
}

std::shared_ptr<const Plan> PlanCache::get_or_plan(const Graph& g, const Topology& topo, const Residency& residency,
                                                   const std::unordered_map<ValueId, Shape>* bound_shapes) {
  // A cache hit reads the clock only while a trace records it.
  const bool tracing = trace::on();
  const auto t_lookup = tracing ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  const Key key = key_of(g, topo, residency, bound_shapes);
  if (auto p = find(key)) {
    if (tracing) trace_decision(g, *p, true, t_lookup, std::chrono::steady_clock::now());
    return p;
  }
  const auto t0 = tracing ? t_lookup : std::chrono::steady_clock::now();
  auto plan = std::make_shared<const Plan>(plan_graph(g, topo, residency, bound_shapes));
  const auto t1 = std::chrono::steady_clock::now();
  metrics::observe(metrics::Id::SchedulerDecision, {}, std::chrono::duration<double>(t1 - t0).count());
  if (trace::on()) trace_decision(g, *plan, false, t0, t1);
  insert(key, plan);
  return plan;
}

void PlanCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  lru_.clear();
  index_.clear();
  dropped_.clear();
}

size_t PlanCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}
uint64_t PlanCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}
uint64_t PlanCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}
uint64_t PlanCache::replans() const {
  std::lock_guard<std::mutex> lock(mu_);
  return replans_;
}

}  // namespace genie::sched
