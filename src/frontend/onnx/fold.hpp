// Constant folding for the ONNX importer: the shape arithmetic exporters
// leave in a model (Shape -> Gather -> Unsqueeze -> Concat -> Reshape,
// ConstantOfShape, Expand of buffers, Range ...) computed on the host, so
// that only tensor work on the model's inputs becomes Genie nodes.
#pragma once

#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/shape.hpp"
#include "core/tensor_data.hpp"
#include "graph/attrs.hpp"

namespace genie::onnx {

// A constant on the host. Values are held as doubles: exact for f32, f16,
// bf16, bool and for integers up to 2^53 (shapes, indices, token ids).
struct Host {
  DType dtype = DType::F32;
  Shape shape;
  std::vector<double> v;
};

Host host_of(const TensorData& t);
TensorPtr tensor_of(const Host& h);
// The ints of a rank-0 or rank-1 constant (shapes, axes, indices).
std::vector<int64_t> ints_of(const Host& h);
Host host_ints(const std::vector<int64_t>& v, bool scalar = false);
// ONNX Shape (attributes start, end) or, with `size`, Size of shape `s`.
Host shape_host(const Shape& s, const Attrs& a, bool size);

// Folds ONNX op `op` (attributes `a`, `tensor_attr` the node's TENSOR
// attribute when it has one) on constant inputs (nullptr for an omitted
// optional input). Returns false when the op is not one this folds; throws
// Error(UNSUPPORTED / SHAPE_MISMATCH) for inputs it cannot fold.
bool fold(const std::string& op, const std::vector<const Host*>& in, const Attrs& a,
          const Host* tensor_attr, std::vector<Host>& out);

// Axis in [0, rank) from an ONNX axis in [-rank, rank); throws naming `what`.
int64_t norm_axis(int64_t axis, size_t rank, const char* what);
// Shape of Unsqueeze / Squeeze / Reshape / Flatten / Expand, shared with the
// importer's runtime mapping.
Shape unsqueeze_shape(const Shape& s, std::vector<int64_t> axes);
Shape squeeze_shape(const Shape& s, const std::vector<int64_t>& axes);
Shape reshape_shape(const Shape& s, const std::vector<int64_t>& target, bool allowzero);
Shape flatten_shape(const Shape& s, int64_t axis);

}  // namespace genie::onnx
