// What a graph run leaves in this process's observability: while a trace
// is recorded (core/trace.hpp), a span for the graph and one per node on the
// worker that ran it, with the node's op and semantic annotations; while
// metrics are recorded (core/metrics.hpp), each node's time by op.
#pragma once

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

}  // namespace genie
