// A server offers the devices of its device backends (here the test
// backend's fake devices, as a GPU server offers cuda:N): they follow
// cpu:0 in its device list, clients allocate there as remote:i, writes and
// reads go through the backend, a graph bound to a tensor there runs on
// that device, and one bound to tensors on two of them is placed across
// them as embedded mode places it; outputs stay where they were produced.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "exec/backend_loader.hpp"
#include "exec/executor.hpp"
#include "graph/graph.hpp"
#include "graph_test_util.hpp"
#include "runtime/context.hpp"
#include "server/node_server.hpp"
#include "test_backend.hpp"

namespace genie {
namespace {

std::vector<float> values(int n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(static_cast<float>(i) * scale);
  return v;
}

// A server offering the test backend's devices, and a client of it.
class ServerDevices : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("GENIE_DEVICE_BACKEND_PATH", testing::kTestBackendDir.c_str(), 1);
    ::setenv("GENIE_DEVICE_BACKENDS", "test", 1);
    Config scfg;
    scfg.use_env = false;
    scfg.num_threads = 2;
    server = std::make_unique<NodeServer>(scfg, "127.0.0.1", 0);
    ::unsetenv("GENIE_DEVICE_BACKENDS");
    ASSERT_NE(device_backend("test").backend, nullptr) << device_backend("test").why_unavailable;
    Config cfg;
    cfg.use_env = false;
    cfg.num_threads = 2;
    cfg.master_addr = "127.0.0.1";
    cfg.master_port = server->port();
    ctx = std::make_shared<Context>(cfg);
  }
  void TearDown() override {
    if (ctx) ctx->shutdown();
  }

  std::unique_ptr<NodeServer> server;
  std::shared_ptr<Context> ctx;  // destroyed before the server
};

TEST_F(ServerDevices, AServerOffersItsBackendsDevicesAndRunsGraphsThere) {
  // remote:0 is the server's CPU, remote:1 and remote:2 its test devices.
  std::string canonical;
  TensorRef w = ctx->alloc(DType::F32, {16, 8}, "remote:1", &canonical);
  EXPECT_EQ(canonical, "remote:1");
  ASSERT_TRUE(w.is_remote());
  EXPECT_EQ(w.remote()->device, "remote:1");  // the server's test:0, as this client names it
  std::vector<float> back(16 * 8, 1.f);
  w.read(0, back.data(), back.size() * sizeof(float));  // zero-filled on the device
  for (float v : back) ASSERT_EQ(v, 0.f);
  const std::vector<float> wv = values(16 * 8, 0.21f), xv = values(4 * 16, 0.37f);
  w.write(0, wv.data(), wv.size() * sizeof(float));
  w.read(0, back.data(), back.size() * sizeof(float));
  EXPECT_EQ(back, wv);
  const float patch = 42.f;  // a partial write at an offset
  w.write(8, &patch, sizeof patch);
  float one = 0.f;
  w.read(8, &one, sizeof one);
  EXPECT_EQ(one, 42.f);
  w.write(8, &wv[2], sizeof(float));

  TensorRef x = ctx->alloc(DType::F32, {4, 16}, "remote:0", &canonical);
  x.write(0, xv.data(), xv.size() * sizeof(float));
  Graph g("mm");
  g.add_input("x", DType::F32, {4, 16});
  g.add_input("w", DType::F32, {16, 8});
  g.add_node("matmul", "mm", {"x", "w"}, {"h"});
  g.add_node("relu", "act", {"h"}, {"y"});
  g.mark_output("y");
  const uint64_t k0 = testing::test_backend_kernels(0);
  std::shared_ptr<FutureState> f = ctx->submit(g, {"x", "w"}, {x, w});
  ASSERT_EQ(f->wait(30000), GENIE_OK);
  TensorRef y = f->output(0);
  ASSERT_TRUE(y.is_remote());
  EXPECT_EQ(y.remote()->device, "remote:1");  // produced and kept on the device
  EXPECT_EQ(testing::test_backend_kernels(0) - k0, 2u);
  std::vector<float> got(4 * 8);
  y.read(0, got.data(), got.size() * sizeof(float));
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j) {
      float s = 0;
      for (int k = 0; k < 16; ++k)
        s += xv[static_cast<size_t>(i * 16 + k)] * wv[static_cast<size_t>(k * 8 + j)];
      EXPECT_NEAR(got[static_cast<size_t>(i * 8 + j)], std::max(s, 0.f), 1e-5) << i << "," << j;
    }

  // A device the server does not have: the list of those it has.
  EXPECT_TRUE(testing::fails_with([&] { ctx->alloc(DType::F32, {2}, "remote:9", &canonical); },
                                  GENIE_ERR_UNSUPPORTED, "remote:1 = test:0"));
}

