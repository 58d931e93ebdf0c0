// Helpers shared by the CPU kernel files: the registry hooks, dtype dispatch,
// strided (broadcast) iteration, the BLAS entry point and row primitives.
#pragma once

#include <array>
#include <cstdint>
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
// are each operand's element offset of the row start.
template <size_t N, class Row>
void for_each_row(const StridedLoop<N>& l, Row&& row) {
  for (int64_t d : l.dims)
    if (d == 0) return;
  const size_t outer = l.dims.size() - 1;
  std::vector<int64_t> idx(outer, 0);
  std::array<int64_t, N> off{};
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
