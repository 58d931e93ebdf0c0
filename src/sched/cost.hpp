// Cost model: FLOPs and bytes moved per node, and predicted seconds on a
// device. docs/scheduler.md lists the formula of every operator.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/graph.hpp"

namespace genie::sched {

struct DeviceProfile;
enum class OpCode : uint8_t;

struct OpCost {
  double flops = 0;          // floating-point operations (a multiply-add is 2)
  uint64_t bytes_read = 0;   // bytes the kernel reads (a gather reads only the rows it needs)
  uint64_t bytes_written = 0;
  bool gemm = false;         // GEMM-like (matmul, linear, attention, conv2d): runs at peak_flops, else at vector_flops
  OpCode code{};             // the op class (graph_view.hpp): what learned corrections are kept by
  // Bytes of the output of an op the roofline counts as free (a reshape
  // touches no data: bytes_read and bytes_written are 0), so that its
  // learned correction still tells a small view from a large one (a
  // reshape of a non-contiguous tensor copies it).
  uint64_t view_bytes = 0;
  uint64_t bytes() const { return bytes_read + bytes_written; }
  // The size learned corrections are bucketed by (learned_cost.hpp).
  double work() const { return flops + static_cast<double>(bytes() + view_bytes); }
};

// Shapes of every value of a validated graph: node outputs as inferred,
// inputs as bound (bound_shapes) or declared.
std::vector<const Shape*> value_shapes(const Graph& g, const std::unordered_map<ValueId, Shape>* bound_shapes);

// The cost of node `n` given the shapes of all values. Operators the model
// does not know (custom ops) cost their bytes and one FLOP per output element.
OpCost op_cost(const Graph& g, NodeId n, const std::vector<const Shape*>& shapes);
// The same with the node's operator code already looked up (graph_view.hpp).
OpCost op_cost(const Graph& g, NodeId n, OpCode code, const std::vector<const Shape*>& shapes);
// The cost of every node, by node id (bound_shapes as for value_shapes).
std::vector<OpCost> node_costs(const Graph& g, const std::unordered_map<ValueId, Shape>* bound_shapes);
// Whether `op` has its own formula (else the custom-op rule applies).
bool cost_model_knows(const std::string& op);
// The same for a validated graph with static input shapes.
OpCost op_cost(const Graph& g, NodeId n);

// A digest of a graph's structure as its costs show it (each node's op
// class, in node order; not the sizes, so the steps of a decode loop whose
// caches grow share one), never 0: what the learned time between nodes is
// kept by (CostLearner::observe_run). The same for the planner's graph and
// for the graph the executor ran, without hashing the graph on every run.
uint64_t cost_signature(const std::vector<OpCost>& costs);

// Bytes of a value of the given dtype and shape (0 for an unknown dtype).
uint64_t value_bytes(DType t, const Shape& s);

// Roofline: max(flops / rate, bytes / bandwidth) + the device's per-op
// overhead; rate = peak_flops for GEMM-like ops, vector_flops (when set)
// for the rest.
double model_seconds(const OpCost& c, const DeviceProfile& d);
// What the scheduler plans with: model_seconds times the device's learned
// correction for the op class and size (DeviceProfile::learned), if any.
double predict_seconds(const OpCost& c, const DeviceProfile& d);
// The same for node `node` of the graph whose cost_signature() is `graph`:
// that node's own learned factor when it has one (CostLearner::observe_node),
// else its class's.
double predict_seconds(const OpCost& c, const DeviceProfile& d, uint64_t graph, size_t node);

}  // namespace genie::sched