// A graph binding tensors on two of the server's devices is placed across
// them as embedded mode places it (exec/local_devices.hpp): each weight's
// matmul runs on the device holding it, the value between them moves from
// one device to the other on the server, and the result is the CPU's.
TEST_F(ServerDevices, AServerSplitsAGraphAcrossItsDevices) {
  const std::vector<float> xv = values(4 * 16, 0.3f), w1v = values(16 * 32, 0.07f),
                           w2v = values(32 * 8, 0.11f), bv = values(8, 1.f);
  Graph g("two_layer");
  g.add_input("x", DType::F32, {4, 16});
  g.add_input("w1", DType::F32, {16, 32});
  g.add_input("w2", DType::F32, {32, 8});
  g.add_input("b", DType::F32, {8});
  g.value(g.find_value("w1")).role = TensorRole::Weight;
  g.value(g.find_value("w2")).role = TensorRole::Weight;
  g.add_node("matmul", "mm1", {"x", "w1"}, {"h0"});
  g.add_node("relu", "act", {"h0"}, {"h"});
  g.add_node("matmul", "mm2", {"h", "w2"}, {"y0"});
  g.add_node("add", "bias", {"y0", "b"}, {"y"});
  g.mark_output("y");
  // The reference: the same graph on a CPU alone.
  const auto host = [](Shape shape, const std::vector<float>& v) {
    auto t = std::make_shared<TensorData>(DType::F32, std::move(shape));
    std::copy(v.begin(), v.end(), t->data<float>());
    return t;
  };
  auto ref_graph = std::make_shared<Graph>(g);
  ref_graph->validate();
  Executor cpu_only(1);
  const ExecResult ref = cpu_only.run_inline(
      ref_graph, {host({4, 16}, xv), host({16, 32}, w1v), host({32, 8}, w2v), host({8}, bv)});
  ASSERT_EQ(ref.status, GENIE_OK) << ref.detail;

  const auto on = [&](const char* device, Shape shape, const std::vector<float>& v) {
    std::string canonical;
    TensorRef t = ctx->alloc(DType::F32, std::move(shape), device, &canonical);
    t.write(0, v.data(), v.size() * sizeof(float));
    return t;
  };
  TensorRef x = on("remote:0", {4, 16}, xv), w1 = on("remote:1", {16, 32}, w1v),
            w2 = on("remote:2", {32, 8}, w2v), b = on("remote:0", {8}, bv);
  for (int round = 0; round < 2; ++round) {  // the second from the server's plan cache
    const uint64_t k0 = testing::test_backend_kernels(0), k1 = testing::test_backend_kernels(1);
    std::shared_ptr<FutureState> f = ctx->submit(g, {"x", "w1", "w2", "b"}, {x, w1, w2, b});
    ASSERT_EQ(f->wait(30000), GENIE_OK);
    // Each matmul ran on the device of its weight.
    EXPECT_GE(testing::test_backend_kernels(0) - k0, 1u);
    EXPECT_GE(testing::test_backend_kernels(1) - k1, 1u);
    TensorRef y = f->output(0);
    ASSERT_TRUE(y.is_remote());
    std::vector<float> got(4 * 8);
    y.read(0, got.data(), got.size() * sizeof(float));
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], ref.outputs[0]->data<float>()[i]) << i;
  }
}

