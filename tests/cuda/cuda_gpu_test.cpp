// The CUDA backend on a GPU: memory, copies (direct and staged, with and
// without a queue), conversions, and matmul, linear and conv2d against the
// CPU backend per dtype. Every test skips with the reason where the
// backend is unavailable (no driver, no device).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "exec/backend_loader.hpp"
#include "exec/executor.hpp"
#include "exec/transfer.hpp"
#include "graph/graph.hpp"

namespace genie {
namespace {

DeviceBackend* cuda_backend(std::string* why) {
  static const bool env = ::setenv("GENIE_DEVICE_BACKEND_PATH", GENIE_CUDA_PLUGIN_DIR, 1) == 0;
  (void)env;
  const LoadedBackend& b = device_backend("cuda");
  *why = b.why_unavailable;
  return b.backend.get();
}

#define REQUIRE_GPU(be)                                                  \
  std::string why_;                                                      \
  DeviceBackend* be = cuda_backend(&why_);                               \
  if (be == nullptr) {                                                   \
    GTEST_SKIP() << "the CUDA backend is unavailable: " << why_;         \
  }

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 131 + seed + (i >> 12));
  return v;
}

TEST(CudaMemory, CopiesRoundTripDirectAndStaged) {
  REQUIRE_GPU(be);
  // Below the direct-copy threshold, just above it, and several staging chunks.
  for (size_t n : {size_t{1}, size_t{4097}, size_t{(64 << 10) + 1}, size_t{(9 << 20) + 3}}) {
    for (bool with_queue : {false, true}) {
      for (bool pinned : {false, true}) {
        SCOPED_TRACE(testing::Message() << n << " bytes, queue " << with_queue << ", pinned " << pinned);
        const std::vector<uint8_t> src = pattern(n, static_cast<uint8_t>(n));
        Buffer host_in = pinned ? be->allocate_pinned(n) : Buffer::host(n);
        Buffer host_out = pinned ? be->allocate_pinned(n) : Buffer::host(n);
        if (pinned) {
          ASSERT_EQ(host_in.memory(), MemoryKind::PinnedHost);
        }
        std::memcpy(host_in.data(), src.data(), n);
        std::memset(host_out.data(), 0xee, n);
        std::unique_ptr<Queue> q = with_queue ? be->create_queue(0) : nullptr;
        Buffer a = be->allocate(0, n + 16), b = be->allocate(0, n + 16);
        EXPECT_EQ(a.memory(), MemoryKind::Device);
        EXPECT_EQ(a.device().str(), "cuda:0");
        be->copy_from_host(host_in.data(), a, 5, n, q.get());
        be->copy_device(a, 5, b, 11, n, q.get());
        be->copy_to_host(b, 11, host_out.data(), n, q.get());
        if (q) q->synchronize();
        ASSERT_EQ(std::memcmp(host_out.data(), src.data(), n), 0);
        be->fill_zero(b, n + 16, q.get());
        be->copy_to_host(b, 11, host_out.data(), n, q.get());
        if (q) q->synchronize();
        for (size_t i = 0; i < n; i += 997) ASSERT_EQ(host_out.data()[i], std::byte{0}) << i;
      }
    }
  }
}

TEST(CudaMemory, OverlappingCopyWithinABlockIsAMove) {
  REQUIRE_GPU(be);
  const size_t n = 1 << 20;
  const std::vector<uint8_t> src = pattern(n, 3);
  Buffer a = be->allocate(0, n + 4096);
  be->copy_from_host(src.data(), a, 0, n, nullptr);
  be->copy_device(a, 0, a, 4096, n, nullptr);
  std::vector<uint8_t> back(n);
  be->copy_to_host(a, 4096, back.data(), n, nullptr);
  EXPECT_EQ(back, src);
}

TEST(CudaMemory, BuffersFreedBehindQueuedWorkKeepTheirBytesUntilItIsDone) {
  REQUIRE_GPU(be);
  // Each round frees its buffers while the copies that read them may still
  // be queued; the pool must not hand their memory to the next round early.
  const size_t n = 8 << 20;
  std::unique_ptr<Queue> q = be->create_queue(0);
  std::vector<std::vector<uint8_t>> outs(12, std::vector<uint8_t>(n));
  std::vector<Buffer> keep;
  for (int r = 0; r < 12; ++r) {
    const std::vector<uint8_t> src = pattern(n, static_cast<uint8_t>(r));
    Buffer tmp = be->allocate(0, n);
    Buffer dst = be->allocate(0, n);
    be->copy_from_host(src.data(), tmp, 0, n, q.get());
    be->copy_device(tmp, 0, dst, 0, n, q.get());
    tmp.reset();  // freed while the copy out of it may be queued
    keep.push_back(std::move(dst));
  }
  q->synchronize();
  for (int r = 0; r < 12; ++r) {
    be->copy_to_host(keep[static_cast<size_t>(r)], 0, outs[static_cast<size_t>(r)].data(), n, nullptr);
    ASSERT_EQ(outs[static_cast<size_t>(r)], pattern(n, static_cast<uint8_t>(r))) << "round " << r;
  }
}

