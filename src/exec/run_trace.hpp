// A graph run's events in this process's trace (core/trace.hpp), while one
// is recorded: a span for the graph and one per node on the worker that ran
// it, with the node's op and semantic annotations.
#pragma once

#include "core/trace.hpp"
#include "exec/executor.hpp"
#include "graph/graph.hpp"

namespace genie {

// `r` has just completed (its last node finished now); `where` names the
// side that ran it ("embedded", "server"). Nothing while no trace is
// recorded. Any thread.
void trace_run(const Graph& g, const ExecResult& r, const char* where);

}  // namespace genie
