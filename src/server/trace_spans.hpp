// A remote graph's spans for the session that submitted it
// (docs/observability.md, "Remote graphs"): a submission with
// GraphSubmit.trace set gets what the server recorded of its run in its
// GraphDone, on the server's steady clock; the client shifts them onto its
// own clock and merges them into its trace. Nothing is buffered between
// graphs: the spans of a run go out with its completion, bounded in count
// and bytes, so a session that asks for them costs the server no more than
// its graph's completion message grown by a bounded amount.
#pragma once

#include <cstddef>

#include "exec/executor.hpp"
#include "genie.pb.h"
#include "graph/graph.hpp"
#include "server/multinode.hpp"

namespace genie {

// At most this many spans per GraphDone (the graph's, then its nodes' in
// node order), and at most this many bytes of them; the rest are counted in
// GraphDone.spans_dropped.
constexpr size_t kMaxTraceSpans = 4096;
constexpr size_t kMaxTraceSpanBytes = size_t{1} << 20;
// Traced submissions in flight on one connection; past it a submission
// runs untraced (its GraphDone has no spans, spans_dropped 0).
constexpr size_t kMaxTracedInFlight = 1024;

// Adds the spans of run `r` of `g`, which has just completed, to `d`: the
// graph's and one per node on the thread that ran it (a multi-node graph:
// the graph's only). Loop thread.
void add_trace_spans(const Graph& g, const ExecResult& r, wire::GraphDone& d);
void add_trace_spans(const Graph& g, const MultiResult& r, wire::GraphDone& d);

}  // namespace genie
