#include "core/metrics.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>

#include "core/error.hpp"
#include "core/log.hpp"

#ifdef GENIE_HAVE_PROMETHEUS
#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#endif

namespace genie::metrics {

namespace detail {
std::atomic<bool> g_on{false};
}

#ifdef GENIE_HAVE_PROMETHEUS

namespace {

enum class Kind { Counter, Histogram };

struct Def {
  Id id;
  Kind kind;
  const char* name;
  const char* help;
  std::vector<std::string> labels;
  std::vector<double> buckets;  // histograms
};

// Seconds from 10 µs to about 10 s (a tiny graph on the loop to a large
// one), and ratios around 1 for the cost model.
std::vector<double> seconds_buckets() {
  return {1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3,
          1e-2, 2.5e-2, 5e-2, 0.1,  0.25,   0.5,  1,    2.5,    10};
}
std::vector<double> ratio_buckets() { return {0.25, 0.5, 0.75, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2, 4}; }

// Every metric recorded where it happens: docs/observability.md lists them.
const std::vector<Def>& defs() {
  static const std::vector<Def> d = {
      {Id::GraphsSubmitted,
       Kind::Counter,
       "genie_graphs_submitted_total",
       "Graphs accepted for execution, by the phase of their nodes.",
       {"phase"},
       {}},
      {Id::GraphsCompleted,
       Kind::Counter,
       "genie_graphs_completed_total",
       "Graphs that finished successfully, by phase.",
       {"phase"},
       {}},
      {Id::GraphsFailed,
       Kind::Counter,
       "genie_graphs_failed_total",
       "Graphs that finished with an error, by phase.",
       {"phase"},
       {}},
      {Id::GraphDuration,
       Kind::Histogram,
       "genie_graph_duration_seconds",
       "From a graph's start on this server (queueing for a worker included) to its completion, by phase.",
       {"phase"},
       seconds_buckets()},
      {Id::OpDuration,
       Kind::Histogram,
       "genie_op_duration_seconds",
       "Execution time of each node of the graphs run here, by op.",
       {"op"},
       seconds_buckets()},
      {Id::TensorBytes,
       Kind::Counter,
       "genie_tensor_bytes_total",
       "Tensor payload bytes moved, by direction (write, read, import) and the semantic tag's phase and "
       "role.",
       {"direction", "phase", "role"},
       {}},
      {Id::TransportBytes,
       Kind::Counter,
       "genie_transport_bytes_total",
       "Bytes a transport moved through its connections (frames and payloads), by transport and direction.",
       {"transport", "direction"},
       {}},
      {Id::PlanCacheHits,
       Kind::Counter,
       "genie_plan_cache_hits_total",
       "Plan lookups answered from the plan cache.",
       {},
       {}},
      {Id::PlanCacheMisses,
       Kind::Counter,
       "genie_plan_cache_misses_total",
       "Plan lookups that had to plan the graph.",
       {},
       {}},
      {Id::SchedulerDecision,
       Kind::Histogram,
       "genie_scheduler_decision_seconds",
       "Time the scheduler took to plan a graph on a plan-cache miss.",
       {},
       seconds_buckets()},
      {Id::CostModelRatio,
       Kind::Histogram,
       "genie_cost_model_ratio",
       "Measured over predicted time of a multi-node graph's plan (1: exact).",
       {},
       ratio_buckets()},
      {Id::GraphDeltaSavedBytes,
       Kind::Counter,
       "genie_graph_delta_saved_bytes_total",
       "Bytes graph deltas saved: rebuilt graph size minus the delta message's size.",
       {},
       {}},
      {Id::AuthFailures,
       Kind::Counter,
       "genie_auth_failures_total",
       "Connections closed because they failed authentication.",
       {},
       {}},
      {Id::Heartbeats,
       Kind::Counter,
       "genie_heartbeats_total",
       "Heartbeats this master accepted from cluster nodes.",
       {},
       {}},
  };
  return d;
}

// One metric's family and the cells of the label values seen so far.
template <class T>
struct Slot {
  prometheus::Family<T>* family = nullptr;
  const Def* def = nullptr;
  std::mutex mu;
  std::unordered_map<std::string, T*> cells;
};

// Label values beyond this many per metric go to one "other" cell, so that a
// caller passing an unexpected value cannot grow the registry without bound.
constexpr size_t kMaxCellsPerMetric = 256;

struct Collectors : prometheus::Collectable {
  mutable std::mutex mu;
  std::map<uint64_t, Collector> by_id;
  uint64_t next = 1;

