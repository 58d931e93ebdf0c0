// Helpers shared by the CPU kernel files: the registry hooks, dtype dispatch,
// strided (broadcast) iteration, the BLAS entry point and row primitives.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "exec/cpu/kernels.hpp"

namespace genie::cpu {

using KernelTable = std::unordered_map<std::string, KernelFn>;

// Each kernel file adds its operators; registry.cpp calls them once.
void add_elementwise_kernels(KernelTable& t);
void add_matmul_kernels(KernelTable& t);
void add_norm_kernels(KernelTable& t);
void add_layout_kernels(KernelTable& t);
void add_reduce_kernels(KernelTable& t);
void add_attention_kernels(KernelTable& t);
void add_conv_kernels(KernelTable& t);

// Input slot i, or nullptr when an optional input is omitted (or the slot list is short).
inline const TensorData* optional_input(const KernelArgs& a, size_t i) {
  return i < a.in.size() ? a.in[i] : nullptr;
}

[[noreturn]] void unsupported_dtype(const KernelArgs& a, DType t);

// A kernel reading memory with the wrong element size would overrun its
// buffer, so kernels check dtypes rather than trust their caller.
inline void expect_dtype(const KernelArgs& a, const TensorData& t, DType want) {
  if (t.dtype() != want)
    fail(GENIE_ERR_DTYPE_MISMATCH, "cpu kernel '", a.op, "': expected a ", dtype_name(want), " tensor, got ",
         dtype_name(t.dtype()));
}

// Calls f(T{}) with T the element type of `t`, for arithmetic that bool does
// not support.
template <class F>
void visit_numeric(const KernelArgs& a, DType t, F&& f) {
  switch (t) {
    case DType::F32:
      return f(float{});
    case DType::I32:
      return f(int32_t{});
    case DType::I64:
      return f(int64_t{});
    default:
      unsupported_dtype(a, t);
  }
}

// Like visit_numeric, with bool as uint8_t.
template <class F>
void visit_dtype(const KernelArgs& a, DType t, F&& f) {
  if (t == DType::Bool) return f(uint8_t{});
  visit_numeric(a, t, std::forward<F>(f));
}

// Element strides of a tensor of shape `in` read as if broadcast to `out`:
// 0 along dims it is broadcast over, right-aligned as in NumPy.
std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out);

// Iteration over `dims` for N operands with their own element strides. Size-1
// dims are dropped and neighbouring dims merged wherever every operand stays
// linear across them, so common cases become one long innermost row.
template <size_t N>
struct StridedLoop {
  std::vector<int64_t> dims;  // never empty
  std::vector<std::array<int64_t, N>> strides;
};

template <size_t N>
StridedLoop<N> make_loop(const Shape& dims, const std::array<std::vector<int64_t>, N>& strides) {
  StridedLoop<N> l;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    std::array<int64_t, N> s;
    bool mergeable = !l.dims.empty();
    for (size_t k = 0; k < N; ++k) {
      s[k] = strides[k][d];
      mergeable = mergeable && l.strides.back()[k] == s[k] * dims[d];
    }
    if (mergeable) {
      l.dims.back() *= dims[d];
      l.strides.back() = s;
    } else {
      l.dims.push_back(dims[d]);
      l.strides.push_back(s);
    }
  }
  if (l.dims.empty()) {
    l.dims.push_back(1);
    l.strides.push_back({});
  }
  return l;
}

// Calls row(offsets, n, inner_strides) for every innermost row, where offsets
// are each operand's element offset of the row start (plus `base`).
template <size_t N, class Row>
void for_each_row(const StridedLoop<N>& l, Row&& row, std::array<int64_t, N> base = {}) {
  for (int64_t d : l.dims)
    if (d == 0) return;
  const size_t outer = l.dims.size() - 1;
  std::vector<int64_t> idx(outer, 0);
  std::array<int64_t, N> off = base;
  for (;;) {
    row(off, l.dims.back(), l.strides.back());
    for (size_t d = outer;;) {
      if (d == 0) return;
      --d;
      for (size_t k = 0; k < N; ++k) off[k] += l.strides[d][k];
      if (++idx[d] < l.dims[d]) break;
      for (size_t k = 0; k < N; ++k) off[k] -= l.strides[d][k] * l.dims[d];
      idx[d] = 0;
    }
  }
}

