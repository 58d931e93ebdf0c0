// ONNX import: an ONNX model (the protobuf bytes of a .onnx file) as a Genie
// graph (docs/onnx.md lists the operators it maps).
//
// The ONNX frontend only produces graph IR: the initializers the graph uses
// come back as host tensors, and the caller (the C API) makes them resident
// tensors bound to the graph's weight inputs.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor_data.hpp"
#include "graph/graph.hpp"

namespace genie {

struct OnnxImport {
  std::unique_ptr<Graph> graph;
  // (graph input name, value) of each initializer the graph uses, in the
  // order of the graph's inputs: they follow the model's own inputs and carry
  // role weight.
  std::vector<std::pair<std::string, TensorPtr>> weights;
};

// Parses and maps the model. Throws Error: PARSE (not an ONNX model),
// UNSUPPORTED (a node, attribute, element type or dimension Genie has no
// mapping for: the detail names the node and its op_type), INVALID_GRAPH
// (the model is inconsistent), or the errors of graph building and
// validation. The returned graph is validated.
OnnxImport import_onnx(const void* data, size_t len);

}  // namespace genie
