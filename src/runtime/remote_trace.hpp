// A remote graph on the client's trace (docs/observability.md, "Remote
// graphs"): its span from submission to completion on this process's
// "graphs" row, and the server's spans of its run (RemoteResult::spans) on
// a process row of the server's own, shifted onto this process's clock by
// the estimated offset; the offset and its error bound go into the trace's
// metadata.
#pragma once

#include <cstdint>
#include <string>

#include "control/client.hpp"
#include "graph/graph.hpp"

namespace genie {

struct RemoteTrace {
  uint64_t submit_ns = 0;  // trace::now_ns() when submitted; 0: not traced
  ClockOffset clock;       // the server's clock against ours (not known: no spans asked)
  std::string server;      // the server's node id
};

// Before submitting `g` to `client` while a trace is recorded: the
// server's clock (RemoteClient::server_clock; not known when it cannot be
// measured) and the submission time. submit_ns stays 0 when no trace is
// recorded. Never throws.
RemoteTrace remote_trace_begin(RemoteClient& client);
// `r` completed the submission `t` began (any thread); its spans are
// moved into the trace. Nothing when not traced or no longer recording.
// Never throws.
void remote_trace_end(const Graph& g, const RemoteTrace& t, RemoteResult& r);

}  // namespace genie
