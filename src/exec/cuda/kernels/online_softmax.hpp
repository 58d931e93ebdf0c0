// The running softmax of the fused attention (attention.cu), kept apart so
// that the host compiler builds it too and a CPU unit test runs the same
// tile-by-tile algorithm against a plain softmax
// (tests/unit/exec_cuda_index_math_test.cpp).
//
// Per query row: m is the largest score seen so far, l the sum of
// exp(score - m) over the keys seen. A new tile of scores moves m to
// m' = max(m, tile max); everything accumulated so far (l and the
// unnormalised output row) is scaled by exp(m - m'), and the tile's keys
// add weights exp(score - m'). Masked keys have score -inf and weight 0; a
// row whose every key so far is masked has m = -inf and skips the tile.
#pragma once

#include <cmath>

#include "exec/cuda/kernels/index_math.hpp"

namespace genie::cuda {

struct OnlineSoftmax {
  float m = -INFINITY;
  float l = 0.f;

  // Starts a tile whose largest score is tile_max. Returns false when no key
  // is visible yet (nothing to add); otherwise sets `alpha`, the factor the
  // output row accumulated so far is scaled by (0 on the first visible tile).
  GENIE_HD bool begin_tile(float tile_max, float& alpha) {
    const float m_new = fmaxf(m, tile_max);
    if (m_new == -INFINITY) return false;
    alpha = expf(m - m_new);
    l *= alpha;
    m = m_new;
    return true;
  }
  // The weight of a key of this tile.
  GENIE_HD float weight(float score) const { return score == -INFINITY ? 0.f : expf(score - m); }
  // After begin_tile: the sum of the tile's weights.
  GENIE_HD void add(float tile_weights) { l += tile_weights; }
  // What the unnormalised output row is multiplied by at the end: 1/l, or 0
  // for a row with every key masked (its output is zeros).
  GENIE_HD float finish() const { return l > 0.f ? 1.f / l : 0.f; }
};

}  // namespace genie::cuda
