// Scaled dot-product attention, fused: softmax(q·kᵀ·scale + mask)·v without
// the [Sq, Sk] score matrix ever existing. Flash-attention style: a block
// takes a tile of kQueryTile queries of one (batch, head), walks the keys in
// tiles of kKeyTile staged in shared memory, and keeps per query a running
// max m, a running sum l and an unnormalised output row; each key tile
// rescales them by exp(m_old - m_new) (online softmax). Scores exist only
// as one register per lane (lane j scores key j of the tile). Causal blocks
// stop at the last key their last query sees (index_math.hpp, key_tiles),
// so the masked half of the keys is never loaded. q, k, v, mask and output
// stay in their storage type (f16/bf16 loaded natively); everything is
// computed in f32. docs/cuda-kernels.md has the design.
#include <cmath>

#include "exec/cuda/kernels/device_util.cuh"
#include "exec/cuda/kernels/online_softmax.hpp"

namespace genie::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 4;
constexpr int kQueryTile = kWarps * kRowsPerWarp;  // queries per block
constexpr int kKeyTile = 32;                       // keys per tile: one per lane
constexpr float kNegInf = -INFINITY;

enum class MaskKind { None, Bool, Add };

template <class T>
struct AttentionParams {
  const T* q;
  const T* k;
  const T* v;
  const void* mask;
  T* out;
  int64_t batches, sq, sk, q_tiles;
  int d, dv;
  float scale;
  bool causal;
  // The mask's element offset: mask_batch over the leading dims, then
  // query·mask_row + key·mask_col (0 along broadcast dims).
  Indexer<1> mask_batch;
  int64_t mask_row, mask_col;
};

// Dynamic shared memory: the query tile, the key tile (rows padded by one
// float so that lanes reading different keys hit different banks), the value
// tile and the unnormalised output rows, all f32.
inline size_t shared_bytes(int d, int dv) {
  return sizeof(float) * (static_cast<size_t>(kQueryTile) * d + static_cast<size_t>(kKeyTile) * (d + 1) +
                          static_cast<size_t>(kKeyTile) * dv + static_cast<size_t>(kQueryTile) * dv);
}

template <class T, MaskKind kMask>
__global__ void __launch_bounds__(kWarps * 32) flash_attention(AttentionParams<T> p) {
  extern __shared__ float smem[];
  __shared__ float probs[kWarps][kKeyTile];  // a warp's p_j, read by all its lanes
  float* qs = smem;
  float* ks = qs + kQueryTile * p.d;
  float* vs = ks + kKeyTile * (p.d + 1);
  float* acc = vs + kKeyTile * p.dv;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int kd = p.d + 1;

  for (int64_t unit = blockIdx.x; unit < p.batches * p.q_tiles; unit += gridDim.x) {
    const int64_t b = unit / p.q_tiles;
    const int64_t q0 = (unit - b * p.q_tiles) * kQueryTile;
    const int rows = static_cast<int>(p.sq - q0 < kQueryTile ? p.sq - q0 : kQueryTile);
    const T* qb = p.q + (b * p.sq + q0) * p.d;
    const T* kb = p.k + b * p.sk * p.d;
    const T* vb = p.v + b * p.sk * p.dv;
    const int64_t mask_base = kMask == MaskKind::None ? 0 : p.mask_batch.offset(b);

    __syncthreads();  // the previous unit is done with the shared tiles
    for (int i = threadIdx.x; i < kQueryTile * p.d; i += blockDim.x) {
      const int r = i / p.d;
      qs[i] = r < rows ? to_f32(qb[static_cast<int64_t>(i)]) : 0.f;
    }
    for (int i = threadIdx.x; i < kQueryTile * p.dv; i += blockDim.x) acc[i] = 0.f;
    __syncthreads();  // zeroed by other threads than the lanes that own the rows (even with no key tile)

    OnlineSoftmax row[kRowsPerWarp];

    const int64_t tiles = key_tiles(q0, rows, p.sq, p.sk, p.causal, kKeyTile);
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t k0 = t * kKeyTile;
      const int kn = static_cast<int>(p.sk - k0 < kKeyTile ? p.sk - k0 : kKeyTile);
      __syncthreads();  // every warp is done with the previous tile
      for (int i = threadIdx.x; i < kKeyTile * p.d; i += blockDim.x) {
        const int j = i / p.d;
        const int c = i - j * p.d;
        ks[j * kd + c] = j < kn ? to_f32(kb[(k0 + j) * p.d + c]) : 0.f;
      }
      for (int i = threadIdx.x; i < kKeyTile * p.dv; i += blockDim.x) {
        const int j = i / p.dv;
        vs[i] = j < kn ? to_f32(vb[k0 * p.dv + i]) : 0.f;
      }
      __syncthreads();

      for (int rr = 0; rr < kRowsPerWarp; ++rr) {
        const int r = warp * kRowsPerWarp + rr;
        if (r >= rows) break;  // uniform across the warp
        const int64_t qi = q0 + r;
        const int64_t key = k0 + lane;
        float s = kNegInf;
        if (lane < kn && key < visible_keys(qi, p.sq, p.sk, p.causal)) {
          const float* qrow = qs + r * p.d;
          const float* krow = ks + lane * kd;
          float dot = 0.f;
          for (int c = 0; c < p.d; ++c) dot = fmaf(qrow[c], krow[c], dot);
          s = dot * p.scale;
          if constexpr (kMask != MaskKind::None) {
            const int64_t off = mask_base + qi * p.mask_row + key * p.mask_col;
            if constexpr (kMask == MaskKind::Bool) {
              if (!static_cast<const uint8_t*>(p.mask)[off]) s = kNegInf;
            } else {
              s += to_f32(static_cast<const T*>(p.mask)[off]);
            }
          }
        }
        // The tile max is the same in every lane, so the whole warp skips or not.
        float alpha;
        if (!row[rr].begin_tile(warp_reduce(s, MaxOp{}), alpha)) continue;
        const float pj = row[rr].weight(s);
        row[rr].add(warp_reduce(pj, SumOp{}));
        probs[warp][lane] = pj;
        __syncwarp();
        float* arow = acc + r * p.dv;
        for (int c = lane; c < p.dv; c += 32) {
          float a = arow[c] * alpha;
          for (int j = 0; j < kn; ++j) a = fmaf(probs[warp][j], vs[j * p.dv + c], a);
          arow[c] = a;
        }
        __syncwarp();  // probs is rewritten for the next row
      }
    }

    // A lane wrote the same columns of its warp's rows that it reads here.
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      const int r = warp * kRowsPerWarp + rr;
      if (r >= rows) break;
      const float inv = row[rr].finish();  // 0 for a row with every key masked
      T* orow = p.out + (b * p.sq + q0 + r) * p.dv;
      for (int c = lane; c < p.dv; c += 32) orow[c] = from_f32<T>(acc[r * p.dv + c] * inv);
    }
  }
}

