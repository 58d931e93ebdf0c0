// The TCP transport, built into libgenie and always present ("tcp"):
// channels are framed TCP connections (connection.hpp), listeners are libuv
// TCP servers. Host memory only; no remote memory access.
#pragma once

#include <memory>

#include "dataplane/transport.hpp"

namespace genie::dataplane::tcp {

std::shared_ptr<Transport> make_transport();

}  // namespace genie::dataplane::tcp
