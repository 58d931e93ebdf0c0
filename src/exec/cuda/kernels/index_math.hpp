// Shape and index arithmetic of the CUDA kernels, kept apart from them so
// that the host compiler builds it too and CPU unit tests check it
// (tests/unit/exec_cuda_index_math_test.cpp): broadcast and permutation
// strides, strided iteration with 64-bit offsets, the outer/axis/inner split
// of row operations, reductions over any set of axes, slices, pooling
// windows, and the key bounds of causal attention tiles.
//
// The __host__ __device__ functions run in kernels; the builders taking
// Shapes run on the host only, before a launch.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "core/shape.hpp"

#if defined(__CUDACC__)
#define GENIE_HD __host__ __device__ __forceinline__
#else
#define GENIE_HD inline
#endif

namespace genie::cuda {

// Dims a strided iteration keeps after merging (see make_indexer): more
// than any operator's tensors need once contiguous dims are merged.
constexpr int kMaxDims = 10;

// Row-major iteration over up to kMaxDims dims for N operands with their own
// element strides; passed to kernels by value. offsets() maps a linear index
// of the iteration to each operand's element offset.
template <int N>
struct Indexer {
  int rank = 1;
  int64_t dims[kMaxDims] = {1};
  int64_t strides[N][kMaxDims] = {};

  GENIE_HD void offsets(int64_t i, int64_t (&off)[N]) const {
    if (rank == 1) {  // the common merged case, without a 64-bit division
      for (int k = 0; k < N; ++k) off[k] = i * strides[k][0];
      return;
    }
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t q = i / dims[d];
      const int64_t r = i - q * dims[d];
      i = q;
      for (int k = 0; k < N; ++k) off[k] += r * strides[k][d];
    }
  }
  GENIE_HD int64_t offset(int64_t i) const {
    int64_t off[N];
    offsets(i, off);
    return off[0];
  }
};

// Element strides of a tensor of shape `in` read as if broadcast to `out`:
// 0 along dims it is broadcast over, right-aligned as in NumPy. Throws
// Error(SHAPE_MISMATCH) when `in` does not broadcast to `out`.
inline std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  if (in.size() > out.size())
    fail(GENIE_ERR_SHAPE_MISMATCH, shape_str(in), " does not broadcast to ", shape_str(out));
  std::vector<int64_t> st(out.size(), 0);
  int64_t stride = 1;
  for (size_t i = 0; i < in.size(); ++i) {
    const size_t di = in.size() - 1 - i;
    const size_t dout = out.size() - 1 - i;
    if (!(in[di] == out[dout] || in[di] == 1))
      fail(GENIE_ERR_SHAPE_MISMATCH, shape_str(in), " does not broadcast to ", shape_str(out));
    st[dout] = in[di] == 1 ? 0 : stride;
    stride *= in[di];
  }
  return st;
}

// The strides of `in` read in the order `perm` (out dim i is in dim perm[i]).
// Throws Error(INVALID_ATTRIBUTE) unless perm is a permutation of 0..rank-1.
inline std::vector<int64_t> permuted_strides(const Shape& in, const std::vector<int64_t>& perm) {
  const std::vector<int64_t> own = strides_of(in);
  std::vector<bool> seen(in.size(), false);
  if (perm.size() != in.size())
    fail(GENIE_ERR_INVALID_ATTRIBUTE, "perm has ", perm.size(), " entries for ", shape_str(in));
  std::vector<int64_t> st(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    const int64_t p = perm[i];
    if (!(p >= 0 && p < static_cast<int64_t>(in.size()) && !seen[static_cast<size_t>(p)]))
      fail(GENIE_ERR_INVALID_ATTRIBUTE, "perm is not a permutation of the dims of ", shape_str(in));
    seen[static_cast<size_t>(p)] = true;
    st[i] = own[static_cast<size_t>(p)];
  }
  return st;
}

