// The backend's entry point (exec/backend.hpp): the only symbol
// libgenie_backend_cuda_impl.so exports. The plugin libgenie loads
// (shim/entry.cpp) calls it once the driver has reported a device.
#include <cstring>
#include <string>

#include "exec/cuda/backend.hpp"
#include "exec/cuda/reasons.hpp"

namespace {

using namespace genie;

// Why the driver cannot serve this process, in an operator's words.
std::string why_no_devices(cudaError_t e) {
  switch (e) {
    case cudaErrorNoDevice: return cuda::kNoDeviceReason;
    case cudaErrorInsufficientDriver:
      return "CUDA driver not found, or older than CUDA " + std::to_string(CUDART_VERSION / 1000) + "." +
             std::to_string(CUDART_VERSION % 1000 / 10) + " needs (libcuda.so.1)";
    default: return std::string("CUDA driver not usable: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  }
}

DeviceBackend* create(const BackendHost* host, char* why, size_t why_size) {
  const auto refuse = [&](const std::string& s) -> DeviceBackend* {
    if (why_size) {
      std::strncpy(why, s.c_str(), why_size - 1);
      why[why_size - 1] = '\0';
    }
    return nullptr;
  };
  if (host == nullptr || host->abi_version != kDeviceBackendAbi)
    return refuse("the host library is of another device-backend ABI version");
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return refuse(why_no_devices(e));
  if (count <= 0) return refuse(why_no_devices(cudaErrorNoDevice));
  try {
    return new cuda::CudaBackend(count);
  } catch (const std::exception& ex) {
    return refuse(std::string("CUDA devices could not be opened: ") + ex.what());
  }
}

const DeviceBackendEntry kEntry{kDeviceBackendAbi, "cuda", &create};

}  // namespace

extern "C" __attribute__((visibility("default"))) const genie::DeviceBackendEntry* genie_device_backend_entry() {
  return &kEntry;
}