// Intra-op parallelism. A grain is the least work worth handing to another
// worker, about 50 µs: waking a worker costs 10 µs and more on a loaded
// host, and a split of less work was measured slower than the serial loop
// (add, permute, layer norm of [128, 768]). In elements: cheap maps and
// copies (add, compare, permute), row normalisations (softmax, layer_norm,
// rms_norm; ≈ 1 ns per element) and transcendental maps (gelu, exp, tanh;
// ≈ 3 ns per element); attention counts flops.
constexpr int64_t kGrainCheap = 256 * 1024;
constexpr int64_t kGrainNorm = 64 * 1024;
constexpr int64_t kGrainDear = 16 * 1024;
constexpr int64_t kGrainFlops = 8 << 20;
// Element ranges are split at multiples of this many (64-byte lines of f32).
constexpr int64_t kSplitAlign = 16;

// Calls fn(begin, end) over disjoint ranges covering [0, n) items, spread
// over a.par when given and there are at least two grains of items; else
// one call fn(0, n) (none for n == 0).
template <class F>
void parallel_for(const KernelArgs& a, int64_t n, int64_t grain, F&& fn) {
  if (n <= 0) return;
  if (a.par == nullptr || n < 2 * std::max<int64_t>(grain, 1)) {
    fn(int64_t{0}, n);
    return;
  }
  a.par->for_range(n, grain, std::function<void(int64_t, int64_t)>(std::ref(fn)));
}

// parallel_for over n elements, `grain` of them at least per range, split at
// multiples of kSplitAlign.
template <class F>
void parallel_elements(const KernelArgs& a, int64_t n, int64_t grain, F&& fn) {
  const int64_t blocks = (n + kSplitAlign - 1) / kSplitAlign;
  parallel_for(a, blocks, (grain + kSplitAlign - 1) / kSplitAlign, [&](int64_t b, int64_t e) {
    fn(b * kSplitAlign, std::min(n, e * kSplitAlign));
  });
}

// for_each_row, with the rows spread over a.par: split along the outermost
// dim, or within the row when the loop is a single row. Every element is
// computed as in the serial loop.
template <size_t N, class Row>
void parallel_rows(const KernelArgs& a, const StridedLoop<N>& l, int64_t grain, Row&& row) {
  for (int64_t d : l.dims)
    if (d == 0) return;
  if (a.par == nullptr) return for_each_row(l, row);
  if (l.dims.size() == 1) {
    parallel_elements(a, l.dims[0], grain, [&](int64_t b, int64_t e) {
      std::array<int64_t, N> off;
      for (size_t k = 0; k < N; ++k) off[k] = b * l.strides[0][k];
      row(off, e - b, l.strides[0]);
    });
    return;
  }
  int64_t inner = 1;
  for (size_t d = 1; d < l.dims.size(); ++d) inner *= l.dims[d];
  parallel_for(a, l.dims[0], (grain + inner - 1) / inner, [&](int64_t b, int64_t e) {
    StridedLoop<N> part = l;
    part.dims[0] = e - b;
    std::array<int64_t, N> base;
    for (size_t k = 0; k < N; ++k) base[k] = b * l.strides[0][k];
    for_each_row(part, row, base);
  });
}

// Product of dims [begin, end).
int64_t dims_product(const Shape& s, size_t begin, size_t end);

// Row-major C[m,n] = alpha·op(A)·op(B) + beta·C with op(X) = Xᵀ when trans_x;
// lda/ldb/ldc are the row strides of the matrices as stored. Handles empty
// products (k == 0 gives beta·C) and refuses sizes past the BLAS integer.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// y[0, n) = softmax(x[0, n)), max subtracted; x == y is allowed. A row whose
// every entry is -inf (everything masked) gives zeros rather than NaN.
void softmax_row(const float* x, float* y, int64_t n);

}  // namespace genie::cpu
