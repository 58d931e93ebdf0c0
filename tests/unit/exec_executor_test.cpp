// The executor: dependency order, parallelism, freeing intermediates after
// their last use, error propagation, outputs that never alias inputs, and
// the inline path (run_inline) agreeing with the pool.
#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <set>

#include "core/error.hpp"
#include "exec/executor.hpp"
#include "graph/graph.hpp"

namespace genie {
namespace {

TensorPtr filled(Shape s, float v) {
  auto t = std::make_shared<TensorData>(DType::F32, std::move(s));
  for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] = v;
  return t;
}

ExecResult run_sync(Executor& ex, const std::shared_ptr<Graph>& g, std::vector<TensorPtr> in) {
  std::promise<ExecResult> p;
  auto fut = p.get_future();
  int calls = 0;
  ex.run(g, std::move(in), [&](ExecResult&& r) {
    ++calls;
    p.set_value(std::move(r));
  });
  ExecResult r = fut.get();
  ex.wait_idle();
  EXPECT_EQ(calls, 1);
  return r;
}

TEST(Executor, DiamondRunsInDependencyOrder) {
  // b = relu(a); c = add(a, a); d = mul(b, c)  ->  d = relu(a) * 2a
  auto g = std::make_shared<Graph>("diamond");
  g->add_input("a", DType::F32, {4});
  g->add_node("relu", "n1", {"a"}, {"b"});
  g->add_node("add", "n2", {"a", "a"}, {"c"});
  g->add_node("mul", "n3", {"b", "c"}, {"d"});
  g->mark_output("d");
  g->validate();
  auto a = std::make_shared<TensorData>(DType::F32, Shape{4});
  const float in[4] = {-1.f, 0.5f, 2.f, -3.f};
  for (int i = 0; i < 4; ++i) a->data<float>()[i] = in[i];
  Executor ex(2);
  ExecResult r = run_sync(ex, g, {a});
  ASSERT_EQ(r.status, GENIE_OK) << r.detail;
  ASSERT_EQ(r.outputs.size(), 1u);
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(r.outputs[0]->data<float>()[i], std::max(in[i], 0.f) * 2 * in[i]);
  // Every node ran after all of its producers finished.
  ASSERT_EQ(r.trace.size(), 3u);
  EXPECT_GE(r.trace[2].start_ns, r.trace[0].end_ns);
  EXPECT_GE(r.trace[2].start_ns, r.trace[1].end_ns);
}

// A chain of 24 elementwise nodes over 1 MiB tensors: holding every
// intermediate would need 24 MiB; freeing after last use needs a few.
// Returns the peak of live tensor bytes while `run` executes it.
template <class Run>
size_t chain_peak_bytes(Run&& run) {
  constexpr int kLen = 24;
  const Shape s{256, 1024};
  auto g = std::make_shared<Graph>("chain");
  g->add_input("v0", DType::F32, s);
  for (int i = 0; i < kLen; ++i)
    g->add_node("relu", "n" + std::to_string(i), {"v" + std::to_string(i)}, {"v" + std::to_string(i + 1)});
  g->mark_output("v" + std::to_string(kLen));
  g->validate();
  auto in = filled(s, 1.f);
  tensor_bytes_reset_peak();
  const size_t before = tensor_bytes_live();
  ExecResult r = run(g, in);
  EXPECT_EQ(r.status, GENIE_OK) << r.detail;
  return tensor_bytes_peak() - before;
}

constexpr size_t kChainMiB = 256 * 1024 * 4;

TEST(Executor, FreesIntermediatesAfterLastUse) {
  Executor ex(2);
  const size_t peak = chain_peak_bytes([&](auto g, auto in) { return run_sync(ex, g, {in}); });
  EXPECT_LE(peak, 3 * kChainMiB) << "peak " << peak << " bytes: intermediates were not freed";
  EXPECT_GE(peak, kChainMiB);
}

TEST(Executor, RunsIndependentNodesInParallel) {
  // Two independent branches of large matmuls on a 2-worker pool: both
  // workers take part (the second branch does not wait for the first).
  const Shape s{512, 512};
  auto g = std::make_shared<Graph>("branches");
  g->add_input("x", DType::F32, s);
  g->add_input("y", DType::F32, s);
  for (const char* b : {"x", "y"}) {
    std::string prev = b;
    for (int i = 0; i < 4; ++i) {
      const std::string next = std::string(b) + std::to_string(i);
      g->add_node("matmul", "mm_" + next, {prev, prev}, {next});
      prev = next;
    }
    g->mark_output(prev);
  }
  g->validate();
  Executor ex(2);
  ExecResult r = run_sync(ex, g, {filled(s, 0.01f), filled(s, 0.02f)});
  ASSERT_EQ(r.status, GENIE_OK) << r.detail;
  std::set<int> workers;
  for (const NodeTrace& t : r.trace) workers.insert(t.worker);
  EXPECT_EQ(workers.size(), 2u);
  EXPECT_EQ(workers.count(-1), 0u);
}

TEST(Executor, ReportsTheFailingNodeAndSkipsDependents) {
  auto g = std::make_shared<Graph>("fail");
  g->add_input("ids", DType::I64, {2});
  g->add_input("table", DType::F32, {3, 2});
  g->add_node("embedding", "lookup", {"ids", "table"}, {"e"});
  g->add_node("relu", "after", {"e"}, {"r"});
  g->mark_output("r");
  g->validate();
  auto ids = std::make_shared<TensorData>(DType::I64, Shape{2});
  ids->data<int64_t>()[1] = 99;
  Executor ex(2);
  ExecResult r = run_sync(ex, g, {ids, filled({3, 2}, 1.f)});
  EXPECT_EQ(r.status, GENIE_ERR_INVALID_ARGUMENT);
  EXPECT_NE(r.detail.find("lookup"), std::string::npos) << r.detail;
  EXPECT_TRUE(r.outputs.empty());
}

TEST(Executor, OutputThatIsAnInputIsCopied) {
  auto g = std::make_shared<Graph>("identity");
  g->add_input("a", DType::F32, {3});
  g->mark_output("a");
  g->validate();
  auto a = filled({3}, 2.f);
  Executor ex(1);
  ExecResult r = run_sync(ex, g, {a});
  ASSERT_EQ(r.status, GENIE_OK) << r.detail;
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_NE(r.outputs[0].get(), a.get());
  EXPECT_EQ(r.outputs[0]->data<float>()[2], 2.f);
}

TEST(Executor, ReducedPrecisionStorageComputesInF32) {
  auto g = std::make_shared<Graph>("bf16");
  g->add_input("a", DType::BF16, {2});
  g->add_node("add", "n", {"a", "a"}, {"b"});
  g->mark_output("b");
  g->validate();
  auto a = std::make_shared<TensorData>(DType::BF16, Shape{2});
  a->data<uint16_t>()[0] = f32_to_bf16(1.5f);
  a->data<uint16_t>()[1] = f32_to_bf16(-0.25f);
  Executor ex(1);
  ExecResult r = run_sync(ex, g, {a});
  ASSERT_EQ(r.status, GENIE_OK) << r.detail;
  EXPECT_EQ(r.outputs[0]->dtype(), DType::BF16);
  EXPECT_EQ(bf16_to_f32(r.outputs[0]->data<uint16_t>()[0]), 3.f);
  EXPECT_EQ(bf16_to_f32(r.outputs[0]->data<uint16_t>()[1]), -0.5f);
}

// Every input, graph and expected behaviour of the pooled tests, run both
// ways: run_inline shares the node code, so results agree bit for bit.
TEST(Executor, InlineRunGivesThePooledResults) {
  struct Case {
    std::shared_ptr<Graph> g;
    std::vector<TensorPtr> in;
  };
  std::vector<Case> cases;
  {
    auto g = std::make_shared<Graph>("diamond");
    g->add_input("a", DType::F32, {4});
    g->add_node("relu", "n1", {"a"}, {"b"});
    g->add_node("add", "n2", {"a", "a"}, {"c"});
    g->add_node("mul", "n3", {"b", "c"}, {"d"});
    g->add_node("softmax", "n4", {"d"}, {"e"});
    g->mark_output("e");
    g->mark_output("d");
    g->validate();
    auto a = std::make_shared<TensorData>(DType::F32, Shape{4});
    const float in[4] = {-1.f, 0.5f, 2.f, -3.f};
    for (int i = 0; i < 4; ++i) a->data<float>()[i] = in[i];
    cases.push_back({g, {a}});
  }
  {
    auto g = std::make_shared<Graph>("bf16");
    g->add_input("a", DType::BF16, {2});
    g->add_node("add", "n", {"a", "a"}, {"b"});
    g->mark_output("b");
    g->validate();
    auto a = std::make_shared<TensorData>(DType::BF16, Shape{2});
    a->data<uint16_t>()[0] = f32_to_bf16(1.5f);
    a->data<uint16_t>()[1] = f32_to_bf16(-0.25f);
    cases.push_back({g, {a}});
  }
  {
    auto g = std::make_shared<Graph>("identity_and_constant");
    g->add_input("a", DType::F32, {3});
    g->add_constant("k", filled({3}, 0.5f));
    g->add_node("sub", "n", {"a", "k"}, {"b"});
    g->mark_output("a");
    g->mark_output("k");
    g->mark_output("b");
    g->validate();
    cases.push_back({g, {filled({3}, 2.f)}});
  }
  {
    auto g = std::make_shared<Graph>("matmul_chain");
    g->add_input("x", DType::F32, {8, 8});
    g->add_node("matmul", "m1", {"x", "x"}, {"y"});
    g->add_node("gelu", "g", {"y"}, {"z"});
    g->add_node("matmul", "m2", {"z", "x"}, {"w"});
    g->mark_output("w");
    g->validate();
    auto x = std::make_shared<TensorData>(DType::F32, Shape{8, 8});
    for (int i = 0; i < 64; ++i) x->data<float>()[i] = 0.01f * static_cast<float>(i % 13) - 0.05f;
    cases.push_back({g, {x}});
  }
  {
    auto g = std::make_shared<Graph>("fail");
    g->add_input("ids", DType::I64, {2});
    g->add_input("table", DType::F32, {3, 2});
    g->add_node("embedding", "lookup", {"ids", "table"}, {"e"});
    g->add_node("relu", "after", {"e"}, {"r"});
    g->mark_output("r");
    g->validate();
    auto ids = std::make_shared<TensorData>(DType::I64, Shape{2});
    ids->data<int64_t>()[1] = 99;
    cases.push_back({g, {ids, filled({3, 2}, 1.f)}});
  }
  Executor ex(2);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.g->name());
    const ExecResult pooled = run_sync(ex, c.g, c.in);
    const ExecResult in_line = ex.run_inline(c.g, c.in);
    EXPECT_EQ(in_line.status, pooled.status);
    EXPECT_EQ(in_line.detail, pooled.detail);
    ASSERT_EQ(in_line.outputs.size(), pooled.outputs.size());
    for (size_t i = 0; i < pooled.outputs.size(); ++i) {
      const TensorData& a = *in_line.outputs[i];
      const TensorData& b = *pooled.outputs[i];
      EXPECT_EQ(a.dtype(), b.dtype());
      EXPECT_EQ(a.shape(), b.shape());
      ASSERT_EQ(a.nbytes(), b.nbytes());
      EXPECT_EQ(std::memcmp(a.bytes(), b.bytes(), a.nbytes()), 0) << "output " << i;
      // Outputs never alias the caller's inputs (or the graph's constants).
      for (const TensorPtr& t : c.in) EXPECT_NE(in_line.outputs[i].get(), t.get());
    }
    // Every node ran (or was skipped after the failure), on this thread.
    ASSERT_EQ(in_line.trace.size(), c.g->nodes().size());
    for (const NodeTrace& t : in_line.trace) {
      EXPECT_NE(t.node, kNone);
      EXPECT_EQ(t.worker, -1);
    }
    // Timed on one clock in order: each node starts when the one before it
    // ended, and the run ends with the last.
    uint64_t last_end = 0;
    for (NodeId n : c.g->topo_order()) {
      const NodeTrace& t = in_line.trace[static_cast<size_t>(n)];
      EXPECT_EQ(t.start_ns, last_end);
      EXPECT_GE(t.end_ns, t.start_ns);
      last_end = t.end_ns;
    }
    EXPECT_EQ(in_line.exec_ns, last_end);
  }
}

