// Transports by name. "tcp" is built in and always present; every other
// name is a plugin, libgenie_transport_<name>.so (dataplane/plugin.hpp),
// looked for in each directory of GENIE_TRANSPORT_PATH (colon-separated),
// then in the directory libgenie itself was loaded from. A name that cannot
// be had (no such plugin, its libraries not installed, another ABI version,
// its transport failed to start) comes with a reason for discovery to show;
// nothing else changes and TCP keeps working.
//
// Thread-safe. A transport, once loaded, is kept until the process exits;
// a failed lookup is not remembered, so a later one tries again.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dataplane/transport.hpp"
#include "genie.h"

namespace genie::dataplane {

struct TransportLookup {
  std::shared_ptr<Transport> transport;  // null when not available
  genie_status_t status = GENIE_OK;      // why not: NOT_FOUND (no plugin), UNSUPPORTED (cannot
                                         // load or start), VERSION_MISMATCH, INVALID_ARGUMENT
  std::string reason;                    // empty when available
};

// Never throws.
TransportLookup lookup_transport(const std::string& name);

// As lookup_transport, but throws Error(status, reason) when not available.
std::shared_ptr<Transport> find_transport(const std::string& name);

// The directories searched for plugins, in order.
std::vector<std::string> transport_search_path();

// "libgenie_transport_<name>.so".
std::string plugin_file_name(const std::string& name);

}  // namespace genie::dataplane
