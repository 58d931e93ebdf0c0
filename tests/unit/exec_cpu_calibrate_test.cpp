// The CPU backend's calibration and its on-disk cache (the scheduler's
// profile cache).
#include <cjson/cJSON.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "exec/cpu/backend.hpp"
#include "exec/cpu/calibrate.hpp"
#include "sched/plan.hpp"

namespace genie::cpu {
namespace {

namespace fs = std::filesystem;
using sched::CalibrateOptions;
using sched::DeviceProfile;

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/genie-calib-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

size_t count_files(const fs::path& dir) {
  size_t n = 0;
  if (fs::exists(dir))
    for (auto& e : fs::directory_iterator(dir)) n += e.is_regular_file();
  return n;
}

TEST(CpuCalibrate, MeasuresAndCaches) {
  TempDir tmp;
  CalibrateOptions o;
  o.cache_dir = (tmp.path / "sub" / "genie").string();  // created on demand
  o.node_id = "node-x";
  const DeviceProfile d = calibrate_local_cpu(o);
  EXPECT_EQ(d.node_id, "node-x");
  EXPECT_EQ(d.device, "cpu:0");
  EXPECT_GT(d.peak_flops, 1e8);          // any CPU of this century
  EXPECT_GT(d.mem_bw_bytes_per_s, 1e8);
  // Element-wise kernels: a rate of their own, below the sgemm peak.
  EXPECT_GT(d.vector_flops, 1e7);
  EXPECT_LT(d.vector_flops, d.peak_flops);
  EXPECT_GT(d.mem_capacity_bytes, 0u);
  EXPECT_GT(d.mem_budget_bytes, 0u);
  EXPECT_LE(d.mem_budget_bytes, d.mem_capacity_bytes);
  ASSERT_EQ(count_files(o.cache_dir), 1u);

  // The second call reads the file: the same rates exactly.
  const DeviceProfile again = calibrate_local_cpu(o);
  EXPECT_EQ(again.peak_flops, d.peak_flops);
  EXPECT_EQ(again.mem_bw_bytes_per_s, d.mem_bw_bytes_per_s);
  EXPECT_EQ(again.vector_flops, d.vector_flops);

  // The file is what is read: edit it and the profile follows.
  const fs::path file = fs::directory_iterator(o.cache_dir)->path();
  std::string text;
  {
    std::ifstream in(file);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const size_t at = text.find("\"peak_flops\"");
  ASSERT_NE(at, std::string::npos) << text;
  const size_t colon = text.find(':', at), end = text.find_first_of(",\n}", colon);
  text.replace(colon + 1, end - colon - 1, " 123456789");
  { std::ofstream(file) << text; }
  EXPECT_EQ(calibrate_local_cpu(o).peak_flops, 123456789.0);

  // A damaged file is measured again and rewritten.
  { std::ofstream(file) << "{ not json"; }
  const DeviceProfile fresh = calibrate_local_cpu(o);
  EXPECT_GT(fresh.peak_flops, 1e8);
  EXPECT_NE(fresh.peak_flops, 123456789.0);
  std::ifstream in(file);
  std::string rewritten((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(rewritten.find("peak_flops"), std::string::npos);
}

TEST(CpuCalibrate, AnOlderCacheFormatIsMeasuredAgain) {
  TempDir tmp;
  CalibrateOptions o;
  o.cache_dir = tmp.path.string();
  calibrate_local_cpu(o);
  const fs::path file = fs::directory_iterator(o.cache_dir)->path();
  std::string text;
  {
    std::ifstream in(file);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  // The same file as format 1 wrote it: no vector_flops, version 1, and a
  // recognisable peak.
  cJSON* root = cJSON_Parse(text.c_str());
  ASSERT_NE(root, nullptr) << text;
  EXPECT_EQ(cJSON_GetObjectItem(root, "version")->valuedouble, 4);
  cJSON_DeleteItemFromObject(root, "vector_flops");
  cJSON_SetNumberValue(cJSON_GetObjectItem(root, "version"), 1);
  cJSON_SetNumberValue(cJSON_GetObjectItem(root, "peak_flops"), 123456789.0);
  char* v1 = cJSON_Print(root);
  cJSON_Delete(root);
  { std::ofstream(file) << v1; }
  cJSON_free(v1);
  const DeviceProfile d = calibrate_local_cpu(o);
  EXPECT_NE(d.peak_flops, 123456789.0);  // measured, not read
  EXPECT_GT(d.vector_flops, 0);
  std::ifstream in(file);
  std::string rewritten((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(rewritten.find("vector_flops"), std::string::npos) << rewritten;
}

TEST(CpuCalibrate, WithoutCacheWritesNothing) {
  TempDir tmp;
  CalibrateOptions o;
  o.cache_dir = tmp.path.string();
  o.use_cache = false;
  o.budget_fraction = 0.5;
  const DeviceProfile d = calibrate_local_cpu(o);
  EXPECT_GT(d.peak_flops, 0);
  EXPECT_EQ(count_files(tmp.path), 0u);
  EXPECT_LE(d.mem_budget_bytes, d.mem_capacity_bytes / 2 + 1);
}

TEST(CpuCalibrate, UsesXdgCacheHome) {
  TempDir tmp;
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::string saved = old ? old : "";
  ::setenv("XDG_CACHE_HOME", tmp.path.c_str(), 1);
  calibrate_local_cpu({});
  EXPECT_EQ(count_files(tmp.path / "genie"), 1u);
  if (old) ::setenv("XDG_CACHE_HOME", saved.c_str(), 1); else ::unsetenv("XDG_CACHE_HOME");
}

TEST(CpuCalibrate, AnUnwritableCacheIsNotAnError) {
  CalibrateOptions o;
  o.cache_dir = "/proc/genie-cannot-write-here";
  EXPECT_GT(calibrate_local_cpu(o).peak_flops, 0);
}

// The backend's calibrate() is this calibration, for its one device.
TEST(CpuCalibrate, TheBackendCalibratesItsDevice) {
  TempDir tmp;
  CalibrateOptions o;
  o.cache_dir = tmp.path.string();
  o.node_id = "node-y";
  CpuBackend be;
  const DeviceProfile d = be.calibrate(0, o);
  EXPECT_EQ(d.device, "cpu:0");
  EXPECT_EQ(d.node_id, "node-y");
  EXPECT_GT(d.peak_flops, 0);
  EXPECT_EQ(count_files(tmp.path), 1u);
  try {
    be.calibrate(1, o);
    ADD_FAILURE() << "cpu:1 calibrated";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_INVALID_ARGUMENT);
    EXPECT_NE(e.detail().find("cpu:1"), std::string::npos) << e.detail();
  }
}

}  // namespace
}  // namespace genie::cpu