TEST(Executor, InlineRunFreesIntermediatesAfterLastUse) {
  Executor ex(1);
  const size_t peak = chain_peak_bytes([&](auto g, auto in) { return ex.run_inline(g, {in}); });
  EXPECT_LE(peak, 3 * kChainMiB) << "peak " << peak << " bytes: intermediates were not freed";
  EXPECT_GE(peak, kChainMiB);
}

TEST(Executor, TinyMeansFewElementsAndNoHeavyOps) {
  const auto relu_of = [](const Shape& s) {
    auto g = std::make_shared<Graph>("relu");
    g->add_input("x", DType::F32, {-1});
    g->add_node("relu", "r", {"x"}, {"y"});
    g->mark_output("y");
    std::unordered_map<ValueId, Shape> shapes{{g->find_value("x"), s}};
    g->validate(&shapes);
    return g;
  };
  // Inputs count with their bound size: input and output elements per node.
  const int64_t half = Executor::kTinyElements / 2;
  auto small = relu_of({half});
  EXPECT_TRUE(Executor::is_tiny(*small, {filled({half}, 1.f)}));
  auto big = relu_of({half + 1});
  EXPECT_FALSE(Executor::is_tiny(*big, {filled({half + 1}, 1.f)}));
  // A reduction of a large input to one number is not tiny work.
  auto sum = std::make_shared<Graph>("sum");
  sum->add_input("x", DType::F32, {Executor::kTinyElements});
  sum->add_node("reduce_sum", "s", {"x"}, {"y"});
  sum->mark_output("y");
  sum->validate();
  EXPECT_FALSE(Executor::is_tiny(*sum, {filled({Executor::kTinyElements}, 1.f)}));
  // A matmul is never tiny, however small.
  auto mm = std::make_shared<Graph>("mm");
  mm->add_input("a", DType::F32, {2, 2});
  mm->add_node("matmul", "m", {"a", "a"}, {"b"});
  mm->mark_output("b");
  mm->validate();
  EXPECT_FALSE(Executor::is_tiny(*mm, {filled({2, 2}, 1.f)}));
}