  std::vector<prometheus::MetricFamily> Collect() const override;
};

struct State {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::shared_ptr<Collectors> collectors = std::make_shared<Collectors>();
  Slot<prometheus::Counter> counters[size_t(Id::kCount)];
  Slot<prometheus::Histogram> histograms[size_t(Id::kCount)];

  State() {
    for (const Def& d : defs()) {
      const size_t i = size_t(d.id);
      switch (d.kind) {
        case Kind::Counter:
          counters[i].family = &prometheus::BuildCounter().Name(d.name).Help(d.help).Register(*registry);
          counters[i].def = &d;
          break;
        case Kind::Histogram:
          histograms[i].family = &prometheus::BuildHistogram().Name(d.name).Help(d.help).Register(*registry);
          histograms[i].def = &d;
          break;
      }
    }
  }
};

State& state() {
  static State* s = new State();  // never destroyed: exposer threads may scrape during exit
  return *s;
}

// The cell of `values` (joined as `key`) in `slot`, made on first use.
template <class T, class Make>
T* resolve(Slot<T>& slot, std::initializer_list<const char*> values, const std::string& key, Make make) {
  std::lock_guard<std::mutex> lk(slot.mu);
  if (auto it = slot.cells.find(key); it != slot.cells.end()) return it->second;
  const std::vector<std::string>& names = slot.def->labels;
  std::map<std::string, std::string> labels;
  const bool full = slot.cells.size() >= kMaxCellsPerMetric;
  size_t i = 0;
  for (const char* v : values) {
    if (i >= names.size()) break;
    labels[names[i++]] = full ? "other" : (v && *v ? v : "none");
  }
  for (; i < names.size(); ++i) labels[names[i]] = "none";
  T* c = make(*slot.family, labels);
  if (!full) slot.cells.emplace(key, c);
  return c;
}

// Cells this thread has resolved, by the metric's slot and label values:
// most events find theirs here without taking the slot's lock. Cells live as
// long as the process, so the pointers stay valid; bounded per thread.
constexpr size_t kMaxThreadCells = 1024;
struct ThreadCells {
  std::unordered_map<std::string, void*> by_key;
  std::string key;
};
thread_local ThreadCells t_cells;

template <class T, class Make>
T* cell(Slot<T>& slot, std::initializer_list<const char*> values, Make make) {
  if (slot.family == nullptr) return nullptr;  // wrong kind for this id
  std::string& key = t_cells.key;
  const Slot<T>* which = &slot;
  key.assign(reinterpret_cast<const char*>(&which), sizeof which);
  for (const char* v : values) {
    key += v ? v : "";
    key += '\x1f';
  }
  if (auto it = t_cells.by_key.find(key); it != t_cells.by_key.end()) return static_cast<T*>(it->second);
  T* c = resolve(slot, values, key.substr(sizeof which), make);
  if (t_cells.by_key.size() < kMaxThreadCells) t_cells.by_key.emplace(key, c);
  return c;
}

// Adds the samples of `from` to `into` (same name), summing equal label sets.
void merge(prometheus::MetricFamily& into, const Family& from) {
  for (const Family::Sample& s : from.samples) {
    std::vector<prometheus::ClientMetric::Label> labels;
    for (const auto& [k, v] : s.labels) labels.push_back({k, v});
    std::sort(labels.begin(), labels.end());
    prometheus::ClientMetric* m = nullptr;
    for (auto& existing : into.metric)
      if (existing.label == labels) m = &existing;
    if (m == nullptr) {
      into.metric.emplace_back();
      m = &into.metric.back();
      m->label = std::move(labels);
    }
    if (from.counter)
      m->counter.value += s.value;
    else
      m->gauge.value += s.value;
  }
}

std::vector<prometheus::MetricFamily> Collectors::Collect() const {
  // Under the lock throughout, so that removing a collector waits for a
  // scrape calling it.
  std::lock_guard<std::mutex> lk(mu);
  std::vector<prometheus::MetricFamily> out;
  std::map<std::string, size_t> index;
  for (const auto& [id, c] : by_id) {
    std::vector<Family> families;
    try {
      families = c();
    } catch (const std::exception& e) {
      log(LogLevel::Warn, "metrics: a collector failed: ", e.what());
      continue;
    }
    for (const Family& f : families) {
      auto [it, fresh] = index.emplace(f.name, out.size());
      if (fresh) {
        out.emplace_back();
        out.back().name = f.name;
        out.back().help = f.help;
        out.back().type = f.counter ? prometheus::MetricType::Counter : prometheus::MetricType::Gauge;
      }
      merge(out[it->second], f);
    }
  }
  return out;
}

class PromExposure final : public Exposure {
 public:
  PromExposure(std::string host, int port) : host_(std::move(host)) {
    const bool v6 = host_.find(':') != std::string::npos;
    const std::string bind = v6 ? cat("[", host_, "]:", port) : cat(host_, ":", port);
    try {
      exposer_ = std::make_unique<prometheus::Exposer>(bind, 1);
    } catch (const std::exception& e) {
      fail(GENIE_ERR_IO, "cannot serve metrics on ", bind, ": ", e.what());
    }
    const std::vector<int> ports = exposer_->GetListeningPorts();
    check(!ports.empty(), GENIE_ERR_IO, "cannot serve metrics on ", bind, ": no listening port");
    port_ = ports.front();
    State& s = state();
    exposer_->RegisterCollectable(s.registry);
    exposer_->RegisterCollectable(s.collectors);
  }
  int port() const override { return port_; }
  const std::string& host() const override { return host_; }