template <class T, MaskKind kMask>
void launch(const KernelArgs& k, const AttentionParams<T>& p) {
  const size_t bytes = shared_bytes(p.d, p.dv);
  int device = 0, optin = 0;
  check_cuda(cudaGetDevice(&device), "attention");
  check_cuda(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "attention");
  const size_t static_bytes = sizeof(float) * kWarps * kKeyTile;
  if (bytes + static_bytes > static_cast<size_t>(optin))
    fail(GENIE_ERR_UNSUPPORTED, "attention: head dims ", p.d, " and ", p.dv, " need ", bytes + static_bytes,
         " bytes of shared memory per block; the device offers ", optin);
  auto kernel = flash_attention<T, kMask>;
  if (bytes > 48 * 1024)
    check_cuda(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
        "attention: shared memory size");
  kernel<<<blocks_for(p.batches * p.q_tiles, 1), kWarps * 32, bytes, stream_of(k)>>>(p);
  check_launch("attention");
}

void attention(const KernelArgs& k) {
  const TensorData& q = *k.in[0];
  const TensorData& key = *k.in[1];
  const TensorData& v = *k.in[2];
  const TensorData* mask = optional_input(k, 3);
  TensorData& out = *k.out[0];
  for (const TensorData* t : {&key, &v, static_cast<const TensorData*>(&out)}) expect_dtype(k, *t, q.dtype());
  if (mask && mask->dtype() != DType::Bool) expect_dtype(k, *mask, q.dtype());
  const Shape& qs = q.shape();
  const size_t r = qs.size();
  bool ok = r >= 2 && key.shape().size() == r && v.shape().size() == r &&
            std::equal(qs.begin(), qs.end() - 2, key.shape().begin()) &&
            std::equal(qs.begin(), qs.end() - 2, v.shape().begin());
  const int64_t sq = ok ? qs[r - 2] : 0;
  const int64_t d = ok ? qs[r - 1] : 0;
  const int64_t sk = ok ? key.shape()[r - 2] : 0;
  const int64_t dv = ok ? v.shape()[r - 1] : 0;
  int64_t batches = 1;
  for (size_t i = 0; ok && i + 2 < r; ++i) batches *= qs[i];
  ok = ok && key.shape()[r - 1] == d && v.shape()[r - 2] == sk && out.numel() == batches * sq * dv;
  if (!ok)
    fail(GENIE_ERR_SHAPE_MISMATCH, "attention: q ", shape_str(qs), ", k ", shape_str(key.shape()), ", v ",
         shape_str(v.shape()), " and output ", shape_str(out.shape()), " do not fit together");
  check(d <= (1 << 20) && dv <= (1 << 20), GENIE_ERR_UNSUPPORTED, "attention: head dims past 2^20");
  if (out.numel() == 0) return;

  Shape score_shape(qs.begin(), qs.end() - 2);
  score_shape.insert(score_shape.end(), {sq, sk});
  visit_float(k, q.dtype(), [&](auto tag) {
    using T = decltype(tag);
    AttentionParams<T> p{};
    p.q = dev<T>(q);
    p.k = dev<T>(key);
    p.v = dev<T>(v);
    p.out = dev<T>(out);
    p.batches = batches;
    p.sq = sq;
    p.sk = sk;
    p.q_tiles = (sq + kQueryTile - 1) / kQueryTile;
    p.d = static_cast<int>(d);
    p.dv = static_cast<int>(dv);
    p.scale = static_cast<float>(k.attrs.get_float("scale", 1.0 / std::sqrt(static_cast<double>(d))));
    p.causal = k.attrs.get_int("causal", 0) != 0;
    if (!mask) return launch<T, MaskKind::None>(k, p);
    const std::vector<int64_t> st = broadcast_strides(mask->shape(), score_shape);
    p.mask = mask->bytes();
    p.mask_row = st[r - 2];
    p.mask_col = st[r - 1];
    p.mask_batch =
        make_indexer<1>(Shape(qs.begin(), qs.end() - 2), {std::vector<int64_t>(st.begin(), st.end() - 2)});
    if (mask->dtype() == DType::Bool) return launch<T, MaskKind::Bool>(k, p);
    launch<T, MaskKind::Add>(k, p);
  });
}

}  // namespace

void add_attention_kernels(KernelTable& t) { t["attention"] = attention; }

}  // namespace genie::cuda