// An Indexer over `dims` for N operands: size-1 dims are dropped and
// neighbouring dims merged wherever every operand stays linear across them,
// so that most iterations need one or two divisions per element. Throws
// Error(UNSUPPORTED) past kMaxDims dims after merging.
template <int N>
Indexer<N> make_indexer(const Shape& dims, const std::array<std::vector<int64_t>, N>& strides) {
  Indexer<N> ix;
  ix.rank = 0;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    bool mergeable = ix.rank > 0;
    for (int k = 0; k < N && mergeable; ++k)
      mergeable = ix.strides[k][ix.rank - 1] == strides[k][d] * dims[d];
    if (mergeable) {
      ix.dims[ix.rank - 1] *= dims[d];
      for (int k = 0; k < N; ++k) ix.strides[k][ix.rank - 1] = strides[k][d];
      continue;
    }
    if (ix.rank >= kMaxDims)
      fail(GENIE_ERR_UNSUPPORTED, "cuda kernels: more than ", kMaxDims, " non-mergeable dims in ",
           shape_str(dims));
    ix.dims[ix.rank] = dims[d];
    for (int k = 0; k < N; ++k) ix.strides[k][ix.rank] = strides[k][d];
    ++ix.rank;
  }
  if (ix.rank == 0) {
    ix.rank = 1;
    ix.dims[0] = 1;
    for (int k = 0; k < N; ++k) ix.strides[k][0] = 0;
  }
  return ix;
}

// A row operation along one axis (softmax): the tensor seen as
// [outer, len, inner], rows of `len` elements `inner` apart.
struct AxisSplit {
  int64_t outer = 1, len = 1, inner = 1;
};

inline AxisSplit split_at_axis(const Shape& s, int64_t axis) {
  AxisSplit r;
  if (s.empty()) return r;  // a scalar is one row of one element
  const auto a = static_cast<size_t>(normalize_axis(axis, static_cast<int64_t>(s.size())));
  for (size_t d = 0; d < a; ++d) r.outer *= s[d];
  r.len = s[a];
  for (size_t d = a + 1; d < s.size(); ++d) r.inner *= s[d];
  return r;
}

// A reduction over a set of axes: `kept` iterates the output elements
// (offset into the input of each one's first element), `reduced` the
// elements folded into each (offset from that first element).
struct ReducePlan {
  Indexer<1> kept;
  Indexer<1> reduced;
  int64_t outputs = 1;  // output elements
  int64_t count = 1;    // input elements per output
};

// `axes` empty means all. Throws Error(INVALID_ATTRIBUTE) for an axis out of
// range or repeated, Error(SHAPE_MISMATCH) when `out_numel` is not the
// reduced element count.
inline ReducePlan plan_reduce(const Shape& in, const std::vector<int64_t>& axes, int64_t out_numel) {
  const auto rank = static_cast<int64_t>(in.size());
  std::vector<bool> reduced(in.size(), axes.empty());
  for (int64_t axis : axes) {
    const auto d = static_cast<size_t>(normalize_axis(axis, rank));
    check(!reduced[d], GENIE_ERR_INVALID_ATTRIBUTE, "axis ", axis, " appears twice in axes");
    reduced[d] = true;
  }
  const std::vector<int64_t> st = strides_of(in);
  Shape kept_dims, red_dims;
  std::vector<int64_t> kept_st, red_st;
  ReducePlan p;
  for (size_t d = 0; d < in.size(); ++d) {
    (reduced[d] ? red_dims : kept_dims).push_back(in[d]);
    (reduced[d] ? red_st : kept_st).push_back(st[d]);
    (reduced[d] ? p.count : p.outputs) *= in[d];
  }
  if (p.outputs != out_numel)
    fail(GENIE_ERR_SHAPE_MISMATCH, "output of ", out_numel, " elements does not match the reduction of ",
         shape_str(in));
  p.kept = make_indexer<1>(kept_dims, {kept_st});
  p.reduced = make_indexer<1>(red_dims, {red_st});
  return p;
}

