// matmul and linear through cuBLASLt.
//
// Genie's tensors are row-major and cuBLASLt's matrices column-major: a
// row-major X (r x c, leading dimension ld) is the column-major Xᵀ with the
// same ld, so C = op(A) op(B) is computed as Cᵀ = op(B)ᵀ op(A)ᵀ with the
// operands swapped and no data moved.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "exec/cuda/blas.hpp"
#include "exec/cuda/cuda_kernels.hpp"
#include "exec/cuda/plugin_util.hpp"

namespace genie::cuda {

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;
constexpr int kMaxDevices = 64;

void check_blas(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  fail(s == CUBLAS_STATUS_ALLOC_FAILED ? GENIE_ERR_OUT_OF_MEMORY
       : s == CUBLAS_STATUS_NOT_SUPPORTED ? GENIE_ERR_UNSUPPORTED
                                           : GENIE_ERR_INTERNAL,
       "cuBLASLt ", what, ": ", cublasLtGetStatusName(s), " (", cublasLtGetStatusString(s), ")");
}

// One handle per device, created on first use.
cublasLtHandle_t handle_for(int device) {
  static std::mutex mu;
  static std::array<cublasLtHandle_t, kMaxDevices> handles{};
  check(device >= 0 && device < kMaxDevices, GENIE_ERR_INTERNAL, "cuda:", device, " beyond the handle table");
  std::lock_guard<std::mutex> lk(mu);
  if (handles[static_cast<size_t>(device)] == nullptr)
    check_blas(cublasLtCreate(&handles[static_cast<size_t>(device)]), "cublasLtCreate");
  return handles[static_cast<size_t>(device)];
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    default: fail(GENIE_ERR_INVALID_ARGUMENT, "cuBLASLt products take f32, f16 or bf16, not ", dtype_name(t));
  }
}

// The largest power of two (at most 256) dividing the address: what an
// algorithm may assume of the pointer.
uint32_t alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && a % al != 0) al /= 2;
  return al;
}

template <class T>
struct Owned {
  T h = nullptr;
  cublasStatus_t (*destroy)(T) = nullptr;
  ~Owned() {
    if (h) destroy(h);
  }
};

// Heuristic answers are cached by everything they depend on.
using AlgoKey = std::tuple<int, int, int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                           int64_t, int64_t, int64_t, int, uint32_t, uint32_t, uint32_t, int>;

}  // namespace