 private:
  std::string host_;
  int port_ = 0;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

std::mutex g_expose_mu;
std::weak_ptr<Exposure> g_exposure;

}  // namespace

bool supported() { return true; }

namespace detail {

void add(Id id, std::initializer_list<const char*> labels, double v) {
  if (!(v > 0)) return;
  auto* c = cell(state().counters[size_t(id)], labels, [](auto& fam, const auto& l) { return &fam.Add(l); });
  if (c) c->Increment(v);
}

void observe(Id id, std::initializer_list<const char*> labels, double v) {
  Slot<prometheus::Histogram>& slot = state().histograms[size_t(id)];
  auto* h = cell(slot, labels, [&slot](auto& fam, const auto& l) {
    return &fam.Add(l, prometheus::Histogram::BucketBoundaries(slot.def->buckets));
  });
  if (h) h->Observe(v);
}

}  // namespace detail

std::shared_ptr<void> add_collector(Collector collect) {
  std::shared_ptr<Collectors> cs = state().collectors;
  uint64_t id;
  {
    std::lock_guard<std::mutex> lk(cs->mu);
    id = cs->next++;
    cs->by_id.emplace(id, std::move(collect));
  }
  // Under the lock that a scrape holds: once this returns, `collect` is
  // never called again.
  return std::shared_ptr<void>(nullptr, [cs, id](void*) {
    std::lock_guard<std::mutex> lk(cs->mu);
    cs->by_id.erase(id);
  });
}

std::shared_ptr<Exposure> expose(const std::string& host, int port) {
  check(port >= 0 && port <= 65535, GENIE_ERR_INVALID_ARGUMENT, "metrics port ", port,
        " is outside 0..65535");
  check(!host.empty(), GENIE_ERR_INVALID_ARGUMENT, "metrics address is empty");
  std::lock_guard<std::mutex> lk(g_expose_mu);
  if (std::shared_ptr<Exposure> e = g_exposure.lock()) {
    check((port == 0 || port == e->port()) && host == e->host(), GENIE_ERR_INVALID_ARGUMENT,
          "metrics are already served on ", e->host(), ":", e->port(), " by this process (asked for ", host,
          ":", port, ")");
    return e;
  }
  auto e = std::make_shared<PromExposure>(host, port);
  g_exposure = e;
  detail::g_on.store(true, std::memory_order_relaxed);
  return e;
}

#else  // no prometheus-cpp

bool supported() { return false; }

namespace detail {
void add(Id, std::initializer_list<const char*>, double) {}
void observe(Id, std::initializer_list<const char*>, double) {}
}  // namespace detail

std::shared_ptr<void> add_collector(Collector) { return nullptr; }

std::shared_ptr<Exposure> expose(const std::string& host, int port) {
  fail(GENIE_ERR_UNSUPPORTED, "metrics are not supported: this library was built without prometheus-cpp ",
       "(install prometheus-cpp-dev and rebuild)");
}

#endif

}  // namespace genie::metrics
