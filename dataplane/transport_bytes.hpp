// The bytes each transport moves: genie_transport_bytes_total{transport,
// direction} (core/metrics.hpp), also shown in a server's info and by
// `genie top`. Every transport counts the same way: a frame's bytes
// (header, message, payload) when it is handed to the wire, bytes as they
// arrive, and for RMA the bytes of a put as sent and of a get as received
// by the side that issues it (the target's CPU never sees them). The TCP
// transport counts here directly, plugins through
// TransportHost::byte_counter (plugin.hpp). Any thread.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/metrics.hpp"

namespace genie::dataplane {

// The cell of `transport` ("tcp", "ucx", "dpdk", ...) for bytes sent or
// received; it lives as long as the process, so a hot path keeps it.
metrics::Counter& transport_bytes(const std::string& transport, bool sent);

// ("<transport> sent" | "<transport> received", bytes) for "tcp" and for
// every other transport that has been counted in this process, in the
// order first counted.
std::vector<std::pair<std::string, uint64_t>> transport_byte_totals();

}  // namespace genie::dataplane
