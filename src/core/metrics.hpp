// This process's Prometheus metrics (docs/observability.md lists each one).
//
// One registry per process, served over HTTP by prometheus-cpp once
// expose() has been called (genie serve --metrics-port, GENIE_METRICS_PORT).
// Until then every recording call is one relaxed atomic load and a branch,
// so instrumented hot paths cost nothing measurable with metrics off.
//
// Two kinds of values:
//   - recorded where they happen (add/observe below, by Id): counters and
//     histograms whose label values the caller passes, in the
//     order of the metric's label names; label values must come from small
//     fixed sets (a phase, a role, a transport name, "hit"/"miss"), never
//     ids;
//   - read at scrape time from a collector (add_collector): values a layer
//     already keeps (a server's sessions and tensors), which then cost
//     nothing between scrapes.
//
// Built without prometheus-cpp, supported() is false, expose() throws
// UNSUPPORTED and the recording calls do nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace genie::metrics {

// The metrics recorded where they happen. Their names, label names, help
// and buckets are defined once, in metrics.cpp.
enum class Id : uint8_t {
  GraphsSubmitted,       // counter {phase}
  GraphsCompleted,       // counter {phase}
  GraphsFailed,          // counter {phase}
  GraphDuration,         // histogram seconds {phase}
  OpDuration,            // histogram seconds {op}
  TensorBytes,           // counter bytes {direction, phase, role}
  TransportBytes,        // counter bytes {transport, direction}
  PlanCacheHits,         // counter
  PlanCacheMisses,       // counter
  SchedulerDecision,     // histogram seconds
  CostModelRatio,        // histogram measured / predicted
  GraphDeltaSavedBytes,  // counter bytes
  AuthFailures,          // counter
  Heartbeats,            // counter
  kCount
};

// One metric's cell for one set of label values: a counter's count or a
// histogram's buckets, kept in relaxed atomics that a scrape sums up. Cells
// live as long as the process, so a hot path may resolve its cell once and
// keep the reference (counter()/histogram() below); recording into a cell is
// then one or two relaxed atomic adds, no lock and no lookup.
class Counter {
 public:
  // += v, in whole units (bytes, events; rounded); v <= 0 is ignored. Any
  // thread.
  void add(double v) {
    if (v >= 0.5) n_.fetch_add(static_cast<uint64_t>(v + 0.5), std::memory_order_relaxed);
  }
  uint64_t value() const { return n_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> n_{0};
};

class Histogram {
 public:
  explicit Histogram(const std::vector<double>& bounds);
  // Counts v in the first bucket whose bound is >= v (Prometheus's `le`).
  // Any thread.
  void observe(double v);
  // Non-cumulative counts, one per bound and a last one past them (+Inf).
  const std::vector<double>& bounds() const { return bounds_; }
  uint64_t count(size_t bucket) const { return counts_[bucket].load(std::memory_order_relaxed); }
  double sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  const std::vector<double>& bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<double> sum_{0};
};

// The cell of metric `id` for `labels` (values in the order of the
// metric's label names), made on first use under the metric's lock. Past 256
// label sets a metric gives every new one its single "other" cell. Any
// thread; works whether or not metrics are on (the caller checks on()
// before recording). Throws INVALID_ARGUMENT for an id of the other kind.
Counter& counter(Id id, std::initializer_list<const char*> labels = {});
Histogram& histogram(Id id, std::initializer_list<const char*> labels = {});

namespace detail {
extern std::atomic<bool> g_on;
// Finds the cell through a small cache of the calling thread (a hash of the
// label values, then their comparison), else as counter()/histogram() do.
Counter* counter_cell(Id id, std::initializer_list<const char*> labels);
Histogram* histogram_cell(Id id, std::initializer_list<const char*> labels);
}  // namespace detail

// Whether this library was built with prometheus-cpp.
bool supported();
// Whether metrics are being recorded (once expose() has succeeded). Any
// thread; a relaxed load.
inline bool on() { return detail::g_on.load(std::memory_order_relaxed); }

// Counter `id` += v (v >= 0; a negative v is ignored). Any thread. Label
// values may change from call to call (a phase, an op); a call site with
// fixed values is cheaper holding counter(id, values).
inline void add(Id id, std::initializer_list<const char*> labels = {}, double v = 1) {
  if (on()) detail::counter_cell(id, labels)->add(v);
}
// Histogram `id` observes v. Any thread.
inline void observe(Id id, std::initializer_list<const char*> labels, double v) {
  if (on()) detail::histogram_cell(id, labels)->observe(v);
}

// A graph finished (completed when `ok`, else failed) after `ns` ns.
inline void graph_finished(const char* phase, bool ok, uint64_t ns) {
  if (!on()) return;
  detail::counter_cell(ok ? Id::GraphsCompleted : Id::GraphsFailed, {phase})->add(1);
  detail::histogram_cell(Id::GraphDuration, {phase})->observe(static_cast<double>(ns) * 1e-9);
}

// A metric family read at scrape time.
struct Family {
  std::string name;  // genie_..., with _total for counters
  std::string help;
  bool counter = false;  // else a gauge
  struct Sample {
    std::vector<std::pair<std::string, std::string>> labels;
    double value = 0;
  };
  std::vector<Sample> samples;
};
using Collector = std::function<std::vector<Family>()>;

// Registers `collect`, called on the exposer's HTTP threads at each scrape
// while the returned handle lives (it must not outlive what `collect`
// reads: destroying the handle waits for a scrape in progress). Families of
// the same name from several collectors are merged, samples with the same
// labels summed (two servers in one process report their total).
std::shared_ptr<void> add_collector(Collector collect);

// Serves /metrics on host:port over HTTP (port 0: a free port). The
// exposer is process-wide: while one is served, asking again for port 0 or
// for the same host and port shares it; another address throws
// INVALID_ARGUMENT. Throws UNSUPPORTED without prometheus-cpp, IO when the
// address cannot be bound. Serving stops when the last handle goes;
// recording stays on.
class Exposure {
 public:
  virtual ~Exposure() = default;
  virtual int port() const = 0;
  virtual const std::string& host() const = 0;
};
std::shared_ptr<Exposure> expose(const std::string& host, int port);

}  // namespace genie::metrics
