// The payload patterns of `genie replay` and their checks, written to run
// at memory speed: on a host where the ranks share the cores, every cycle
// spent filling or checking a buffer is a cycle another rank's transfer
// waits for.
//
// Every contribution is a function of (source rank, collective, chunk,
// element) only: 32-bit words that vary along the buffer (so a misplaced
// block is caught, not just a wrong one), or, for reductions,
// integer-valued float32 in [-127, 127] with a period of 255 elements, so
// that sums stay exact for up to 65536 ranks and a whole period can be
// compared bytewise.
#pragma once

#include <cstdint>
#include <vector>

namespace genie::replay {

// A hash of (source, collective, chunk) that sets patterns apart.
uint64_t pattern_base(uint64_t src, uint64_t seq, uint64_t chunk);

// Words: fills n elements that start at element e0 of the buffer; counts
// the ones that differ.
void fill_u(uint32_t* p, uint64_t n, uint64_t src, uint64_t seq, uint64_t chunk, uint64_t e0);
uint64_t wrong_u(const uint32_t* p, uint64_t n, uint64_t src, uint64_t seq, uint64_t chunk, uint64_t e0);

// Floats: fills n elements of the pattern of `src`.
void fill_f(float* p, uint64_t n, uint64_t src, uint64_t seq, uint64_t chunk);
// Counts the elements of p[off, off + n) that differ from the sum over
// `group` of their patterns.
uint64_t wrong_sum(const float* p, uint64_t off, uint64_t n, const std::vector<int>& group, uint64_t seq,
                   uint64_t chunk);

// dst[i] += src[i].
void reduce_into(float* dst, const float* src, uint64_t n);

}  // namespace genie::replay
