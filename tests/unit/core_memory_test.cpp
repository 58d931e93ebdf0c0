// Host memory figures (core/memory.hpp) from fake /proc and cgroup trees,
// and zeroed host buffers (core/buffer.hpp).
#include "core/memory.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/buffer.hpp"
#include "core/error.hpp"
#include "core/tensor_data.hpp"

namespace genie {
namespace {

namespace fs = std::filesystem;

class FakeRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/genie-memory-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    write("proc/meminfo", "MemTotal:       16000000 kB\nMemFree:         1000000 kB\nMemAvailable:    8000000 kB\n");
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& rel, const std::string& text) {
    const fs::path p = fs::path(root_) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  HostMemory read() { return read_host_memory(root_ + "/proc", root_ + "/cgroup"); }
  std::string root_;
};

TEST_F(FakeRoot, AvailableMemoryWithoutCgroupLimit) {
  write("proc/self/cgroup", "0::/user.slice\n");
  write("cgroup/user.slice/memory.max", "max\n");
  const HostMemory m = read();
  EXPECT_EQ(m.available, 8000000ull * 1024);
  EXPECT_EQ(m.cgroup_limit, 0u);
  EXPECT_EQ(m.headroom(), 8000000ull * 1024);
  EXPECT_EQ(default_memory_budget(m), static_cast<uint64_t>(8000000.0 * 1024 * kDefaultBudgetFraction));
  EXPECT_GT(m.physical, 0u);  // the real machine's
}

TEST_F(FakeRoot, CgroupV2LimitBelowAvailable) {
  write("proc/self/cgroup", "0::/box/job\n");
  write("cgroup/box/job/memory.max", "1073741824\n");
  write("cgroup/box/job/memory.current", "268435456\n");
  const HostMemory m = read();
  EXPECT_EQ(m.cgroup_limit, 1073741824u);
  EXPECT_EQ(m.cgroup_usage, 268435456u);
  EXPECT_EQ(m.headroom(), 1073741824u - 268435456u);
}

TEST_F(FakeRoot, TightestAncestorWinsAndMissingLeafIsSkipped) {
  // In a container the leaf path names the host's hierarchy and may not
  // exist under the mount; an ancestor (the mount's root) still limits.
  write("proc/self/cgroup", "0::/host/path/leaf\n");
  write("cgroup/memory.max", "536870912\n");
  write("cgroup/memory.current", "0\n");
  write("cgroup/host/memory.max", "2147483648\n");
  EXPECT_EQ(read().cgroup_limit, 536870912u);
}

TEST_F(FakeRoot, CgroupV1Limit) {
  write("proc/self/cgroup", "5:cpu,cpuacct:/x\n4:memory:/docker/abc\n0::/\n");
  write("cgroup/memory/docker/abc/memory.limit_in_bytes", "2147483648\n");
  write("cgroup/memory/docker/abc/memory.usage_in_bytes", "1073741824\n");
  write("cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");  // v1's "no limit"
  const HostMemory m = read();
  EXPECT_EQ(m.cgroup_limit, 2147483648u);
  EXPECT_EQ(m.headroom(), 1073741824u);
}

TEST_F(FakeRoot, UsageAboveLimitLeavesNoHeadroom) {
  write("proc/self/cgroup", "0::/\n");
  write("cgroup/memory.max", "1000\n");
  write("cgroup/memory.current", "5000\n");
  EXPECT_EQ(read().headroom(), 0u);
}

TEST(HostMemoryReal, HeadroomIsAtMostAvailable) {
  const HostMemory m = read_host_memory();
  ASSERT_GT(m.physical, 0u);
  EXPECT_LE(m.headroom(), m.available ? m.available : m.physical);
}

TEST(ZeroedBuffer, SmallAndLargeAreZero) {
  for (size_t n : {size_t{1}, size_t{4096}, Buffer::kMapThreshold - 200, Buffer::kMapThreshold * 3 + 5}) {
    // Dirty the heap first, so a small block reused from it would show.
    { Buffer dirty = Buffer::host(n); std::memset(dirty.data(), 0xAB, dirty.size()); }
    Buffer b = Buffer::host_zeroed(n);
    ASSERT_GE(b.size(), n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u);
    for (size_t i = 0; i < n; i += 511) ASSERT_EQ(b.data()[i], std::byte{0}) << n << " at " << i;
    EXPECT_EQ(b.data()[n - 1], std::byte{0});
    std::memset(b.data(), 1, n);  // writable
  }
}

TEST(ZeroedBuffer, TensorsSeeZerosUninitializedNeedNot) {
  TensorData t(DType::F32, Shape{512, 1024});  // 2 MiB: mapped, not cleared
  for (int64_t i = 0; i < t.numel(); i += 4093) ASSERT_EQ(t.data<float>()[i], 0.f);
  TensorData u(DType::F32, Shape{3, 5}, TensorData::Uninitialized{});
  EXPECT_EQ(u.nbytes(), 60u);
  EXPECT_THROW(TensorData(DType::Invalid, Shape{2}, TensorData::Uninitialized{}), Error);
}

}  // namespace
}  // namespace genie