// Python's slice with a positive step over an axis of `len`: the first
// index and the element count. Negative bounds count from the end; bounds
// outside clamp.
struct SliceRange {
  int64_t start = 0, count = 0;
};

inline SliceRange slice_range(int64_t len, int64_t start, int64_t end, int64_t step) {
  check(step > 0, GENIE_ERR_INVALID_ATTRIBUTE, "slice: step must be > 0, got ", step);
  auto clamp_index = [len](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + len : i, 0, len); };
  const int64_t s = clamp_index(start);
  const int64_t e = clamp_index(end);
  return {s, e > s ? (e - s + step - 1) / step : 0};
}

// concat and split: the whole tensor cut along `axis` into parts, seen as
// `outer` rows each part takes a slice of (in elements).
struct AxisTiling {
  int64_t outer = 1;
  int64_t whole_row = 0;           // elements of one row of the whole
  std::vector<int64_t> part_rows;  // elements of one row of each part
};

// Throws Error(SHAPE_MISMATCH) when the parts are not pieces of `whole`
// along `axis` that add up to it.
inline AxisTiling tile_axis(const Shape& whole, const std::vector<Shape>& parts, int64_t axis_attr) {
  const auto axis = static_cast<size_t>(normalize_axis(axis_attr, static_cast<int64_t>(whole.size())));
  int64_t inner = 1;
  for (size_t d = axis + 1; d < whole.size(); ++d) inner *= whole[d];
  AxisTiling t;
  for (size_t d = 0; d < axis; ++d) t.outer *= whole[d];
  t.whole_row = whole[axis] * inner;
  int64_t total = 0;
  for (const Shape& p : parts) {
    bool fits = p.size() == whole.size();
    for (size_t d = 0; fits && d < whole.size(); ++d) fits = d == axis || p[d] == whole[d];
    if (!fits)
      fail(GENIE_ERR_SHAPE_MISMATCH, shape_str(p), " is not a piece of ", shape_str(whole), " along axis ",
           axis);
    total += p[axis];
    t.part_rows.push_back(p[axis] * inner);
  }
  if (total != whole[axis]) fail(GENIE_ERR_SHAPE_MISMATCH, "pieces do not add up to ", shape_str(whole));
  return t;
}

// One spatial axis of a pooling window: output position o covers input
// [begin, end) (clipped to the input) and, for an average that counts
// padded zeros, `divisor` positions (padding included, nothing past it).
struct Window {
  int64_t begin, end, divisor;
};

GENIE_HD Window pool_window(int64_t o, int64_t in, int64_t kernel, int64_t stride, int64_t pad) {
  const int64_t s = o * stride - pad;
  const int64_t e = s + kernel;
  const int64_t padded_end = e < in + pad ? e : in + pad;
  return {s > 0 ? s : 0, e < in ? e : in, padded_end - s};
}

// PyTorch's adaptive bins: [floor(o·in/out), ceil((o+1)·in/out)).
GENIE_HD Window adaptive_window(int64_t o, int64_t in, int64_t out) {
  const int64_t b = o * in / out;
  const int64_t e = ((o + 1) * in + out - 1) / out;
  return {b, e, e - b};
}

// Causal attention: query i (of sq, the last sq positions of sk) sees keys
// [0, visible_keys(i)); without causality every key.
GENIE_HD int64_t visible_keys(int64_t i, int64_t sq, int64_t sk, bool causal) {
  if (!causal) return sk;
  const int64_t n = i + sk - sq + 1;
  return n < 0 ? 0 : (n > sk ? sk : n);
}

// The key tiles a block of queries [q0, q0 + rows) reads: every key one of
// them sees, so tiles past the last query's bound are never loaded.
GENIE_HD int64_t key_tiles(int64_t q0, int64_t rows, int64_t sq, int64_t sk, bool causal, int64_t tile) {
  const int64_t keys = visible_keys(q0 + rows - 1, sq, sk, causal);
  return (keys + tile - 1) / tile;
}

}  // namespace genie::cuda
