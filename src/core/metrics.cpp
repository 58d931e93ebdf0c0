#include "core/metrics.hpp"

#include <algorithm>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <type_traits>
#include <unordered_map>

#include "core/error.hpp"
#include "core/log.hpp"

#ifdef GENIE_HAVE_PROMETHEUS
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>
#endif

namespace genie::metrics {

namespace detail {
std::atomic<bool> g_on{false};
}

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

// One metric's cells, one per set of label values.
struct Slot {
  const Def* def = nullptr;
  std::mutex mu;
  struct Cell {
    std::vector<std::pair<std::string, std::string>> labels;  // sorted by name
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Histogram> histogram;
  };
  std::deque<Cell> cells;                         // stable addresses
  std::unordered_map<std::string, Cell*> by_key;  // values, each followed by '\x1f'
  Cell* other = nullptr;
};

// Label values beyond this many per metric go to one "other" cell, so that a
// caller passing an unexpected value cannot grow the registry without bound.
constexpr size_t kMaxCellsPerMetric = 256;

struct Cells {
  Slot slots[size_t(Id::kCount)];
  Cells() {
    for (const Def& d : defs()) slots[size_t(d.id)].def = &d;
  }
};

Cells& cells() {
  static Cells* c = new Cells();  // never destroyed: exposer threads may scrape during exit
  return *c;
}

void append_key(std::string& key, std::initializer_list<const char*> values) {
  for (const char* v : values) {
    key += v ? v : "";
    key += '\x1f';
  }
}

Slot::Cell& make_cell(Slot& slot, std::initializer_list<const char*> values, bool other) {
  const Def& d = *slot.def;
  Slot::Cell& c = slot.cells.emplace_back();
  size_t i = 0;
  for (const char* v : values) {
    if (i >= d.labels.size()) break;
    c.labels.emplace_back(d.labels[i++], other ? "other" : (v && *v ? v : "none"));
  }
  for (; i < d.labels.size(); ++i) c.labels.emplace_back(d.labels[i], other ? "other" : "none");
  std::sort(c.labels.begin(), c.labels.end());
  if (d.kind == Kind::Counter)
    c.counter = std::make_unique<Counter>();
  else
    c.histogram = std::make_unique<Histogram>(d.buckets);
  return c;
}

// The cell of `values` in metric `id`, made on first use.
Slot::Cell& resolve(Id id, Kind kind, std::initializer_list<const char*> values) {
  check(size_t(id) < size_t(Id::kCount), GENIE_ERR_INVALID_ARGUMENT, "metrics: no metric ", int(id));
  Slot& slot = cells().slots[size_t(id)];
  check(slot.def->kind == kind, GENIE_ERR_INVALID_ARGUMENT, "metrics: ", slot.def->name, " is a ",
        slot.def->kind == Kind::Counter ? "counter" : "histogram");
  std::string key;
  append_key(key, values);
  std::lock_guard<std::mutex> lk(slot.mu);
  if (auto it = slot.by_key.find(key); it != slot.by_key.end()) return *it->second;
  if (slot.by_key.size() >= kMaxCellsPerMetric) {
    if (slot.other == nullptr) slot.other = &make_cell(slot, values, true);
    return *slot.other;
  }
  Slot::Cell& c = make_cell(slot, values, false);
  slot.by_key.emplace(std::move(key), &c);
  return c;
}

// Cells this thread has found, in a small direct-mapped table keyed by a
// hash of the metric and its label values, then checked against the entry's
// values: most events find theirs here without a lock or an allocation.
struct ThreadEntry {
  uint64_t hash = 0;
  void* cell = nullptr;
  std::string key;  // as Slot::by_key's
};
constexpr size_t kThreadEntries = 256;
thread_local ThreadEntry t_entries[kThreadEntries];

uint64_t hash_of(Id id, std::initializer_list<const char*> values) {
  uint64_t h = 1469598103934665603ull ^ uint64_t(id);  // FNV-1a
  for (const char* v : values) {
    for (const char* c = v ? v : ""; *c; ++c) h = (h ^ uint8_t(*c)) * 1099511628211ull;
    h = (h ^ 0x1f) * 1099511628211ull;
  }
  return h;
}

bool same_values(const std::string& key, std::initializer_list<const char*> values) {
  size_t pos = 0;
  for (const char* v : values) {
    const char* s = v ? v : "";
    const size_t n = std::strlen(s);
    if (pos + n >= key.size() || key.compare(pos, n, s) != 0 || key[pos + n] != '\x1f') return false;
    pos += n + 1;
  }
  return pos == key.size();
}

template <class T>
T* cached_cell(Id id, std::initializer_list<const char*> values) {
  constexpr Kind kind = std::is_same_v<T, Counter> ? Kind::Counter : Kind::Histogram;
  const uint64_t h = hash_of(id, values);
  ThreadEntry& e = t_entries[h % kThreadEntries];
  if (e.cell != nullptr && e.hash == h && same_values(e.key, values)) return static_cast<T*>(e.cell);
  Slot::Cell& c = resolve(id, kind, values);
  T* cell;
  if constexpr (kind == Kind::Counter)
    cell = c.counter.get();
  else
    cell = c.histogram.get();
  e.hash = h;
  e.cell = cell;
  e.key.clear();
  append_key(e.key, values);
  return cell;
}

}  // namespace

