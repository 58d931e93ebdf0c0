// Splits a planned graph into per-device stages for multi-node execution.
//
// A stage is a maximal run of consecutive nodes of the plan's order placed
// on the same device, as a graph of its own: its inputs are the values its
// nodes read that it does not produce (graph inputs or outputs of earlier
// stages, under their own names, with their dtypes, shapes and roles), the
// parent's constants it reads are copied in (sharing their bytes), and its
// outputs are the values it produces that a later stage reads or that are
// outputs of the whole graph. The edges between stages are the cut edges:
// the tensors that move between devices.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "graph/graph.hpp"

namespace genie {

struct Stage {
  int device = -1;
  std::vector<NodeId> nodes;      // parent node ids, in plan order
  std::vector<ValueId> inputs;    // parent values bound to the stage's graph inputs, in its input order
  std::vector<ValueId> outputs;   // parent values of the stage's outputs, in mark order
  std::shared_ptr<Graph> graph;   // validated
};

// `g` validated (with `bound_shapes`, which give the dynamic inputs' sizes);
// node_device and order as in sched::Plan. Throws
// Error(INVALID_ARGUMENT) when `order` is not every node once with its
// producers first.
std::vector<Stage> split_stages(const Graph& g, const std::vector<int>& node_device,
                                const std::vector<NodeId>& order,
                                const std::unordered_map<ValueId, Shape>* bound_shapes = nullptr);

}  // namespace genie
