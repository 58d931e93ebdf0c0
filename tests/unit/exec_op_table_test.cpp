// The op table (src/graph/op_table.def) against every layer linked here: each
// line has a schema with its shape rule, a CPU kernel, and a cost rule; no
// schema, CPU kernel or scheduler class exists without a line. The CUDA
// kernels and the frontends' ops are checked from their sources by
// scripts/check-op-table.py (tests/scripts/op_table_test.sh), since the CUDA
// plugin is not linked into the tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "exec/cpu/kernels.hpp"
#include "exec/cpu/registry.hpp"
#include "graph/op_schema.hpp"
#include "graph/op_table.hpp"
#include "sched/cost.hpp"
#include "sched/graph_view.hpp"

namespace genie {
namespace {

TEST(OpTable, EveryLineHasASchemaACpuKernelAndACostRule) {
  const std::vector<std::string>& ops = op_table_names();
  ASSERT_GE(ops.size(), 40u);
  for (const std::string& op : ops) {
    const OpSchema* s = find_builtin_op(op);
    ASSERT_NE(s, nullptr) << op << ": no schema";
    EXPECT_TRUE(static_cast<bool>(s->infer)) << op << ": no shape rule";
    EXPECT_NE(cpu::find_kernel(op), nullptr) << op << ": no CPU kernel";
    EXPECT_NE(sched::op_code(op), sched::OpCode::Other) << op << ": no scheduler class";
    EXPECT_TRUE(sched::cost_model_knows(op)) << op << ": no cost rule";
  }
}

TEST(OpTable, NoOpOutsideTheTable) {
  const std::vector<std::string>& listed = op_table_names();
  const std::set<std::string> table(listed.begin(), listed.end());
  EXPECT_EQ(table.size(), listed.size()) << "a line appears twice";
  const std::vector<std::string> schemas = builtin_op_names();
  EXPECT_EQ(std::set<std::string>(schemas.begin(), schemas.end()), table);
  const std::vector<std::string> kernels = cpu::kernel_names();
  EXPECT_EQ(std::set<std::string>(kernels.begin(), kernels.end()), table) << "a CPU kernel without a line";
  // The CPU and the scheduler know nothing the table does not list.
  for (const char* unknown : {"not_an_op", "matmul2", "Relu"}) {
    EXPECT_EQ(cpu::find_kernel(unknown), nullptr) << unknown;
    EXPECT_EQ(sched::op_code(unknown), sched::OpCode::Other) << unknown;
  }
}

}  // namespace
}  // namespace genie
