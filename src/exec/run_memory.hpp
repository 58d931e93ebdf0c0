// What a run of a graph will hold, known before it starts: the bytes of its
// outputs and the peak of the values alive at once (outputs included) when
// its nodes run in topological order and each value is freed after its last
// consumer, as the executor frees them. A server checks it against its
// memory budget and the session's quota before running anything
// (server/quota.hpp), so a graph whose outputs would not fit fails at once
// with OUT_OF_MEMORY instead of taking the memory first.
#pragma once

#include <cstdint>
#include <string>

#include "graph/graph.hpp"

namespace genie {

struct RunMemory {
  uint64_t peak = 0;     // bytes of node outputs alive at once, at most
  uint64_t outputs = 0;  // bytes of the graph's outputs that nodes produce
  size_t num_outputs = 0;
  ValueId largest = kNone;  // the largest value a node produces
  uint64_t largest_bytes = 0;
  // "graph 'g': outputs and intermediates of up to P bytes (largest: value
  // 'v' f32[..] of B bytes)", for error details.
  std::string describe(const Graph& g) const;
};

// `g` must be validated (the shapes of node outputs resolved). Sizes beyond
// 2^64 saturate.
RunMemory run_memory(const Graph& g);

}  // namespace genie
