// The CUDA kernels' shape and index arithmetic (exec/cuda/kernels/
// index_math.hpp) and the fused attention's running softmax
// (online_softmax.hpp), compiled by the host compiler and checked against
// brute-force references: these run on every machine, GPU or not.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/error.hpp"
#include "exec/cuda/kernels/index_math.hpp"
#include "exec/cuda/kernels/online_softmax.hpp"

namespace genie::cuda {
namespace {

// Element offset of linear index i of `dims` for the given strides, by
// decomposing i into a multi-index the slow way.
int64_t brute_offset(const Shape& dims, const std::vector<int64_t>& strides, int64_t i) {
  int64_t off = 0;
  for (size_t d = dims.size(); d-- > 0;) {
    off += (i % dims[d]) * strides[d];
    i /= dims[d];
  }
  return off;
}

TEST(CudaIndexMath, BroadcastStridesRightAligned) {
  EXPECT_EQ(broadcast_strides({3, 1}, {2, 3, 4}), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(broadcast_strides({4}, {2, 3, 4}), (std::vector<int64_t>{0, 0, 1}));
  EXPECT_EQ(broadcast_strides({2, 3, 4}, {2, 3, 4}), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(broadcast_strides({}, {2, 3}), (std::vector<int64_t>{0, 0}));
  EXPECT_THROW(broadcast_strides({3}, {2, 4}), Error);
  EXPECT_THROW(broadcast_strides({1, 2, 3}, {2, 3}), Error);
}

TEST(CudaIndexMath, IndexerMatchesBruteForceForBroadcasts) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 4}, {2, 3, 4}}, {{1, 3, 1}, {2, 3, 4}},       {{4}, {5, 1, 4}}, {{7, 1}, {7, 9}},
      {{1}, {3, 5, 7}},       {{2, 1, 5, 1}, {2, 3, 5, 2}}, {{}, {4}}};
  for (const auto& [in, out] : cases) {
    const std::vector<int64_t> bs = broadcast_strides(in, out);
    const std::vector<int64_t> os = strides_of(out);
    const Indexer<2> ix = make_indexer<2>(out, {os, bs});
    for (int64_t i = 0; i < numel(out); ++i) {
      int64_t off[2];
      ix.offsets(i, off);
      ASSERT_EQ(off[0], i) << shape_str(in) << " -> " << shape_str(out);
      ASSERT_EQ(off[1], brute_offset(out, bs, i)) << shape_str(in) << " -> " << shape_str(out) << " at " << i;
    }
  }
}

TEST(CudaIndexMath, IndexerMergesContiguousDims) {
  const Shape s = {2, 1, 3, 4};
  const Indexer<1> ix = make_indexer<1>(s, {strides_of(s)});
  EXPECT_EQ(ix.rank, 1);
  EXPECT_EQ(ix.dims[0], 24);
  const Indexer<1> scalar = make_indexer<1>({}, {std::vector<int64_t>{}});
  EXPECT_EQ(scalar.rank, 1);
  EXPECT_EQ(scalar.offset(0), 0);
}

TEST(CudaIndexMath, PermutedStridesGatherTheTranspose) {
  const Shape in = {2, 3, 4};
  const std::vector<int64_t> perm = {2, 0, 1};
  const Shape out = {4, 2, 3};
  const Indexer<1> ix = make_indexer<1>(out, {permuted_strides(in, perm)});
  // out[a, b, c] = in[b, c, a]
  for (int64_t a = 0; a < 4; ++a)
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t c = 0; c < 3; ++c) ASSERT_EQ(ix.offset((a * 2 + b) * 3 + c), b * 12 + c * 4 + a);
  EXPECT_THROW(permuted_strides(in, {0, 0, 1}), Error);
  EXPECT_THROW(permuted_strides(in, {0, 1}), Error);
  EXPECT_THROW(permuted_strides(in, {0, 1, 3}), Error);
}

