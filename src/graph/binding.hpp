// Binding graph inputs to tensors at submission, shared by embedded mode, the
// remote client and the server so that all three accept and refuse exactly
// the same bindings with the same messages.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "core/dtype.hpp"
#include "core/shape.hpp"
#include "graph/graph.hpp"

namespace genie {

// What binding needs to know of a tensor (a local TensorData or a remote one).
struct TensorDesc {
  DType dtype = DType::Invalid;
  Shape shape;
};

// Matches `names[i]` -> `tensors[i]` against the graph's declared inputs:
// every input bound exactly once, no other names, dtypes equal, shapes equal
// to the declaration where it is static (-1 takes the bound size).
// Returns, for each graph input in declaration order, the index into `names`
// of its tensor; `bound_shapes` (may be null) receives each input's bound
// shape, ready for Graph::validate. Throws Error(INVALID_GRAPH) for unknown,
// unbound or twice-bound names, DTYPE_MISMATCH, SHAPE_MISMATCH, and
// INVALID_ARGUMENT when the two vectors differ in length.
std::vector<size_t> bind_inputs(const Graph& graph, const std::vector<std::string>& names,
                                const std::vector<TensorDesc>& tensors,
                                std::unordered_map<ValueId, Shape>* bound_shapes);

// Each graph input's bound shape, by value (ready for Graph::validate), from
// the order bind_inputs returned for the same tensors.
std::unordered_map<ValueId, Shape> input_shapes(const Graph& graph, const std::vector<TensorDesc>& tensors,
                                                const std::vector<size_t>& order);

}  // namespace genie
