#include "exec/run_trace.hpp"

#include <unistd.h>

#include "core/error.hpp"

namespace genie {

std::vector<RunSpan> run_spans(const Graph& g, const ExecResult& r, const char* where, uint64_t end_ns,
                               size_t max_spans, size_t* dropped) {
  std::vector<RunSpan> spans;
  *dropped = 0;
  if (max_spans == 0) {
    *dropped = 1 + r.trace.size();
    return spans;
  }
  // Node times are from the run's start, which is exec_ns before its end.
  const uint64_t start_ns = end_ns >= r.exec_ns ? end_ns - r.exec_ns : 0;
  RunSpan graph;
  graph.event.name = g.name().empty() ? "graph" : g.name();
  graph.event.cat = "graph";
  graph.event.tid = 0;
  graph.event.args = {
      {"phase", graph_phase_name(g)}, {"side", where}, {"status", r.status == GENIE_OK ? "ok" : r.detail}};
  graph.event.num_args = {{"nodes", static_cast<double>(g.nodes().size())}};
  graph.row = "graphs";
  graph.start_ns = start_ns;
  graph.dur_ns = r.exec_ns;
  spans.push_back(std::move(graph));
  for (const NodeTrace& t : r.trace) {
    if (t.node == kNone || static_cast<size_t>(t.node) >= g.nodes().size() || t.end_ns < t.start_ns) continue;
    if (spans.size() >= max_spans) {
      ++*dropped;
      continue;
    }
    const Node& n = g.node(t.node);
    RunSpan s;
    s.event.name = n.op;
    s.event.cat = "node";
    // Row 1 + worker; the thread that issued the run itself (-1) is row 1.
    s.event.tid = 2 + t.worker;
    s.event.args = {{"op", n.op}, {"node", n.name}, {"phase", phase_name(n.ann.phase)}, {"graph", g.name()}};
    if (!n.ann.module_path.empty()) s.event.args.push_back({"module", n.ann.module_path});
    if (n.ann.layer >= 0) s.event.num_args.push_back({"layer", static_cast<double>(n.ann.layer)});
    s.row = t.worker < 0 ? "submitting thread" : cat("worker ", t.worker);
    s.start_ns = start_ns + t.start_ns;
    s.dur_ns = t.end_ns - t.start_ns;
    spans.push_back(std::move(s));
  }
  return spans;
}

void observe_run(const Graph& g, const ExecResult& r, const char* where) {
  if (metrics::on()) {
    for (const NodeTrace& t : r.trace)
      if (t.node != kNone && static_cast<size_t>(t.node) < g.nodes().size() && t.end_ns >= t.start_ns)
        metrics::observe(metrics::Id::OpDuration, {g.node(t.node).op.c_str()},
                         static_cast<double>(t.end_ns - t.start_ns) * 1e-9);
  }
  if (!trace::on()) return;
  size_t dropped = 0;
  const int64_t pid = ::getpid();
  for (RunSpan& s : run_spans(g, r, where, trace::now_ns(), SIZE_MAX, &dropped)) {
    s.event.ts_us = trace::ts_us(s.start_ns);
    s.event.dur_us = static_cast<double>(s.dur_ns) / 1e3;
    s.event.pid = pid;
    trace::record(std::move(s.event), s.row);
  }
}

}  // namespace genie
