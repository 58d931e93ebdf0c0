#include "cluster/store_plugin.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <map>
#include <mutex>

#include "core/error.hpp"
#include "dataplane/registry.hpp"

namespace genie {

namespace {

const StoreHost& store_host() {
  static const StoreHost host{[](LogLevel level, const std::string& msg) { log(level, msg); }};
  return host;
}

// Loads the plugin's entry once per process (never unloaded).
const GenieStorePlugin* load_entry(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, const GenieStorePlugin*>* loaded = new std::map<std::string, const GenieStorePlugin*>;
  std::lock_guard<std::mutex> lk(mu);
  if (auto it = loaded->find(name); it != loaded->end()) return it->second;
  const std::string file = cat("libgenie_store_", name, ".so");
  std::string reasons, dirs;
  for (const std::string& dir : dataplane::transport_search_path()) {
    dirs += cat(dirs.empty() ? "" : ", ", dir);
    const std::string path = cat(dir, "/", file);
    if (::access(path.c_str(), F_OK) != 0) continue;
    dlerror();
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (lib == nullptr) {
      const char* why = dlerror();
      reasons += cat(reasons.empty() ? "" : "; ", path, " cannot be loaded (are its libraries installed?): ",
                     why ? why : "unknown dlopen error");
      continue;
    }
    auto fn = reinterpret_cast<GenieStorePluginFn>(dlsym(lib, kStoreEntrySymbol));
    const GenieStorePlugin* entry = fn ? fn() : nullptr;
    if (entry == nullptr) {
      reasons += cat(reasons.empty() ? "" : "; ", path, " is not a store plugin (no ", kStoreEntrySymbol, ")");
      continue;
    }
    if (entry->abi_version != kStoreAbiVersion)
      fail(GENIE_ERR_VERSION_MISMATCH, "store '", name, "': plugin ", path, " was built for store ABI version ",
           entry->abi_version, ", this libgenie speaks version ", kStoreAbiVersion, " (rebuild the plugin)");
    check(entry->name != nullptr && name == entry->name && entry->open != nullptr, GENIE_ERR_UNSUPPORTED,
          "store '", name, "': plugin ", path, " names itself '", entry->name ? entry->name : "(none)", "'");
    (*loaded)[name] = entry;
    return entry;
  }
  if (!reasons.empty()) fail(GENIE_ERR_UNSUPPORTED, "store '", name, "': ", reasons);
  fail(GENIE_ERR_UNSUPPORTED, "no membership store plugin ", file, " in ", dirs.empty() ? "(no directory)" : dirs,
       " (GENIE_TRANSPORT_PATH adds directories; the ", name,
       " plugin is built where its libraries are found at configure time)");
}

}  // namespace

std::shared_ptr<MembershipStore> open_membership_store(const std::string& name, const StoreOptions& opts) {
  const GenieStorePlugin* entry = load_entry(name);
  std::shared_ptr<MembershipStore> store(entry->open(&store_host(), &opts));
  check(store != nullptr, GENIE_ERR_UNSUPPORTED, "store '", name, "': its plugin opened nothing");
  return store;
}

}  // namespace genie