TEST(CudaIndexMath, TooManyUnmergeableDimsAreRefused) {
  Shape s(kMaxDims + 1, 2);
  std::vector<int64_t> reversed(s.size());
  for (size_t d = 0; d < s.size(); ++d) reversed[d] = int64_t{1} << d;  // a full reversal: nothing merges
  try {
    make_indexer<1>(s, {reversed});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_UNSUPPORTED);
  }
  Shape contiguous(kMaxDims + 5, 2);
  EXPECT_NO_THROW(make_indexer<1>(contiguous, {strides_of(contiguous)}));
}

TEST(CudaIndexMath, AxisSplit) {
  const AxisSplit a = split_at_axis({2, 3, 4}, 1);
  EXPECT_EQ(a.outer, 2);
  EXPECT_EQ(a.len, 3);
  EXPECT_EQ(a.inner, 4);
  const AxisSplit b = split_at_axis({2, 3, 4}, -1);
  EXPECT_EQ(b.outer, 6);
  EXPECT_EQ(b.len, 4);
  EXPECT_EQ(b.inner, 1);
  const AxisSplit c = split_at_axis({}, -1);
  EXPECT_EQ(c.outer * c.len * c.inner, 1);
  EXPECT_THROW(split_at_axis({2, 3}, 2), Error);
}

TEST(CudaIndexMath, ReducePlanSumsMatchBruteForce) {
  std::mt19937 rng(7);
  const Shape s = {3, 4, 5, 2};
  std::vector<int64_t> x(static_cast<size_t>(numel(s)));
  for (auto& v : x) v = static_cast<int64_t>(rng() % 100);
  const std::vector<std::vector<int64_t>> axes_cases = {{},     {0},    {1},       {-1},
                                                        {0, 2}, {1, 3}, {3, 0, 1}, {0, 1, 2, 3}};
  for (const auto& axes : axes_cases) {
    std::vector<bool> red(s.size(), axes.empty());
    for (int64_t a : axes) red[static_cast<size_t>(normalize_axis(a, 4))] = true;
    Shape kept = s;
    for (size_t d = 0; d < s.size(); ++d)
      if (red[d]) kept[d] = 1;
    // Reference: scatter-add every element into its kept position.
    std::vector<int64_t> want(static_cast<size_t>(numel(kept)), 0);
    const std::vector<int64_t> ks = strides_of(kept);
    for (int64_t i = 0; i < numel(s); ++i) {
      int64_t rest = i, o = 0;
      for (size_t d = s.size(); d-- > 0;) {
        if (!red[d]) o += (rest % s[d]) * ks[d];
        rest /= s[d];
      }
      want[static_cast<size_t>(o)] += x[static_cast<size_t>(i)];
    }
    const ReducePlan p = plan_reduce(s, axes, numel(kept));
    ASSERT_EQ(p.outputs * p.count, numel(s));
    for (int64_t o = 0; o < p.outputs; ++o) {
      int64_t sum = 0;
      for (int64_t j = 0; j < p.count; ++j)
        sum += x[static_cast<size_t>(p.kept.offset(o) + p.reduced.offset(j))];
      ASSERT_EQ(sum, want[static_cast<size_t>(o)]) << "axes of size " << axes.size() << ", output " << o;
    }
  }
  EXPECT_THROW(plan_reduce(s, {1, -3}, 30), Error);  // axis 1 twice
  EXPECT_THROW(plan_reduce(s, {1}, 31), Error);      // wrong output size
  EXPECT_THROW(plan_reduce(s, {4}, 30), Error);
  // Zero-size: no outputs, or outputs of an empty reduction.
  EXPECT_EQ(plan_reduce({0, 3}, {0}, 3).count, 0);
  EXPECT_EQ(plan_reduce({0, 3}, {1}, 0).outputs, 0);
}