// relu -> reshape [8,4] -> mul by itself -> reshape [32] -> add: reshapes in
// the middle of a chain, the last node a graph output.
std::shared_ptr<Graph> reshape_chain() {
  auto g = std::make_shared<Graph>("reshapes");
  g->add_input("a", DType::F32, {4, 8});
  g->add_node("relu", "r", {"a"}, {"b"});
  g->add_node("reshape", "v1", {"b"}, {"c"});
  g->set_attr("v1", "shape", std::vector<int64_t>{8, 4});
  g->add_node("mul", "m", {"c", "c"}, {"d"});
  g->add_node("reshape", "v2", {"d"}, {"e"});
  g->set_attr("v2", "shape", std::vector<int64_t>{32});
  g->add_node("add", "s", {"e", "e"}, {"f"});
  g->mark_output("f");
  g->validate();
  return g;
}

TensorPtr ramp(Shape s, float from) {
  auto t = std::make_shared<TensorData>(DType::F32, std::move(s));
  for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] = from + static_cast<float>(i);
  return t;
}

void expect_reshape_chain(const ExecResult& r, const TensorData& a) {
  ASSERT_EQ(r.status, GENIE_OK) << r.detail;
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0]->shape(), (Shape{32}));
  for (int64_t i = 0; i < 32; ++i) {
    const float b = std::max(a.data<float>()[i], 0.f);
    EXPECT_FLOAT_EQ(r.outputs[0]->data<float>()[i], 2 * b * b) << i;
  }
}

