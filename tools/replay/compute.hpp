// Compute nodes as real work on Genie's embedded executor (`--compute
// real`): each COMP_NODE runs a one-node graph, a square float32 matrix
// product of side n, through the C API in this process.
//
// The mapping: a node with a positive `num_ops` attribute (its FLOPs)
// gets n = round(cbrt(num_ops / 2)), since a product of side n costs 2n^3
// FLOPs; one without gets the n whose product takes its duration_micros (x
// the compute scale) at the rate this rank measured once at start. n is
// clamped to 1..kMaxSide; the node's time on the timeline is what the
// product really took.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "genie.h"

namespace genie::replay {

class RealCompute {
 public:
  static constexpr int64_t kMaxSide = 4096;

  // Starts an embedded context (one executor thread) and measures its
  // matrix-product rate. Throws Error naming the failing call.
  RealCompute();
  ~RealCompute();
  RealCompute(const RealCompute&) = delete;
  RealCompute& operator=(const RealCompute&) = delete;

  // The side for a node (see above); 0 for a node with no work.
  int64_t side_for(int64_t num_ops, double micros) const;
  // Runs one product of side n; throws Error on failure. Any thread.
  void run(int64_t n);

  double flops_per_s() const { return rate_; }

 private:
  struct Problem;  // a graph and its inputs for one side
  Problem& problem(int64_t n);

  genie_context_t* ctx_ = nullptr;
  std::mutex mu_;
  std::map<int64_t, std::unique_ptr<Problem>> problems_;
  double rate_ = 1e9;
};

}  // namespace genie::replay