TEST(CudaIndexMath, SliceRangeFollowsPython) {
  auto r = slice_range(10, -3, 100, 1);
  EXPECT_EQ(r.start, 7);
  EXPECT_EQ(r.count, 3);
  r = slice_range(10, 2, 9, 3);  // 2, 5, 8
  EXPECT_EQ(r.start, 2);
  EXPECT_EQ(r.count, 3);
  r = slice_range(10, 5, 2, 1);
  EXPECT_EQ(r.count, 0);
  r = slice_range(10, -100, -8, 1);  // 0, 1
  EXPECT_EQ(r.start, 0);
  EXPECT_EQ(r.count, 2);
  r = slice_range(0, 0, 5, 2);
  EXPECT_EQ(r.count, 0);
  EXPECT_THROW(slice_range(10, 0, 5, 0), Error);
}

TEST(CudaIndexMath, AxisTilingOfConcat) {
  const AxisTiling t = tile_axis({2, 8, 3}, {{2, 3, 3}, {2, 5, 3}}, 1);
  EXPECT_EQ(t.outer, 2);
  EXPECT_EQ(t.whole_row, 24);
  EXPECT_EQ(t.part_rows, (std::vector<int64_t>{9, 15}));
  const AxisTiling first = tile_axis({5, 2}, {{2, 2}, {3, 2}}, 0);
  EXPECT_EQ(first.outer, 1);
  EXPECT_EQ(first.part_rows, (std::vector<int64_t>{4, 6}));
  EXPECT_THROW(tile_axis({2, 8}, {{2, 3}, {2, 4}}, 1), Error);  // 7 != 8
  EXPECT_THROW(tile_axis({2, 8}, {{3, 3}, {2, 5}}, 1), Error);  // other dim differs
}

TEST(CudaIndexMath, PoolWindowsCountPaddingLikePyTorch) {
  // H = 5, kernel 3, stride 2, padding 1: windows [-1, 2), [1, 4), [3, 6).
  Window w = pool_window(0, 5, 3, 2, 1);
  EXPECT_EQ(w.begin, 0);
  EXPECT_EQ(w.end, 2);
  EXPECT_EQ(w.divisor, 3);
  w = pool_window(2, 5, 3, 2, 1);
  EXPECT_EQ(w.begin, 3);
  EXPECT_EQ(w.end, 5);
  EXPECT_EQ(w.divisor, 3);
  // H = 4, kernel 3, stride 3, padding 1: window [2, 5) holds inputs 2, 3
  // and the padded position 4; the divisor counts all three.
  w = pool_window(1, 4, 3, 3, 1);
  EXPECT_EQ(w.begin, 2);
  EXPECT_EQ(w.end, 4);
  EXPECT_EQ(w.divisor, 3);
  w = pool_window(0, 2, 4, 4, 2);  // [-2, 2), padded end min(2, 4) = 2
  EXPECT_EQ(w.divisor, 4);
  w = pool_window(0, 3, 2, 2, 1);  // [-1, 1)
  EXPECT_EQ(w.begin, 0);
  EXPECT_EQ(w.end, 1);
  EXPECT_EQ(w.divisor, 2);
  w = pool_window(1, 3, 2, 2, 1);  // [1, 3)
  EXPECT_EQ(w.end, 3);
  EXPECT_EQ(w.divisor, 2);
}

TEST(CudaIndexMath, AdaptiveBins) {
  const int64_t want[3][2] = {{0, 2}, {1, 4}, {3, 5}};
  for (int64_t o = 0; o < 3; ++o) {
    const Window w = adaptive_window(o, 5, 3);
    EXPECT_EQ(w.begin, want[o][0]);
    EXPECT_EQ(w.end, want[o][1]);
    EXPECT_EQ(w.divisor, want[o][1] - want[o][0]);
  }
  // Upsampling 2 -> 7: bins of one element, except the middle one that
  // straddles both inputs ([floor(6/7), ceil(8/7)) = [0, 2)).
  for (int64_t o = 0; o < 7; ++o) EXPECT_EQ(adaptive_window(o, 2, 7).divisor, o == 3 ? 2 : 1) << o;
}

