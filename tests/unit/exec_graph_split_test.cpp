// Per-device stages of a planned graph: stage boundaries, cut edges,
// constants, dynamic shapes, and running the stages one after another gives
// the same outputs as running the whole graph.
#include <gtest/gtest.h>

#include <cstring>
#include <unordered_map>

#include "graph/split.hpp"
#include "core/error.hpp"
#include "exec/executor.hpp"

namespace genie {
namespace {

TensorPtr filled(Shape s, float base) {
  auto t = std::make_shared<TensorData>(DType::F32, std::move(s));
  float* p = reinterpret_cast<float*>(t->bytes());
  for (size_t i = 0; i < t->nbytes() / 4; ++i) p[i] = base + 0.25f * static_cast<float>(i % 7);
  return t;
}

// A diamond with a constant and a dynamic input: a -> (mm, relu) -> add -> out.
Graph diamond() {
  Graph g("diamond");
  g.add_input("x", DType::F32, {-1, 4});
  g.add_input("w", DType::F32, {4, 4});
  g.add_constant("c", filled({4}, 1.0f));
  g.add_node("matmul", "mm", {"x", "w"}, {"h"});
  g.add_node("relu", "act", {"x"}, {"r"});
  g.add_node("add", "sum", {"h", "r"}, {"s"});
  g.add_node("add", "bias", {"s", "c"}, {"out"});
  g.mark_output("out");
  g.mark_output("h");
  return g;
}

TEST(GraphSplit, CutsRunsOfOneDeviceAndNamesTheCutEdges) {
  Graph g = diamond();
  std::unordered_map<ValueId, Shape> shapes{{g.find_value("x"), {3, 4}}};
  g.validate(&shapes);
  const NodeId mm = g.find_node("mm"), act = g.find_node("act"), sum = g.find_node("sum"), bias = g.find_node("bias");
  std::vector<int> dev(4);
  dev[mm] = 1, dev[act] = 0, dev[sum] = 0, dev[bias] = 1;
  const std::vector<Stage> st = split_stages(g, dev, {mm, act, sum, bias}, &shapes);
  ASSERT_EQ(st.size(), 3u);
  EXPECT_EQ(st[0].device, 1);
  EXPECT_EQ(st[1].device, 0);
  EXPECT_EQ(st[2].device, 1);
  // Stage 0 reads x and w; it returns h (read later, and a graph output).
  EXPECT_EQ(st[0].inputs, (std::vector<ValueId>{g.find_value("x"), g.find_value("w")}));
  EXPECT_EQ(st[0].outputs, (std::vector<ValueId>{g.find_value("h")}));
  EXPECT_EQ(st[0].graph->value(st[0].graph->find_value("x")).shape, (Shape{3, 4}));  // bound, not -1
  // Stage 1 (act, then sum) reads x and h (a cut edge); returns s.
  EXPECT_EQ(st[1].inputs, (std::vector<ValueId>{g.find_value("x"), g.find_value("h")}));
  EXPECT_EQ(st[1].outputs, (std::vector<ValueId>{g.find_value("s")}));
  // Stage 2 reads s; the constant travels inside it.
  EXPECT_EQ(st[2].inputs, (std::vector<ValueId>{g.find_value("s")}));
  EXPECT_EQ(st[2].graph->value(st[2].graph->find_value("c")).kind, ValueKind::Constant);
  EXPECT_EQ(st[2].outputs, (std::vector<ValueId>{g.find_value("out")}));
  for (const Stage& s : st) EXPECT_TRUE(s.graph->validated());
}

TEST(GraphSplit, StagesRunInOrderGiveTheWholeGraphsOutputs) {
  Graph g = diamond();
  std::unordered_map<ValueId, Shape> shapes{{g.find_value("x"), {3, 4}}};
  g.validate(&shapes);
  const TensorPtr x = filled({3, 4}, -1.0f), w = filled({4, 4}, 0.5f);
  Executor ex(1);
  const ExecResult whole = ex.run_inline(std::make_shared<Graph>(g), {x, w});
  ASSERT_EQ(whole.status, GENIE_OK) << whole.detail;

  std::vector<int> dev(4, 0);
  dev[g.find_node("act")] = 1;  // a stage in the middle of the diamond
  std::unordered_map<ValueId, TensorPtr> have{{g.find_value("x"), x}, {g.find_value("w"), w}};
  for (const Stage& s : split_stages(g, dev, g.topo_order(), &shapes)) {
    std::vector<TensorPtr> in;
    for (ValueId v : s.inputs) in.push_back(have.at(v));
    ExecResult r = ex.run_inline(s.graph, in);
    ASSERT_EQ(r.status, GENIE_OK) << r.detail;
    for (size_t i = 0; i < s.outputs.size(); ++i) have[s.outputs[i]] = r.outputs[i];
  }
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const TensorPtr& got = have.at(g.outputs()[i]);
    ASSERT_EQ(got->nbytes(), whole.outputs[i]->nbytes());
    EXPECT_EQ(std::memcmp(got->bytes(), whole.outputs[i]->bytes(), got->nbytes()), 0) << "output " << i;
  }
}

TEST(GraphSplit, AnOrderThatIsNotAPlanIsRefused) {
  Graph g = diamond();
  std::unordered_map<ValueId, Shape> shapes{{g.find_value("x"), {3, 4}}};
  g.validate(&shapes);
  const NodeId mm = g.find_node("mm"), act = g.find_node("act"), sum = g.find_node("sum"), bias = g.find_node("bias");
  const std::vector<int> dev(4, 0);
  const auto refused = [&](std::vector<NodeId> order, std::vector<int> d) {
    try {
      split_stages(g, d, order, &shapes);
    } catch (const Error& e) {
      return e.code() == GENIE_ERR_INVALID_ARGUMENT;
    }
    return false;
  };
  std::vector<int> split_dev(4, 0);
  split_dev[bias] = 1;
  EXPECT_TRUE(refused({mm, act, bias, sum}, split_dev));  // bias's stage before the one producing s
  EXPECT_TRUE(refused({mm, mm, sum, bias}, dev));        // a node twice
  EXPECT_TRUE(refused({mm, act, sum}, dev));             // a node missing
  EXPECT_TRUE(refused({mm, act, sum, bias}, {0, 0, 0}));  // placements missing
}

}  // namespace
}  // namespace genie
