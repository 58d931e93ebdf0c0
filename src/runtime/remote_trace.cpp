#include "runtime/remote_trace.hpp"

#include <unistd.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/trace.hpp"

namespace genie {

namespace {

std::string micros(double ns) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", ns / 1e3);
  return buf;
}

// The server's process row in the current trace, and the trace's metadata
// of its clock: written once per trace and clock estimate, not per graph.
int64_t server_row(const RemoteTrace& t) {
  struct Written {
    uint64_t generation = 0;
    int64_t offset_ns = 0;
    uint64_t error_ns = 0, rtt_ns = 0;
    int64_t pid = 0;
  };
  static std::mutex mu;
  static std::map<std::string, Written> written;
  const uint64_t gen = trace::generation();
  std::lock_guard<std::mutex> lk(mu);
  Written& w = written[t.server];
  if (w.pid != 0 && w.generation == gen && w.offset_ns == t.clock.offset_ns &&
      w.error_ns == t.clock.error_ns && w.rtt_ns == t.clock.rtt_ns)
    return w.pid;
  const std::string key = cat("server ", t.server, " ");
  trace::set_metadata(
      key + "spans",
      cat("merged: server steady clock minus clock_offset_us; offset from the least round trip of ",
          t.clock.samples, " ClockProbe round trips, error bound half that round trip"));
  trace::set_metadata(key + "clock_offset_us", micros(static_cast<double>(t.clock.offset_ns)));
  trace::set_metadata(key + "clock_error_us", micros(static_cast<double>(t.clock.error_ns)));
  trace::set_metadata(key + "clock_rtt_us", micros(static_cast<double>(t.clock.rtt_ns)));
  w = {gen, t.clock.offset_ns, t.clock.error_ns, t.clock.rtt_ns,
       trace::process_row(cat("genie serve ", t.server, " (server)"))};
  return w.pid;
}

}  // namespace

RemoteTrace remote_trace_begin(RemoteClient& client) {
  RemoteTrace t;
  if (!trace::on()) return t;
  try {
    t.server = client.server_node_id();
    t.clock = client.server_clock();
  } catch (const std::exception& e) {
    log(LogLevel::Warn, "trace: cannot measure the clock of server ", t.server, ": ", e.what());
    t.clock = {};
  }
  t.submit_ns = trace::now_ns();
  return t;
}

void remote_trace_end(const Graph& g, const RemoteTrace& t, RemoteResult& r) {
  if (t.submit_ns == 0 || !trace::on()) return;
  try {
    const uint64_t end_ns = trace::now_ns();
    std::vector<trace::Event> events;
    std::vector<std::string> rows;
    events.reserve(1 + r.spans.size());
    rows.reserve(1 + r.spans.size());
    trace::Event& e = events.emplace_back();
    rows.emplace_back("graphs");
    e.name = g.name().empty() ? "graph" : g.name();
    e.cat = "graph";
    e.ts_us = trace::ts_us(t.submit_ns);
    e.dur_us = static_cast<double>(end_ns - t.submit_ns) / 1e3;
    e.pid = ::getpid();
    e.tid = 0;
    e.args = {{"phase", graph_phase_name(g)},
              {"side", "remote"},
              {"server", t.server},
              {"status", r.status == GENIE_OK ? "ok" : r.detail}};
    e.num_args = {{"nodes", static_cast<double>(g.nodes().size())},
                  {"server_exec_us", static_cast<double>(r.exec_ns) / 1e3},
                  {"server_spans", static_cast<double>(r.spans.size())},
                  {"server_spans_dropped", static_cast<double>(r.spans_dropped)}};
    const int64_t pid = t.clock.known ? server_row(t) : 0;
    for (RemoteSpan& s : r.spans) {
      if (!t.clock.known) break;
      trace::Event& se = events.emplace_back(std::move(s.event));
      rows.push_back(std::move(s.row));
      // Onto this process's clock: client time = server time - offset.
      const uint64_t start = static_cast<uint64_t>(static_cast<int64_t>(s.start_ns) - t.clock.offset_ns);
      se.ts_us = trace::ts_us(start);
      se.dur_us = static_cast<double>(s.dur_ns) / 1e3;
      se.pid = pid;
    }
    if (!t.clock.known)
      trace::set_metadata(
          cat("server ", t.server, " spans"),
          "none: the server does not send its spans (an older server: no Welcome.trace_spans)");
    trace::record(std::move(events), rows);
  } catch (const std::exception& e) {
    log(LogLevel::Warn, "trace: cannot record the remote graph ", g.name(), ": ", e.what());
  }
}

}  // namespace genie
