#include "exec/backend_loader.hpp"

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

#include "core/error.hpp"
#include "core/log.hpp"
#include "exec/cpu/kernels.hpp"

namespace genie {

namespace {

KernelFn host_cpu_kernel(const std::string& op) { return cpu::find_kernel(op); }

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The directory libgenie (or the program it is linked into) was loaded from.
std::string own_directory() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&host_cpu_kernel), &info) == 0 || info.dli_fname == nullptr) return "";
  const std::string f = info.dli_fname;
  const size_t slash = f.rfind('/');
  return slash == std::string::npos ? "" : f.substr(0, slash);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size()) {
    size_t e = s.find(sep, b);
    if (e == std::string::npos) e = s.size();
    if (e > b) out.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

// The kinds named in $GENIE_DEVICE_BACKENDS, valid names only (each
// registered with parse_device), "cpu" and "cuda" left out.
std::vector<std::string> requested_kinds() {
  std::vector<std::string> kinds;
  const char* env = std::getenv("GENIE_DEVICE_BACKENDS");
  if (env == nullptr) return kinds;
  for (std::string k : split(env, ',')) {
    while (!k.empty() && k.front() == ' ') k.erase(k.begin());
    while (!k.empty() && k.back() == ' ') k.pop_back();
    if (k.empty() || k == "cpu" || k == "cuda") continue;
    try {
      register_device_kind(k);
    } catch (const Error& e) {
      log(LogLevel::Warn, "GENIE_DEVICE_BACKENDS: ", e.detail(), "; ignored");
      continue;
    }
    if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
  }
  return kinds;
}

}  // namespace

std::string backend_plugin_name(const std::string& kind) { return "libgenie_backend_" + kind + ".so"; }

LoadedBackend load_backend_plugin(const std::string& file, const std::string& kind) {
  LoadedBackend r;
  r.kind = kind;
  r.path = file;
  // RTLD_NODELETE: a backend's code stays mapped while any buffer it
  // allocated may still call back into it.
  void* lib = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (lib == nullptr) {
    const char* e = ::dlerror();
    r.why_unavailable = cat("cannot load ", file, ": ", e ? e : "unknown error");
    return r;
  }
  const auto refuse = [&](std::string why) {
    r.why_unavailable = std::move(why);
    ::dlclose(lib);
    return r;
  };
  void* sym = ::dlsym(lib, GENIE_DEVICE_BACKEND_ENTRY);
  if (sym == nullptr)
    return refuse(cat(file, " is not a genie device backend: it exports no ", GENIE_DEVICE_BACKEND_ENTRY));
  const DeviceBackendEntry* entry = reinterpret_cast<DeviceBackendEntryFn>(sym)();
  if (entry == nullptr) return refuse(cat(file, ": ", GENIE_DEVICE_BACKEND_ENTRY, "() returned NULL"));
  if (entry->abi_version != kDeviceBackendAbi)
    return refuse(cat(file, " was built for device-backend ABI version ", entry->abi_version,
                      "; this library speaks version ", kDeviceBackendAbi, " (rebuild the backend)"));
  const std::string served = entry->kind ? entry->kind : "";
  if (!kind.empty() && served != kind)
    return refuse(cat(file, " serves device kind '", served, "', not '", kind, "'"));
  r.kind = served;
  try {
    register_device_kind(served);
  } catch (const Error& e) {
    return refuse(cat(file, ": ", e.detail()));
  }
  if (entry->create == nullptr) return refuse(cat(file, ": its entry has no create function"));
  static const BackendHost host{kDeviceBackendAbi, &host_cpu_kernel, &convert_elements};
  char why[512] = {};
  DeviceBackend* be = entry->create(&host, why, sizeof why);
  if (be == nullptr) {
    why[sizeof why - 1] = '\0';
    return refuse(cat("the ", served, " backend (", file,
                      ") found no usable device: ", why[0] ? why : "no reason given"));
  }
  r.backend.reset(be);
  if (be->kind() != served) {
    r.backend.reset();
    r.why_unavailable = cat(file, ": its backend calls itself '", be->kind(), "', its entry '", served, "'");
  }
  return r;
}

const LoadedBackend& device_backend(const std::string& kind) {
  // Never destroyed: buffers of a backend may outlive every static object.
  static std::mutex* mu = new std::mutex;
  static auto* loaded = new std::map<std::string, LoadedBackend>;
  std::lock_guard<std::mutex> lk(*mu);
  if (auto it = loaded->find(kind); it != loaded->end()) return it->second;
  const std::string name = backend_plugin_name(kind);
  std::vector<std::string> tried;
  LoadedBackend r;
  r.kind = kind;
  if (kind == "cpu") {
    r.why_unavailable = "the CPU backend is built in (each executor has its own)";
    return loaded->emplace(kind, std::move(r)).first->second;
  }
  std::vector<std::string> dirs;
  if (const char* p = std::getenv("GENIE_DEVICE_BACKEND_PATH"); p && *p) dirs = split(p, ':');
  if (std::string own = own_directory(); !own.empty()) dirs.push_back(own);
  bool found = false;
  for (const std::string& d : dirs) {
    const std::string f = d + "/" + name;
    tried.push_back(d);
    if (!file_exists(f)) continue;
    r = load_backend_plugin(f, kind);
    found = true;
    break;
  }
  if (!found) {
    // The system's library path (ld.so.conf, LD_LIBRARY_PATH).
    r = load_backend_plugin(name, kind);
    if (!r.backend) {
      std::string where;
      for (const std::string& d : tried) where += d + ", ";
      r.why_unavailable = cat("no ", kind, " backend: ", name, " was not found (searched ", where,
                              "and the system library path; set GENIE_DEVICE_BACKEND_PATH to its directory)");
    }
  }
  if (r.backend) {
    std::string list;
    for (const DeviceDesc& d : r.backend->devices()) list += cat(list.empty() ? "" : ", ", d.id.str());
    log(LogLevel::Info, "device backend '", kind, "' loaded from ", r.path, ": ",
        list.empty() ? "no devices" : list);
  } else {
    // A backend the user asked for is worth a warning; the probe for CUDA
    // on a machine without it is not.
    const std::vector<std::string> asked = requested_kinds();
    const bool requested = std::find(asked.begin(), asked.end(), kind) != asked.end();
    log(requested ? LogLevel::Warn : LogLevel::Debug, "device backend '", kind,
        "' unavailable: ", r.why_unavailable);
  }
  return loaded->emplace(kind, std::move(r)).first->second;
}

std::vector<std::string> probed_backend_kinds() {
  std::vector<std::string> kinds{"cuda"};
  for (const std::string& k : requested_kinds())
    if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
  return kinds;
}

}  // namespace genie
