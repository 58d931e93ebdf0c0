// Cost model against hand-computed FLOPs and bytes.
#include <gtest/gtest.h>

#include "sched/cost.hpp"
#include "graph/op_schema.hpp"
#include "sched/plan.hpp"

namespace genie::sched {
namespace {

// A one-node graph: op over inputs of the given shapes (f32 unless given).
struct One {
  Graph g{"one"};
  explicit One(const std::string& op, std::vector<Shape> shapes, std::vector<std::pair<std::string, AttrValue>> attrs = {},
               std::vector<DType> dtypes = {}) {
    std::vector<std::string> names;
    for (size_t i = 0; i < shapes.size(); ++i) {
      names.push_back("i" + std::to_string(i));
      g.add_input(names.back(), i < dtypes.size() ? dtypes[i] : DType::F32, shapes[i]);
    }
    g.add_node(op, "n", names, {"o"});
    for (auto& [k, v] : attrs) g.set_attr("n", k, v);
    g.mark_output("o");
    g.validate();
  }
  OpCost cost() const { return op_cost(g, 0); }
  const Shape& out() const { return g.value(g.find_value("o")).shape; }
};

TEST(SchedCost, Matmul) {
  One m("matmul", {{100, 200}, {200, 300}});
  EXPECT_EQ(m.cost().flops, 12e6);  // 2 * 100 * 200 * 300
  EXPECT_EQ(m.cost().bytes_read, (100u * 200 + 200 * 300) * 4);
  EXPECT_EQ(m.cost().bytes_written, 100u * 300 * 4);
}

TEST(SchedCost, BatchedAndBroadcastMatmul) {
  EXPECT_EQ(One("matmul", {{8, 100, 200}, {8, 200, 300}}).cost().flops, 8 * 12e6);
  EXPECT_EQ(One("matmul", {{8, 100, 200}, {200, 300}}).cost().flops, 8 * 12e6);  // b broadcast over the batch
  One bc("matmul", {{2, 1, 64, 32}, {3, 32, 16}});                                 // batch dims [2,1] x [3] -> [2,3]
  ASSERT_EQ(bc.out(), (Shape{2, 3, 64, 16}));
  EXPECT_EQ(bc.cost().flops, 2.0 * 6 * 64 * 16 * 32);
  EXPECT_EQ(One("matmul", {{64, 32}, {16, 32}}, {{"transpose_b", int64_t{1}}}).cost().flops, 2.0 * 64 * 16 * 32);
  EXPECT_EQ(One("matmul", {{32, 64}, {32, 16}}, {{"transpose_a", int64_t{1}}}).cost().flops, 2.0 * 64 * 16 * 32);
  EXPECT_EQ(One("matmul", {{32}, {32, 16}}).cost().flops, 2.0 * 16 * 32);  // vector-matrix
  EXPECT_EQ(One("matmul", {{5, 64, 32}, {32}}).cost().flops, 2.0 * 5 * 64 * 32);  // matrix-vector
}

TEST(SchedCost, Linear) {
  One l("linear", {{4, 10, 64}, {32, 64}, {32}});
  EXPECT_EQ(l.cost().flops, 2.0 * 40 * 32 * 64 + 40 * 32);
  EXPECT_EQ(One("linear", {{4, 10, 64}, {32, 64}}).cost().flops, 2.0 * 40 * 32 * 64);
}

TEST(SchedCost, Conv2d) {
  One c("conv2d", {{1, 3, 32, 32}, {16, 3, 3, 3}}, {{"padding", std::vector<int64_t>{1, 1}}});
  ASSERT_EQ(c.out(), (Shape{1, 16, 32, 32}));
  EXPECT_EQ(c.cost().flops, 2.0 * 16 * 32 * 32 * 27);  // 884736
  One s("conv2d", {{2, 3, 224, 224}, {64, 3, 7, 7}, {64}},
        {{"stride", std::vector<int64_t>{2, 2}}, {"padding", std::vector<int64_t>{3, 3}}});
  ASSERT_EQ(s.out(), (Shape{2, 64, 112, 112}));
  EXPECT_EQ(s.cost().flops, 2.0 * 2 * 64 * 112 * 112 * 3 * 49 + 2.0 * 64 * 112 * 112);
  One dw("conv2d", {{1, 8, 16, 16}, {8, 1, 3, 3}}, {{"padding", std::vector<int64_t>{1, 1}}, {"groups", int64_t{8}}});
  EXPECT_EQ(dw.cost().flops, 2.0 * 8 * 16 * 16 * 9);  // depthwise: C/groups = 1
}

TEST(SchedCost, Attention) {
  // scores = 2*4*8*24 = 1536: two matmuls, then scale + softmax (1 + 5 per score).
  One a("attention", {{2, 4, 8, 16}, {2, 4, 24, 16}, {2, 4, 24, 32}});
  const double scores = 2 * 4 * 8 * 24;
  EXPECT_EQ(a.cost().flops, 2 * scores * 16 + 2 * scores * 32 + 6 * scores);
  One m("attention", {{2, 4, 8, 16}, {2, 4, 24, 16}, {2, 4, 24, 32}, {8, 24}});
  EXPECT_EQ(m.cost().flops, 2 * scores * 16 + 2 * scores * 32 + 7 * scores);  // + the mask add
  EXPECT_EQ(a.cost().bytes_read, (2u * 4 * 8 * 16 + 2 * 4 * 24 * 16 + 2 * 4 * 24 * 32) * 4);
  EXPECT_EQ(a.cost().bytes_written, 2u * 4 * 8 * 32 * 4);
}

TEST(SchedCost, ElementwiseNormsAndLayout) {
  EXPECT_EQ(One("add", {{10, 20}, {20}}).cost().flops, 200);
  EXPECT_EQ(One("add", {{10, 20}, {20}}).cost().bytes(), (200u + 20 + 200) * 4);
  EXPECT_EQ(One("gelu", {{10, 20}}).cost().flops, 8 * 200);
  EXPECT_EQ(One("softmax", {{10, 20}}).cost().flops, 5 * 200);
  EXPECT_EQ(One("layer_norm", {{10, 20}}).cost().flops, 8 * 200);
  EXPECT_EQ(One("rms_norm", {{10, 20}}).cost().flops, 5 * 200);
  EXPECT_EQ(One("reduce_sum", {{10, 20}}, {{"axes", std::vector<int64_t>{1}}}).cost().flops, 200);
  One r("reshape", {{10, 20}}, {{"shape", std::vector<int64_t>{200}}});
  EXPECT_EQ(r.cost().flops, 0);
  EXPECT_EQ(r.cost().bytes(), 0u);  // a view
  One t("transpose", {{10, 20}});
  EXPECT_EQ(t.cost().bytes(), 2u * 200 * 4);  // a copy
  One sl("slice", {{10, 20}}, {{"axis", int64_t{1}}, {"end", int64_t{5}}});
  EXPECT_EQ(sl.cost().bytes(), 2u * 50 * 4);  // reads only what it keeps
  One p("max_pool2d", {{1, 4, 8, 8}}, {{"kernel", std::vector<int64_t>{2, 2}}});
  EXPECT_EQ(p.cost().flops, 4.0 * 4 * 4 * 4);
}

TEST(SchedCost, EmbeddingReadsOnlyTheRows) {
  One e("embedding", {{4, 1}, {50000, 128}}, {}, {DType::I64, DType::F32});
  EXPECT_EQ(e.cost().bytes_read, 4u * 8 + 4 * 128 * 4);  // the ids and 4 rows, not the 25 MB table
  EXPECT_EQ(e.cost().bytes_written, 4u * 128 * 4);
  EXPECT_EQ(e.cost().flops, 0);
}

TEST(SchedCost, EveryOperatorHasAFormula) {
  // Every operator of docs/operators.md has its own formula, none falls back
  // to the custom-op rule.
  const std::vector<std::string> ops = op_names();
  EXPECT_GE(ops.size(), 40u);
  for (const std::string& op : ops) EXPECT_TRUE(cost_model_knows(op)) << op;
  EXPECT_FALSE(cost_model_knows("my_custom_op"));
}

TEST(SchedCost, Roofline) {
  DeviceProfile d;
  d.peak_flops = 1e9;
  d.mem_bw_bytes_per_s = 1e9;
  d.op_overhead_s = 1e-6;
  OpCost compute{2e6, 1000, 0};
  EXPECT_DOUBLE_EQ(predict_seconds(compute, d), 2e-3 + 1e-6);
  OpCost memory{10, 3000000, 1000000};
  EXPECT_DOUBLE_EQ(predict_seconds(memory, d), 4e-3 + 1e-6);
}

}  // namespace
}  // namespace genie::sched
