// Intra-op parallelism: Parallel::for_range covers its range exactly once and
// really runs on several threads; every kernel that splits its work gives
// the same bits as its serial loop (odd sizes, remainder rows and
// elements); the executor splits a large node and leaves a small one alone.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "exec/cpu/kernels.hpp"
#include "exec/executor.hpp"
#include "exec/parallel.hpp"
#include "exec/thread_pool.hpp"
#include "exec_cpu_testing.hpp"
#include "graph/graph.hpp"

namespace genie {
namespace {

using cpu::testing::attrs;
using cpu::testing::OutSpec;
using cpu::testing::random_f32;
using cpu::testing::Tensor;

// Until every worker waits for a task (helpers of an earlier split may still
// be on their way out), so that the next split finds them idle.
void wait_all_idle(ThreadPool& pool) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (pool.idle_workers() < pool.size()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "workers never became idle";
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

TEST(Parallel, CoversTheRangeOnceInChunksOfAtLeastTheGrain) {
  ThreadPool pool(3);
  Parallel par(&pool);
  for (int64_t n : {1, 2, 7, 64, 100, 1001, 4099, 65537}) {
    for (int64_t grain : {1, 3, 16, 1000}) {
      wait_all_idle(pool);
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::mutex mu;
      std::vector<std::pair<int64_t, int64_t>> ranges;
      par.for_range(n, grain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        std::lock_guard<std::mutex> lk(mu);
        ranges.emplace_back(b, e);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << n << "/" << grain;
      for (const auto& [b, e] : ranges) {
        EXPECT_LT(b, e);
        if (e != n) EXPECT_GE(e - b, grain) << "a chunk other than the last is below the grain";
      }
      if (n < 2 * grain) EXPECT_EQ(ranges.size(), 1u) << "small work must not be split";
    }
  }
  EXPECT_GT(par.stats().splits, 0u);
  EXPECT_GE(par.stats().chunks, 2 * par.stats().splits);
}

TEST(Parallel, ChunksRunOnSeveralThreadsAtOnce) {
  // The first chunk waits until another thread has run a chunk: it can only
  // return if a helper really took part while the caller was busy.
  ThreadPool pool(2);
  Parallel par(&pool);
  wait_all_idle(pool);
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> helped{false};
  std::atomic<bool> timed_out{false};
  par.for_range(64, 1, [&](int64_t b, int64_t) {
    if (std::this_thread::get_id() != caller) {
      helped = true;
      return;
    }
    if (b != 0) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!helped && !timed_out) {
      if (std::chrono::steady_clock::now() > deadline) timed_out = true;
      std::this_thread::yield();
    }
  });
  EXPECT_TRUE(helped.load());
  EXPECT_FALSE(timed_out.load()) << "no worker ran a chunk while the caller was busy";
  EXPECT_GT(par.stats().helper_chunks, 0u);
}

TEST(Parallel, RethrowsAChunksErrorAfterAllChunks) {
  ThreadPool pool(2);
  Parallel par(&pool);
  std::atomic<int> done{0};
  EXPECT_THROW(par.for_range(100, 1,
                             [&](int64_t b, int64_t e) {
                               done += static_cast<int>(e - b);
                               if (b == 0) throw std::runtime_error("chunk failed");
                             }),
               std::runtime_error);
  EXPECT_EQ(done.load(), 100);
}

TEST(Parallel, OneWorkerOrNoPoolRunsSerially) {
  ThreadPool one(1);
  Parallel p1(&one);
  Parallel p0(nullptr);
  for (const Parallel* p : {&p1, &p0}) {
    int calls = 0;
    p->for_range(1 << 20, 1, [&](int64_t b, int64_t e) {
      ++calls;
      EXPECT_EQ(b, 0);
      EXPECT_EQ(e, 1 << 20);
    });
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(p->stats().splits, 0u);
  }
}

// One kernel run serially and split over three workers; the outputs must be
// the same bits and the split must really have happened.
class KernelSplit : public ::testing::Test {
 protected:
  ThreadPool pool_{3};
  Parallel par_{&pool_};
  std::mt19937 rng_{1234};

  std::vector<Tensor> run(const std::string& op, const Attrs& at, const std::vector<const TensorData*>& in,
                          const std::vector<OutSpec>& outs, const Parallel* par) {
    cpu::KernelFn fn = cpu::find_kernel(op);
    EXPECT_NE(fn, nullptr) << op;
    std::vector<Tensor> owned;
    std::vector<TensorData*> out;
    for (const OutSpec& o : outs) {
      owned.push_back(std::make_unique<TensorData>(o.dtype, o.shape));
      // Different garbage on both sides: an element a split leaves unwritten differs.
      std::memset(owned.back()->bytes(), par ? 0x7f : 0x11, owned.back()->nbytes());
      out.push_back(owned.back().get());
    }
    fn(cpu::KernelArgs{op, at, in, out, par});
    return owned;
  }

  void expect_same(const std::string& op, const Attrs& at, const std::vector<const TensorData*>& in,
                   const std::vector<OutSpec>& outs) {
    SCOPED_TRACE(op);
    const std::vector<Tensor> serial = run(op, at, in, outs, nullptr);
    wait_all_idle(pool_);
    const uint64_t before = par_.stats().splits;
    const std::vector<Tensor> split = run(op, at, in, outs, &par_);
    EXPECT_GT(par_.stats().splits, before) << op << " did not split its work";
    for (size_t i = 0; i < outs.size(); ++i) {
      ASSERT_EQ(serial[i]->nbytes(), split[i]->nbytes());
      EXPECT_EQ(std::memcmp(serial[i]->bytes(), split[i]->bytes(), serial[i]->nbytes()), 0)
          << op << " output " << i << " differs from the serial kernel";
    }
  }

  Tensor f32(const Shape& s, float lo = -3.f, float hi = 3.f) { return random_f32(s, rng_, lo, hi); }
  Tensor mask(const Shape& s) {
    auto t = std::make_unique<TensorData>(DType::Bool, s);
    for (int64_t i = 0; i < t->numel(); ++i) t->data<uint8_t>()[i] = (rng_() % 5) != 0;
    return t;
  }
};

TEST_F(KernelSplit, ElementwiseMapsOddSizes) {
  const Tensor a = f32({600001});
  const Tensor b = f32({600001});
  for (const char* op : {"add", "mul", "sub", "div", "gt"})
    expect_same(op, {}, {a.get(), b.get()}, {{std::string(op) == "gt" ? DType::Bool : DType::F32, {600001}}});
  for (const char* op : {"relu", "neg", "abs", "exp", "tanh", "sigmoid", "silu", "log", "sqrt"}) {
    const Tensor x = f32({40001}, std::string(op) == "log" || std::string(op) == "sqrt" ? 0.1f : -3.f);
    const Tensor big = f32({600001});
    const bool dear = std::string(op) != "relu" && std::string(op) != "neg" && std::string(op) != "abs";
    const TensorData* in = dear ? x.get() : big.get();
    expect_same(op, {}, {in}, {{DType::F32, in->shape()}});
  }
  const Tensor g = f32({3, 2001, 7});
  expect_same("gelu", attrs({{"approximate", std::string("tanh")}}), {g.get()}, {{DType::F32, g->shape()}});
  expect_same("gelu", {}, {g.get()}, {{DType::F32, g->shape()}});
  expect_same("cast", {}, {a.get()}, {{DType::I32, a->shape()}});
}

TEST_F(KernelSplit, BroadcastWhereAndMaskedFill) {
  // Bias over rows (outer dim split), a column vector, and a single long row.
  const Shape s{7031, 77};
  const Tensor x = f32(s);
  const Tensor bias = f32({77});
  const Tensor col = f32({7031, 1});
  expect_same("add", {}, {x.get(), bias.get()}, {{DType::F32, s}});
  expect_same("mul", {}, {col.get(), x.get()}, {{DType::F32, s}});
  const Tensor row = f32({1, 600003});
  const Tensor one = f32({1});
  expect_same("sub", {}, {row.get(), one.get()}, {{DType::F32, {1, 600003}}});
  const Tensor m = mask(s);
  const Tensor mrow = mask({1, 77});
  const Tensor y = f32(s);
  expect_same("where", {}, {m.get(), x.get(), y.get()}, {{DType::F32, s}});
  expect_same("masked_fill", attrs({{"value", -1e9}}), {x.get(), mrow.get()}, {{DType::F32, s}});
  const Tensor mcol = mask({7031, 1});
  expect_same("masked_fill", attrs({{"value", 2.5}}), {x.get(), mcol.get()}, {{DType::F32, s}});
}

TEST_F(KernelSplit, SoftmaxAndNormsSplitRows) {
  const Tensor x = f32({7, 531, 37});
  expect_same("softmax", attrs({{"axis", int64_t{-1}}}), {x.get()}, {{DType::F32, x->shape()}});
  const Tensor inner = f32({1301, 13, 17});  // softmax over a middle axis: outer slices split
  expect_same("softmax", attrs({{"axis", int64_t{1}}}), {inner.get()}, {{DType::F32, inner->shape()}});
  const Tensor h = f32({3, 1343, 37});
  const Tensor w = f32({37});
  const Tensor b = f32({37});
  expect_same("layer_norm", {}, {h.get(), w.get(), b.get()}, {{DType::F32, h->shape()}});
  expect_same("layer_norm", {}, {h.get()}, {{DType::F32, h->shape()}});
  expect_same("rms_norm", {}, {h.get(), w.get()}, {{DType::F32, h->shape()}});
}

TEST_F(KernelSplit, AttentionSplitsHeadsAndQueryBlocks) {
  // Causal with a remainder query block (131 = 4·32 + 3), several heads.
  const Tensor q = f32({4, 6, 131, 40}, -1.f, 1.f);
  const Tensor k = f32({4, 6, 131, 40}, -1.f, 1.f);
  const Tensor v = f32({4, 6, 131, 24}, -1.f, 1.f);
  expect_same("attention", attrs({{"causal", int64_t{1}}}), {q.get(), k.get(), v.get()},
              {{DType::F32, {4, 6, 131, 24}}});
  // A broadcast boolean mask and a float mask, keys longer than queries.
  const Tensor q2 = f32({4, 8, 61, 32}, -1.f, 1.f);
  const Tensor k2 = f32({4, 8, 97, 32}, -1.f, 1.f);
  const Tensor v2 = f32({4, 8, 97, 32}, -1.f, 1.f);
  const Tensor bm = mask({1, 1, 61, 97});
  const Tensor fm = f32({4, 1, 61, 97});
  expect_same("attention", {}, {q2.get(), k2.get(), v2.get(), bm.get()}, {{DType::F32, {4, 8, 61, 32}}});
  expect_same("attention", attrs({{"scale", 0.2}}), {q2.get(), k2.get(), v2.get(), fm.get()},
              {{DType::F32, {4, 8, 61, 32}}});
}

TEST_F(KernelSplit, LayoutCopies) {
  const Tensor x = f32({2, 331, 12, 67});
  expect_same("permute", attrs({{"perm", std::vector<int64_t>{0, 2, 1, 3}}}), {x.get()},
              {{DType::F32, {2, 12, 331, 67}}});
  expect_same("transpose", {}, {x.get()}, {{DType::F32, {2, 331, 67, 12}}});
  const Tensor qkv = f32({1, 2001, 3 * 101});
  const Shape part{1, 2001, 101};
  expect_same("split", attrs({{"axis", int64_t{-1}}, {"sizes", std::vector<int64_t>{101, 101, 101}}}),
              {qkv.get()}, {{DType::F32, part}, {DType::F32, part}, {DType::F32, part}});
}

ExecResult run_sync(Executor& ex, const std::shared_ptr<Graph>& g, std::vector<TensorPtr> in) {
  std::promise<ExecResult> p;
  auto fut = p.get_future();
  ex.run(g, std::move(in), [&](ExecResult&& r) { p.set_value(std::move(r)); });
  ExecResult r = fut.get();
  ex.wait_idle();
  return r;
}

std::shared_ptr<Graph> norm_gelu_graph(const Shape& s) {
  auto g = std::make_shared<Graph>("norm_gelu");
  g->add_input("x", DType::F32, s);
  g->add_node("layer_norm", "ln", {"x"}, {"h"});
  g->add_node("gelu", "act", {"h"}, {"y"});
  g->set_attr("act", "approximate", std::string("tanh"));
  g->mark_output("y");
  g->validate();
  return g;
}

TEST(ExecutorParallel, SplitsALargeNodeAndMatchesTheInlineRun) {
  std::mt19937 rng(7);
  const Shape s{257, 4099};
  auto g = norm_gelu_graph(s);
  TensorPtr x = random_f32(s, rng);
  Executor ex(2);
  const Parallel::Stats before = ex.parallel().stats();
  ExecResult r = run_sync(ex, g, {x});
  ASSERT_EQ(r.status, GENIE_OK) << r.detail;
  const Parallel::Stats after = ex.parallel().stats();
  EXPECT_GE(after.splits, before.splits + 2) << "layer_norm and gelu over 1M elements were not split";
  EXPECT_GT(after.chunks, after.splits);
  ExecResult inl = ex.run_inline(g, {x});
  ASSERT_EQ(inl.status, GENIE_OK) << inl.detail;
  EXPECT_EQ(ex.parallel().stats().splits, after.splits) << "run_inline must not split";
  ASSERT_EQ(r.outputs[0]->nbytes(), inl.outputs[0]->nbytes());
  EXPECT_EQ(std::memcmp(r.outputs[0]->bytes(), inl.outputs[0]->bytes(), r.outputs[0]->nbytes()), 0);
}

TEST(ExecutorParallel, SmallNodesAreNotSplit) {
  std::mt19937 rng(8);
  const Shape s{4, 33};
  auto g = norm_gelu_graph(s);
  Executor ex(2);
  for (int i = 0; i < 5; ++i) {
    ExecResult r = run_sync(ex, g, {random_f32(s, rng)});
    ASSERT_EQ(r.status, GENIE_OK) << r.detail;
  }
  EXPECT_EQ(ex.parallel().stats().splits, 0u);
}

TEST(ExecutorParallel, OneThreadNeverSplits) {
  std::mt19937 rng(9);
  const Shape s{129, 3073};
  Executor ex(1);
  ExecResult r = run_sync(ex, norm_gelu_graph(s), {random_f32(s, rng)});
  ASSERT_EQ(r.status, GENIE_OK) << r.detail;
  EXPECT_EQ(ex.parallel().stats().splits, 0u);
}

}  // namespace
}  // namespace genie
