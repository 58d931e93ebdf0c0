// Custom ops below the C API: the schema table (lookup, clashes, removal,
// spelling suggestions, free-form attributes), the cost model's use of a
// custom op's estimate, and the CPU backend resolving its kernel.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "exec/cpu/backend.hpp"
#include "exec/custom_kernels.hpp"
#include "exec/executor.hpp"
#include "graph/graph.hpp"
#include "graph/op_schema.hpp"
#include "sched/cost.hpp"

namespace genie {
namespace {

OpSchemaPtr twice_schema(const std::string& name) {
  auto s = std::make_shared<OpSchema>();
  s->name = name;
  s->custom = true;
  s->infer = [](const std::vector<ValueType>& in, const Attrs&) { return std::vector<ValueType>{in[0]}; };
  s->flops = [](const std::vector<ValueType>&, const std::vector<ValueType>& out, const Attrs&) {
    return 10.0 * static_cast<double>(numel(out[0].shape));
  };
  return s;
}

TEST(CustomOps, TableAddsFindsAndRemoves) {
  add_custom_op(twice_schema("unit.twice"));
  ASSERT_NE(find_op("unit.twice"), nullptr);
  EXPECT_TRUE(find_op("unit.twice")->custom);
  EXPECT_FALSE(find_op("relu")->custom);
  EXPECT_EQ(similar_op_names("unit.twize"), std::vector<std::string>{"unit.twice"});
  EXPECT_THROW(add_custom_op(twice_schema("unit.twice")), Error);  // a duplicate
  EXPECT_THROW(add_custom_op(twice_schema("relu")), Error);        // a built-in
  // A schema held by a validation in progress outlives its removal.
  OpSchemaPtr held = find_op("unit.twice");
  EXPECT_TRUE(remove_custom_op("unit.twice"));
  EXPECT_FALSE(remove_custom_op("unit.twice"));
  EXPECT_EQ(find_op("unit.twice"), nullptr);
  EXPECT_EQ(held->name, "unit.twice");
}

TEST(CustomOps, GraphsTakeAnyAttributeAndTheCostModelAsksTheOp) {
  add_custom_op(twice_schema("unit.cost"));
  Graph g;
  g.add_input("x", DType::F32, {4, 5});
  g.add_node("unit.cost", "n", {"x"}, {"y"});
  g.set_attr("n", "anything", std::string("goes"));
  g.set_attr("n", "alpha", int64_t{3});  // kept as given: no declared type to convert to
  g.mark_output("y");
  g.validate();
  EXPECT_EQ(std::get<int64_t>(g.node(0).attrs.all().at("alpha")), 3);
  EXPECT_DOUBLE_EQ(sched::op_cost(g, 0).flops, 200.0);
  remove_custom_op("unit.cost");
}

TEST(CustomOps, AGraphWithOneIsNeverTinyWork) {
  // Its kernel may take any time: it runs on an executor worker, never on
  // the submitting thread or a server's loop (Executor::is_tiny).
  add_custom_op(twice_schema("unit.small"));
  const auto relu_then = [](const char* op) {
    Graph g;
    g.add_input("x", DType::F32, {2});
    g.add_node("relu", "r", {"x"}, {"h"});
    g.add_node(op, "n", {"h"}, {"y"});
    g.mark_output("y");
    g.validate();
    return g;
  };
  const auto x = std::make_shared<TensorData>(DType::F32, Shape{2});
  const Graph custom = relu_then("unit.small");
  EXPECT_TRUE(custom.has_custom_ops());
  EXPECT_FALSE(Executor::is_tiny(custom, {x}));
  // The same graph with a built-in op in its place is.
  const Graph builtin = relu_then("neg");
  EXPECT_FALSE(builtin.has_custom_ops());
  EXPECT_TRUE(Executor::is_tiny(builtin, {x}));
  remove_custom_op("unit.small");
}

int g_calls = 0;

TEST(CustomOps, CpuBackendResolvesTheKernelThroughFindKernel) {
  cpu::CpuBackend be;
  EXPECT_EQ(be.find_kernel("unit.k"), nullptr);
  add_custom_kernel("cpu", "unit.k", std::make_shared<const CustomKernel>([](const KernelArgs&) { ++g_calls; }));
  EXPECT_THROW(add_custom_kernel("cpu", "unit.k", std::make_shared<const CustomKernel>([](const KernelArgs&) {})),
               Error);
  EXPECT_THROW(add_custom_kernel("nokind", "unit.k", std::make_shared<const CustomKernel>([](const KernelArgs&) {})),
               Error);
  KernelFn fn = be.find_kernel("unit.k");
  ASSERT_NE(fn, nullptr);
  const std::string op = "unit.k";
  Attrs attrs;
  std::vector<const TensorData*> in;
  std::vector<TensorData*> out;
  fn(KernelArgs{op, attrs, in, out});
  EXPECT_EQ(g_calls, 1);
  remove_custom_kernels("unit.k");
  EXPECT_EQ(be.find_kernel("unit.k"), nullptr);
  // A call through an entry taken before the removal fails cleanly.
  EXPECT_THROW(fn(KernelArgs{op, attrs, in, out}), Error);
  EXPECT_NE(be.find_kernel("relu"), nullptr);  // built-ins still found
}

}  // namespace
}  // namespace genie