// A small graph on a device is issued by the server's event loop (kernels
// only queue work there; the worker that waits for the device wakes while
// it runs), as a tiny one runs there; a graph of more nodes than the loop
// issues itself, one submitted while another is in flight, or one with a
// kernel that waits for its queue goes to a worker.
TEST_F(ServerDevices, TheLoopIssuesASmallDeviceGraphAndAWorkerALargeOne) {
  std::string canonical;
  TensorRef x = ctx->alloc(DType::F32, {4, 16}, "remote:1", &canonical);
  TensorRef w = ctx->alloc(DType::F32, {16, 8}, "remote:1", &canonical);
  const std::vector<float> xv = values(4 * 16, 0.37f), wv = values(16 * 8, 0.21f);
  x.write(0, xv.data(), xv.size() * sizeof(float));
  w.write(0, wv.data(), wv.size() * sizeof(float));
  const auto run = [&](const Graph& g, const std::vector<std::string>& names,
                       const std::vector<TensorRef>& in, uint64_t kernels) {
    const uint64_t k0 = testing::test_backend_kernels(0);
    std::shared_ptr<FutureState> f = ctx->submit(g, names, in);
    EXPECT_EQ(f->wait(30000), GENIE_OK) << g.name();
    EXPECT_EQ(testing::test_backend_kernels(0) - k0, kernels) << g.name();
    return testing::test_backend_last_issuer(0);
  };

  // Tiny (no product, few elements): run on the loop, inline.
  Graph tiny("tiny");
  tiny.add_input("x", DType::F32, {4, 16});
  tiny.add_node("relu", "act", {"x"}, {"y"});
  tiny.mark_output("y");
  const long loop = run(tiny, {"x"}, {x}, 1);
  ASSERT_NE(loop, 0);

  // Not tiny (a product), two nodes: issued by the same thread.
  Graph small("small");
  small.add_input("x", DType::F32, {4, 16});
  small.add_input("w", DType::F32, {16, 8});
  small.add_node("matmul", "mm", {"x", "w"}, {"h0"});
  small.add_node("relu", "act", {"h0"}, {"y"});
  small.mark_output("y");
  for (int i = 0; i < 5; ++i) EXPECT_EQ(run(small, {"x", "w"}, {x, w}, 2), loop);

  // While a device graph is in flight (its device busy for 300 ms), the
  // next one goes to a worker: a launch behind queued work may block.
  ::setenv("GENIE_TEST_BACKEND_SYNC_MS", "300", 1);
  const uint64_t k0 = testing::test_backend_kernels(0);
  std::shared_ptr<FutureState> first = ctx->submit(small, {"x", "w"}, {x, w});
  std::shared_ptr<FutureState> second = ctx->submit(small, {"x", "w"}, {x, w});
  EXPECT_EQ(first->wait(30000), GENIE_OK);
  EXPECT_EQ(second->wait(30000), GENIE_OK);
  ::unsetenv("GENIE_TEST_BACKEND_SYNC_MS");
  EXPECT_EQ(testing::test_backend_kernels(0) - k0, 4u);
  EXPECT_NE(testing::test_backend_last_issuer(0), loop);
  EXPECT_EQ(run(small, {"x", "w"}, {x, w}, 2), loop);  // idle again: the loop issues

  // A kernel that waits for its queue (the test backend's embedding, as
  // CUDA's): the graph is issued on a worker, so the loop never waits.
  TensorRef ids = ctx->alloc(DType::I64, {3}, "remote:1", &canonical);
  const int64_t idv[3] = {2, 0, 15};
  ids.write(0, idv, sizeof idv);
  Graph lookup("lookup");
  lookup.add_input("ids", DType::I64, {3});
  lookup.add_input("x", DType::F32, {4, 16});
  lookup.add_input("w", DType::F32, {16, 8});
  lookup.add_node("matmul", "mm", {"x", "w"}, {"h0"});
  lookup.add_node("embedding", "emb", {"ids", "w"}, {"e"});
  lookup.mark_output("h0");
  lookup.mark_output("e");
  for (int i = 0; i < 3; ++i) EXPECT_NE(run(lookup, {"ids", "x", "w"}, {ids, x, w}, 2), loop);

  // The product and 80 more nodes: issued on a worker.
  Graph large("large");
  large.add_input("x", DType::F32, {4, 16});
  large.add_input("w", DType::F32, {16, 8});
  large.add_node("matmul", "mm", {"x", "w"}, {"h0"});
  for (int i = 0; i < 80; ++i)
    large.add_node("relu", "act" + std::to_string(i), {"h" + std::to_string(i)},
                   {"h" + std::to_string(i + 1)});
  large.mark_output("h80");
  for (int i = 0; i < 3; ++i) EXPECT_NE(run(large, {"x", "w"}, {x, w}, 81), loop);
}

}  // namespace
}  // namespace genie
