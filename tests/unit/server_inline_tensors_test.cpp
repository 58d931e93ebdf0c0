// Small tensors inside a submission and its completion (docs/protocol.md,
// "Small tensors inside a submission"): a host input travels inside the
// GraphSubmit, an output annotated as what the caller reads comes back
// inside the GraphDone, and reading it then costs no round trip; whatever
// may change such an output drops the copy first. The server checks what
// it is given.
#include <gtest/gtest.h>

#include <cjson/cJSON.h>

#include <future>
#include <memory>
#include <string>
#include <vector>

#include "control/client.hpp"
#include "control/wire.hpp"
#include "core/log.hpp"
#include "graph/graph.hpp"
#include "runtime/context.hpp"
#include "server/node_server.hpp"
#include "server/server.hpp"

namespace genie {
namespace {

// y = x (1, n) @ w (n, m), annotated as the caller's result when `annotate`.
Graph step(int64_t n, int64_t m, bool annotate) {
  Graph g("step");
  g.add_input("x", DType::F32, {1, n});
  g.add_input("w", DType::F32, {n, m});
  g.add_node("matmul", "mm", {"x", "w"}, {"y"});
  g.mark_output("y");
  if (annotate) g.value(g.find_value("y")).role = TensorRole::Output;
  return g;
}

std::vector<float> iota(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 7) * scale;
  return v;
}

class InlineTensors : public ::testing::Test {
 protected:
  void SetUp() override {
    set_log_level(LogLevel::Error);
    Config scfg;
    scfg.use_env = false;
    scfg.num_threads = 1;
    server = std::make_unique<NodeServer>(scfg, "127.0.0.1", 0);
    Config cfg;
    cfg.use_env = false;
    cfg.num_threads = 1;
    cfg.master_addr = "127.0.0.1";
    cfg.master_port = server->port();
    ctx = std::make_shared<Context>(cfg);
  }
  void TearDown() override {
    if (ctx) ctx->shutdown();
  }
  // The client's counter `key` (genie_context_server_info's "client").
  double counter(const char* key) {
    cJSON* j = cJSON_Parse(ctx->server_info_json().c_str());
    const cJSON* v = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "client"), key);
    const double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
    cJSON_Delete(j);
    return d;
  }
  TensorRef resident(Shape shape, const std::vector<float>& data) {
    std::string dev;
    TensorRef t = ctx->alloc(DType::F32, std::move(shape), "remote:0", &dev);
    t.write(0, data.data(), data.size() * sizeof(float));
    return t;
  }
  TensorRef host(Shape shape, const std::vector<float>& data) {
    std::string dev;
    TensorRef t = ctx->alloc(DType::F32, std::move(shape), "cpu", &dev);
    t.write(0, data.data(), data.size() * sizeof(float));
    return t;
  }
  static std::vector<float> expected(const std::vector<float>& x, const std::vector<float>& w, int64_t n,
                                     int64_t m) {
    std::vector<float> y(static_cast<size_t>(m), 0.0f);
    for (int64_t j = 0; j < m; ++j)
      for (int64_t k = 0; k < n; ++k) y[size_t(j)] += x[size_t(k)] * w[size_t(k * m + j)];
    return y;
  }

  std::unique_ptr<NodeServer> server;
  std::shared_ptr<Context> ctx;  // destroyed before the server
};

TEST_F(InlineTensors, AStepWithAHostInputAndAnAnnotatedOutputIsOneRoundTrip) {
  const int64_t n = 32, m = 16;
  const auto xs = iota(n, 0.5f), ws = iota(size_t(n * m), 0.25f);
  TensorRef w = resident({n, m}, ws);
  TensorRef x = host({1, n}, xs);
  const double written = counter("tensor_bytes_written"), read = counter("tensor_bytes_read");
  const double inl = counter("inline_output_bytes");
  const Graph g = step(n, m, true);
  for (int i = 0; i < 3; ++i) {
    std::shared_ptr<FutureState> f = ctx->submit(g, {"x", "w"}, {x, w});
    ASSERT_EQ(f->wait(30000), GENIE_OK);
    TensorRef y = f->output(0);
    ASSERT_TRUE(y.is_remote());
    std::vector<float> got(static_cast<size_t>(m));
    y.read(0, got.data(), got.size() * sizeof(float));
    EXPECT_EQ(got, expected(xs, ws, n, m));
  }
  // Nothing uploaded or read on its own: the input went inside each
  // submission, the output came back inside each completion.
  EXPECT_EQ(counter("tensor_bytes_written"), written);
  EXPECT_EQ(counter("tensor_bytes_read"), read);
  EXPECT_EQ(counter("inline_output_bytes") - inl, 3.0 * m * sizeof(float));
}

