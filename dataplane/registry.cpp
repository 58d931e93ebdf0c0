#include "dataplane/registry.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <map>
#include <mutex>

#include "core/config.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "dataplane/loop_hooks.hpp"
#include "dataplane/plugin.hpp"
#include "dataplane/tcp/transport.hpp"
#include "dataplane/transport_bytes.hpp"

namespace genie::dataplane {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<Transport>> loaded;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: transports outlive static destruction
  return *r;
}

std::string join(const std::vector<std::string>& dirs) {
  std::string out;
  for (const auto& d : dirs) out += (out.empty() ? "" : ", ") + d;
  return out.empty() ? "(no directory)" : out;
}

TransportLookup refused(genie_status_t status, std::string reason) {
  return TransportLookup{nullptr, status, std::move(reason)};
}

// Loads `path`, which exists. On success the library stays loaded for good.
TransportLookup load_plugin(const std::string& name, const std::string& path) {
  dlerror();
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    return refused(GENIE_ERR_UNSUPPORTED, cat("transport '", name, "': plugin ", path,
                                              " cannot be loaded (are its libraries installed?): ",
                                              why ? why : "unknown dlopen error"));
  }
  auto entry_fn = reinterpret_cast<GenieTransportPluginFn>(dlsym(lib, kPluginEntrySymbol));
  if (entry_fn == nullptr) {
    dlclose(lib);
    return refused(GENIE_ERR_UNSUPPORTED, cat("transport '", name, "': ", path,
                                              " is not a transport plugin (no ", kPluginEntrySymbol, ")"));
  }
  const GenieTransportPlugin* entry = entry_fn();
  if (entry == nullptr) {
    dlclose(lib);
    return refused(GENIE_ERR_UNSUPPORTED, cat("transport '", name, "': ", path, " returned no plugin entry"));
  }
  // The version first: the rest of the entry may be laid out differently.
  if (entry->abi_version != kTransportAbiVersion) {
    const uint32_t v = entry->abi_version;
    dlclose(lib);
    return refused(GENIE_ERR_VERSION_MISMATCH,
                   cat("transport '", name, "': plugin ", path, " was built for transport ABI version ", v,
                       ", this libgenie speaks version ", kTransportAbiVersion, " (rebuild the plugin)"));
  }
  if (entry->name == nullptr || name != entry->name || entry->create == nullptr) {
    const std::string says = entry->name ? entry->name : "(none)";
    dlclose(lib);
    return refused(GENIE_ERR_UNSUPPORTED,
                   cat("transport '", name, "': plugin ", path, " names itself '", says, "'"));
  }
  // From here on the library is never closed: create() may have left
  // objects of its own behind even when it failed.
  try {
    std::shared_ptr<Transport> t(entry->create(&transport_host()));
    if (!t)
      return refused(GENIE_ERR_UNSUPPORTED, cat("transport '", name, "': plugin ", path, " created nothing"));
    return TransportLookup{std::move(t), GENIE_OK, {}};
  } catch (const Error& e) {
    return refused(e.code() == GENIE_OK ? GENIE_ERR_UNSUPPORTED : e.code(),
                   cat("transport '", name, "' cannot start: ", e.detail()));
  } catch (const std::exception& e) {
    return refused(GENIE_ERR_UNSUPPORTED, cat("transport '", name, "' cannot start: ", e.what()));
  } catch (...) {
    return refused(GENIE_ERR_UNSUPPORTED, cat("transport '", name, "' cannot start"));
  }
}

}  // namespace

const TransportHost& transport_host() {
  static const TransportHost host{
      [](uv_loop_t* loop, std::function<void()> fn) { return add_close_hook(loop, std::move(fn)); },
      [](uv_loop_t* loop, uint64_t id) { remove_close_hook(loop, id); },
      [](LogLevel level, const std::string& msg) { log(level, msg); },
      [](const char* transport, bool sent) -> metrics::Counter& { return transport_bytes(transport, sent); },
      [](const std::function<SpinStep()>& step, std::chrono::microseconds idle) {
        return spin_while(step, idle);
      }};
  return host;
}

std::string plugin_file_name(const std::string& name) { return cat("libgenie_transport_", name, ".so"); }

std::vector<std::string> transport_search_path() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("GENIE_TRANSPORT_PATH")) {
    std::string s = env;
    size_t start = 0;
    while (start <= s.size()) {
      size_t end = s.find(':', start);
      if (end == std::string::npos) end = s.size();
      if (end > start) dirs.push_back(s.substr(start, end - start));
      start = end + 1;
    }
  }
  // The object this function is linked into: libgenie, or a program linking
  // the library statically.
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&transport_search_path), &info) != 0 && info.dli_fname != nullptr) {
    std::string self = info.dli_fname;
    const size_t slash = self.rfind('/');
    dirs.push_back(slash == std::string::npos ? std::string(".") : self.substr(0, slash == 0 ? 1 : slash));
  }
  // A directory named twice is searched once (a plugin that fails to load
  // would otherwise give its reason twice).
  std::vector<std::string> once;
  for (auto& d : dirs)
    if (std::find(once.begin(), once.end(), d) == once.end()) once.push_back(std::move(d));
  return once;
}

TransportLookup lookup_transport(const std::string& name) {
  try {
    if (!is_transport_name(name)) {
      return refused(GENIE_ERR_INVALID_ARGUMENT,
                     cat("'", name, "' is not a transport name (lowercase letters, digits and '_')"));
    }
    Registry& r = registry();
    // Held across the load so that two threads asking for one name load it
    // once.
    std::lock_guard<std::mutex> lk(r.mu);
    auto it = r.loaded.find(name);
    if (it != r.loaded.end()) return TransportLookup{it->second, GENIE_OK, {}};
    if (name == "tcp") return TransportLookup{r.loaded[name] = tcp::make_transport(), GENIE_OK, {}};
    const std::vector<std::string> dirs = transport_search_path();
    std::string reasons;
    TransportLookup last = refused(GENIE_ERR_NOT_FOUND, {});
    for (const auto& dir : dirs) {
      const std::string path = dir + "/" + plugin_file_name(name);
      if (::access(path.c_str(), F_OK) != 0) continue;
      TransportLookup got = load_plugin(name, path);
      if (got.transport) {
        r.loaded[name] = got.transport;
        log(LogLevel::Debug, "transport '", name, "' loaded from ", path);
        return got;
      }
      reasons += (reasons.empty() ? "" : "; ") + got.reason;
      last = std::move(got);
    }
    if (!reasons.empty()) return refused(last.status, reasons);
    return refused(
        GENIE_ERR_NOT_FOUND,
        cat("no transport named '", name, "': 'tcp' is built in, and no plugin ", plugin_file_name(name),
            " is in ", join(dirs), " (GENIE_TRANSPORT_PATH adds directories)"));
  } catch (const std::exception& e) {
    return refused(GENIE_ERR_INTERNAL, cat("transport '", name, "': ", e.what()));
  }
}

std::shared_ptr<Transport> find_transport(const std::string& name) {
  TransportLookup got = lookup_transport(name);
  if (!got.transport) throw Error(got.status, got.reason);
  return got.transport;
}

}  // namespace genie::dataplane