TEST(Executor, SecondRunOfAGraphAllocatesNothing) {
  auto g = reshape_chain();
  Executor ex(2);
  auto a1 = ramp({4, 8}, -10.f);
  const size_t live_before = tensor_bytes_live();
  {
    ExecResult r = run_sync(ex, g, {a1});
    expect_reshape_chain(r, *a1);
  }
  // Every output buffer went back to the pool; none is counted as live.
  EXPECT_EQ(tensor_bytes_live(), live_before);
  const BufferPool::Stats first = ex.buffers().stats();
  EXPECT_GT(first.fresh, 0u);
  EXPECT_GT(first.idle_bytes, 0u);
  for (float from : {-3.f, 5.f}) {
    auto a = ramp({4, 8}, from);
    ExecResult r = run_sync(ex, g, {a});
    expect_reshape_chain(r, *a);
  }
  const BufferPool::Stats later = ex.buffers().stats();
  EXPECT_EQ(later.fresh, first.fresh) << "a later run of the same graph allocated";
  EXPECT_GT(later.reused, first.reused);
  // The inline path draws on the same pool.
  auto a3 = ramp({4, 8}, -20.f);
  expect_reshape_chain(ex.run_inline(g, {a3}), *a3);
  EXPECT_EQ(ex.buffers().stats().fresh, first.fresh);
  ex.buffers().trim();
  EXPECT_EQ(ex.buffers().stats().idle_bytes, 0u);
}

