#include "exec/run_trace.hpp"

#include <unistd.h>

#include <chrono>

#include "core/error.hpp"
#include "core/trace.hpp"

namespace genie {

void observe_run(const Graph& g, const ExecResult& r, const char* where) {
  if (metrics::on()) {
    for (const NodeTrace& t : r.trace)
      if (t.node != kNone && static_cast<size_t>(t.node) < g.nodes().size() && t.end_ns >= t.start_ns)
        metrics::observe(metrics::Id::OpDuration, {g.node(t.node).op.c_str()},
                         static_cast<double>(t.end_ns - t.start_ns) * 1e-9);
  }
  if (!trace::on()) return;
  // Node times are from the run's start, which is exec_ns before now.
  const uint64_t end_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                    std::chrono::steady_clock::now().time_since_epoch())
                                                    .count());
  const uint64_t start_ns = end_ns >= r.exec_ns ? end_ns - r.exec_ns : 0;
  const int64_t pid = ::getpid();
  trace::Event graph;
  graph.name = g.name().empty() ? "graph" : g.name();
  graph.cat = "graph";
  graph.ts_us = trace::ts_us(start_ns);
  graph.dur_us = static_cast<double>(r.exec_ns) / 1e3;
  graph.pid = pid;
  graph.tid = 0;
  graph.args = {
      {"phase", graph_phase_name(g)}, {"side", where}, {"status", r.status == GENIE_OK ? "ok" : r.detail}};
  graph.num_args = {{"nodes", static_cast<double>(g.nodes().size())}};
  trace::record(std::move(graph), "graphs");
  for (const NodeTrace& t : r.trace) {
    if (t.node == kNone || static_cast<size_t>(t.node) >= g.nodes().size() || t.end_ns < t.start_ns) continue;
    const Node& n = g.node(t.node);
    trace::Event e;
    e.name = n.op;
    e.cat = "node";
    e.ts_us = trace::ts_us(start_ns + t.start_ns);
    e.dur_us = static_cast<double>(t.end_ns - t.start_ns) / 1e3;
    e.pid = pid;
    // Row 1 + worker; the thread that issued the run itself (-1) is row 1.
    e.tid = 2 + t.worker;
    e.args = {{"op", n.op}, {"node", n.name}, {"phase", phase_name(n.ann.phase)}, {"graph", g.name()}};
    if (!n.ann.module_path.empty()) e.args.push_back({"module", n.ann.module_path});
    if (n.ann.layer >= 0) e.num_args.push_back({"layer", static_cast<double>(n.ann.layer)});
    trace::record(std::move(e), t.worker < 0 ? "submitting thread" : cat("worker ", t.worker));
  }
}

}  // namespace genie
