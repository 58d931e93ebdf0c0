// Embedded mode over several devices: the local topology lists every
// device a backend offers (here the test backend's two fake devices beside
// the CPU), tensors are allocated on them by device id, and a graph runs by
// the scheduler's plan across them, with the same results as on the CPU
// alone.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "exec/backend_loader.hpp"
#include "exec/executor.hpp"
#include "graph/graph.hpp"
#include "graph_test_util.hpp"
#include "runtime/context.hpp"
#include "test_backend.hpp"

namespace genie {
namespace {

const std::string& kDir = testing::kTestBackendDir;
const auto test_kernels = testing::test_backend_kernels;

// An embedded context that loads the test backend, as an application would
// with GENIE_DEVICE_BACKENDS=test.
std::shared_ptr<Context> context_with_test_devices() {
  ::setenv("GENIE_DEVICE_BACKEND_PATH", kDir.c_str(), 1);
  ::setenv("GENIE_DEVICE_BACKENDS", "test", 1);
  Config cfg;
  cfg.num_threads = 2;
  cfg.use_env = false;
  auto ctx = std::make_shared<Context>(cfg);
  ::unsetenv("GENIE_DEVICE_BACKENDS");
  return ctx;
}

std::vector<float> values(int n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(static_cast<float>(i) * scale);
  return v;
}

// h = relu(x @ w1); y = (h @ w2) + b with w1 a weight on test:0 and w2 on
// test:1: the plan must run the first matmul where w1 lives and the second
// where w2 lives, moving h between the devices.
std::shared_ptr<Graph> two_layer() {
  auto g = std::make_shared<Graph>("two_layer");
  g->add_input("x", DType::F32, {4, 16});
  g->add_input("w1", DType::F32, {16, 32});
  g->add_input("w2", DType::F32, {32, 8});
  g->add_input("b", DType::F32, {8});
  g->value(g->find_value("w1")).role = TensorRole::Weight;
  g->value(g->find_value("w2")).role = TensorRole::Weight;
  g->add_node("matmul", "mm1", {"x", "w1"}, {"h0"});
  g->add_node("relu", "act", {"h0"}, {"h"});
  g->add_node("matmul", "mm2", {"h", "w2"}, {"y0"});
  g->add_node("add", "bias", {"y0", "b"}, {"y"});
  g->mark_output("y");
  return g;
}

TensorRef tensor_on(Context& ctx, const char* device, Shape shape, const std::vector<float>& v) {
  std::string canonical;
  TensorRef t = ctx.alloc(DType::F32, std::move(shape), device, &canonical);
  EXPECT_EQ(canonical, parse_device(device).str());
  t.write(0, v.data(), v.size() * sizeof(float));
  return t;
}

TEST(RuntimeDevices, TheTopologyListsEveryDeviceOfEveryBackend) {
  std::shared_ptr<Context> ctx = context_with_test_devices();
  const auto& devs = ctx->local_devices();
  ASSERT_EQ(devs.size(), 3u) << device_backend("test").why_unavailable;
  EXPECT_EQ(devs[0].id.str(), "cpu:0");
  EXPECT_EQ(devs[1].id.str(), "test:0");
  EXPECT_EQ(devs[2].id.str(), "test:1");
  const sched::Topology& topo = ctx->local_topology();
  ASSERT_EQ(topo.devices.size(), 3u);
  EXPECT_EQ(topo.devices[2].device, "test:1");
  EXPECT_EQ(topo.devices[2].node_id, ctx->node_id());
  EXPECT_GT(topo.devices[0].peak_flops, 0);  // the CPU, calibrated by its backend

  // Allocation by device id; a device no backend offers is refused with the
  // devices there are.
  std::string canonical;
  TensorRef t = ctx->alloc(DType::F32, {2}, "test:1", &canonical);
  EXPECT_EQ(canonical, "test:1");
  EXPECT_EQ(t.local()->device().str(), "test:1");
  EXPECT_EQ(t.local()->memory(), MemoryKind::Device);
  float zero[2] = {1, 1};
  t.read(0, zero, sizeof zero);  // zero-filled, read through the backend
  EXPECT_EQ(zero[0], 0.f);
  EXPECT_EQ(zero[1], 0.f);
  EXPECT_TRUE(testing::fails_with([&] { ctx->alloc(DType::F32, {2}, "test:2", &canonical); },
                                  GENIE_ERR_UNSUPPORTED, "test:0, test:1"));
  // Without a CUDA backend: the loader's reason.
  if (!device_backend("cuda").backend)
    EXPECT_TRUE(testing::fails_with([&] { ctx->alloc(DType::F32, {2}, "cuda:0", &canonical); },
                                    GENIE_ERR_UNSUPPORTED, "libgenie_backend_cuda.so"));
  ctx->shutdown();
}

TEST(RuntimeDevices, EmbeddedModeRunsThePlanAcrossDevices) {
  std::shared_ptr<Context> ctx = context_with_test_devices();
  ASSERT_EQ(ctx->local_devices().size(), 3u) << device_backend("test").why_unavailable;
  const std::vector<float> x = values(4 * 16, 0.3f), w1 = values(16 * 32, 0.07f), w2 = values(32 * 8, 0.11f),
                           b = values(8, 1.f);

  // The reference: the same graph on the CPU alone.
  std::shared_ptr<Graph> g = two_layer();
  auto ref_graph = std::make_shared<Graph>(*g);
  ref_graph->validate();
  const auto host = [](Shape s, const std::vector<float>& v) {
    auto t = std::make_shared<TensorData>(DType::F32, std::move(s));
    std::copy(v.begin(), v.end(), t->data<float>());
    return t;
  };
  Executor cpu_only(2);
  ExecResult ref =
      cpu_only.run_inline(ref_graph, {host({4, 16}, x), host({16, 32}, w1), host({32, 8}, w2), host({8}, b)});
  ASSERT_EQ(ref.status, GENIE_OK) << ref.detail;

  // The plan the context runs by, as the scheduler makes it: the weights'
  // devices pin the two matmuls.
  std::shared_ptr<Graph> v = two_layer();
  v->validate();
  sched::Residency res;
  res.value_device = {{"x", 0}, {"w1", 1}, {"w2", 2}, {"b", 0}};
  const sched::Plan plan = sched::plan_graph(*v, ctx->local_topology(), res);
  EXPECT_EQ(plan.node_device[static_cast<size_t>(v->find_node("mm1"))], 1);
  EXPECT_EQ(plan.node_device[static_cast<size_t>(v->find_node("mm2"))], 2);
  uint64_t planned[3] = {0, 0, 0};
  for (int d : plan.node_device) ++planned[d];
  const std::string last =
      ctx->local_devices()[static_cast<size_t>(plan.node_device[static_cast<size_t>(v->find_node("bias"))])]
          .id.str();

  // Weights resident on the two test devices; x and b in host memory.
  TensorRef tw1 = tensor_on(*ctx, "test:0", {16, 32}, w1);
  TensorRef tw2 = tensor_on(*ctx, "test:1", {32, 8}, w2);
  TensorRef tx = tensor_on(*ctx, "cpu", {4, 16}, x);
  TensorRef tb = tensor_on(*ctx, "cpu:0", {8}, b);
  const uint64_t k0 = test_kernels(0), k1 = test_kernels(1);
  for (int round = 0; round < 2; ++round) {  // the second from the plan cache
    std::shared_ptr<FutureState> f = ctx->submit(*g, {"x", "w1", "w2", "b"}, {tx, tw1, tw2, tb});
    ASSERT_EQ(f->wait(30000), GENIE_OK);
    TensorRef y = f->output(0);
    // The output stays on the device of the node that produced it.
    EXPECT_EQ(y.local()->device().str(), last);
    std::vector<float> got(32);
    y.read(0, got.data(), got.size() * sizeof(float));
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], ref.outputs[0]->data<float>()[i]) << i;
  }
  // Each test device ran exactly the nodes the plan gave it, in both rounds.
  EXPECT_EQ(test_kernels(0) - k0, 2 * planned[1]);
  EXPECT_EQ(test_kernels(1) - k1, 2 * planned[2]);
  ctx->shutdown();
}

