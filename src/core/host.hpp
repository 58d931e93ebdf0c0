// Host names and addresses.
#pragma once

#include <string>

namespace genie {

// Whether `host` keeps a listener on this machine: an address of
// 127.0.0.0/8 or ::1, or the name localhost. Anything else, names included,
// may be reachable from the network.
bool is_loopback(const std::string& host);

}  // namespace genie