TEST(CudaIndexMath, CausalKeyBounds) {
  // Queries are the last sq of sk positions: query i sees keys j <= i + sk - sq.
  EXPECT_EQ(visible_keys(0, 3, 5, true), 3);
  EXPECT_EQ(visible_keys(2, 3, 5, true), 5);
  EXPECT_EQ(visible_keys(0, 5, 3, true), 0);  // sq > sk: the first queries see nothing
  EXPECT_EQ(visible_keys(3, 5, 3, true), 2);
  EXPECT_EQ(visible_keys(0, 3, 5, false), 5);
  EXPECT_EQ(visible_keys(0, 1, 2048, true), 2048);  // decode sees everything
  // A tile of 16 queries at the start of a 100-long causal square sees keys [0, 16).
  EXPECT_EQ(key_tiles(0, 16, 100, 100, true, 32), 1);
  EXPECT_EQ(key_tiles(32, 16, 100, 100, true, 32), 2);
  EXPECT_EQ(key_tiles(96, 4, 100, 100, true, 32), 4);
  EXPECT_EQ(key_tiles(0, 16, 100, 100, false, 32), 4);
  EXPECT_EQ(key_tiles(0, 2, 5, 3, true, 32), 0);
  EXPECT_EQ(key_tiles(0, 1, 1, 0, false, 32), 0);
}

// The fused attention's algorithm on the host: scores of one query row fed
// tile by tile through OnlineSoftmax, stopping at key_tiles, against a plain
// softmax in double. Masks leave -inf scores, some rows entirely.
TEST(CudaOnlineSoftmax, TiledRowsMatchPlainSoftmax) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.f, 3.f);
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int64_t sk : std::vector<int64_t>{1, 5, 31, 32, 33, 100, 2048}) {
    for (int64_t sq : {int64_t{1}, int64_t{7}, sk}) {
      for (int mode = 0; mode < 3; ++mode) {  // 0: none, 1: causal, 2: causal + random mask
        const bool causal = mode > 0;
        for (int64_t i = 0; i < sq; i += std::max<int64_t>(1, sq / 5)) {
          std::vector<float> s(static_cast<size_t>(sk)), v(static_cast<size_t>(sk));
          for (int64_t j = 0; j < sk; ++j) {
            s[j] = dist(rng);
            v[j] = dist(rng);
            if (j >= visible_keys(i, sq, sk, causal) || (mode == 2 && rng() % 3 == 0)) s[j] = ninf;
          }
          // Reference.
          double mx = -INFINITY, sum = 0, want = 0;
          for (float x : s) mx = std::max<double>(mx, x);
          if (mx != -INFINITY) {
            for (int64_t j = 0; j < sk; ++j) sum += std::exp(s[j] - mx);
            for (int64_t j = 0; j < sk; ++j) want += std::exp(s[j] - mx) / sum * v[j];
          }
          // Tiled, as one lane-parallel warp would: tiles of 32 keys.
          const int64_t tile = 32;
          OnlineSoftmax row;
          float acc = 0.f;
          for (int64_t t = 0; t < key_tiles(i, 1, sq, sk, causal, tile); ++t) {
            float tmax = ninf;
            for (int64_t j = t * tile; j < std::min(sk, (t + 1) * tile); ++j) tmax = std::max(tmax, s[j]);
            float alpha;
            if (!row.begin_tile(tmax, alpha)) continue;
            float tsum = 0.f, tacc = 0.f;
            for (int64_t j = t * tile; j < std::min(sk, (t + 1) * tile); ++j) {
              tsum += row.weight(s[j]);
              tacc += row.weight(s[j]) * v[j];
            }
            row.add(tsum);
            acc = acc * alpha + tacc;
          }
          const float got = acc * row.finish();
          ASSERT_NEAR(got, want, 1e-4 * (1 + std::fabs(want)))
              << "sk " << sk << " sq " << sq << " mode " << mode << " query " << i;
          if (mx == -INFINITY) ASSERT_EQ(got, 0.f);
        }
      }
    }
  }
}

}  // namespace
}  // namespace genie::cuda