TEST(Executor, ReshapeInsideTheGraphSharesBytes) {
  // relu, mul and add each take one buffer; the two reshapes take none.
  auto g = reshape_chain();
  Executor ex(1);
  auto a = ramp({4, 8}, -10.f);
  expect_reshape_chain(ex.run_inline(g, {a}), *a);
  const BufferPool::Stats st = ex.buffers().stats();
  EXPECT_EQ(st.fresh + st.reused, 3u);
}

TEST(Executor, ReshapeThatIsAGraphOutputOwnsItsBytes) {
  auto g = std::make_shared<Graph>("reshape_out");
  g->add_input("a", DType::F32, {2, 3});
  g->add_node("relu", "r", {"a"}, {"b"});
  g->add_node("reshape", "v", {"b"}, {"c"});
  g->set_attr("v", "shape", std::vector<int64_t>{6});
  g->add_node("reshape", "w", {"a"}, {"d"});
  g->set_attr("w", "shape", std::vector<int64_t>{3, 2});
  g->mark_output("b");
  g->mark_output("c");
  g->mark_output("d");
  g->validate();
  Executor ex(1);
  auto a = ramp({2, 3}, -2.f);
  ExecResult r = ex.run_inline(g, {a});
  ASSERT_EQ(r.status, GENIE_OK) << r.detail;
  ASSERT_EQ(r.outputs.size(), 3u);
  EXPECT_NE(r.outputs[1]->bytes(), r.outputs[0]->bytes());
  EXPECT_NE(r.outputs[2]->bytes(), a->bytes());
  r.outputs[0]->data<float>()[5] = 99.f;
  a->data<float>()[0] = 42.f;
  EXPECT_FLOAT_EQ(r.outputs[1]->data<float>()[5], 3.f);
  EXPECT_FLOAT_EQ(r.outputs[2]->data<float>()[0], -2.f);
}

// A tensor on a buffer of `pool`, as the CPU backend makes node outputs.
TensorPtr pooled(BufferPool& pool, DType dtype, const Shape& shape) {
  return std::make_shared<TensorData>(dtype, shape, pool.take(byte_size(shape, dtype_size(dtype))), true);
}

TEST(BufferPool, ReusesBuffersOfTheSameSizeAndOutlivesNothing) {
  auto pool = BufferPool::create(1 << 20);
  const size_t live = tensor_bytes_live();
  TensorPtr t = pooled(*pool, DType::F32, {100});
  EXPECT_EQ(tensor_bytes_live(), live + 400);
  std::byte* first = t->bytes();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
  t.reset();
  EXPECT_EQ(tensor_bytes_live(), live);
  EXPECT_GT(pool->stats().idle_bytes, 0u);
  TensorPtr u = pooled(*pool, DType::I32, {10, 10});  // same byte size: the same buffer
  EXPECT_EQ(u->bytes(), first);
  EXPECT_EQ(pool->stats().fresh, 1u);
  EXPECT_EQ(pool->stats().reused, 1u);
  TensorPtr v = pooled(*pool, DType::F32, {1000});  // another size: a fresh one
  EXPECT_EQ(pool->stats().fresh, 2u);
  // Over the idle cap: freed, not kept.
  TensorPtr big = pooled(*pool, DType::F32, {1 << 20});
  big.reset();
  EXPECT_LE(pool->stats().idle_bytes, size_t{1} << 20);
  // A tensor outliving its pool frees its buffer itself (LSan checks).
  pool.reset();
  u.reset();
  v.reset();
  EXPECT_EQ(tensor_bytes_live(), live);
}

TEST(BufferPool, BadShapesFailCleanly) {
  auto pool = BufferPool::create();
  EXPECT_THROW(pooled(*pool, DType::F32, {int64_t{1} << 62, int64_t{1} << 62}), Error);
  EXPECT_EQ(pool->stats().fresh, 0u);
}

}  // namespace
}  // namespace genie