TEST(CudaMemory, AllocationsBeyondTheDeviceFailOutOfMemory) {
  REQUIRE_GPU(be);
  const uint64_t cap = be->devices()[0].capacity_bytes;
  try {
    Buffer b = be->allocate(0, static_cast<size_t>(cap) * 2);
    FAIL() << "allocated twice the device's memory";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_OUT_OF_MEMORY) << e.detail();
    EXPECT_NE(e.detail().find("cuda:0"), std::string::npos) << e.detail();
  }
  EXPECT_THROW(be->allocate(static_cast<int>(be->devices().size()), 16), Error);
  // Still usable afterwards.
  Buffer ok = be->allocate(0, 1 << 20);
  EXPECT_TRUE(static_cast<bool>(ok));
}

TEST(CudaConvert, EveryPairMatchesTheHost) {
  REQUIRE_GPU(be);
  const DType all[] = {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::Bool};
  std::vector<float> base;
  for (int i = 0; i < 1000; ++i) base.push_back(std::round(std::sin(i * 0.37f) * 300.f) / 8.f);
  base[0] = 0.f;
  const int64_t n = static_cast<int64_t>(base.size());
  for (DType from : all) {
    for (DType to : all) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + dtype_name(to));
      auto src = std::make_shared<TensorData>(from, Shape{n});
      convert_elements(reinterpret_cast<const std::byte*>(base.data()), DType::F32, src->bytes(), from, n);
      auto want = std::make_shared<TensorData>(to, Shape{n});
      convert_elements(src->bytes(), from, want->bytes(), to, n);
      TensorPtr d_src = be->make_tensor(0, from, {n});
      TensorPtr d_dst = be->make_tensor(0, to, {n});
      be->copy_from_host(src->bytes(), d_src->buffer(), 0, src->nbytes(), nullptr);
      be->convert(*d_src, *d_dst, nullptr);
      std::vector<std::byte> got(want->nbytes());
      be->copy_to_host(d_dst->buffer(), 0, got.data(), got.size(), nullptr);
      ASSERT_EQ(std::memcmp(got.data(), want->bytes(), got.size()), 0);
    }
  }
}

// --- kernels against the CPU backend -------------------------------------

struct Case {
  std::string op;
  std::vector<Shape> inputs;
  std::vector<std::pair<std::string, AttrValue>> attrs;
};

std::vector<float> values(int64_t n, float scale, int salt) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(static_cast<float>(i * 7 + salt) * 0.13f) * scale;
  return v;
}

// Runs the case on the CPU and on cuda:0 with inputs of `dt`; returns the
// largest difference relative to the output's largest magnitude.
double run_both(DeviceBackend* be, const Case& c, DType dt) {
  auto g = std::make_shared<Graph>(c.op);
  std::vector<std::string> names;
  std::vector<TensorPtr> host;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    names.push_back("in" + std::to_string(i));
    g->add_input(names.back(), dt, c.inputs[i]);
    const int64_t n = numel(c.inputs[i]);
    const std::vector<float> v = values(n, 1.f, static_cast<int>(i) * 31);
    auto t = std::make_shared<TensorData>(dt, c.inputs[i]);
    convert_elements(reinterpret_cast<const std::byte*>(v.data()), DType::F32, t->bytes(), dt, n);
    host.push_back(t);
  }
  g->add_node(c.op, "n", names, {"y"});
  for (const auto& [k, v] : c.attrs) g->set_attr("n", k, v);
  g->mark_output("y");
  g->validate();
  Executor ex(2);
  ExecResult cpu = ex.run_inline(g, host);
  EXPECT_EQ(cpu.status, GENIE_OK) << cpu.detail;
  ExecResult gpu = ex.run_inline(g, host, DeviceRef{be, 0});
  EXPECT_EQ(gpu.status, GENIE_OK) << gpu.detail;
  if (cpu.status != GENIE_OK || gpu.status != GENIE_OK) return 1e30;
  EXPECT_EQ(gpu.outputs[0]->device().str(), "cuda:0");
  EXPECT_EQ(gpu.outputs[0]->dtype(), dt);
  TensorPtr back = copy_tensor(gpu.outputs[0], DeviceRef{be, 0}, DeviceRef{&ex.cpu_backend(), 0});
  const TensorPtr want = convert(*cpu.outputs[0], DType::F32);
  const TensorPtr got = convert(*back, DType::F32);
  EXPECT_EQ(want->shape(), got->shape());
  double max_abs = 1e-6, max_diff = 0;
  for (int64_t i = 0; i < want->numel(); ++i) {
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(want->data<float>()[i])));
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(want->data<float>()[i] - got->data<float>()[i])));
  }
  return max_diff / max_abs;
}

