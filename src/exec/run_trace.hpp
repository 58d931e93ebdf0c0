// What a graph run leaves in this process's observability: while a trace
// is recorded (core/trace.hpp), a span for the graph and one per node on the
// worker that ran it, with the node's op and semantic annotations; while
// metrics are recorded (core/metrics.hpp), each node's time by op.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/metrics.hpp"
#include "core/trace.hpp"
#include "exec/executor.hpp"
#include "graph/graph.hpp"

namespace genie {

// `r` has just completed (its last node finished now); `where` names the
// side that ran it ("embedded", "server"). Nothing while neither is
// recorded. Any thread.
void observe_run(const Graph& g, const ExecResult& r, const char* where);

inline bool observing() { return trace::on() || metrics::on(); }

// One span of a run on the steady clock (trace::now_ns()): `event` without
// its times and process (ts_us, dur_us, pid unset), on row event.tid named
// `row`.
struct RunSpan {
  trace::Event event;
  std::string row;
  uint64_t start_ns = 0;
  uint64_t dur_ns = 0;
};

// The spans of run `r` of `g` that ended at `end_ns`: the graph's (row 0,
// "graphs") and each node's on the thread that ran it, as observe_run
// records them; at most `max_spans` (the graph's first), the others
// counted in *dropped.
std::vector<RunSpan> run_spans(const Graph& g, const ExecResult& r, const char* where, uint64_t end_ns,
                               size_t max_spans, size_t* dropped);

}  // namespace genie
