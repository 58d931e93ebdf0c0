// Matrix products through the BLAS: matmul (batched, broadcast batch dims) and linear.
#include <algorithm>
#include <limits>
#include <utility>

#include "exec/cpu/blas.hpp"
#include "exec/cpu/kernel_util.hpp"

namespace genie::cpu {

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // BLAS refuses the zero leading dimensions an empty operand may have.
    for (int64_t i = 0; i < m; ++i)
      for (float* row = c + i * ldc; row != c + i * ldc + n; ++row) *row = beta == 0.f ? 0.f : beta * *row;
    return;
  }
  constexpr int64_t kMax = std::numeric_limits<blasint>::max();
  check(m <= kMax && n <= kMax && k <= kMax && lda <= kMax && ldb <= kMax && ldc <= kMax, GENIE_ERR_TOO_LARGE,
        "matrix product ", m, "x", k, " by ", k, "x", n, " exceeds the BLAS index range");
  const SgemmFn sgemm = blas_sgemm();
  sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
        static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
        static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

namespace {

void matmul(const KernelArgs& args) {
  const TensorData& a = *args.in[0];
  const TensorData& b = *args.in[1];
  TensorData& out = *args.out[0];
  expect_dtype(args, a, DType::F32);
  expect_dtype(args, b, DType::F32);
  expect_dtype(args, out, DType::F32);
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  check(!sa.empty() && !sb.empty(), GENIE_ERR_SHAPE_MISMATCH, "matmul: operands must have rank >= 1");
  // Transposes are done by the BLAS, which reads the stored matrix either way.
  const bool ta = sa.size() >= 2 && args.attrs.get_int("transpose_a", 0) != 0;
  const bool tb = sb.size() >= 2 && args.attrs.get_int("transpose_b", 0) != 0;
  // A 1-D a is a [1, k] row and a 1-D b a [k, 1] column.
  int64_t m = 1, k = sa.back(), kb = sb[0], n = 1;
  if (sa.size() >= 2) {
    m = sa[sa.size() - 2];
    if (ta) std::swap(m, k);
  }
  if (sb.size() >= 2) {
    kb = sb[sb.size() - 2];
    n = sb.back();
    if (tb) std::swap(kb, n);
  }
  const int64_t lda = sa.back();
  const int64_t ldb = sb.size() >= 2 ? sb.back() : 1;

  const Shape batch_a(sa.begin(), sa.end() - std::min<size_t>(sa.size(), 2));
  const Shape batch_b(sb.begin(), sb.end() - std::min<size_t>(sb.size(), 2));
  Shape batch(std::max(batch_a.size(), batch_b.size()));
  for (size_t i = 0; i < batch.size(); ++i) {
    const size_t from_end = batch.size() - i;
    const int64_t da = from_end <= batch_a.size() ? batch_a[batch_a.size() - from_end] : 1;
    const int64_t db = from_end <= batch_b.size() ? batch_b[batch_b.size() - from_end] : 1;
    batch[i] = da == 1 ? db : da;
  }
  const int64_t batches = numel(batch);
  if (k != kb || out.numel() != batches * m * n)
    fail(GENIE_ERR_SHAPE_MISMATCH, "matmul: shapes ", shape_str(sa), " and ", shape_str(sb), " do not give ",
         shape_str(out.shape()));

  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* pc = out.data<float>();
  if (numel(batch_b) == 1 && !ta) {
    // One b for every batch: the batches of a stack into a single tall matrix.
    gemm(false, tb, batches * m, n, k, 1.f, pa, lda, pb, ldb, 0.f, pc, n);
    return;
  }
  std::vector<int64_t> stride_a = broadcast_strides(batch_a, batch);
  std::vector<int64_t> stride_b = broadcast_strides(batch_b, batch);
  for (int64_t& s : stride_a) s *= m * k;
  for (int64_t& s : stride_b) s *= k * n;
  // Batches are visited in row-major order, matching the output's layout.
  float* c = pc;
  for_each_row(make_loop<2>(batch, {stride_a, stride_b}), [&](const auto& off, int64_t rows, const auto& st) {
    for (int64_t i = 0; i < rows; ++i, c += m * n)
      gemm(ta, tb, m, n, k, 1.f, pa + off[0] + i * st[0], lda, pb + off[1] + i * st[1], ldb, 0.f, c, n);
  });
}

// x @ weightᵀ + bias over the flattened leading dims of x: one BLAS call.
void linear(const KernelArgs& args) {
  const TensorData& x = *args.in[0];
  const TensorData& w = *args.in[1];
  const TensorData* bias = optional_input(args, 2);
  TensorData& out = *args.out[0];
  expect_dtype(args, x, DType::F32);
  expect_dtype(args, w, DType::F32);
  expect_dtype(args, out, DType::F32);
  const Shape& sx = x.shape();
  if (sx.empty() || w.shape().size() != 2 || w.shape()[1] != sx.back())
    fail(GENIE_ERR_SHAPE_MISMATCH, "linear: x ", shape_str(sx), " does not match weight ",
         shape_str(w.shape()));
  const int64_t in = sx.back();
  const int64_t features = w.shape()[0];
  const int64_t rows = dims_product(sx, 0, sx.size() - 1);
  if (out.numel() != rows * features)
    fail(GENIE_ERR_SHAPE_MISMATCH, "linear: output ", shape_str(out.shape()), " does not match x ",
         shape_str(sx), " and weight ", shape_str(w.shape()));
  float* c = out.data<float>();
  float beta = 0.f;
  if (bias) {
    expect_dtype(args, *bias, DType::F32);
    if (bias->numel() != features)
      fail(GENIE_ERR_SHAPE_MISMATCH, "linear: bias ", shape_str(bias->shape()), " does not match ", features,
           " output features");
    // Seeding the output with the bias lets the GEMM add it (beta = 1) for free.
    for (int64_t r = 0; r < rows; ++r) std::copy_n(bias->data<float>(), features, c + r * features);
    beta = 1.f;
  }
  gemm(false, true, rows, features, in, 1.f, x.data<float>(), in, w.data<float>(), in, beta, c, features);
}

}  // namespace

void add_matmul_kernels(KernelTable& t) {
  t["matmul"] = matmul;
  t["linear"] = linear;
}

}  // namespace genie::cpu