// Relative tolerance per dtype: f32 accumulates in f32 (no TF32 unless
// asked for), f16 and bf16 round their inputs and output.
double tolerance(DType dt) { return dt == DType::F32 ? 1e-4 : dt == DType::F16 ? 5e-3 : 3e-2; }

void check_cases(DeviceBackend* be, const std::vector<Case>& cases) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16})
    for (const Case& c : cases) {
      SCOPED_TRACE(c.op + " " + dtype_name(dt) + " first input " + shape_str(c.inputs[0]));
      EXPECT_LE(run_both(be, c, dt), tolerance(dt));
    }
}

TEST(CudaKernels, MatmulMatchesTheCpu) {
  REQUIRE_GPU(be);
  check_cases(be, {
                      {"matmul", {{64, 48}, {48, 80}}, {}},
                      {"matmul", {{3, 17, 33}, {33, 9}}, {}},                   // one b for every batch
                      {"matmul", {{2, 3, 17, 33}, {2, 3, 33, 9}}, {}},          // merged batch dims
                      {"matmul", {{2, 1, 8, 16}, {1, 3, 16, 4}}, {}},           // broadcast both ways
                      {"matmul", {{5, 16, 8}, {5, 16, 12}}, {{"transpose_a", int64_t{1}}}},
                      {"matmul", {{5, 8, 16}, {12, 16}}, {{"transpose_b", int64_t{1}}}},
                      {"matmul", {{4, 16, 8}, {4, 12, 16}}, {{"transpose_a", int64_t{1}}, {"transpose_b", int64_t{1}}}},
                      {"matmul", {{16}, {16, 8}}, {}},                          // 1-D a
                      {"matmul", {{3, 8, 16}, {16}}, {}},                       // 1-D b
                      {"matmul", {{16}, {16}}, {}},                             // dot product
                  });
}

TEST(CudaKernels, LinearMatchesTheCpu) {
  REQUIRE_GPU(be);
  check_cases(be, {
                      {"linear", {{2, 7, 64}, {96, 64}, {96}}, {}},
                      {"linear", {{5, 33}, {17, 33}}, {}},
                      {"linear", {{1, 768}, {3072, 768}, {3072}}, {}},
                  });
}

TEST(CudaKernels, Conv2dMatchesTheCpu) {
  REQUIRE_GPU(be);
  check_cases(be, {
                      {"conv2d", {{2, 3, 16, 16}, {8, 3, 3, 3}, {8}}, {{"padding", std::vector<int64_t>{1, 1}}}},
                      {"conv2d",
                       {{1, 4, 15, 13}, {6, 2, 3, 2}},
                       {{"groups", int64_t{2}},
                        {"stride", std::vector<int64_t>{2, 1}},
                        {"dilation", std::vector<int64_t>{1, 2}},
                        {"padding", std::vector<int64_t>{0, 1}}}},
                      {"conv2d", {{1, 16, 8, 8}, {16, 1, 3, 3}}, {{"groups", int64_t{16}}}},  // depthwise
                  });
}

TEST(CudaBackend, CalibratesTheDevice) {
  REQUIRE_GPU(be);
  sched::CalibrateOptions o;
  const sched::DeviceProfile p = be->calibrate(0, o);
  EXPECT_EQ(p.device, "cuda:0");
  EXPECT_GT(p.peak_flops, 1e12);  // any GPU of the pinned architectures
  EXPECT_GT(p.mem_bw_bytes_per_s, 1e11);
  EXPECT_GT(p.vector_flops, 0);
  EXPECT_GT(p.mem_budget_bytes, 0u);
  EXPECT_LE(p.mem_budget_bytes, p.mem_capacity_bytes);
  printf("cuda:0: %.1f TFLOP/s (f16 GEMM), %.0f GB/s device memory, %.1f G elements/s element-wise\n",
         p.peak_flops * 1e-12, p.mem_bw_bytes_per_s * 1e-9, p.vector_flops / 8 * 1e-9);
}

}  // namespace
}  // namespace genie
