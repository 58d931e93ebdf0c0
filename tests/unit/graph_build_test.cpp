// Graph building: every call either succeeds or throws the status the C API
// documents and leaves the graph as it was.
#include <gtest/gtest.h>

#include <functional>

#include "graph/op_schema.hpp"
#include "graph_test_util.hpp"

namespace genie {
namespace {

using testing::fails_with;
using testing::tensor;

// A graph with one of everything, and a way to prove a failed call changed
// nothing about it.
class BuildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g.add_input("x", DType::F32, {2, 3});
    g.add_constant("w", tensor(DType::F32, {3, 4}));
    g.add_node("matmul", "mm", {"x", "w"}, {"y"});
    g.set_attr("mm", "transpose_b", int64_t{0});
    g.mark_output("y");
    before = snapshot();
  }
  std::string snapshot() const {
    return graph_to_json(g) + cat(g.values().size(), "/", g.nodes().size(), "/", g.structural_hash());
  }
  void expect_unchanged() const { EXPECT_EQ(snapshot(), before); }

  Graph g{"build"};
  std::string before;
};

TEST_F(BuildTest, DuplicateValueNamesAreInvalidGraph) {
  EXPECT_TRUE(
      fails_with([&] { g.add_input("x", DType::F32, {1}); }, GENIE_ERR_INVALID_GRAPH, "'x' is already used"));
  EXPECT_TRUE(fails_with([&] { g.add_input("w", DType::F32, {1}); }, GENIE_ERR_INVALID_GRAPH, "'w'"));
  EXPECT_TRUE(
      fails_with([&] { g.add_constant("y", tensor(DType::F32, {1})); }, GENIE_ERR_INVALID_GRAPH, "'y'"));
  EXPECT_TRUE(fails_with([&] { g.add_node("relu", "r", {"x"}, {"w"}); }, GENIE_ERR_INVALID_GRAPH, "'w'"));
  EXPECT_TRUE(fails_with(
      [&] {
        g.add_node("split", "s", {"x"}, {"a", "a"});
      },
      GENIE_ERR_INVALID_GRAPH, "twice"));
  expect_unchanged();
}

TEST_F(BuildTest, DuplicateNodeNameIsInvalidGraph) {
  EXPECT_TRUE(fails_with([&] { g.add_node("relu", "mm", {"x"}, {"r"}); }, GENIE_ERR_INVALID_GRAPH, "'mm'"));
  expect_unchanged();
  // Nodes and values have separate namespaces.
  g.add_node("relu", "x", {"y"}, {"mm"});
  EXPECT_NE(g.find_node("x"), kNone);
  EXPECT_NE(g.find_value("mm"), kNone);
}

TEST_F(BuildTest, BadNamesAreInvalidArgument) {
  const std::string long_name(256, 'n');
  for (const std::string& bad : {std::string(), long_name, std::string("a\nb"), std::string("tab\t"),
                                 std::string("del\x7f"), std::string("nul\0x", 5)}) {
    SCOPED_TRACE(bad);
    EXPECT_TRUE(fails_with([&] { g.add_input(bad, DType::F32, {1}); }, GENIE_ERR_INVALID_ARGUMENT));
    EXPECT_TRUE(
        fails_with([&] { g.add_constant(bad, tensor(DType::F32, {1})); }, GENIE_ERR_INVALID_ARGUMENT));
    EXPECT_TRUE(fails_with([&] { g.add_node("relu", bad, {"x"}, {"r"}); }, GENIE_ERR_INVALID_ARGUMENT));
    EXPECT_TRUE(fails_with([&] { g.add_node("relu", "r", {"x"}, {bad}); }, GENIE_ERR_INVALID_ARGUMENT));
    EXPECT_TRUE(fails_with([&] { g.mark_output(bad); }, GENIE_ERR_INVALID_ARGUMENT));
    if (!bad.empty())  // "" is an omitted input
      EXPECT_TRUE(fails_with([&] { g.add_node("relu", "r", {bad}, {"r"}); }, GENIE_ERR_INVALID_ARGUMENT));
  }
  expect_unchanged();
  g.add_input(std::string(255, 'n'), DType::F32, {1});
  g.add_input("utf8 ünïcode ok", DType::F32, {1});
}

