#include "pattern.hpp"

#include <algorithm>
#include <cstring>

// The loops over whole buffers are built twice on x86-64: for the baseline
// (SSE2) and for AVX2, picked once at load time by the CPU that runs them
// (GCC's and Clang's target_clones). AVX2 checks twice the words per
// instruction: on a rank that shares its cores, the check of a 1 MiB
// all-gather was as much CPU as the copy that moved its bytes.
#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define GENIE_REPLAY_WIDE __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef GENIE_REPLAY_WIDE
#define GENIE_REPLAY_WIDE
#endif

namespace genie::replay {

namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

constexpr uint32_t kStep = 0x9e3779b1u;  // element i's word: base ^ (i * kStep), mod 2^32
constexpr uint64_t kPeriod = 255;        // of the float pattern
// Blocks of the float pattern are copied and compared this many periods at
// a time (about 64 KiB: large enough that memcpy/memcmp run at full speed,
// small enough to stay in cache).
constexpr uint64_t kPeriods = 64;
constexpr uint64_t kBlock = kPeriod * kPeriods;

// One period of a source's float pattern, repeated kPeriods times.
void float_block(float* out, uint64_t src, uint64_t seq, uint64_t chunk) {
  const uint64_t b = pattern_base(src, seq, chunk) % kPeriod;
  for (uint64_t j = 0; j < kPeriod; ++j) out[j] = static_cast<float>(static_cast<int>((b + j) % kPeriod) - 127);
  for (uint64_t r = 1; r < kPeriods; ++r) std::memcpy(out + r * kPeriod, out, kPeriod * sizeof(float));
}

// Elements of p[0, n) that differ from the periodic block `want` starting
// at phase `phase`: whole stretches are compared bytewise (the values are
// integers, so equal floats have equal bits: a sum that is zero is +0),
// element by element only where a stretch differs.
uint64_t wrong_periodic(const float* p, uint64_t n, const float* want, uint64_t phase) {
  uint64_t w = 0;
  for (uint64_t i = 0; i < n;) {
    const uint64_t at = (phase + i) % kPeriod;  // kBlock is a multiple of the period
    const uint64_t len = std::min(n - i, kBlock - at);
    if (std::memcmp(p + i, want + at, len * sizeof(float)) != 0)
      for (uint64_t j = 0; j < len; ++j) w += p[i + j] != want[at + j];
    i += len;
  }
  return w;
}

}  // namespace

uint64_t pattern_base(uint64_t src, uint64_t seq, uint64_t chunk) {
  return mix(mix(src * 0x9e3779b97f4a7c15ull + 1) ^ mix(seq * 0x100000001b3ull + chunk + 7));
}

// 32-bit arithmetic throughout (the low 32 bits of (e0 + i) * kStep), the
// product stepped by additions, so that the loops vectorise without a
// vector multiply (which the baseline x86-64 lacks).
GENIE_REPLAY_WIDE void fill_u(uint32_t* p, uint64_t n, uint64_t src, uint64_t seq, uint64_t chunk,
                              uint64_t e0) {
  const uint32_t b = static_cast<uint32_t>(pattern_base(src, seq, chunk));
  uint32_t x = static_cast<uint32_t>(e0) * kStep;
  for (uint64_t i = 0; i < n; ++i, x += kStep) p[i] = b ^ x;
}

GENIE_REPLAY_WIDE uint64_t wrong_u(const uint32_t* p, uint64_t n, uint64_t src, uint64_t seq, uint64_t chunk,
                                   uint64_t e0) {
  const uint32_t b = static_cast<uint32_t>(pattern_base(src, seq, chunk));
  uint64_t w = 0;
  // Counted in 32-bit pieces, which vectorise; a piece has fewer than 2^32
  // elements.
  for (uint64_t i0 = 0; i0 < n; i0 += uint64_t{1} << 30) {
    const uint32_t m = static_cast<uint32_t>(std::min<uint64_t>(n - i0, uint64_t{1} << 30));
    const uint32_t* q = p + i0;
    uint32_t x = static_cast<uint32_t>(e0 + i0) * kStep, part = 0;
    for (uint32_t i = 0; i < m; ++i, x += kStep) part += q[i] != (b ^ x);
    w += part;
  }
  return w;
}

void fill_f(float* p, uint64_t n, uint64_t src, uint64_t seq, uint64_t chunk) {
  std::vector<float> block(kBlock);
  float_block(block.data(), src, seq, chunk);
  for (uint64_t i = 0; i < n; i += kBlock) std::memcpy(p + i, block.data(), std::min(kBlock, n - i) * sizeof(float));
}

uint64_t wrong_sum(const float* p, uint64_t off, uint64_t n, const std::vector<int>& group, uint64_t seq,
                   uint64_t chunk) {
  std::vector<float> sum(kBlock, 0.0f), one(kBlock);
  for (int r : group) {
    float_block(one.data(), static_cast<uint64_t>(r), seq, chunk);
    for (uint64_t j = 0; j < kBlock; ++j) sum[j] += one[j];
  }
  return wrong_periodic(p + off, n, sum.data(), off % kPeriod);
}

GENIE_REPLAY_WIDE void reduce_into(float* dst, const float* src, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) dst[i] += src[i];
}

}  // namespace genie::replay
