// A membership store plugin (cluster/membership.hpp): a shared object named
// libgenie_store_<name>.so that defines, with default visibility,
//
//   extern "C" const GenieStorePlugin* genie_store_plugin(void);
//
// loaded at run time by open_membership_store() from the directories the
// transport plugins are looked for in (GENIE_TRANSPORT_PATH, then
// libgenie's own directory), so that libgenie runs where a store's
// libraries (libcurl for etcd) are not installed. As for transports
// (dataplane/plugin.hpp), the C++ classes cross the boundary as they are:
// the plugin is built with the same compiler and standard library, and
// kStoreAbiVersion goes up with every change to membership.hpp or this file.
// A loaded plugin is never unloaded.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cluster/membership.hpp"
#include "core/log.hpp"

namespace genie {

constexpr uint32_t kStoreAbiVersion = 2;
constexpr const char* kStoreEntrySymbol = "genie_store_plugin";

// What a store is opened with.
struct StoreOptions {
  // Where the store answers: for etcd, its client URLs
  // ("http://127.0.0.1:2379"; a bare host:port means http), tried in turn.
  std::vector<std::string> endpoints;
  // The namespace of one Genie cluster in the store (Config::cluster).
  std::string cluster = "default";
  // The most one request to the store may take.
  int64_t timeout_ms = 5000;
};

// libgenie's services for a plugin; valid until the process exits.
struct StoreHost {
  void (*log)(LogLevel level, const std::string& msg);
};

// Loads plugin `name` ("etcd") and opens a store with `opts`. Throws
// UNSUPPORTED when the plugin is not installed or cannot be loaded (the
// detail says where it was looked for and why), VERSION_MISMATCH for one
// built for another ABI, and what the store's constructor throws
// (CONNECTION naming the endpoints when none answers).
std::shared_ptr<MembershipStore> open_membership_store(const std::string& name, const StoreOptions& opts);

}  // namespace genie

extern "C" {

struct GenieStorePlugin {
  uint32_t abi_version;  // first, at the same place in every version
  const char* name;      // must match the file name
  // Opens the store; may throw genie::Error.
  genie::MembershipStore* (*open)(const genie::StoreHost* host, const genie::StoreOptions* opts);
};

typedef const GenieStorePlugin* (*GenieStorePluginFn)(void);

}  // extern "C"
