// A device-backend plugin built for another ABI version: the loader must
// refuse it from its entry's version alone, never calling create().
#include <cstdlib>

#include "exec/backend.hpp"

namespace {

genie::DeviceBackend* create(const genie::BackendHost*, char*, size_t) {
  std::abort();  // the loader must not get this far
}

const genie::DeviceBackendEntry kEntry{genie::kDeviceBackendAbi + 100, "test", &create};

}  // namespace

extern "C" __attribute__((visibility("default"))) const genie::DeviceBackendEntry*
genie_device_backend_entry() {
  return &kEntry;
}
