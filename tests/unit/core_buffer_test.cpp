// Device-aware buffers: memory kinds, who frees a block, moves, and tensors
// adopting buffers.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "core/buffer.hpp"
#include "core/error.hpp"
#include "core/tensor_data.hpp"

namespace genie {
namespace {

TEST(Buffer, HostMemoryIsAlignedWholeCacheLinesOfTheLocalCpu) {
  Buffer b = Buffer::host(100);
  ASSERT_TRUE(b);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u);
  EXPECT_GE(b.size(), 100u);
  EXPECT_EQ(b.size() % 64, 0u);
  EXPECT_EQ(b.size(), Buffer::host_alloc_size(100));
  EXPECT_EQ(b.memory(), MemoryKind::Host);
  EXPECT_EQ(b.device().str(), "cpu:0");
  EXPECT_TRUE(b.host_accessible());
  std::memset(b.data(), 7, b.size());  // writable (ASan checks the bounds)
  // Never zero bytes: a zero-sized tensor still has an address.
  Buffer z = Buffer::host(0);
  EXPECT_TRUE(z);
  EXPECT_GT(z.size(), 0u);
}

TEST(Buffer, KindsSayWhetherHostCodeMayTouchTheBytes) {
  EXPECT_STREQ(memory_kind_name(MemoryKind::Host), "host");
  EXPECT_STREQ(memory_kind_name(MemoryKind::PinnedHost), "pinned_host");
  EXPECT_STREQ(memory_kind_name(MemoryKind::Device), "device");
  alignas(64) static std::byte block[64];
  Device gpu{"cuda", 1, ""};
  Buffer pinned(block, 64, MemoryKind::PinnedHost, Device{}, [](std::byte*) {});
  Buffer dev(block, 64, MemoryKind::Device, gpu, [](std::byte*) {});
  EXPECT_TRUE(pinned.host_accessible());
  EXPECT_FALSE(dev.host_accessible());
  EXPECT_EQ(dev.device(), gpu);
}

TEST(Buffer, ReleaseRunsOnceAndMovesTransferOwnership) {
  int released = 0;
  std::byte* seen = nullptr;
  alignas(64) static std::byte block[128];
  {
    Buffer a(block, 128, MemoryKind::Device, Device{"cuda", 0, ""}, [&](std::byte* p) {
      ++released;
      seen = p;
    });
    Buffer b(std::move(a));
    EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
    EXPECT_EQ(a.size(), 0u);
    EXPECT_EQ(b.data(), block);
    EXPECT_EQ(b.memory(), MemoryKind::Device);
    Buffer c;
    c = std::move(b);
    EXPECT_EQ(released, 0);
    EXPECT_EQ(c.device().str(), "cuda:0");
  }
  EXPECT_EQ(released, 1);
  EXPECT_EQ(seen, block);

  // reset() frees now; assigning over a live buffer frees the old block.
  int first = 0, second = 0;
  Buffer x(block, 64, MemoryKind::Host, Device{}, [&](std::byte*) { ++first; });
  x = Buffer(block + 64, 64, MemoryKind::Host, Device{}, [&](std::byte*) { ++second; });
  EXPECT_EQ(first, 1);
  x.reset();
  EXPECT_EQ(second, 1);
  EXPECT_FALSE(x);
  x.reset();  // empty: nothing more
  EXPECT_EQ(second, 1);
}

TEST(Buffer, TensorsAdoptBuffersAndReportWhereTheyLive) {
  int released = 0;
  alignas(64) static std::byte block[64];
  {
    TensorData t(
        DType::F32, {4, 4},
        Buffer(block, 64, MemoryKind::Device, Device{"cuda", 2, ""}, [&](std::byte*) { ++released; }), false);
    EXPECT_EQ(t.nbytes(), 64u);
    EXPECT_EQ(t.memory(), MemoryKind::Device);
    EXPECT_EQ(t.device().str(), "cuda:2");
    EXPECT_FALSE(t.host_accessible());
  }
  EXPECT_EQ(released, 1);

  // A buffer smaller than the tensor is refused (and freed).
  try {
    TensorData t(DType::F32, {4, 5},
                 Buffer(block, 64, MemoryKind::Host, Device{}, [&](std::byte*) { ++released; }), false);
    ADD_FAILURE() << "a 64-byte buffer held an 80-byte tensor";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_INVALID_ARGUMENT);
    EXPECT_NE(e.detail().find("64 bytes"), std::string::npos) << e.detail();
  }
  EXPECT_EQ(released, 2);

  // The plain constructor: zero-filled host memory of this process's CPU.
  TensorData h(DType::I32, {3});
  EXPECT_EQ(h.memory(), MemoryKind::Host);
  EXPECT_TRUE(h.device().is_local_cpu());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(h.data<int32_t>()[i], 0);
}

TEST(Buffer, ConvertElementsIsTheLoopOfConvert) {
  const float src[3] = {1.5f, -2.f, 0.f};
  uint16_t half[3];
  float back[3];
  convert_elements(reinterpret_cast<const std::byte*>(src), DType::F32, reinterpret_cast<std::byte*>(half),
                   DType::F16, 3);
  convert_elements(reinterpret_cast<const std::byte*>(half), DType::F16, reinterpret_cast<std::byte*>(back),
                   DType::F32, 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(back[i], src[i]);
  int32_t ints[3];
  convert_elements(reinterpret_cast<const std::byte*>(src), DType::F32, reinterpret_cast<std::byte*>(ints),
                   DType::I32, 3);
  EXPECT_EQ(ints[0], 1);
  EXPECT_EQ(ints[1], -2);
}

}  // namespace
}  // namespace genie
