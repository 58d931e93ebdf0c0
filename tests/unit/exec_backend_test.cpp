// Device backends: the CPU backend's memory, copies, kernels and queues;
// the run-time loader (missing library, not a backend, another ABI version,
// a backend without devices, the test backend); the executor running
// graphs on a device whose memory host code cannot reach, and moving
// tensors between devices.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <future>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "exec/backend_loader.hpp"
#include "exec/cpu/backend.hpp"
#include "exec/executor.hpp"
#include "exec/transfer.hpp"
#include "graph/graph.hpp"
#include "graph_test_util.hpp"
#include "test_backend.hpp"

namespace genie {
namespace {

const std::string& kDir = testing::kTestBackendDir;
const auto test_kernels = testing::test_backend_kernels;

// Passes when f throws Error(code) with `needle` in its detail.
template <class F>
void expect_error(genie_status_t code, const std::string& needle, F&& f) {
  EXPECT_TRUE(testing::fails_with(std::forward<F>(f), code, needle));
}

// The test plugin, loaded once for the process as the loader would for
// GENIE_DEVICE_BACKENDS=test.
const LoadedBackend& test_backend() {
  static const bool env = [] {
    ::setenv("GENIE_DEVICE_BACKEND_PATH", kDir.c_str(), 1);
    return true;
  }();
  (void)env;
  return device_backend("test");
}

ExecResult run_sync(Executor& ex, const std::shared_ptr<Graph>& g, std::vector<TensorPtr> in, DeviceRef dev) {
  std::promise<ExecResult> p;
  auto fut = p.get_future();
  ex.run(
      g, std::move(in), [&](ExecResult&& r) { p.set_value(std::move(r)); }, dev);
  ExecResult r = fut.get();
  ex.wait_idle();
  return r;
}

TensorPtr host_f32(Shape s, std::initializer_list<float> v) {
  auto t = std::make_shared<TensorData>(DType::F32, std::move(s));
  size_t i = 0;
  for (float x : v) t->data<float>()[i++] = x;
  return t;
}

std::vector<float> read_f32(DeviceRef d, const TensorData& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  read_tensor(d, t, 0, out.data(), t.nbytes());
  return out;
}

// ---------------------------------------------------------------------------
// The CPU backend
// ---------------------------------------------------------------------------

TEST(CpuBackend, OneDeviceOfHostMemory) {
  cpu::CpuBackend be;
  EXPECT_EQ(be.kind(), "cpu");
  ASSERT_EQ(be.devices().size(), 1u);
  EXPECT_EQ(be.devices()[0].id.str(), "cpu:0");
  EXPECT_EQ(be.devices()[0].memory, MemoryKind::Host);
  EXPECT_GT(be.devices()[0].capacity_bytes, 0u);

  Buffer b = be.allocate(0, 100);
  EXPECT_GE(b.size(), 100u);
  EXPECT_EQ(b.memory(), MemoryKind::Host);
  EXPECT_TRUE(b.device().is_local_cpu());
  Buffer p = be.allocate_pinned(10);
  EXPECT_TRUE(p.host_accessible());

  expect_error(GENIE_ERR_INVALID_ARGUMENT, "cpu:1", [&] { be.allocate(1, 8); });
  expect_error(GENIE_ERR_INVALID_ARGUMENT, "cpu:-1", [&] { be.create_queue(-1); });
}

TEST(CpuBackend, CopiesAndZeroFillWithinBounds) {
  cpu::CpuBackend be;
  Buffer a = be.allocate(0, 64), b = be.allocate(0, 64);
  const char msg[] = "0123456789";
  be.copy_from_host(msg, a, 4, 10, nullptr);
  be.copy_device(a, 4, b, 0, 10, nullptr);
  char out[11] = {};
  be.copy_to_host(b, 0, out, 10, nullptr);
  EXPECT_STREQ(out, msg);
  be.fill_zero(b, 10, nullptr);
  be.copy_to_host(b, 0, out, 10, nullptr);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(out[i], 0);
  // Past the end: refused, nothing written.
  expect_error(GENIE_ERR_INTERNAL, "exceeds", [&] { be.copy_from_host(msg, a, a.size() - 4, 10, nullptr); });
  expect_error(GENIE_ERR_INTERNAL, "exceeds", [&] { be.copy_to_host(a, a.size(), out, 1, nullptr); });
  // Device memory of another backend is not the CPU's to touch.
  alignas(64) static std::byte block[64];
  Buffer dev(block, 64, MemoryKind::Device, Device{"cuda", 0, ""}, [](std::byte*) {});
  expect_error(GENIE_ERR_INTERNAL, "cuda:0", [&] { be.copy_device(a, 0, dev, 0, 8, nullptr); });
}

TEST(CpuBackend, BuffersComeBackToThePool) {
  cpu::CpuBackend be;
  { Buffer a = be.allocate(0, 4096); }
  { Buffer b = be.allocate(0, 4096); }  // the same block again
  EXPECT_EQ(be.buffers().stats().fresh, 1u);
  EXPECT_EQ(be.buffers().stats().reused, 1u);
}

TEST(CpuBackend, FindsKernelsByOp) {
  cpu::CpuBackend be;
  KernelFn add = be.find_kernel("add");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(be.find_kernel("no_such_op"), nullptr);
  TensorPtr x = host_f32({3}, {1, 2, 3}), y = host_f32({3}, {10, 20, 30});
  TensorPtr z = be.make_tensor(0, DType::F32, {3});
  std::unique_ptr<Queue> q = be.create_queue(0);
  const std::string op = "add";
  const Attrs attrs;
  const std::vector<const TensorData*> in{x.get(), y.get()};
  const std::vector<TensorData*> out{z.get()};
  add(KernelArgs{op, attrs, in, out, nullptr, q.get()});
  q->synchronize();
  EXPECT_EQ(z->data<float>()[2], 33.f);
  // Conversion on the device.
  TensorPtr h = be.make_tensor(0, DType::F16, {3});
  be.convert(*z, *h, q.get());
  TensorPtr back = be.make_tensor(0, DType::F32, {3});
  be.convert(*h, *back, q.get());
  EXPECT_EQ(back->data<float>()[0], 11.f);
}

// ---------------------------------------------------------------------------
// The loader
// ---------------------------------------------------------------------------

TEST(BackendLoader, AMissingLibraryIsAnAbsentBackendWithAReason) {
  const LoadedBackend r = load_backend_plugin(kDir + "/libgenie_backend_nowhere.so", "nowhere");
  EXPECT_EQ(r.backend, nullptr);
  EXPECT_NE(r.why_unavailable.find("libgenie_backend_nowhere.so"), std::string::npos) << r.why_unavailable;
  // By kind, through the search path: the same, and the reason says where
  // it looked and how to point it elsewhere.
  const LoadedBackend& k = device_backend("nowhere");
  EXPECT_EQ(k.backend, nullptr);
  EXPECT_NE(k.why_unavailable.find("not found"), std::string::npos) << k.why_unavailable;
  EXPECT_NE(k.why_unavailable.find("GENIE_DEVICE_BACKEND_PATH"), std::string::npos) << k.why_unavailable;
  // Asked again: the same answer, not a second search.
  EXPECT_EQ(&device_backend("nowhere"), &k);
}

TEST(BackendLoader, AnotherAbiVersionIsRefusedBeforeCreate) {
  // Its create() aborts: reaching it would end the test.
  const LoadedBackend r = load_backend_plugin(kDir + "/libgenie_backend_bad_abi.so");
  EXPECT_EQ(r.backend, nullptr);
  EXPECT_NE(r.why_unavailable.find("ABI version " + std::to_string(kDeviceBackendAbi + 100)),
            std::string::npos)
      << r.why_unavailable;
  EXPECT_NE(r.why_unavailable.find("speaks version " + std::to_string(kDeviceBackendAbi)), std::string::npos)
      << r.why_unavailable;
}

TEST(BackendLoader, ALibraryWithoutTheEntryPointIsNotABackend) {
  const LoadedBackend r = load_backend_plugin(GENIE_TEST_NVML_LIBRARY);
  EXPECT_EQ(r.backend, nullptr);
  EXPECT_NE(r.why_unavailable.find("exports no " GENIE_DEVICE_BACKEND_ENTRY), std::string::npos)
      << r.why_unavailable;
}

TEST(BackendLoader, APluginOfAnotherKindOrWithoutDevicesIsRefused) {
  const std::string file = kDir + "/" + backend_plugin_name("test");
  const LoadedBackend other = load_backend_plugin(file, "cuda");
  EXPECT_EQ(other.backend, nullptr);
  EXPECT_NE(other.why_unavailable.find("serves device kind 'test', not 'cuda'"), std::string::npos)
      << other.why_unavailable;
  ::setenv("GENIE_TEST_BACKEND_DEVICES", "0", 1);
  const LoadedBackend none = load_backend_plugin(file, "test");
  ::unsetenv("GENIE_TEST_BACKEND_DEVICES");
  EXPECT_EQ(none.backend, nullptr);
  EXPECT_NE(none.why_unavailable.find("found no usable device"), std::string::npos) << none.why_unavailable;
  EXPECT_NE(none.why_unavailable.find("GENIE_TEST_BACKEND_DEVICES"), std::string::npos)
      << none.why_unavailable;
}

TEST(BackendLoader, TheTestBackendOffersTwoDevicesOfDeviceMemory) {
  const LoadedBackend& lb = test_backend();
  ASSERT_NE(lb.backend, nullptr) << lb.why_unavailable;
  DeviceBackend& be = *lb.backend;
  EXPECT_EQ(be.kind(), "test");
  ASSERT_EQ(be.devices().size(), 2u);
  EXPECT_EQ(be.devices()[1].id.str(), "test:1");
  EXPECT_EQ(be.devices()[1].memory, MemoryKind::Device);
  // Loading registered the kind with the device-id parser.
  EXPECT_EQ(parse_device("node-z/test:1").str(), "node-z/test:1");
  Buffer b = be.allocate(1, 16);
  EXPECT_EQ(b.memory(), MemoryKind::Device);
  EXPECT_EQ(b.device().str(), "test:1");
  EXPECT_FALSE(b.host_accessible());
  EXPECT_EQ(be.allocate_pinned(8).memory(), MemoryKind::PinnedHost);
  expect_error(GENIE_ERR_INVALID_ARGUMENT, "test:2", [&] { be.allocate(2, 16); });
  expect_error(GENIE_ERR_OUT_OF_MEMORY, "test:0", [&] { be.allocate(0, size_t{1} << 40); });
  // The CPU backend refuses its memory.
  cpu::CpuBackend cpu;
  char c = 0;
  expect_error(GENIE_ERR_INTERNAL, "device memory", [&] { cpu.copy_to_host(b, 0, &c, 1, nullptr); });
}

// ---------------------------------------------------------------------------
// Transfers and the executor on a device
// ---------------------------------------------------------------------------

TEST(DeviceTransfer, TensorsMoveBetweenDevicesAndTheHost) {
  const LoadedBackend& lb = test_backend();
  ASSERT_NE(lb.backend, nullptr) << lb.why_unavailable;
  cpu::CpuBackend cpu;
  const DeviceRef host{&cpu, 0}, t0{lb.backend.get(), 0}, t1{lb.backend.get(), 1};
  TensorPtr h = host_f32({4}, {1, 2, 3, 4});
  TensorPtr a = copy_tensor(h, host, t0);
  EXPECT_EQ(a->device().str(), "test:0");
  TensorPtr b = copy_tensor(a, t0, t1);
  EXPECT_EQ(b->device().str(), "test:1");
  TensorPtr back = copy_tensor(b, t1, host);
  EXPECT_TRUE(back->host_accessible());
  EXPECT_EQ(back->data<float>()[3], 4.f);
  EXPECT_EQ(read_f32(t1, *b), (std::vector<float>{1, 2, 3, 4}));
  const float v = 9.f;
  write_tensor(t1, *b, 4, &v, 4);
  EXPECT_EQ(read_f32(t1, *b)[1], 9.f);
  EXPECT_EQ(read_f32(t0, *a)[1], 2.f);  // a copy, not an alias
}

TEST(DeviceExecutor, RunsAGraphOnADeviceThroughItsBackend) {
  const LoadedBackend& lb = test_backend();
  ASSERT_NE(lb.backend, nullptr) << lb.why_unavailable;
  // y = relu(x + w) as f16 (converted around the kernels on the device);
  // z = y, an output that is another output's copy; k is a constant.
  auto g = std::make_shared<Graph>("dev");
  g->add_input("x", DType::F16, {4});
  g->add_constant("k", convert(*host_f32({4}, {1, 1, 1, 1}), DType::F16));
  g->add_node("add", "a", {"x", "k"}, {"s"});
  g->add_node("relu", "r", {"s"}, {"y"});
  g->mark_output("y");
  g->mark_output("x");
  ASSERT_NO_THROW(g->validate());
  auto x = std::make_shared<TensorData>(DType::F16, Shape{4});
  const float xs[4] = {-3, -0.5, 0.5, 2};
  convert_elements(reinterpret_cast<const std::byte*>(xs), DType::F32, x->bytes(), DType::F16, 4);

  Executor ex(2);
  const DeviceRef t1{lb.backend.get(), 1};
  const uint64_t k0 = test_kernels(0), k1 = test_kernels(1);
  ExecResult r = run_sync(ex, g, {x}, t1);
  ASSERT_EQ(r.status, GENIE_OK) << r.detail;
  EXPECT_EQ(test_kernels(1), k1 + 2);  // add and relu, both on test:1
  EXPECT_EQ(test_kernels(0), k0);
  ASSERT_EQ(r.outputs.size(), 2u);
  for (const TensorPtr& o : r.outputs) {
    EXPECT_EQ(o->device().str(), "test:1");
    EXPECT_EQ(o->memory(), MemoryKind::Device);
  }
  EXPECT_EQ(r.outputs[0]->dtype(), DType::F16);
  TensorPtr y = copy_tensor(r.outputs[0], t1, DeviceRef{&ex.cpu_backend(), 0});
  float ys[4];
  convert_elements(y->bytes(), DType::F16, reinterpret_cast<std::byte*>(ys), DType::F32, 4);
  EXPECT_EQ(ys[0], 0.f);
  EXPECT_EQ(ys[1], 0.5f);
  EXPECT_EQ(ys[2], 1.5f);
  EXPECT_EQ(ys[3], 3.f);

  // The inline path: the same through the backend.
  ExecResult inl = ex.run_inline(g, {x}, t1);
  ASSERT_EQ(inl.status, GENIE_OK) << inl.detail;
  EXPECT_EQ(inl.outputs[0]->device().str(), "test:1");

  // A tensor on another device is the caller's to move first.
  TensorPtr on0 = copy_tensor(x, DeviceRef{&ex.cpu_backend(), 0}, DeviceRef{lb.backend.get(), 0});
  EXPECT_THROW(run_sync(ex, g, {on0}, t1), Error);
}

TEST(DeviceExecutor, IssueHereIssuesEveryKernelBeforeRunReturns) {
  const LoadedBackend& lb = test_backend();
  ASSERT_NE(lb.backend, nullptr) << lb.why_unavailable;
  auto g = std::make_shared<Graph>("here");
  g->add_input("x", DType::F32, {4});
  g->add_node("relu", "r", {"x"}, {"y"});
  g->add_node("neg", "n", {"y"}, {"z"});
  g->add_node("add", "a", {"z", "x"}, {"w"});
  g->mark_output("w");
  ASSERT_NO_THROW(g->validate());
  Executor ex(2);
  const DeviceRef t0{lb.backend.get(), 0};
  const uint64_t k0 = test_kernels(0);
  std::promise<ExecResult> p;
  std::thread::id done_on;
  ex.run(
      g, {host_f32({4}, {-2, -1, 1, 2})},
      [&](ExecResult&& r) {
        done_on = std::this_thread::get_id();
        p.set_value(std::move(r));
      },
      t0, Executor::Issue::Here);
  // Issued on this thread before run() returned; completed on a worker.
  EXPECT_EQ(test_kernels(0), k0 + 3);
  ExecResult r = p.get_future().get();
  ex.wait_idle();
  EXPECT_NE(done_on, std::this_thread::get_id());
  ASSERT_EQ(r.status, GENIE_OK) << r.detail;
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0]->device().str(), "test:0");
  EXPECT_EQ(read_f32(t0, *r.outputs[0]), (std::vector<float>{-2, -1, 0, 0}));  // x - relu(x)

