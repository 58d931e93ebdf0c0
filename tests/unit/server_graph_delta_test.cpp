// Graph deltas: leaf diffs of graph JSON rebuild the new text byte for byte;
// a real client sends deltas to a real server, saves bytes, and falls back
// to the full graph when the server no longer holds the base.
#include <gtest/gtest.h>

#include <cstring>
#include <future>

#include "control/client.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "graph/delta.hpp"
#include "graph/graph.hpp"
#include "server/server.hpp"

namespace genie {
namespace {

// A decode-step-like graph: z = x (1, n) @ w + bias (a constant); out is z
// with its first element replaced by a scalar attribute (masked_fill).
Graph step_graph(int64_t n, double scale, float bias) {
  Graph g("step");
  g.add_input("x", DType::F32, {1, n});
  g.add_input("w", DType::F32, {n, 4});
  auto b = std::make_shared<TensorData>(DType::F32, Shape{4});
  for (int i = 0; i < 4; ++i) reinterpret_cast<float*>(b->bytes())[i] = bias;
  g.add_constant("bias", b);
  auto m = std::make_shared<TensorData>(DType::Bool, Shape{4});
  reinterpret_cast<uint8_t*>(m->bytes())[0] = 1;
  g.add_constant("first", m);
  g.add_node("matmul", "mm", {"x", "w"}, {"y"});
  g.add_node("add", "plus", {"y", "bias"}, {"z"});
  g.add_node("masked_fill", "fill", {"z", "first"}, {"out"});
  g.set_attr("fill", "value", AttrValue(scale));
  g.mark_output("out");
  return g;
}

TEST(GraphDelta, LeafDiffRebuildsTheNewTextExactly) {
  const std::string base = graph_to_json(step_graph(8, 0.5, 1.0f));
  for (const auto& next : {graph_to_json(step_graph(9, 0.5, 1.0f)),        // an input shape
                           graph_to_json(step_graph(8, 1.0 / 3.0, 1.0f)),  // a float attribute
                           graph_to_json(step_graph(8, 0.5, -2.25f)),      // a constant's bytes
                           graph_to_json(step_graph(12, 1e-300, 7.0f)), base}) {
    std::vector<delta::Patch> patches;
    ASSERT_TRUE(delta::diff(base, next, &patches));
    if (next == base) EXPECT_TRUE(patches.empty());
    size_t bytes = 0;
    for (const auto& p : patches) bytes += p.json.size();
    EXPECT_LT(bytes * 10, next.size()) << "a delta should be a small part of the graph";
    EXPECT_EQ(delta::apply(base, patches), next);
  }
}

TEST(GraphDelta, ADifferentStructureIsNoDelta) {
  const std::string base = graph_to_json(step_graph(8, 0.5, 1.0f));
  Graph other = step_graph(8, 0.5, 1.0f);
  other.add_node("relu", "act", {"out"}, {"r"});
  std::vector<delta::Patch> patches;
  EXPECT_FALSE(delta::diff(base, graph_to_json(other), &patches));
  EXPECT_FALSE(delta::diff(base, "{\"not\": \"a graph\"}", &patches));
  EXPECT_FALSE(delta::diff(base, "\"unterminated", &patches));
}

TEST(GraphDelta, BadPatchesAreRefused) {
  const std::string base = graph_to_json(step_graph(8, 0.5, 1.0f));
  auto refused = [&](std::vector<delta::Patch> p) {
    try {
      delta::apply(base, p);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), GENIE_ERR_PROTOCOL) << e.detail();
      return true;
    }
    return false;
  };
  EXPECT_TRUE(refused({{1u << 30, "1"}}));     // beyond the leaves
  EXPECT_TRUE(refused({{3, "1"}, {2, "2"}}));  // out of order
  EXPECT_TRUE(refused({{3, "1"}, {3, "2"}}));  // twice
  EXPECT_TRUE(refused({{3, "{\"a\": 1}"}}));   // a container, not a leaf
  EXPECT_TRUE(refused({{3, "1, \"x\": 2"}}));  // smuggled structure
  EXPECT_TRUE(refused({{3, ""}}));
}

TEST(GraphDelta, BaseTableIsBoundedAndKeepsTheMostRecent) {
  delta::BaseTable t(2, 1 << 20);
  auto text = [](const char* s) { return std::make_shared<const std::string>(s); };
  t.put("a", text("A"));
  t.put("b", text("B"));
  ASSERT_NE(t.find("a"), nullptr);  // a is now the most recent
  t.put("c", text("C"));
  EXPECT_EQ(t.find("b"), nullptr);
  EXPECT_EQ(*t.find("a"), "A");
  EXPECT_EQ(*t.find("c"), "C");
  EXPECT_EQ(t.size(), 2u);
}

// --- client and server -------------------------------------------------------

std::unique_ptr<Server> start_server() {
  ServerOptions o;
  o.port = 0;
  o.num_threads = 1;
  o.node_id = "delta-server";
  return std::make_unique<Server>(o);
}

Config client_config(int port, bool deltas = true) {
  Config c;
  c.master_addr = "127.0.0.1";
  c.master_port = port;
  c.timeout_ms = 10000;
  c.graph_deltas = deltas;
  return c;
}

RemoteResult run(RemoteClient& c, const std::string& json, uint64_t x, uint64_t w) {
  std::promise<RemoteResult> p;
  c.submit(json, {{"x", x}, {"w", w}}, [&](RemoteResult&& r) { p.set_value(std::move(r)); });
  return p.get_future().get();
}

