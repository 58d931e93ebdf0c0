// Four-lane float math for the kernels dominated by transcendental functions
// (softmax, attention, GELU, SiLU, sigmoid, tanh, exp).
//
// libm's expf/tanhf/erff are scalar calls, and GCC does not vectorise them (or
// the selects around them) without -ffast-math; at the default -O2 it does not
// vectorise loops of unknown length at all. GCC/Clang vector extensions give
// SSE code at any optimisation level with IEEE semantics intact, which made
// GPT-2's GELU about 6x faster than the libm loop.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>

namespace genie::cpu::vec {

using F4 = float __attribute__((vector_size(16)));
using I4 = int32_t __attribute__((vector_size(16)));
using U4 = uint32_t __attribute__((vector_size(16)));

constexpr int64_t kLanes = 4;
constexpr float kInf = std::numeric_limits<float>::infinity();

inline F4 splat(float v) { return F4{v, v, v, v}; }

// Loads min(avail, 4) floats from p (avail >= 1); missing lanes read `pad`.
// The tail is assembled lane by lane on purpose: written as a short copy, GCC
// merges it with the full-block path into one variable-length copy through
// the stack, and every block then pays a store-forwarding stall.
inline F4 load(const float* p, int64_t avail, float pad) {
  if (avail >= kLanes) {
    F4 v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  return F4{p[0], avail > 1 ? p[1] : pad, avail > 2 ? p[2] : pad, pad};
}

// Stores min(avail, 4) lanes of v to p (avail >= 1).
inline void store(float* p, F4 v, int64_t avail) {
  if (avail >= kLanes) {
    std::memcpy(p, &v, sizeof v);
    return;
  }
  p[0] = v[0];
  if (avail > 1) p[1] = v[1];
  if (avail > 2) p[2] = v[2];
}

inline float sum(F4 v) { return (v[0] + v[1]) + (v[2] + v[3]); }
inline float max(F4 v) { return std::max(std::max(v[0], v[1]), std::max(v[2], v[3])); }

// e^x within 1.5 ulp (Cephes expf): x = n·ln2 + r, a degree-6 polynomial for
// e^r, and 2^n built in the exponent bits. Overflow gives inf, results below
// the smallest normal flush to 0, NaN propagates.
inline F4 exp(F4 x) {
  constexpr float kLo = -87.33654f, kHi = 88.72284f;  // ln(FLT_MIN), ln(FLT_MAX)
  const F4 xc = x < kLo ? kLo : (x > kHi ? kHi : x);
  // Adding 1.5·2^23 rounds to an integer and leaves it in the low mantissa bits.
  constexpr float kRound = 12582912.f;
  const F4 t = xc * 1.44269504088896341f + kRound;
  const I4 n = std::bit_cast<I4>(t) - 0x4B400000;
  const F4 nf = t - kRound;
  const F4 r = (xc - nf * 0.693359375f) - nf * -2.12194440e-4f;  // ln2 in two parts
  F4 p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const F4 y = p * r * r + r + 1.f;
  // n reaches 128 near the top of the range: scale in two halves so that each
  // stays a normal power of two.
  const I4 half = n >> 1;
  const F4 s1 = std::bit_cast<F4>(std::bit_cast<U4>(half + 127) << 23);
  const F4 s2 = std::bit_cast<F4>(std::bit_cast<U4>(n - half + 127) << 23);
  const F4 e = y * s1 * s2;
  return x > kHi ? kInf : (x < kLo ? 0.f : e);
}

inline F4 sigmoid(F4 x) { return 1.f / (1.f + exp(-x)); }
inline F4 silu(F4 x) { return x / (1.f + exp(-x)); }

// tanh within a few ulp (Cephes tanhf): an odd polynomial below |x| = 0.625,
// where (1 − e^−2|x|)/(1 + e^−2|x|) would cancel, that formula above.
inline F4 tanh(F4 x) {
  const F4 a = x < 0.f ? -x : x;
  const F4 s = x * x;
  const F4 small =
      ((((-5.70498872745e-3f * s + 2.06390887954e-2f) * s - 5.37397155531e-2f) * s + 1.33314422036e-1f) * s -
       3.33332819422e-1f) *
          s * x +
      x;
  const F4 e = exp(-2.f * a);
  const F4 big = (1.f - e) / (1.f + e);
  return a < 0.625f ? small : (x < 0.f ? -big : big);
}

// x·Φ(x) with erf from Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7, the
// approximation PyTorch's vectorised CPU erf uses). The negative side uses
// erfc directly, so small outputs do not come from 1 − (1 − ε).
inline F4 gelu_erf(F4 x) {
  const F4 z = (x < 0.f ? -x : x) * 0.70710678118654752f;
  const F4 t = 1.f / (1.f + 0.3275911f * z);
  const F4 poly =
      t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  const F4 erfc = poly * exp(-z * z);
  return 0.5f * x * (x < 0.f ? erfc : 2.f - erfc);
}

// 0.5·x·(1 + tanh(u)) rewritten as x·sigmoid(2u): one exp, no cancellation.
inline F4 gelu_tanh(F4 x) {
  constexpr float kSqrt2OverPi = 0.79788456080286536f;
  const F4 u = kSqrt2OverPi * (x + 0.044715f * x * x * x);
  return x / (1.f + exp(-2.f * u));
}

}  // namespace genie::cpu::vec
