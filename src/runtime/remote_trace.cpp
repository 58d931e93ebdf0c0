#include "runtime/remote_trace.hpp"

#include <unistd.h>

#include <cstdio>

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

void remote_trace_end(const Graph& g, const RemoteTrace& t, const RemoteResult& r) {
  if (t.submit_ns == 0 || !trace::on()) return;
  try {
    const uint64_t end_ns = trace::now_ns();
    const std::string key = cat("server ", t.server, " ");
    trace::Event e;
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
    trace::record(std::move(e), "graphs");
    if (!t.clock.known) {
      trace::set_metadata(
          key + "spans",
          "none: the server does not send its spans (an older server: no Welcome.trace_spans)");
      return;
    }
    trace::set_metadata(
        key + "spans",
        cat("merged: server steady clock minus clock_offset_us; offset from the least round trip of ",
            t.clock.samples, " ClockProbe round trips, error bound half that round trip"));
    trace::set_metadata(key + "clock_offset_us", micros(static_cast<double>(t.clock.offset_ns)));
    trace::set_metadata(key + "clock_error_us", micros(static_cast<double>(t.clock.error_ns)));
    trace::set_metadata(key + "clock_rtt_us", micros(static_cast<double>(t.clock.rtt_ns)));
    const int64_t pid = trace::process_row(cat("genie serve ", t.server, " (server)"));
    for (const RemoteSpan& s : r.spans) {
      trace::Event se = s.event;
      // Onto this process's clock: client time = server time - offset.
      const uint64_t start = static_cast<uint64_t>(static_cast<int64_t>(s.start_ns) - t.clock.offset_ns);
      se.ts_us = trace::ts_us(start);
      se.dur_us = static_cast<double>(s.dur_ns) / 1e3;
      se.pid = pid;
      trace::record(std::move(se), s.row);
    }
  } catch (const std::exception& e) {
    log(LogLevel::Warn, "trace: cannot record the remote graph ", g.name(), ": ", e.what());
  }
}

}  // namespace genie