  // A kernel that fails, issued here, still completes the run once, with
  // the node's error; the nodes after it are not issued.
  auto bad = std::make_shared<Graph>("bad");
  bad->add_input("a", DType::I32, {2});
  bad->add_input("b", DType::I32, {2});
  bad->add_node("div", "d", {"a", "b"}, {"q"});
  bad->add_node("neg", "n", {"q"}, {"o"});
  bad->mark_output("o");
  ASSERT_NO_THROW(bad->validate());
  auto a = std::make_shared<TensorData>(DType::I32, Shape{2});
  auto b = std::make_shared<TensorData>(DType::I32, Shape{2});
  a->data<int32_t>()[0] = 6, a->data<int32_t>()[1] = 7;
  b->data<int32_t>()[0] = 2, b->data<int32_t>()[1] = 0;
  std::promise<ExecResult> pb;
  int calls = 0;
  ex.run(
      bad, {a, b},
      [&](ExecResult&& res) {
        ++calls;
        pb.set_value(std::move(res));
      },
      t0, Executor::Issue::Here);
  ExecResult rb = pb.get_future().get();
  ex.wait_idle();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(rb.status, GENIE_ERR_INVALID_ARGUMENT);
  EXPECT_NE(rb.detail.find("division by zero"), std::string::npos) << rb.detail;
  EXPECT_TRUE(rb.outputs.empty());
}

}  // namespace
}  // namespace genie