TEST_F(BuildTest, InputDeclarationErrors) {
  EXPECT_TRUE(
      fails_with([&] { g.add_input("i", DType::Invalid, {1}); }, GENIE_ERR_INVALID_ARGUMENT, "dtype"));
  EXPECT_TRUE(fails_with([&] { g.add_input("i", static_cast<DType>(99), {1}); }, GENIE_ERR_INVALID_ARGUMENT));
  EXPECT_TRUE(
      fails_with([&] { g.add_input("i", DType::F32, Shape(9, 1)); }, GENIE_ERR_INVALID_ARGUMENT, "rank 9"));
  EXPECT_TRUE(fails_with([&] { g.add_input("i", DType::F32, {2, -2}); }, GENIE_ERR_INVALID_ARGUMENT, "-2"));
  EXPECT_TRUE(fails_with([&] { g.add_input("i", DType::F32, {1 << 30, 1 << 30}); }, GENIE_ERR_TOO_LARGE));
  // The static part of a dynamic shape is checked too.
  EXPECT_TRUE(fails_with([&] { g.add_input("i", DType::F32, {-1, int64_t{1} << 50}); }, GENIE_ERR_TOO_LARGE));
  EXPECT_TRUE(fails_with([&] { g.add_constant("c", nullptr); }, GENIE_ERR_INVALID_ARGUMENT));
  EXPECT_TRUE(
      fails_with([&] { g.add_constant("c", tensor(DType::F32, Shape(9, 1))); }, GENIE_ERR_INVALID_ARGUMENT));
  expect_unchanged();
  const ValueId dyn = g.add_input("dyn", DType::I64, {-1, 8});
  EXPECT_EQ(g.value(dyn).shape, (Shape{-1, 8}));
  EXPECT_EQ(g.value(dyn).kind, ValueKind::Input);
  EXPECT_EQ(g.inputs().back(), dyn);
}

TEST_F(BuildTest, UnknownOpSuggestsCloseNames) {
  EXPECT_TRUE(fails_with(
      [&] {
        g.add_node("matmull", "n", {"x", "w"}, {"o"});
      },
      GENIE_ERR_UNKNOWN_OP, "unknown op 'matmull' (did you mean 'matmul'?)"));
  EXPECT_TRUE(fails_with([&] { g.add_node("reduce", "n", {"x"}, {"o"}); }, GENIE_ERR_UNKNOWN_OP,
                         "did you mean 'reduce_max', 'reduce_sum' or 'reduce_mean'?"));
  EXPECT_TRUE(fails_with([&] { g.add_node("qqqqqqqqqq", "n", {"x"}, {"o"}); }, GENIE_ERR_UNKNOWN_OP,
                         "docs/operators.md"));
  expect_unchanged();
  EXPECT_EQ(similar_op_names("layernorm"), (std::vector<std::string>{"layer_norm"}));
  EXPECT_EQ(similar_op_names("softmx").front(), "softmax");
  EXPECT_LE(similar_op_names("a").size(), 3u);
}

TEST_F(BuildTest, ArityErrorsAreInvalidGraph) {
  EXPECT_TRUE(
      fails_with([&] { g.add_node("add", "n", {"x"}, {"o"}); }, GENIE_ERR_INVALID_GRAPH, "takes 2 inputs"));
  EXPECT_TRUE(fails_with(
      [&] {
        g.add_node("linear", "n", {"x", "w", "w", "w"}, {"o"});
      },
      GENIE_ERR_INVALID_GRAPH, "2 to 3 inputs"));
  EXPECT_TRUE(
      fails_with([&] { g.add_node("concat", "n", {}, {"o"}); }, GENIE_ERR_INVALID_GRAPH, "1 or more"));
  EXPECT_TRUE(fails_with([&] { g.add_node("relu", "n", {"x"}, {}); }, GENIE_ERR_INVALID_GRAPH, "outputs"));
  EXPECT_TRUE(fails_with(
      [&] {
        g.add_node("relu", "n", {"x"}, {"a", "b"});
      },
      GENIE_ERR_INVALID_GRAPH, "outputs"));
  // "" only where the schema makes the input optional.
  EXPECT_TRUE(fails_with(
      [&] {
        g.add_node("linear", "n", {"", "w"}, {"o"});
      },
      GENIE_ERR_INVALID_GRAPH, "input 0 of linear is required"));
  EXPECT_TRUE(fails_with([&] { g.add_node("concat", "n", {"x", ""}, {"o"}); }, GENIE_ERR_INVALID_GRAPH));
  expect_unchanged();
  g.add_node("layer_norm", "ln", {"x", "", ""}, {"ln_out"});
  g.add_node("split", "sp", {"x"}, {"s0", "s1", "s2"});
  EXPECT_EQ(g.value(g.find_value("s2")).producer_slot, 2);
  EXPECT_EQ(g.value(g.find_value("s2")).producer, g.find_node("sp"));
}

