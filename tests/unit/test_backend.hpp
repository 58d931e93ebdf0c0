// Reaching the test device backend (tests/backend/test_backend.cpp) from
// unit tests: where it was built, and its kernel counters.
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <string>

#include "exec/backend_loader.hpp"

namespace genie::testing {

// The directory holding libgenie_backend_test.so and the other test plugins.
inline const std::string kTestBackendDir = GENIE_TEST_BACKEND_DIR;

// Kernels run on test:`device` since the plugin loaded (0 before it is).
inline uint64_t test_backend_kernels(int device) {
  void* lib = ::dlopen((kTestBackendDir + "/" + backend_plugin_name("test")).c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return 0;
  auto fn = reinterpret_cast<uint64_t (*)(int)>(::dlsym(lib, "genie_test_backend_kernels"));
  const uint64_t n = fn ? fn(device) : 0;
  ::dlclose(lib);
  return n;
}

}  // namespace genie::testing
