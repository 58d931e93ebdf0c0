// Graph validation: structure checks, topological order, inference through
// the graph, and that a failed validation leaves the graph untouched.
#include <gtest/gtest.h>

#include "graph_test_util.hpp"

namespace genie {
namespace {

using testing::fails_with;
using testing::tensor;

const Value& value(const Graph& g, const std::string& name) { return g.value(g.find_value(name)); }

// x[2,3] @ w[3,4] -> y; relu(y) -> z; output z.
Graph mlp() {
  Graph g("mlp");
  g.add_input("x", DType::F32, {2, 3});
  g.add_constant("w", tensor(DType::F32, {3, 4}));
  g.add_node("matmul", "mm", {"x", "w"}, {"y"});
  g.add_node("relu", "act", {"y"}, {"z"});
  g.mark_output("z");
  return g;
}

TEST(Validate, InfersAndResolves) {
  Graph g = mlp();
  g.validate();
  EXPECT_TRUE(g.validated());
  EXPECT_EQ(value(g, "y").dtype, DType::F32);
  EXPECT_EQ(value(g, "y").shape, (Shape{2, 4}));
  EXPECT_EQ(value(g, "z").shape, (Shape{2, 4}));
  const Node& mm = g.node(g.find_node("mm"));
  EXPECT_EQ(mm.inputs, (std::vector<ValueId>{g.find_value("x"), g.find_value("w")}));
  EXPECT_EQ(g.outputs(), std::vector<ValueId>{g.find_value("z")});
  EXPECT_EQ(g.topo_order(), (std::vector<NodeId>{0, 1}));
}

TEST(Validate, IndexesTheEdgesBetweenNodes) {
  // a = relu(x); b = add(a, a); c = mul(a, b); output c (and a).
  Graph g("edges");
  g.add_input("x", DType::F32, {4});
  g.add_node("relu", "r", {"x"}, {"a"});
  g.add_node("add", "twice", {"a", "a"}, {"b"});
  g.add_node("mul", "m", {"a", "b"}, {"c"});
  g.mark_output("c");
  g.mark_output("a");
  g.validate();
  const NodeId r = g.find_node("r"), twice = g.find_node("twice"), m = g.find_node("m");
  const auto consumers = [&](NodeId n) {
    const auto c = g.consumers(n);
    return std::vector<NodeId>(c.begin(), c.end());
  };
  // One entry per input slot that reads the node's output.
  EXPECT_EQ(consumers(r), (std::vector<NodeId>{twice, twice, m}));
  EXPECT_EQ(consumers(twice), std::vector<NodeId>{m});
  EXPECT_TRUE(consumers(m).empty());
  EXPECT_EQ(g.producer_edges(r), 0);  // reads a graph input only
  EXPECT_EQ(g.producer_edges(twice), 2);
  EXPECT_EQ(g.producer_edges(m), 2);
  EXPECT_EQ(g.readers(g.find_value("x")), 1);
  EXPECT_EQ(g.readers(g.find_value("a")), 3);
  EXPECT_EQ(g.readers(g.find_value("b")), 1);
  EXPECT_EQ(g.readers(g.find_value("c")), 0);
  // Edited and validated again: the index follows.
  g.add_node("neg", "n", {"c"}, {"d"});
  g.mark_output("d");
  g.validate();
  EXPECT_EQ(consumers(m), std::vector<NodeId>{g.find_node("n")});
  EXPECT_EQ(g.readers(g.find_value("c")), 1);
}

TEST(Validate, TopologicalOrderIsDeterministic) {
  Graph g;
  g.add_input("x", DType::F32, {4});
  // Consumers first: the order must follow edges, and among ready nodes,
  // insertion order.
  g.add_node("add", "sum", {"a", "b"}, {"s"});  // 0
  g.add_node("neg", "na", {"x"}, {"a"});        // 1
  g.add_node("abs", "nb", {"x"}, {"b"});        // 2
  g.add_node("relu", "free", {"x"}, {"f"});     // 3
  g.add_node("exp", "last", {"s"}, {"e"});      // 4
  g.mark_output("e");
  g.mark_output("f");
  g.validate();
  EXPECT_EQ(g.topo_order(), (std::vector<NodeId>{1, 2, 0, 3, 4}));
  EXPECT_EQ(value(g, "e").shape, (Shape{4}));
}

TEST(Validate, OptionalInputsMayBeOmitted) {
  Graph g;
  g.add_input("x", DType::F32, {2, 8});
  g.add_input("b", DType::F32, {8});
  g.add_node("layer_norm", "ln", {"x", "", "b"}, {"y"});
  g.mark_output("y");
  g.validate();
  EXPECT_EQ(g.node(0).inputs, (std::vector<ValueId>{g.find_value("x"), kNone, g.find_value("b")}));
  // Not in a required slot, even when edited in place.
  g.mutable_nodes()[0].input_names[0] = "";
  EXPECT_TRUE(fails_with([&] { g.validate(); }, GENIE_ERR_INVALID_GRAPH, "node 'ln' (layer_norm): input 0"));
}

TEST(Validate, CycleNamesANodeOnIt) {
  Graph g;
  g.add_input("x", DType::F32, {4});
  g.add_node("relu", "after", {"c_out"}, {"d_out"});  // downstream of the cycle, not on it
  g.add_node("add", "b", {"x", "c_out"}, {"b_out"});
  g.add_node("neg", "c", {"b_out"}, {"c_out"});
  g.mark_output("d_out");
  EXPECT_TRUE(fails_with([&] { g.validate(); }, GENIE_ERR_INVALID_GRAPH, "is on a cycle: "));
  try {
    g.validate();
  } catch (const Error& e) {
    EXPECT_EQ(e.detail().find("node 'after'"), std::string::npos) << e.detail();
    EXPECT_NE(e.detail().find("c -> b -> c"), std::string::npos) << e.detail();
  }
  EXPECT_FALSE(g.validated());

  // A long cycle is named by its first steps only.
  Graph ring;
  for (int i = 0; i < 20; ++i) ring.add_node("neg", cat("r", i), {cat("v", (i + 19) % 20)}, {cat("v", i)});
  ring.mark_output("v0");
  EXPECT_TRUE(fails_with([&] { ring.validate(); }, GENIE_ERR_INVALID_GRAPH,
                         "is on a cycle: r0 -> r1 -> r2 -> r3 -> r4 -> r5 -> r6 -> r7 -> r8 -> ..."));

  Graph self;
  self.add_node("relu", "loop", {"y"}, {"y"});
  self.mark_output("y");
  EXPECT_TRUE(
      fails_with([&] { self.validate(); }, GENIE_ERR_INVALID_GRAPH, "node 'loop' (relu) is on a cycle"));
}

TEST(Validate, DanglingInputNamesNodeAndValue) {
  Graph g = mlp();
  g.add_node("add", "bad", {"z", "nope"}, {"q"});
  EXPECT_TRUE(fails_with([&] { g.validate(); }, GENIE_ERR_INVALID_GRAPH,
                         "node 'bad' (add): input 'nope' does not exist"));
}

TEST(Validate, OutputsRequiredAndMustExist) {
  Graph g;
  g.add_input("x", DType::F32, {1});
  EXPECT_TRUE(fails_with([&] { g.validate(); }, GENIE_ERR_INVALID_GRAPH, "no outputs"));
  g.mark_output("ghost");
  EXPECT_TRUE(fails_with([&] { g.validate(); }, GENIE_ERR_INVALID_GRAPH, "output 'ghost' does not exist"));
  Graph passthrough;
  passthrough.add_input("x", DType::I32, {3});
  passthrough.mark_output("x");
  passthrough.validate();  // a graph may return its input unchanged
  EXPECT_EQ(passthrough.outputs(), std::vector<ValueId>{0});
}

TEST(Validate, ArityAndOpRecheckedAfterEdits) {
  Graph g = mlp();
  g.mutable_nodes()[0].input_names.pop_back();
  EXPECT_TRUE(
      fails_with([&] { g.validate(); }, GENIE_ERR_INVALID_GRAPH, "node 'mm' (matmul): matmul takes 2"));
  Graph h = mlp();
  h.mutable_nodes()[1].op = "rleu";
  EXPECT_TRUE(fails_with([&] { h.validate(); }, GENIE_ERR_UNKNOWN_OP, "did you mean 'relu'"));
}

TEST(Validate, AttributeErrors) {
  Graph g;
  g.add_input("x", DType::F32, {2, 3});
  g.add_node("reshape", "rs", {"x"}, {"y"});
  g.mark_output("y");
  EXPECT_TRUE(fails_with([&] { g.validate(); }, GENIE_ERR_INVALID_ATTRIBUTE,
                         "node 'rs' (reshape): required attribute 'shape' of reshape is missing"));
  g.set_attr("rs", "shape", std::vector<int64_t>{3, 2});
  g.validate();
  EXPECT_EQ(value(g, "y").shape, (Shape{3, 2}));
  // An attribute slipped in around set_attr is still caught.
  g.mutable_nodes()[0].attrs.set("shape", std::string("3x2"));
  EXPECT_TRUE(fails_with([&] { g.validate(); }, GENIE_ERR_INVALID_ATTRIBUTE, "must be ints, got string"));
}

TEST(Validate, ShapeAndDtypeErrorsNameTheNode) {
  Graph g;
  g.add_input("a", DType::F32, {2, 3});
  g.add_input("b", DType::F32, {4, 5});
  g.add_input("i", DType::I32, {2, 3});
  g.add_node("matmul", "proj", {"a", "b"}, {"p"});
  g.mark_output("p");
  EXPECT_TRUE(
      fails_with([&] { g.validate(); }, GENIE_ERR_SHAPE_MISMATCH, "node 'proj' (matmul): inner dimensions"));

  Graph h;
  h.add_input("a", DType::F32, {2, 3});
  h.add_input("i", DType::I32, {2, 3});
  h.add_node("add", "mix", {"a", "i"}, {"s"});
  h.mark_output("s");
  EXPECT_TRUE(fails_with([&] { h.validate(); }, GENIE_ERR_DTYPE_MISMATCH, "node 'mix' (add): a and b"));
}

TEST(Validate, SplitOutputCountMustMatchSizes) {
  Graph g;
  g.add_input("x", DType::F32, {6});
  g.add_node("split", "sp", {"x"}, {"a", "b"});
  g.set_attr("sp", "sizes", std::vector<int64_t>{1, 2, 3});
  g.mark_output("a");
  EXPECT_TRUE(fails_with([&] { g.validate(); }, GENIE_ERR_INVALID_ATTRIBUTE,
                         "node 'sp' (split): the attributes give 3"));
  g.set_attr("sp", "sizes", std::vector<int64_t>{2, 4});
  g.validate();
  EXPECT_EQ(value(g, "a").shape, Shape{2});
  EXPECT_EQ(value(g, "b").shape, Shape{4});
}

TEST(Validate, OverflowIsTooLarge) {
  Graph g;
  g.add_input("a", DType::F32, {int64_t{1} << 24, 1});
  g.add_input("b", DType::F32, {1, int64_t{1} << 24});
  g.add_node("mul", "outer", {"a", "b"}, {"c"});  // 2^48 elements of 4 bytes
  g.mark_output("c");
  EXPECT_TRUE(fails_with([&] { g.validate(); }, GENIE_ERR_TOO_LARGE, "node 'outer' (mul)"));

  Graph r;
  r.add_input("x", DType::F32, {1});
  r.add_node("reshape", "deep", {"x"}, {"y"});
  r.set_attr("deep", "shape", std::vector<int64_t>(9, 1));
  r.mark_output("y");
  EXPECT_TRUE(fails_with([&] { r.validate(); }, GENIE_ERR_TOO_LARGE, "more than 8 dimensions"));
}

TEST(Validate, DynamicInputsNeedBoundShapes) {
  Graph g;
  const ValueId x = g.add_input("x", DType::F32, {-1, 3});
  g.add_constant("w", tensor(DType::F32, {3, 5}));
  g.add_node("matmul", "mm", {"x", "w"}, {"y"});
  g.mark_output("y");
  EXPECT_TRUE(
      fails_with([&] { g.validate(); }, GENIE_ERR_INVALID_GRAPH, "input 'x' has dynamic shape [-1, 3]"));

  std::unordered_map<ValueId, Shape> bound{{x, {7, 3}}};
  g.validate(&bound);
  EXPECT_EQ(value(g, "y").shape, (Shape{7, 5}));
  EXPECT_EQ(value(g, "x").shape, (Shape{-1, 3}));  // the declaration stays

  for (const Shape& bad : {Shape{7, 4}, Shape{7}, Shape{7, 3, 1}, Shape{-1, 3}}) {
    bound[x] = bad;
    EXPECT_TRUE(fails_with([&] { g.validate(&bound); }, GENIE_ERR_SHAPE_MISMATCH, "declared [-1, 3]"));
  }
  std::unordered_map<ValueId, Shape> on_constant{{x, {1, 3}}, {g.find_value("w"), {3, 5}}};
  EXPECT_TRUE(fails_with([&] { g.validate(&on_constant); }, GENIE_ERR_INVALID_GRAPH, "not a graph input"));
  bound[x] = {int64_t{1} << 47, 3};
  EXPECT_TRUE(fails_with([&] { g.validate(&bound); }, GENIE_ERR_TOO_LARGE, "value 'x'"));
}

TEST(Validate, FailureLeavesGraphUntouched) {
  Graph g = mlp();
  g.add_input("other", DType::F32, {5});
  g.add_node("add", "bad", {"z", "other"}, {"q"});  // [2,4] + [5]
  g.mark_output("q");
  const std::string before = graph_to_json(g);
  EXPECT_TRUE(fails_with([&] { g.validate(); }, GENIE_ERR_SHAPE_MISMATCH, "node 'bad' (add)"));
  EXPECT_FALSE(g.validated());
  // Nodes before the failing one were inferred in temporaries only.
  EXPECT_EQ(value(g, "y").dtype, DType::Invalid);
  EXPECT_TRUE(value(g, "y").shape.empty());
  EXPECT_TRUE(g.node(0).inputs.empty());
  EXPECT_TRUE(g.outputs().empty());
  EXPECT_TRUE(g.topo_order().empty());
  EXPECT_EQ(graph_to_json(g), before);

  // After a success, a failing re-validation keeps the previous results.
  Graph ok = mlp();
  ok.validate();
  ok.mutable_nodes()[0].attrs.set("transpose_a", int64_t{1});  // [3,2] @ [3,4]: mismatch
  ok.invalidate();
  EXPECT_TRUE(fails_with([&] { ok.validate(); }, GENIE_ERR_SHAPE_MISMATCH));
  EXPECT_EQ(value(ok, "y").shape, (Shape{2, 4}));
  EXPECT_EQ(ok.topo_order().size(), 2u);
  EXPECT_FALSE(ok.validated());
}

TEST(Validate, CopiesAreIndependentSnapshots) {
  Graph g = mlp();
  Graph snapshot = g;
  g.add_node("neg", "more", {"z"}, {"n"});
  snapshot.validate();
  EXPECT_EQ(snapshot.nodes().size(), 2u);
  EXPECT_EQ(snapshot.find_value("n"), kNone);
}

}  // namespace
}  // namespace genie
