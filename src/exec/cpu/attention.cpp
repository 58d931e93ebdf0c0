// Scaled dot-product attention: per (batch, head), scores = scale·Q·Kᵀ and
// out = softmax(scores + mask)·V, both products through the BLAS.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "exec/cpu/kernel_util.hpp"

namespace genie::cpu {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Scores are computed for a block of queries at a time so that long sequences
// need a bounded scratch buffer (4 MiB of scores) rather than Sq·Sk floats.
constexpr int64_t kMaxScoreBlock = int64_t{1} << 20;
// The smallest query block a causal attention is cut into.
constexpr int64_t kCausalBlock = 16;

struct Mask {
  const TensorData* t = nullptr;
  std::vector<int64_t> batch_offset;  // element offset of each (batch, head) block
  int64_t row_stride = 0;
  int64_t col_stride = 0;
};

Mask make_mask(const KernelArgs& a, const TensorData* t, const Shape& score_shape, int64_t batches) {
  Mask m;
  if (!t) return m;
  if (t->dtype() != DType::Bool) expect_dtype(a, *t, DType::F32);
  m.t = t;
  const std::vector<int64_t> st = broadcast_strides(t->shape(), score_shape);
  const size_t r = score_shape.size();
  m.row_stride = st[r - 2];
  m.col_stride = st[r - 1];
  const Shape lead(score_shape.begin(), score_shape.end() - 2);
  m.batch_offset.reserve(batches);
  for_each_row(make_loop<1>(lead, {std::vector<int64_t>(st.begin(), st.end() - 2)}),
               [&](const auto& off, int64_t n, const auto& inner) {
                 for (int64_t i = 0; i < n; ++i) m.batch_offset.push_back(off[0] + i * inner[0]);
               });
  return m;
}

// Applies the mask to keys [0, n) of one score row.
void apply_mask(const Mask& m, int64_t batch, int64_t query, float* row, int64_t n) {
  const int64_t base = m.batch_offset[batch] + query * m.row_stride;
  if (m.t->dtype() == DType::Bool) {
    const uint8_t* keep = m.t->data<uint8_t>() + base;
    for (int64_t j = 0; j < n; ++j)
      if (!keep[j * m.col_stride]) row[j] = kNegInf;
  } else {
    const float* add = m.t->data<float>() + base;
    for (int64_t j = 0; j < n; ++j) row[j] += add[j * m.col_stride];
  }
}

void attention(const KernelArgs& args) {
  const TensorData& q = *args.in[0];
  const TensorData& k = *args.in[1];
  const TensorData& v = *args.in[2];
  TensorData& out = *args.out[0];
  for (const TensorData* t : {&q, &k, &v, static_cast<const TensorData*>(&out)})
    expect_dtype(args, *t, DType::F32);
  const Shape& qs = q.shape();
  const size_t r = qs.size();
  bool ok = r >= 2 && k.shape().size() == r && v.shape().size() == r &&
            std::equal(qs.begin(), qs.end() - 2, k.shape().begin()) &&
            std::equal(qs.begin(), qs.end() - 2, v.shape().begin());
  const int64_t sq = ok ? qs[r - 2] : 0;
  const int64_t d = ok ? qs[r - 1] : 0;
  const int64_t sk = ok ? k.shape()[r - 2] : 0;
  const int64_t dv = ok ? v.shape()[r - 1] : 0;
  const int64_t batches = ok ? dims_product(qs, 0, r - 2) : 0;
  ok = ok && k.shape()[r - 1] == d && v.shape()[r - 2] == sk && out.numel() == batches * sq * dv;
  if (!ok)
    fail(GENIE_ERR_SHAPE_MISMATCH, "attention: q ", shape_str(qs), ", k ", shape_str(k.shape()), ", v ",
         shape_str(v.shape()), " and output ", shape_str(out.shape()), " do not fit together");

  const auto scale =
      static_cast<float>(args.attrs.get_float("scale", 1.0 / std::sqrt(static_cast<double>(d))));
  const bool causal = args.attrs.get_int("causal", 0) != 0;
  Shape score_shape(qs.begin(), qs.end() - 2);
  score_shape.insert(score_shape.end(), {sq, sk});
  const Mask mask = make_mask(args, optional_input(args, 3), score_shape, batches);

  int64_t block = std::clamp(kMaxScoreBlock / std::max<int64_t>(sk, 1), int64_t{1}, std::max<int64_t>(sq, 1));
  // Causal: smaller query blocks skip more of the keys no query of the block
  // sees (with blocks of sq/4 rows, 5/8 of the products instead of all).
  if (causal && sq >= 4 * kCausalBlock) block = std::min(block, std::max(kCausalBlock, sq / 4));
  // Causal: query i sees keys j <= i + (sk - sq), the queries being the last sq positions.
  auto visible = [&](int64_t i) { return causal ? std::clamp(i + sk - sq + 1, int64_t{0}, sk) : sk; };
  // Each (batch·head, query block) writes its own output rows from its own
  // scores: the units are independent and split over a.par, each computed as
  // in the serial loop. A unit's work is at most 2·block·sk·(d + dv) flops.
  const int64_t blocks = sq == 0 ? 0 : (sq + block - 1) / block;
  const int64_t unit_flops = std::max<int64_t>(2 * block * sk * (d + dv), 1);
  parallel_for(
      args, batches * blocks, (kGrainFlops + unit_flops - 1) / unit_flops, [&](int64_t u0, int64_t u1) {
        std::vector<float> scores(static_cast<size_t>(block * sk));
        for (int64_t u = u0; u < u1; ++u) {
          const int64_t b = u / blocks;
          const int64_t i0 = (u % blocks) * block;
          const float* qb = q.data<float>() + b * sq * d;
          const float* kb = k.data<float>() + b * sk * d;
          const float* vb = v.data<float>() + b * sk * dv;
          float* ob = out.data<float>() + b * sq * dv;
          {
            const int64_t rows = std::min(block, sq - i0);
            // Keys no query of the block can see are left out of both products.
            const int64_t keys = visible(i0 + rows - 1);
            gemm(false, true, rows, keys, d, scale, qb + i0 * d, d, kb, d, 0.f, scores.data(), keys);
            for (int64_t i = 0; i < rows; ++i) {
              float* row = scores.data() + i * keys;
              const int64_t n = visible(i0 + i);
              if (mask.t) apply_mask(mask, b, i0 + i, row, n);
              softmax_row(row, row, n);
              std::fill(row + n, row + keys, 0.f);
            }
            gemm(false, false, rows, dv, keys, 1.f, scores.data(), keys, vb, dv, 0.f, ob + i0 * dv, dv);
          }
        }
      });
}

}  // namespace

void add_attention_kernels(KernelTable& t) { t["attention"] = attention; }

}  // namespace genie::cpu