// Runs step_graph(n, scale, bias) with x = 1 and w = 1 and returns
// out[0] * out[1]: scale * (n + bias).
float run_step(RemoteClient& c, int64_t n, double scale, float bias) {
  const uint64_t x = c.tensor_alloc(DType::F32, {1, n}, "cpu:0");
  const uint64_t w = c.tensor_alloc(DType::F32, {n, 4}, "cpu:0");
  std::vector<float> ones(static_cast<size_t>(n * 4), 1.0f);
  c.tensor_write(x, 0, ones.data(), static_cast<size_t>(n) * 4);
  c.tensor_write(w, 0, ones.data(), ones.size() * 4);
  Graph g = step_graph(n, scale, bias);
  g.validate();
  RemoteResult r = run(c, graph_to_json(g), x, w);
  c.tensor_free(x);
  c.tensor_free(w);
  check(r.status == GENIE_OK, r.status, r.detail);
  float out[4];
  c.tensor_read(r.outputs[0].tensor_id, 0, out, sizeof out);
  c.tensor_free(r.outputs[0].tensor_id);
  return out[0] * out[1];
}

TEST(GraphDeltaRemote, RepeatedAndChangedGraphsGoAsDeltasWithTheSameResults) {
  set_log_level(LogLevel::Error);
  auto server = start_server();
  auto c = RemoteClient::connect(client_config(server->port()), "delta-client");
  EXPECT_FLOAT_EQ(run_step(*c, 8, 0.5, 1.0f), 4.5f);   // full: nothing sent before
  EXPECT_FLOAT_EQ(run_step(*c, 8, 0.5, 1.0f), 4.5f);   // the same text: a delta with no patches
  EXPECT_FLOAT_EQ(run_step(*c, 9, 0.5, 1.0f), 5.0f);   // a new shape: patched leaves
  EXPECT_FLOAT_EQ(run_step(*c, 9, 2.0, 3.0f), 24.0f);  // a scalar attribute and a constant
  const auto g = c->graph_stats();
  EXPECT_EQ(g.submits_full, 1u);
  EXPECT_EQ(g.submits_delta, 3u);
  EXPECT_EQ(g.delta_fallbacks, 0u);
  EXPECT_LT(g.bytes_sent * 2, g.bytes_full);
  const auto s = server->stats();
  EXPECT_EQ(s.graph_submits_full(), 1u);
  EXPECT_EQ(s.graph_submits_delta(), 3u);
  EXPECT_EQ(s.graph_submit_bytes(), g.bytes_sent);  // both sides count the same frames

  // Turned off: always the full graph, and the same answers.
  auto full = RemoteClient::connect(client_config(server->port(), false), "full-client");
  EXPECT_FLOAT_EQ(run_step(*full, 8, 0.5, 1.0f), 4.5f);
  EXPECT_FLOAT_EQ(run_step(*full, 8, 0.5, 1.0f), 4.5f);
  EXPECT_EQ(full->graph_stats().submits_delta, 0u);
  EXPECT_EQ(full->graph_stats().bytes_sent, full->graph_stats().bytes_full);
}

TEST(GraphDeltaRemote, AnUnknownBaseFallsBackToTheFullGraph) {
  set_log_level(LogLevel::Error);
  auto server = start_server();
  auto a = RemoteClient::connect(client_config(server->port()), "client-a");
  EXPECT_FLOAT_EQ(run_step(*a, 8, 0.5, 1.0f), 4.5f);
  // Another client's graphs push a's base out of the server's table.
  auto b = RemoteClient::connect(client_config(server->port(), true), "client-b");
  const uint64_t x = b->tensor_alloc(DType::F32, {1, 1}, "cpu:0");
  const uint64_t w = b->tensor_alloc(DType::F32, {1, 4}, "cpu:0");
  for (size_t i = 0; i < delta::BaseTable::kDefaultEntries; ++i) {
    // Distinct texts of different shapes: each goes in full and is kept.
    Graph g("filler-" + std::to_string(i));
    g.add_input("x", DType::F32, {1, 1});
    g.add_input("w", DType::F32, {1, 4});
    std::string prev = "x";
    for (size_t k = 0; k <= i % 7; ++k) {
      g.add_node("relu", "r" + std::to_string(k), {prev}, {"v" + std::to_string(k)});
      prev = "v" + std::to_string(k);
    }
    g.add_node("matmul", "mm", {prev, "w"}, {"out"});
    g.mark_output("out");
    g.validate();
    RemoteResult r = run(*b, graph_to_json(g), x, w);
    ASSERT_EQ(r.status, GENIE_OK) << r.detail;
    b->tensor_free(r.outputs[0].tensor_id);
  }
  EXPECT_FLOAT_EQ(run_step(*a, 8, 0.5, 1.0f), 4.5f);  // delta refused, sent again in full
  EXPECT_EQ(a->graph_stats().delta_fallbacks, 1u);
  EXPECT_EQ(server->stats().graph_delta_unknown_base(), 1u);
  EXPECT_FLOAT_EQ(run_step(*a, 8, 0.5, 1.0f), 4.5f);  // and the base is known again
  EXPECT_EQ(a->graph_stats().delta_fallbacks, 1u);
  EXPECT_EQ(a->graph_stats().submits_delta, 2u);
}

}  // namespace
}  // namespace genie
