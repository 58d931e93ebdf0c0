// Operator schemas: arity, attributes, and shape/dtype inference.
//
// One table, shared by graph validation, the JSON codec, the executors and
// (later) the scheduler's cost model. docs/graph-format.md documents each op.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/shape.hpp"
#include "graph/attrs.hpp"

namespace genie {

struct ValueType {
  DType dtype = DType::Invalid;
  Shape shape;
};

struct AttrSpec {
  std::string name;
  AttrType type;
  bool required = false;
};

// Given the types of the inputs (an omitted optional input has
// dtype Invalid) and the attributes, returns the output types or throws
// genie::Error (SHAPE_MISMATCH / DTYPE_MISMATCH / INVALID_ATTRIBUTE) with a
// message that does not need the node name (the caller prefixes it).
using InferFn = std::function<std::vector<ValueType>(const std::vector<ValueType>& in, const Attrs& attrs)>;

struct OpSchema {
  std::string name;
  int min_inputs = 1;
  int max_inputs = 1;   // -1 = variadic
  int min_outputs = 1;
  int max_outputs = 1;  // -1 = variadic (split)
  std::vector<AttrSpec> attrs;
  InferFn infer;
};

// nullptr when unknown.
const OpSchema* find_op(const std::string& name);
// All op names, sorted.
std::vector<std::string> op_names();
// Up to 3 known op names close to `name` (edit distance), for error messages.
std::vector<std::string> similar_op_names(const std::string& name);

// Checks a node's input and output counts, and that omitted ("") inputs are
// only in optional slots of an op with a fixed input list. Throws
// Error(INVALID_GRAPH).
void check_arity(const OpSchema& schema, const std::vector<std::string>& inputs, size_t n_outputs);
// Checks one attribute against the schema: the op has it, and the value has
// its type (an int or int list is accepted for a float or float list).
// Throws Error(INVALID_ATTRIBUTE).
void check_attr(const OpSchema& schema, const std::string& key, const AttrValue& value);
// check_attr for every attribute, then that every required one is present.
void check_attrs(const OpSchema& schema, const Attrs& attrs);

// Numpy broadcasting of two shapes; throws Error(SHAPE_MISMATCH).
Shape broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace genie
