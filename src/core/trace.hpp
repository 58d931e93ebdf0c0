// Chrome / Perfetto trace-event JSON (docs/observability.md, "Traces"):
// the one writer of the library's traces (GENIE_TRACE, genie_trace_start)
// and of `genie replay --trace`.
//
// A trace is a list of complete events ("ph":"X": a name, a category, a
// start and a duration in microseconds, on a process and thread row, with
// arguments) and the names of those rows ("M" metadata events). to_json
// writes them as {"traceEvents":[...],"displayTimeUnit":"ns",
// "otherData":{...}}, which chrome://tracing and ui.perfetto.dev open.
//
// The process-wide recorder: off until start(); while off, on() is one
// relaxed load and nothing is recorded.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace genie::trace {

struct Event {
  std::string name;
  std::string cat;
  double ts_us = 0;
  double dur_us = 0;
  int64_t pid = 0;
  int64_t tid = 0;
  std::vector<std::pair<std::string, std::string>> args;
  std::vector<std::pair<std::string, double>> num_args;
};

struct Document {
  std::vector<Event> events;
  std::map<int64_t, std::string> process_names;                     // pid -> name
  std::map<std::pair<int64_t, int64_t>, std::string> thread_names;  // (pid, tid) -> name
  std::map<std::string, std::string> metadata;                      // "otherData"
};

std::string to_json(const Document& doc);

// Rows of a process's trace: 0 its graphs, 1 the submitting thread, 2 + N
// worker N; the scheduler's decisions and the transfers have rows of their
// own.
constexpr int64_t kSchedulerTid = 1000;
constexpr int64_t kTransferTid = 1001;

namespace detail {
extern std::atomic<bool> g_on;
}
inline bool on() { return detail::g_on.load(std::memory_order_relaxed); }

// Starts recording into a trace that stop() writes to `path` (the file is
// created, or truncated, at once: Error(IO) naming it when it cannot be).
// Error(INVALID_ARGUMENT) when a trace is already being recorded into
// another path; the same path again is a no-op. Any thread.
void start(const std::string& path);
// Writes the trace recorded since start() and stops recording; nothing
// when not recording. Error(IO) when the file cannot be written. Any
// thread.
void stop();
// Microseconds on the trace's clock (steady, from start()) of a
// steady_clock time in nanoseconds since its epoch.
double ts_us(uint64_t steady_ns);
// GENIE_TRACE=path: start(path), and stop() at exit. Nothing when unset.
void start_from_env();
// Adds an event, and names its row (`thread_name`, when not empty) and its
// process ("genie PID") the first time each is seen. Nothing when not
// recording. Any thread.
void record(Event e, const std::string& thread_name = "");
// The same for each events[i] on its row rows[i], under one lock.
void record(std::vector<Event>&& events, const std::vector<std::string>& rows);
// Counts the traces started: a new value means a new trace (whose rows and
// metadata start empty).
uint64_t generation();

// The pid of a process row of another process, named `name` (a server
// whose spans a client merges into its trace): the same pid for the same
// name until stop(), above any real pid. Any thread.
int64_t process_row(const std::string& name);
// Sets the trace's metadata ("otherData") `key` to `value`. Nothing when
// not recording. Any thread.
void set_metadata(const std::string& key, const std::string& value);

// This process's steady clock in nanoseconds (the clock of ts_us).
uint64_t now_ns();

// A tensor moved between `from` and `to` over `transport` from `start_ns`
// to `end_ns` (now_ns()), with its semantic tag's `role` and `phase`, as a
// span on this process's "transfers" row: named "<role> <bytes> B"
// ("<direction> <role> <bytes> B" with a direction: a client's `write` or
// `read`), `args` bytes, transport, role, phase, from, to, value (and
// direction). Nothing when not recording. Any thread.
struct Transfer {
  std::string value;
  std::string transport;
  std::string role;
  std::string phase;
  std::string from;
  std::string to;
  uint64_t bytes = 0;
  std::string direction{};
};
void transfer(const Transfer& t, uint64_t start_ns, uint64_t end_ns);

}  // namespace genie::trace