TEST_F(InlineTensors, AnOutputNotAnnotatedIsReadFromTheServer) {
  const int64_t n = 8, m = 4;
  const auto xs = iota(n, 1.0f), ws = iota(size_t(n * m), 1.0f);
  TensorRef w = resident({n, m}, ws);
  TensorRef x = host({1, n}, xs);
  const double read = counter("tensor_bytes_read"), inl = counter("inline_output_bytes");
  std::shared_ptr<FutureState> f = ctx->submit(step(n, m, false), {"x", "w"}, {x, w});
  ASSERT_EQ(f->wait(30000), GENIE_OK);
  std::vector<float> got(static_cast<size_t>(m));
  f->output(0).read(0, got.data(), got.size() * sizeof(float));
  EXPECT_EQ(got, expected(xs, ws, n, m));
  EXPECT_EQ(counter("tensor_bytes_read") - read, double(m * sizeof(float)));
  EXPECT_EQ(counter("inline_output_bytes"), inl);
}

TEST_F(InlineTensors, WritingOrBindingAnOutputDropsTheCopyItCameWith) {
  const int64_t n = 4, m = 4;
  const auto xs = iota(n, 1.0f), ws = iota(size_t(n * m), 1.0f);
  TensorRef w = resident({n, m}, ws);
  TensorRef x = host({1, n}, xs);
  const Graph g = step(n, m, true);
  std::shared_ptr<FutureState> f = ctx->submit(g, {"x", "w"}, {x, w});
  ASSERT_EQ(f->wait(30000), GENIE_OK);
  TensorRef y = f->output(0);
  // Written: the next read sees the write, from the server.
  const std::vector<float> mine = {1, 2, 3, 4};
  y.write(0, mine.data(), 16);
  std::vector<float> got(4);
  const double read = counter("tensor_bytes_read");
  y.read(0, got.data(), 16);
  EXPECT_EQ(got, mine);
  EXPECT_EQ(counter("tensor_bytes_read") - read, 16.0);
  // The output is still the server's tensor: bound as another graph's input.
  Graph sq("again");
  sq.add_input("y", DType::F32, {1, m});
  sq.add_node("mul", "sq", {"y", "y"}, {"z"});
  sq.mark_output("z");
  sq.value(sq.find_value("z")).role = TensorRole::Output;
  std::shared_ptr<FutureState> f2 = ctx->submit(sq, {"y"}, {TensorRef(y)});
  ASSERT_EQ(f2->wait(30000), GENIE_OK);
  f2->output(0).read(0, got.data(), 16);
  EXPECT_EQ(got, (std::vector<float>{1, 4, 9, 16}));
}

TEST_F(InlineTensors, LargeTensorsTakeTheirOwnTransfers) {
  // Past kMaxInlineTensorBytes: uploaded and read as before, same results.
  const int64_t n = 1, m = int64_t(wire::kMaxInlineTensorBytes / sizeof(float)) + 1;
  const auto xs = iota(size_t(n), 1.0f), ws = iota(size_t(n * m), 1.0f);
  TensorRef w = host({n, m}, ws);  // a host input too large to go inline
  TensorRef x = host({1, n}, xs);
  const double written = counter("tensor_bytes_written"), read = counter("tensor_bytes_read");
  std::shared_ptr<FutureState> f = ctx->submit(step(n, m, true), {"x", "w"}, {x, w});
  ASSERT_EQ(f->wait(30000), GENIE_OK);
  std::vector<float> got(static_cast<size_t>(m));
  f->output(0).read(0, got.data(), got.size() * sizeof(float));
  EXPECT_EQ(got, expected(xs, ws, n, m));
  EXPECT_EQ(counter("tensor_bytes_written") - written, double(m * sizeof(float)));
  EXPECT_EQ(counter("tensor_bytes_read") - read, double(m * sizeof(float)));
}

