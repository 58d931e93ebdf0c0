// The CUDA plugin as libgenie loads it (libgenie_backend_cuda.so): a small
// front that asks the driver whether this process has a GPU, and loads the
// backend itself (libgenie_backend_cuda_impl.so, beside it) only then.
//
// Why: the backend links cuBLASLt and cuDNN, and loading them costs a
// process about 0.2 s and 95 MB of private memory (their relocations).
// Every embedded-mode process on a machine without a GPU, where the
// plugin is installed, paid that at genie_init to learn it has none. The
// driver's own library (libcuda.so.1, which the CUDA runtime loads the same
// way) answers for a few hundred kilobytes.
//
// Where the driver reports a device, the backend's own entry point creates
// it, with its own checks (driver version, device queries) and reasons.
#include <cuda.h>
#include <dlfcn.h>

#include <cstring>
#include <string>

#include "exec/backend.hpp"
#include "exec/cuda/reasons.hpp"

namespace {

using namespace genie;

constexpr const char* kDriver = "libcuda.so.1";
constexpr const char* kBackendFile = "libgenie_backend_cuda_impl.so";

// Whether the driver sees a device; else why not, in an operator's words.
bool driver_has_devices(std::string* why) {
  void* lib = ::dlopen(kDriver, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    *why = std::string("CUDA driver not found (") + kDriver + " is not installed or not on the library path)";
    return false;
  }
  const auto init = reinterpret_cast<decltype(&cuInit)>(::dlsym(lib, "cuInit"));
  const auto count_devices = reinterpret_cast<decltype(&cuDeviceGetCount)>(::dlsym(lib, "cuDeviceGetCount"));
  int count = 0;
  CUresult r = CUDA_ERROR_NOT_FOUND;
  if (init != nullptr && count_devices != nullptr) {
    r = init(0);
    if (r == CUDA_SUCCESS) r = count_devices(&count);
  }
  // The driver stays loaded either way: the runtime uses it, and once
  // cuInit has run it may have threads or exit handlers of its own.
  if (r == CUDA_SUCCESS && count > 0) return true;
  if (r == CUDA_SUCCESS || r == CUDA_ERROR_NO_DEVICE)
    *why = cuda::kNoDeviceReason;
  else if (init == nullptr || count_devices == nullptr)
    *why = std::string("CUDA driver not usable: ") + kDriver + " lacks cuInit or cuDeviceGetCount";
  else
    *why = std::string("CUDA driver not usable: ") + kDriver + " answered error " + std::to_string(r) +
           " when asked for its devices";
  return false;
}

// The directory this library was loaded from.
std::string own_directory() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&driver_has_devices), &info) == 0 || info.dli_fname == nullptr)
    return ".";
  const std::string f = info.dli_fname;
  const size_t slash = f.rfind('/');
  return slash == std::string::npos ? "." : f.substr(0, slash);
}

// The backend's entry point, loading it; nullptr and why where it cannot.
const DeviceBackendEntry* backend_entry(std::string* why) {
  const std::string file = own_directory() + "/" + kBackendFile;
  // RTLD_NODELETE: the backend's code stays mapped while any buffer it
  // allocated may still call back into it (as the loader does for plugins).
  void* lib = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (lib == nullptr) {
    const char* e = ::dlerror();
    *why = "the CUDA backend's library could not be loaded: " + std::string(e ? e : file);
    return nullptr;
  }
  const auto entry_fn = reinterpret_cast<DeviceBackendEntryFn>(::dlsym(lib, GENIE_DEVICE_BACKEND_ENTRY));
  const DeviceBackendEntry* entry = entry_fn ? entry_fn() : nullptr;
  if (entry == nullptr || entry->abi_version != kDeviceBackendAbi || entry->create == nullptr ||
      entry->kind == nullptr || std::strcmp(entry->kind, "cuda") != 0) {
    *why = file + " is not this build's CUDA backend (its entry point is missing or of another version)";
    return nullptr;
  }
  return entry;
}

DeviceBackend* create(const BackendHost* host, char* why, size_t why_size) {
  std::string reason;
  const DeviceBackendEntry* backend = nullptr;
  if (driver_has_devices(&reason) && (backend = backend_entry(&reason)) != nullptr)
    return backend->create(host, why, why_size);
  if (why_size) {
    std::strncpy(why, reason.c_str(), why_size - 1);
    why[why_size - 1] = '\0';
  }
  return nullptr;
}

const DeviceBackendEntry kEntry{kDeviceBackendAbi, "cuda", &create};

}  // namespace

extern "C" __attribute__((visibility("default"))) const genie::DeviceBackendEntry*
genie_device_backend_entry() {
  return &kEntry;
}