TEST(RuntimeDevices, AGraphOnHostTensorsGivesTheCpuResultWhereverItRuns) {
  std::shared_ptr<Context> ctx = context_with_test_devices();
  ASSERT_EQ(ctx->local_devices().size(), 3u) << device_backend("test").why_unavailable;
  auto g = std::make_shared<Graph>("chain");
  g->add_input("a", DType::F32, {64});
  g->add_node("relu", "r", {"a"}, {"b"});
  g->add_node("mul", "m", {"b", "a"}, {"c"});
  g->mark_output("c");
  g->mark_output("a");  // an input as output: a copy, never the input itself
  const std::vector<float> a = values(64, 0.5f);
  TensorRef ta = tensor_on(*ctx, nullptr, {64}, a);
  std::shared_ptr<FutureState> f = ctx->submit(*g, {"a"}, {ta});
  ASSERT_EQ(f->wait(30000), GENIE_OK);
  std::vector<float> c(64), a2(64);
  f->output(0).read(0, c.data(), c.size() * sizeof(float));
  f->output(1).read(0, a2.data(), a2.size() * sizeof(float));
  EXPECT_NE(f->output(1).local(), ta.local());
  for (size_t i = 0; i < 64; ++i) {
    EXPECT_EQ(c[i], std::max(a[i], 0.f) * a[i]) << i;
    EXPECT_EQ(a2[i], a[i]) << i;
  }
  ctx->shutdown();
}

}  // namespace
}  // namespace genie
