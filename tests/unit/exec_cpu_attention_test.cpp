// Scaled dot-product attention against a naive double reference.
#include <cmath>
#include <limits>

#include "exec_cpu_testing.hpp"

namespace genie::cpu::testing {
namespace {

// q [..., sq, d], k [..., sk, d], v [..., sk, dv]; mask broadcast to [..., sq, sk].
std::vector<double> ref_attention(const TensorData& q, const TensorData& k, const TensorData& v,
                                  const TensorData* mask, bool causal, double scale) {
  const Shape& qs = q.shape();
  const size_t r = qs.size();
  const int64_t sq = qs[r - 2], d = qs[r - 1], sk = k.shape()[r - 2], dv = v.shape()[r - 1];
  const int64_t batches = q.numel() / (sq * d);
  Shape score_shape(qs.begin(), qs.end() - 2);
  score_shape.push_back(sq);
  score_shape.push_back(sk);
  std::vector<double> out;
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t i = 0; i < sq; ++i) {
      std::vector<double> s(sk);
      std::vector<bool> masked(sk, false);
      for (int64_t j = 0; j < sk; ++j) {
        double dot = 0;
        for (int64_t p = 0; p < d; ++p)
          dot += double{q.data<float>()[(b * sq + i) * d + p]} * k.data<float>()[(b * sk + j) * d + p];
        s[j] = dot * scale;
        if (causal && j > i + (sk - sq)) masked[j] = true;
        if (mask) {
          const int64_t m = broadcast_index(unravel((b * sq + i) * sk + j, score_shape), mask->shape());
          if (mask->dtype() == DType::Bool) {
            if (!mask->data<uint8_t>()[m]) masked[j] = true;
          } else {
            s[j] += mask->data<float>()[m];
          }
        }
      }
      double mx = -INFINITY;
      for (int64_t j = 0; j < sk; ++j)
        if (!masked[j]) mx = std::max(mx, s[j]);
      std::vector<double> p(sk, 0.0);
      double sum = 0;
      if (mx != -INFINITY)
        for (int64_t j = 0; j < sk; ++j)
          if (!masked[j]) sum += p[j] = std::exp(s[j] - mx);
      for (int64_t c = 0; c < dv; ++c) {
        double o = 0;
        for (int64_t j = 0; j < sk; ++j)
          if (sum > 0) o += p[j] / sum * v.data<float>()[(b * sk + j) * dv + c];
        out.push_back(o);
      }
    }
  return out;
}

struct Inputs {
  Tensor q, k, v;
  Shape out;
};

Inputs make_inputs(const Shape& lead, int64_t sq, int64_t sk, int64_t d, int64_t dv, uint32_t seed) {
  std::mt19937 rng(seed);
  auto shape = [&](int64_t a, int64_t b) {
    Shape s = lead;
    s.push_back(a);
    s.push_back(b);
    return s;
  };
  return {random_f32(shape(sq, d), rng, -2.f, 2.f), random_f32(shape(sk, d), rng, -2.f, 2.f),
          random_f32(shape(sk, dv), rng), shape(sq, dv)};
}

Tensor attend(const Inputs& in, const Attrs& at, const TensorData* mask = nullptr) {
  return run1("attention", at, {in.q.get(), in.k.get(), in.v.get(), mask}, DType::F32, in.out);
}

TEST(Attention, PlainWithDefaultScaleAndWideValues) {
  const Inputs in = make_inputs({2, 3}, 5, 7, 8, 6, 1);
  expect_close(*attend(in, {}), ref_attention(*in.q, *in.k, *in.v, nullptr, false, 1 / std::sqrt(8.0)));
  expect_close(*attend(in, attrs({{"scale", 0.3}})), ref_attention(*in.q, *in.k, *in.v, nullptr, false, 0.3));
  // Rank 2: no leading dims at all; the mask slot may be omitted entirely.
  const Inputs flat = make_inputs({}, 4, 6, 5, 5, 2);
  expect_close(*run1("attention", {}, {flat.q.get(), flat.k.get(), flat.v.get()}, DType::F32, flat.out),
               ref_attention(*flat.q, *flat.k, *flat.v, nullptr, false, 1 / std::sqrt(5.0)));
}

TEST(Attention, CausalSquareAndDecode) {
  const Attrs causal = attrs({{"causal", int64_t{1}}});
  const Inputs square = make_inputs({2, 2}, 6, 6, 4, 4, 3);
  expect_close(*attend(square, causal), ref_attention(*square.q, *square.k, *square.v, nullptr, true, 0.5));
  // Sq < Sk: the queries are the last positions (decode with a KV cache).
  const Inputs decode = make_inputs({2, 2}, 3, 8, 4, 4, 4);
  expect_close(*attend(decode, causal), ref_attention(*decode.q, *decode.k, *decode.v, nullptr, true, 0.5));
  const Inputs one = make_inputs({1, 2}, 1, 9, 4, 3, 5);
  expect_close(*attend(one, causal), ref_attention(*one.q, *one.k, *one.v, nullptr, true, 0.5));
}

TEST(Attention, CausalWithMoreQueriesThanKeysMasksEarlyRowsFully) {
  const Inputs in = make_inputs({2}, 6, 3, 4, 4, 6);
  const Tensor r = attend(in, attrs({{"causal", int64_t{1}}}));
  expect_close(*r, ref_attention(*in.q, *in.k, *in.v, nullptr, true, 0.5));
  for (int64_t c = 0; c < 3 * 4; ++c) EXPECT_EQ(r->data<float>()[c], 0.f);  // rows 0..2 see no key
}

TEST(Attention, BoolMaskBroadcastAndFullyMaskedRow) {
  const Inputs in = make_inputs({2, 3}, 4, 5, 8, 8, 7);
  // Key padding mask [2, 1, 1, 5]: batch 1 masks its last two keys.
  const Tensor pad = make<uint8_t>({2, 1, 1, 5}, {1, 1, 1, 1, 1, 1, 1, 1, 0, 0});
  const double scale = 1 / std::sqrt(8.0);
  expect_close(*attend(in, {}, pad.get()), ref_attention(*in.q, *in.k, *in.v, pad.get(), false, scale));
  // [Sq, Sk] mask whose row 2 masks everything: that row is zeros in every head.
  std::vector<uint8_t> m(20, 1);
  for (int64_t j = 0; j < 5; ++j) m[2 * 5 + j] = 0;
  m[3] = 0;
  const Tensor mask = make<uint8_t>({4, 5}, m);
  const Tensor r = attend(in, {}, mask.get());
  expect_close(*r, ref_attention(*in.q, *in.k, *in.v, mask.get(), false, scale));
  for (int64_t b = 0; b < 6; ++b)
    for (int64_t c = 0; c < 8; ++c) EXPECT_EQ(r->data<float>()[(b * 4 + 2) * 8 + c], 0.f);
  // Combined with causal.
  expect_close(*attend(in, attrs({{"causal", int64_t{1}}}), mask.get()),
               ref_attention(*in.q, *in.k, *in.v, mask.get(), true, scale));
}

TEST(Attention, FloatMaskIsAdded) {
  const Inputs in = make_inputs({2, 2}, 3, 4, 4, 5, 8);
  std::mt19937 rng(9);
  const Tensor bias = random_f32({2, 1, 3, 4}, rng, -3.f, 3.f);
  expect_close(*attend(in, {}, bias.get()), ref_attention(*in.q, *in.k, *in.v, bias.get(), false, 0.5));
  const float inf = std::numeric_limits<float>::infinity();
  // An additive -inf row masks everything: zeros, not NaN.
  const Tensor neg = make<float>({3, 4}, {0, -inf, 0, 0, -inf, -inf, -inf, -inf, 1, 2, 3, 4});
  const Tensor r = attend(in, {}, neg.get());
  expect_close(*r, ref_attention(*in.q, *in.k, *in.v, neg.get(), false, 0.5));
  for (int64_t c = 0; c < 5; ++c) EXPECT_EQ(r->data<float>()[5 + c], 0.f);
}

TEST(Attention, LongKeysAreProcessedInQueryBlocks) {
  // 1 << 20 scores per block over 4096 keys: 256 queries per block, so 300
  // queries take two blocks, causal ones with different key counts.
  const Inputs in = make_inputs({1}, 300, 4096, 4, 2, 10);
  expect_close(*attend(in, attrs({{"causal", int64_t{1}}})),
               ref_attention(*in.q, *in.k, *in.v, nullptr, true, 0.5));
}

TEST(Attention, CausalPrefillIsCutIntoQueryBlocks) {
  // 70 queries: blocks of 17 rows (the last one short), each product over
  // only the keys its last query sees; with a mask, and with more keys than
  // queries (a prefill appended to a cache).
  const Attrs causal = attrs({{"causal", int64_t{1}}});
  const Inputs square = make_inputs({2, 3}, 70, 70, 4, 6, 11);
  expect_close(*attend(square, causal), ref_attention(*square.q, *square.k, *square.v, nullptr, true, 0.5));
  const Inputs longer = make_inputs({2}, 64, 90, 4, 4, 12);
  std::vector<uint8_t> m(64 * 90, 1);
  for (int64_t i = 0; i < 64; ++i) m[static_cast<size_t>(i * 90 + (i * 7) % 90)] = 0;
  const Tensor mask = make<uint8_t>({64, 90}, m);
  expect_close(*attend(longer, causal, mask.get()),
               ref_attention(*longer.q, *longer.k, *longer.v, mask.get(), true, 0.5));
}

TEST(Attention, MismatchedLeadingDimsAreRefused) {
  std::mt19937 rng(1);
  const Tensor q = random_f32({2, 3, 4}, rng);
  const Tensor k = random_f32({3, 3, 4}, rng);
  expect_error(
      [&] {
        run1("attention", {}, {q.get(), k.get(), k.get()}, DType::F32, {2, 3, 4});
      },
      GENIE_ERR_SHAPE_MISMATCH);
}

}  // namespace
}  // namespace genie::cpu::testing
