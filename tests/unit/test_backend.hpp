// Reaching the test device backend (tests/backend/test_backend.cpp) from
// unit tests: where it was built, its kernel counters and issuing threads.
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <string>

#include "exec/backend_loader.hpp"

namespace genie::testing {

// The directory holding libgenie_backend_test.so and the other test plugins.
inline const std::string kTestBackendDir = GENIE_TEST_BACKEND_DIR;

// Calls the loaded test backend's `symbol`(device); 0 before it is loaded.
template <class R>
R test_backend_query(const char* symbol, int device) {
  void* lib = ::dlopen((kTestBackendDir + "/" + backend_plugin_name("test")).c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return 0;
  auto fn = reinterpret_cast<R (*)(int)>(::dlsym(lib, symbol));
  const R n = fn ? fn(device) : 0;
  ::dlclose(lib);
  return n;
}

// Kernels run on test:`device` since the plugin loaded (0 before it is).
inline uint64_t test_backend_kernels(int device) {
  return test_backend_query<uint64_t>("genie_test_backend_kernels", device);
}

// The thread (gettid) that issued test:`device`'s last kernel, or 0.
inline long test_backend_last_issuer(int device) {
  return test_backend_query<long>("genie_test_backend_last_issuer", device);
}

}  // namespace genie::testing