// --- what the server accepts -------------------------------------------------

RemoteResult run(RemoteClient& c, const std::string& json, std::vector<std::pair<std::string, uint64_t>> b,
                 const SubmitExtras& extras) {
  std::promise<RemoteResult> p;
  c.submit(json, std::move(b), [&](RemoteResult&& r) { p.set_value(std::move(r)); }, false, extras);
  return p.get_future().get();
}

TEST(InlineTensorsWire, TheServerChecksWhatItIsGiven) {
  set_log_level(LogLevel::Error);
  ServerOptions o;
  o.port = 0;
  o.num_threads = 1;
  o.node_id = "inline-server";
  Server server(o);
  Config cfg;
  cfg.master_addr = "127.0.0.1";
  cfg.master_port = server.port();
  cfg.timeout_ms = 10000;
  auto c = RemoteClient::connect(cfg, "inline-client");
  ASSERT_TRUE(c->inline_tensors());
  Graph g = step(2, 2, true);
  g.validate();
  const std::string json = graph_to_json(g);
  const uint64_t w = c->tensor_alloc(DType::F32, {2, 2}, "cpu:0");
  const float ones[4] = {1, 1, 1, 1};
  c->tensor_write(w, 0, ones, sizeof ones);
  const float x[2] = {2, 3};

  SubmitExtras ok;
  ok.inputs.push_back({"x", DType::F32, {1, 2}, x, sizeof x});
  ok.return_outputs = {0, 7};  // an index past the outputs is ignored
  RemoteResult r = run(*c, json, {{"w", w}}, ok);
  ASSERT_EQ(r.status, GENIE_OK) << r.detail;
  ASSERT_TRUE(r.outputs[0].has_data);
  ASSERT_EQ(r.outputs[0].data.size(), 8u);
  float y[2];
  std::memcpy(y, r.outputs[0].data.data(), 8);
  EXPECT_EQ(y[0], 5.0f);
  EXPECT_EQ(y[1], 5.0f);
  float again[2] = {0, 0};
  c->tensor_read(r.outputs[0].tensor_id, 0, again, 8);  // kept in the session all the same
  EXPECT_EQ(again[0], 5.0f);
  // Not asked: no bytes.
  SubmitExtras quiet;
  quiet.inputs = ok.inputs;
  r = run(*c, json, {{"w", w}}, quiet);
  ASSERT_EQ(r.status, GENIE_OK) << r.detail;
  EXPECT_FALSE(r.outputs[0].has_data);

  auto refused = [&](SubmitExtras e, std::vector<std::pair<std::string, uint64_t>> b, genie_status_t want) {
    RemoteResult bad = run(*c, json, std::move(b), e);
    EXPECT_EQ(bad.status, want) << bad.detail;
    return bad.detail;
  };
  SubmitExtras e = ok;
  e.inputs[0].nbytes = 4;  // not the shape's bytes
  EXPECT_NE(refused(e, {{"w", w}}, GENIE_ERR_SIZE_MISMATCH).find("inline input 'x'"), std::string::npos);
  e = ok;
  e.inputs[0].dtype = static_cast<DType>(99);
  refused(e, {{"w", w}}, GENIE_ERR_INVALID_ARGUMENT);
  e = ok;
  e.inputs[0].shape = {1, -2};
  refused(e, {{"w", w}}, GENIE_ERR_INVALID_ARGUMENT);
  e = ok;
  e.inputs[0].name = "w";  // bound twice
  refused(e, {{"w", w}, {"x", w}}, GENIE_ERR_INVALID_ARGUMENT);
  e = ok;
  e.inputs[0].shape = {1, 3};  // the graph's x is (1, 2)
  std::vector<float> three = {1, 2, 3};
  e.inputs[0].data = three.data();
  e.inputs[0].nbytes = 12;
  EXPECT_NE(run(*c, json, {{"w", w}}, e).status, GENIE_OK);
  // And the session still works.
  r = run(*c, json, {{"w", w}}, ok);
  EXPECT_EQ(r.status, GENIE_OK) << r.detail;
}

}  // namespace
}  // namespace genie