Histogram::Histogram(const std::vector<double>& bounds)
    : bounds_(bounds), counts_(std::make_unique<std::atomic<uint64_t>[]>(bounds.size() + 1)) {
  for (size_t i = 0; i <= bounds.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::observe(double v) {
  const auto i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  counts_[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

Counter& counter(Id id, std::initializer_list<const char*> labels) {
  return *resolve(id, Kind::Counter, labels).counter;
}
Histogram& histogram(Id id, std::initializer_list<const char*> labels) {
  return *resolve(id, Kind::Histogram, labels).histogram;
}

namespace detail {
Counter* counter_cell(Id id, std::initializer_list<const char*> labels) {
  return cached_cell<Counter>(id, labels);
}
Histogram* histogram_cell(Id id, std::initializer_list<const char*> labels) {
  return cached_cell<Histogram>(id, labels);
}
}  // namespace detail

#ifdef GENIE_HAVE_PROMETHEUS

namespace {

// The cells as prometheus-cpp's families, read at each scrape.
struct CellsCollectable : prometheus::Collectable {
  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> out;
    for (Slot& slot : cells().slots) {
      prometheus::MetricFamily& f = out.emplace_back();
      f.name = slot.def->name;
      f.help = slot.def->help;
      f.type = slot.def->kind == Kind::Counter ? prometheus::MetricType::Counter
                                               : prometheus::MetricType::Histogram;
      std::lock_guard<std::mutex> lk(slot.mu);
      for (const Slot::Cell& c : slot.cells) {
        prometheus::ClientMetric& m = f.metric.emplace_back();
        for (const auto& [k, v] : c.labels) m.label.push_back({k, v});
        if (c.counter) {
          m.counter.value = static_cast<double>(c.counter->value());
          continue;
        }
        const Histogram& h = *c.histogram;
        const size_t nb = h.bounds().size();
        uint64_t total = 0;
        for (size_t i = 0; i <= nb; ++i) {
          total += h.count(i);
          m.histogram.bucket.push_back(
              {total, i < nb ? h.bounds()[i] : std::numeric_limits<double>::infinity()});
        }
        m.histogram.sample_count = total;
        m.histogram.sample_sum = h.sum();
      }
    }
    return out;
  }
};

struct Collectors : prometheus::Collectable {
  mutable std::mutex mu;
  std::map<uint64_t, Collector> by_id;
  uint64_t next = 1;

  std::vector<prometheus::MetricFamily> Collect() const override;
};

const std::shared_ptr<Collectors>& collectors() {
  static auto* c = new std::shared_ptr<Collectors>(std::make_shared<Collectors>());  // never destroyed
  return *c;
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
    // The exposer holds collectables weakly: both live as long as the process.
    static auto* cells_collectable =
        new std::shared_ptr<CellsCollectable>(std::make_shared<CellsCollectable>());
    exposer_->RegisterCollectable(*cells_collectable);
    exposer_->RegisterCollectable(collectors());
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

std::shared_ptr<void> add_collector(Collector collect) {
  std::shared_ptr<Collectors> cs = collectors();
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

std::shared_ptr<void> add_collector(Collector) { return nullptr; }

std::shared_ptr<Exposure> expose(const std::string& host, int port) {
  fail(GENIE_ERR_UNSUPPORTED, "metrics are not supported: this library was built without prometheus-cpp ",
       "(install prometheus-cpp-dev and rebuild)");
}

#endif

}  // namespace genie::metrics
