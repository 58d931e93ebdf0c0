// What a run holds (exec/run_memory.hpp), against hand-computed figures.
#include "exec/run_memory.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"

namespace genie {
namespace {

// x f32[N] -> relu a -> relu b -> relu c (output): a dies after b, b after c.
TEST(RunMemory, ChainFreesAfterLastConsumer) {
  Graph g("chain");
  g.add_input("x", DType::F32, {1024});
  g.add_node("relu", "n1", {"x"}, {"a"});
  g.add_node("relu", "n2", {"a"}, {"b"});
  g.add_node("relu", "n3", {"b"}, {"c"});
  g.mark_output("c");
  g.validate();
  const RunMemory m = run_memory(g);
  EXPECT_EQ(m.outputs, 4096u);
  EXPECT_EQ(m.num_outputs, 1u);
  EXPECT_EQ(m.peak, 2 * 4096u);  // two values alive at once, never three
  EXPECT_NE(m.describe(g).find("graph 'chain'"), std::string::npos);
}

// An outer product: 128 KiB of inputs, 4 GiB of output.
TEST(RunMemory, OuterProductOutputCounts) {
  Graph g("outer");
  g.add_input("x", DType::F32, {32768, 1});
  g.add_input("y", DType::F32, {1, 32768});
  g.add_node("matmul", "mm", {"x", "y"}, {"z"});
  g.mark_output("z");
  g.validate();
  const RunMemory m = run_memory(g);
  EXPECT_EQ(m.peak, uint64_t{4} << 30);
  EXPECT_EQ(m.outputs, uint64_t{4} << 30);
  EXPECT_EQ(g.value(m.largest).name, "z");
  EXPECT_NE(m.describe(g).find("'z' f32[32768, 32768]"), std::string::npos) << m.describe(g);
}

// Two branches alive together, and an output kept to the end.
TEST(RunMemory, FanOutKeepsBothBranchesAndOutputs) {
  Graph g("fan");
  g.add_input("x", DType::F32, {256});
  g.add_node("relu", "a", {"x"}, {"p"});         // 1 KiB, output
  g.add_node("relu", "b", {"x"}, {"q"});         // 1 KiB
  g.add_node("add", "c", {"p", "q"}, {"r"});     // 1 KiB, output
  g.mark_output("p");
  g.mark_output("r");
  g.validate();
  const RunMemory m = run_memory(g);
  EXPECT_EQ(m.outputs, 2048u);
  EXPECT_EQ(m.peak, 3072u);
}

TEST(RunMemory, NeedsAValidatedGraph) {
  Graph g("raw");
  g.add_input("x", DType::F32, {4});
  EXPECT_THROW(run_memory(g), Error);
}

}  // namespace
}  // namespace genie
