// Node ids made up when the configuration names none.
#pragma once

#include <string>

namespace genie {

// "<host>-<pid>-<4 hex digits>" (servers: "<host>-serve-<pid>-..." with
// kind "serve"): the host name reduced to [A-Za-z0-9._-] (at most 200
// characters, "host" if none), this process id and 16 random bits, so that
// processes on one host differ. Valid for check_node_id.
std::string generate_node_id(const std::string& kind = "");

}  // namespace genie