TEST_F(BuildTest, SetAttrChecksNodeKeyAndType) {
  EXPECT_TRUE(fails_with([&] { g.set_attr("nope", "axis", int64_t{1}); }, GENIE_ERR_NOT_FOUND, "'nope'"));
  EXPECT_TRUE(fails_with([&] { g.set_attr("mm", "axis", int64_t{1}); }, GENIE_ERR_INVALID_ATTRIBUTE,
                         "matmul has no attribute 'axis' (it takes transpose_a, transpose_b)"));
  EXPECT_TRUE(fails_with([&] { g.set_attr("mm", "transpose_a", 1.0); }, GENIE_ERR_INVALID_ATTRIBUTE,
                         "must be int, got float"));
  EXPECT_TRUE(
      fails_with([&] { g.set_attr("mm", "transpose_a", std::string("1")); }, GENIE_ERR_INVALID_ATTRIBUTE));
  EXPECT_TRUE(fails_with([&] { g.set_attr("mm", "transpose_a", std::vector<int64_t>{1}); },
                         GENIE_ERR_INVALID_ATTRIBUTE));
  expect_unchanged();

  // An int is accepted for a float attribute and stored as a float.
  g.add_node("masked_fill", "mf", {"x", "m"}, {"mf_out"});
  g.set_attr("mf", "value", int64_t{3});
  const AttrValue& v = g.node(g.find_node("mf")).attrs.all().at("value");
  ASSERT_TRUE(std::holds_alternative<double>(v));
  EXPECT_EQ(std::get<double>(v), 3.0);
  EXPECT_TRUE(
      fails_with([&] { g.set_attr("mf", "value", std::vector<int64_t>{3}); }, GENIE_ERR_INVALID_ATTRIBUTE));
  g.add_node("cast", "c", {"x"}, {"c_out"});
  EXPECT_TRUE(fails_with([&] { g.set_attr("c", "dtype", std::string("f3\0", 3)); },
                         GENIE_ERR_INVALID_ATTRIBUTE, "NUL"));
  // A later set replaces the value.
  g.set_attr("mm", "transpose_b", int64_t{1});
  EXPECT_EQ(g.node(g.find_node("mm")).attrs.get_int("transpose_b", 0), 1);
}

TEST_F(BuildTest, MarkOutputTwiceIsInvalidGraph) {
  EXPECT_TRUE(fails_with([&] { g.mark_output("y"); }, GENIE_ERR_INVALID_GRAPH, "already marked"));
  expect_unchanged();
  g.mark_output("later");  // may name a value added afterwards
  g.mark_output("x");
  EXPECT_EQ(g.output_names(), (std::vector<std::string>{"y", "later", "x"}));
}

TEST_F(BuildTest, EveryMutationInvalidates) {
  const std::vector<std::function<void()>> mutations = {
      [&] { g.add_input("i2", DType::F32, {1}); },
      [&] { g.add_constant("c2", tensor(DType::F32, {1})); },
      [&] { g.add_node("relu", "r2", {"y"}, {"r2_out"}); },
      [&] { g.set_attr("mm", "transpose_a", int64_t{0}); },
      [&] { g.mark_output("x"); },
  };
  for (size_t i = 0; i < mutations.size(); ++i) {
    SCOPED_TRACE(i);
    g.validate();
    ASSERT_TRUE(g.validated());
    mutations[i]();
    EXPECT_FALSE(g.validated());
  }
}

TEST_F(BuildTest, LookupsAndValueRecords) {
  EXPECT_EQ(g.find_value("missing"), kNone);
  EXPECT_EQ(g.find_node("missing"), kNone);
  const Value& w = g.value(g.find_value("w"));
  EXPECT_EQ(w.kind, ValueKind::Constant);
  EXPECT_EQ(w.dtype, DType::F32);
  EXPECT_EQ(w.shape, (Shape{3, 4}));
  ASSERT_NE(w.constant, nullptr);
  EXPECT_EQ(w.constant->nbytes(), 48u);
  const Node& mm = g.node(g.find_node("mm"));
  EXPECT_EQ(mm.op, "matmul");
  EXPECT_EQ(mm.input_names, (std::vector<std::string>{"x", "w"}));
  EXPECT_EQ(g.value(mm.outputs.at(0)).name, "y");
  EXPECT_EQ(g.name(), "build");
}

TEST(EnumNames, RoundTrip) {
  for (int i = 0; i <= 4; ++i)
    EXPECT_EQ(phase_from_name(phase_name(static_cast<Phase>(i))), static_cast<Phase>(i));
  for (int i = 0; i <= 3; ++i)
    EXPECT_EQ(modality_from_name(modality_name(static_cast<Modality>(i))), static_cast<Modality>(i));
  for (int i = 0; i <= 5; ++i)
    EXPECT_EQ(role_from_name(role_name(static_cast<TensorRole>(i))), static_cast<TensorRole>(i));
  EXPECT_STREQ(phase_name(Phase::Decode), "decode");
  EXPECT_STREQ(modality_name(Modality::Vision), "vision");
  EXPECT_STREQ(role_name(TensorRole::KvCache), "kv_cache");
  EXPECT_STREQ(role_name(static_cast<TensorRole>(42)), "invalid");
  EXPECT_FALSE(phase_from_name("Prefill").has_value());
  EXPECT_FALSE(role_from_name("").has_value());
}

TEST(CheckName, Limits) {
  check_name("a", "graph name");
  EXPECT_TRUE(fails_with([] { check_name(std::string(256, 'g'), "graph name"); }, GENIE_ERR_INVALID_ARGUMENT,
                         "graph name is 256 bytes"));
  EXPECT_TRUE(fails_with([] { check_name("x\x01", "graph name"); }, GENIE_ERR_INVALID_ARGUMENT, "0x1"));
}

}  // namespace
}  // namespace genie