bool tf32_allowed() {
  static const bool allowed = [] {
    const char* v = std::getenv("GENIE_CUDA_ALLOW_TF32");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return allowed;
}

void gemm(Lane& lane, DType dt, const Gemm& g, const void* a, const void* b, void* c, const void* bias) {
  const int device = lane.stream->device;
  cudaStream_t s = lane.stream->handle;
  const size_t es = dtype_size(dt);
  if (g.m == 0 || g.n == 0 || g.batch == 0) return;
  if (g.k == 0) {
    // An empty sum: zeros, or the bias in every row (row 0 written, then
    // the rows written so far copied after themselves).
    const size_t pitch = static_cast<size_t>(g.ldc) * es, width = static_cast<size_t>(g.n) * es;
    for (int64_t i = 0; i < g.batch; ++i) {
      auto* ci = static_cast<std::byte*>(c) + static_cast<size_t>(i * g.stride_c) * es;
      if (bias == nullptr) {
        check_cuda(cudaMemset2DAsync(ci, pitch, 0, width, static_cast<size_t>(g.m), s), "cudaMemset2DAsync");
        continue;
      }
      check_cuda(cudaMemcpyAsync(ci, bias, width, cudaMemcpyDeviceToDevice, s), "bias row");
      for (int64_t done = 1; done < g.m; done *= 2) {
        const int64_t rows = std::min(done, g.m - done);
        check_cuda(cudaMemcpy2DAsync(ci + static_cast<size_t>(done) * pitch, pitch, ci, pitch, width,
                                     static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, s),
                   "bias rows");
      }
    }
    return;
  }
  const cudaDataType_t type = cuda_type(dt);
  const cublasComputeType_t compute =
      dt == DType::F32 && tf32_allowed() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  cublasLtHandle_t h = handle_for(device);

  Owned<cublasLtMatmulDesc_t> op{nullptr, cublasLtMatmulDescDestroy};
  check_blas(cublasLtMatmulDescCreate(&op.h, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
  // Lt's A is our B, its B our A (see the top of this file).
  const cublasOperation_t ta = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_blas(cublasLtMatmulDescSetAttribute(op.h, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "TRANSA");
  check_blas(cublasLtMatmulDescSetAttribute(op.h, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "TRANSB");
  if (bias != nullptr) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    check_blas(cublasLtMatmulDescSetAttribute(op.h, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "EPILOGUE");
    check_blas(cublasLtMatmulDescSetAttribute(op.h, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
               "BIAS_POINTER");
    const cudaDataType_t bt = type;
    check_blas(cublasLtMatmulDescSetAttribute(op.h, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt),
               "BIAS_DATA_TYPE");
    const int64_t bias_stride = 0;  // one bias for every batch
    if (g.batch > 1)
      check_blas(cublasLtMatmulDescSetAttribute(op.h, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &bias_stride,
                                                sizeof bias_stride),
                 "BIAS_BATCH_STRIDE");
  }
  const auto layout = [&](uint64_t rows, uint64_t cols, int64_t ld, int64_t stride) {
    Owned<cublasLtMatrixLayout_t> l{nullptr, cublasLtMatrixLayoutDestroy};
    check_blas(cublasLtMatrixLayoutCreate(&l.h, type, rows, cols, ld), "cublasLtMatrixLayoutCreate");
    if (g.batch > 1) {
      const int32_t count = static_cast<int32_t>(g.batch);
      check_blas(cublasLtMatrixLayoutSetAttribute(l.h, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
                 "BATCH_COUNT");
      check_blas(cublasLtMatrixLayoutSetAttribute(l.h, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                  sizeof stride),
                 "STRIDED_BATCH_OFFSET");
    }
    return std::exchange(l.h, nullptr);
  };
  check(g.batch <= INT32_MAX, GENIE_ERR_TOO_LARGE, "a batched product of ", g.batch, " matrices");
  const auto u = [](int64_t x) { return static_cast<uint64_t>(x); };
  // Column-major views: Lt's A = our B (n x k, or k x n stored when tb), Lt's B = our A.
  Owned<cublasLtMatrixLayout_t> la{g.tb ? layout(u(g.k), u(g.n), g.ldb, g.stride_b)
                                        : layout(u(g.n), u(g.k), g.ldb, g.stride_b),
                                   cublasLtMatrixLayoutDestroy};
  Owned<cublasLtMatrixLayout_t> lb{g.ta ? layout(u(g.m), u(g.k), g.lda, g.stride_a)
                                        : layout(u(g.k), u(g.m), g.lda, g.stride_a),
                                   cublasLtMatrixLayoutDestroy};
  Owned<cublasLtMatrixLayout_t> lc{layout(u(g.n), u(g.m), g.ldc, g.stride_c), cublasLtMatrixLayoutDestroy};

  const uint32_t al_a = alignment(b), al_b = alignment(a), al_c = alignment(c);
  const AlgoKey key{device, static_cast<int>(dt), g.ta, g.tb, g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.batch,
                    g.stride_a, g.stride_b, g.stride_c, bias != nullptr, al_a, al_b, al_c,
                    static_cast<int>(compute)};
  static std::mutex cache_mu;
  static std::map<AlgoKey, cublasLtMatmulHeuristicResult_t> cache;
  cublasLtMatmulHeuristicResult_t algo{};
  bool found = false;
  {
    std::lock_guard<std::mutex> lk(cache_mu);
    auto it = cache.find(key);
    if (it != cache.end()) {
      algo = it->second;
      found = true;
    }
  }
  if (!found) {
    Owned<cublasLtMatmulPreference_t> pref{nullptr, cublasLtMatmulPreferenceDestroy};
    check_blas(cublasLtMatmulPreferenceCreate(&pref.h), "cublasLtMatmulPreferenceCreate");
    const uint64_t ws = kWorkspaceBytes;
    check_blas(cublasLtMatmulPreferenceSetAttribute(pref.h, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
               "MAX_WORKSPACE_BYTES");
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, al_a},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, al_b},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, al_c},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, al_c}};
    for (const auto& [attr, v] : aligns)
      check_blas(cublasLtMatmulPreferenceSetAttribute(pref.h, attr, &v, sizeof v), "MIN_ALIGNMENT");
    int count = 0;
    check_blas(cublasLtMatmulAlgoGetHeuristic(h, op.h, la.h, lb.h, lc.h, lc.h, pref.h, 1, &algo, &count),
               "cublasLtMatmulAlgoGetHeuristic");
    if (count <= 0)
      fail(GENIE_ERR_UNSUPPORTED, "cuBLASLt has no algorithm for a ", dtype_name(dt), " product ", g.m, "x",
           g.k, " by ", g.k, "x", g.n, g.batch > 1 ? cat(" (", g.batch, " batches)") : std::string());
    std::lock_guard<std::mutex> lk(cache_mu);
    cache.emplace(key, algo);
  }
  void* workspace = algo.workspaceSize > 0 ? lane.workspace(algo.workspaceSize) : nullptr;
  const float alpha = 1.f, beta = 0.f;
  check_blas(cublasLtMatmul(h, op.h, &alpha, b, la.h, a, lb.h, &beta, c, lc.h, c, lc.h, &algo.algo, workspace,
                            algo.workspaceSize, s),
             "cublasLtMatmul");
}

namespace {

// Shapes of the batch dims, broadcast (NumPy rules), and each operand's
// batch strides in matrices (0 where it broadcasts).
struct Batches {
  Shape dims;
  std::vector<int64_t> sa, sb;
};

Batches broadcast_batches(const Shape& ba, const Shape& bb) {
  Batches r;
  const size_t rank = std::max(ba.size(), bb.size());
  r.dims.assign(rank, 1);
  std::vector<int64_t> da(rank, 1), db(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    const size_t from_end = rank - i;
    da[i] = from_end <= ba.size() ? ba[ba.size() - from_end] : 1;
    db[i] = from_end <= bb.size() ? bb[bb.size() - from_end] : 1;
    if (!(da[i] == db[i] || da[i] == 1 || db[i] == 1))
      fail(GENIE_ERR_SHAPE_MISMATCH, "matmul: batch dims ", shape_str(ba), " and ", shape_str(bb),
           " do not broadcast");
    r.dims[i] = da[i] == 1 ? db[i] : da[i];
  }
  r.sa.assign(rank, 0);
  r.sb.assign(rank, 0);
  int64_t pa = 1, pb = 1;
  for (size_t i = rank; i-- > 0;) {
    r.sa[i] = da[i] == 1 ? 0 : pa;
    r.sb[i] = db[i] == 1 ? 0 : pb;
    pa *= da[i];
    pb *= db[i];
  }
  return r;
}

// Merges adjacent batch dims that step through both operands evenly, so
// that [B, H] batches of contiguous operands become one strided batch.
void merge_batches(Batches& b) {
  for (size_t i = b.dims.size(); i-- > 1;) {
    const size_t o = i - 1;  // the outer dim, merged into dim i
    const bool even_a = b.sa[o] == b.sa[i] * b.dims[i];
    const bool even_b = b.sb[o] == b.sb[i] * b.dims[i];
    if (even_a && even_b) {
      b.dims[i] *= b.dims[o];
      b.dims.erase(b.dims.begin() + static_cast<long>(o));
      b.sa.erase(b.sa.begin() + static_cast<long>(o));
      b.sb.erase(b.sb.begin() + static_cast<long>(o));
    }
  }
}

Lane& lane_of(const KernelArgs& a) {
  (void)stream_of(a);  // checks the queue
  return static_cast<CudaQueue*>(a.queue)->lane();
}

void expect_float(const KernelArgs& args, const TensorData& t, DType dt) {
  check(t.dtype() == dt, GENIE_ERR_INVALID_ARGUMENT, args.op, ": operands must share one dtype (", dtype_name(dt),
        "), got ", dtype_name(t.dtype()));
}

void matmul(const KernelArgs& args) {
  const TensorData& a = *args.in[0];
  const TensorData& b = *args.in[1];
  TensorData& out = *args.out[0];
  const DType dt = a.dtype();
  expect_float(args, b, dt);
  expect_float(args, out, dt);
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  check(!sa.empty() && !sb.empty(), GENIE_ERR_SHAPE_MISMATCH, "matmul: operands must have rank >= 1");
  Gemm g;
  g.ta = sa.size() >= 2 && args.attrs.get_int("transpose_a", 0) != 0;
  g.tb = sb.size() >= 2 && args.attrs.get_int("transpose_b", 0) != 0;
  int64_t kb = sb[0];
  g.k = sa.back();
  g.m = 1;
  g.n = 1;
  if (sa.size() >= 2) {
    g.m = sa[sa.size() - 2];
    if (g.ta) std::swap(g.m, g.k);
  }
  if (sb.size() >= 2) {
    kb = sb[sb.size() - 2];
    g.n = sb.back();
    if (g.tb) std::swap(kb, g.n);
  }
  g.lda = std::max<int64_t>(sa.back(), 1);
  g.ldb = sb.size() >= 2 ? std::max<int64_t>(sb.back(), 1) : 1;
  g.ldc = std::max<int64_t>(g.n, 1);
  const Shape batch_a(sa.begin(), sa.end() - static_cast<long>(std::min<size_t>(sa.size(), 2)));
  const Shape batch_b(sb.begin(), sb.end() - static_cast<long>(std::min<size_t>(sb.size(), 2)));
  Batches bt = broadcast_batches(batch_a, batch_b);
  const int64_t batches = elements(bt.dims);
  if (!(g.k == kb && out.numel() == batches * g.m * g.n))
    fail(GENIE_ERR_SHAPE_MISMATCH, "matmul: shapes ", shape_str(sa), " and ", shape_str(sb), " do not give ",
         shape_str(out.shape()));
  Lane& lane = lane_of(args);
  const size_t es = dtype_size(dt);
  const auto* pa = a.bytes();
  const auto* pb = b.bytes();
  auto* pc = out.bytes();
  if (elements(batch_b) == 1 && !g.ta) {
    // One b for every batch: the batches of a stack into one tall matrix.
    g.m *= batches;
    gemm(lane, dt, g, pa, pb, pc, nullptr);
    return;
  }
  merge_batches(bt);
  // The innermost (merged) batch dim is one strided call; outer ones loop.
  const size_t rank = bt.dims.size();
  g.batch = rank ? bt.dims.back() : 1;
  g.stride_a = rank ? bt.sa.back() * g.m * g.k : 0;
  g.stride_b = rank ? bt.sb.back() * g.k * g.n : 0;
  g.stride_c = g.m * g.n;
  const int64_t outer = rank ? batches / std::max<int64_t>(g.batch, 1) : 1;
  std::vector<int64_t> idx(rank > 0 ? rank - 1 : 0, 0);
  for (int64_t o = 0; o < outer; ++o) {
    int64_t off_a = 0, off_b = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      off_a += idx[d] * bt.sa[d];
      off_b += idx[d] * bt.sb[d];
    }
    gemm(lane, dt, g, pa + static_cast<size_t>(off_a * g.m * g.k) * es, pb + static_cast<size_t>(off_b * g.k * g.n) * es,
         pc + static_cast<size_t>(o * g.batch * g.m * g.n) * es, nullptr);
    for (size_t d = idx.size(); d-- > 0;) {  // row-major order, as the output is laid out
      if (++idx[d] < bt.dims[d]) break;
      idx[d] = 0;
    }
  }
}

// x @ weightᵀ + bias over the flattened leading dims of x: one product,
// the bias added by the product's epilogue.
void linear(const KernelArgs& args) {
  const TensorData& x = *args.in[0];
  const TensorData& w = *args.in[1];
  const TensorData* bias = args.in.size() > 2 ? args.in[2] : nullptr;
  TensorData& out = *args.out[0];
  const DType dt = x.dtype();
  expect_float(args, w, dt);
  expect_float(args, out, dt);
  const Shape& sx = x.shape();
  if (!(!sx.empty() && w.shape().size() == 2 && w.shape()[1] == sx.back()))
    fail(GENIE_ERR_SHAPE_MISMATCH, "linear: x ", shape_str(sx), " does not match weight ",
         shape_str(w.shape()));
  Gemm g;
  g.tb = true;
  g.k = sx.back();
  g.n = w.shape()[0];
  g.m = elements(sx, 0, sx.size() - 1);
  g.lda = std::max<int64_t>(g.k, 1);
  g.ldb = std::max<int64_t>(g.k, 1);
  g.ldc = std::max<int64_t>(g.n, 1);
  if (out.numel() != g.m * g.n)
    fail(GENIE_ERR_SHAPE_MISMATCH, "linear: output ", shape_str(out.shape()), " does not match x ",
         shape_str(sx), " and weight ", shape_str(w.shape()));
  if (bias != nullptr) {
    expect_float(args, *bias, dt);
    if (bias->numel() != g.n)
      fail(GENIE_ERR_SHAPE_MISMATCH, "linear: bias ", shape_str(bias->shape()), " does not match ", g.n,
           " output features");
  }
  gemm(lane_of(args), dt, g, x.bytes(), w.bytes(), out.bytes(), bias ? bias->bytes() : nullptr);
}

}  // namespace

void add_blas_kernels(KernelTable& t) {
  t["matmul"] = matmul;
  t["linear"] = linear;
}

}  // namespace genie::cuda
