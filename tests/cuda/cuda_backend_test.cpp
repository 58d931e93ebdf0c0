// The CUDA backend plugin as libgenie meets it on any machine with the
// toolkit: it loads (every symbol it needs is resolved: nothing of libgenie
// but headers), exports its entry point alone, and without a driver or a
// device says why, and genie_tensor_alloc("cuda:0") reports that reason.
// The plugin is a front that asks the driver first and loads the backend
// (which links the CUDA libraries) only for a device: without one, those
// libraries never load; the backend is checked on its own as well. On a
// machine with a GPU the same tests check the devices appear.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>

#include <string>

#include "exec/backend_loader.hpp"
#include "genie.h"
#include "process_testing.hpp"

namespace genie {
namespace {

const std::string kPlugin = std::string(GENIE_CUDA_PLUGIN_DIR) + "/libgenie_backend_cuda.so";
const std::string kBackend = std::string(GENIE_CUDA_PLUGIN_DIR) + "/libgenie_backend_cuda_impl.so";

// Before anything loads a backend: the process's "cuda" kind comes from
// this build's plugin.
const bool kEnvSet = [] { return ::setenv("GENIE_DEVICE_BACKEND_PATH", GENIE_CUDA_PLUGIN_DIR, 1) == 0; }();

using testing::library_mapped;

// A reason the driver or the device gave, not a missing library or symbol.
void expect_driver_reason(const std::string& why) {
  EXPECT_NE(why.find("CUDA"), std::string::npos) << why;
  EXPECT_TRUE(why.find("driver") != std::string::npos ||
              why.find("no CUDA-capable device") != std::string::npos)
      << why;
  for (const char* bad : {"undefined symbol", "cannot open", "dlopen", "ABI"})
    EXPECT_EQ(why.find(bad), std::string::npos) << why;
}

TEST(CudaPlugin, LoadsAndSaysWhyItHasNoDevices) {
  ASSERT_TRUE(kEnvSet);
  const LoadedBackend b = load_backend_plugin(kPlugin, "cuda");
  if (b.backend) {
    ASSERT_FALSE(b.backend->devices().empty());
    for (const DeviceDesc& d : b.backend->devices()) {
      EXPECT_EQ(d.id.kind, "cuda");
      EXPECT_EQ(d.memory, MemoryKind::Device);
      EXPECT_GT(d.capacity_bytes, 0u);
      printf("cuda:%d: %s\n", d.id.index, d.description.c_str());
    }
    EXPECT_TRUE(library_mapped("libgenie_backend_cuda_impl.so"));
    return;
  }
  printf("the CUDA backend is unavailable here: %s\n", b.why_unavailable.c_str());
  expect_driver_reason(b.why_unavailable);
  // Asking cost this process neither the backend nor the CUDA libraries.
  EXPECT_FALSE(library_mapped("libgenie_backend_cuda_impl.so"));
  EXPECT_FALSE(library_mapped("libcublas"));
  EXPECT_FALSE(library_mapped("libcudnn"));
}

TEST(CudaPlugin, TheBackendLoadsWithEverySymbolResolved) {
  // Loaded as a plugin of its own, it resolves everything it links and
  // answers with its own reason where there is no device.
  const LoadedBackend b = load_backend_plugin(kBackend, "cuda");
  if (b.backend) {
    EXPECT_FALSE(b.backend->devices().empty());
    return;
  }
  printf("the CUDA backend says: %s\n", b.why_unavailable.c_str());
  expect_driver_reason(b.why_unavailable);
}

TEST(CudaPlugin, ExportsItsEntryPointAlone) {
  for (const std::string& file : {kPlugin, kBackend}) {
    const std::string cmd = "nm -D --defined-only '" + file + "' 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char line[512];
    int symbols = 0;
    while (fgets(line, sizeof line, p) != nullptr) {
      out += line;
      ++symbols;
    }
    ASSERT_EQ(::pclose(p), 0) << out;
    EXPECT_EQ(symbols, 1) << file << "\n" << out;
    EXPECT_NE(out.find(" T " GENIE_DEVICE_BACKEND_ENTRY), std::string::npos) << file << "\n" << out;
  }
}

TEST(CudaPlugin, TensorAllocOnCudaReportsTheReason) {
  ASSERT_TRUE(kEnvSet);
  const LoadedBackend& b = device_backend("cuda");
  genie_context_t* ctx = nullptr;
  ASSERT_EQ(genie_init(nullptr, &ctx), GENIE_OK) << genie_last_error();
  genie_tensor_t* t = nullptr;
  const int64_t shape[1] = {4};
  const genie_status_t st = genie_tensor_alloc(ctx, GENIE_DTYPE_F32, shape, 1, "cuda:0", &t);
  if (b.backend) {
    EXPECT_EQ(st, GENIE_OK) << genie_last_error();
    const float in[4] = {1, 2, 3, 4};
    float back[4] = {};
    ASSERT_EQ(genie_tensor_write(t, 0, in, sizeof in), GENIE_OK) << genie_last_error();
    ASSERT_EQ(genie_tensor_read(t, 0, back, sizeof back), GENIE_OK) << genie_last_error();
    EXPECT_EQ(back[3], 4.f);
    genie_tensor_destroy(t);
  } else {
    EXPECT_NE(st, GENIE_OK);
    EXPECT_EQ(t, nullptr);
    const std::string why = genie_last_error();
    EXPECT_NE(why.find(b.why_unavailable), std::string::npos) << why << "\nexpected: " << b.why_unavailable;
    EXPECT_NE(why.find("cuda:0"), std::string::npos) << why;
  }
  genie_shutdown(ctx);
}

// Last: it leaves a driver in this process that reports a device it does
// not have (ctest runs each test in a process of its own).
TEST(CudaPlugin, HandsOverToTheBackendWhenTheDriverReportsADevice) {
  // Loaded first, the stand-in is the libcuda.so.1 every later dlopen of
  // that name gets: the plugin's question, and the CUDA runtime's.
  void* driver = ::dlopen(GENIE_FAKE_CUDA_DRIVER, RTLD_NOW | RTLD_GLOBAL);
  ASSERT_NE(driver, nullptr) << ::dlerror();
  const LoadedBackend b = load_backend_plugin(kPlugin, "cuda");
  printf("with a driver that reports a device it does not have: %s\n", b.why_unavailable.c_str());
  EXPECT_EQ(b.backend, nullptr);
  // The backend was loaded and answered: the CUDA runtime found no usable
  // driver behind the stand-in.
  EXPECT_TRUE(library_mapped("libgenie_backend_cuda_impl.so"));
  expect_driver_reason(b.why_unavailable);
  EXPECT_EQ(b.why_unavailable.find("not installed or not on the library path"), std::string::npos)
      << b.why_unavailable;
}

}  // namespace
}  // namespace genie
