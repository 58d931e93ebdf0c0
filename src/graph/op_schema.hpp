// Operator schemas: arity, attributes, and shape/dtype inference.
//
// One table, shared by graph validation, the JSON codec, the executors and
// (later) the scheduler's cost model. docs/graph-format.md documents each op.
#pragma once

#include <functional>
#include <memory>
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
// The FLOPs of one node given its input and output types and attributes
// (the scheduler's cost model; see sched/cost.hpp).
using FlopsFn = std::function<double(const std::vector<ValueType>& in, const std::vector<ValueType>& out,
                                     const Attrs& attrs)>;

struct OpSchema {
  std::string name;
  int min_inputs = 1;
  int max_inputs = 1;   // -1 = variadic
  int min_outputs = 1;
  int max_outputs = 1;  // -1 = variadic (split)
  std::vector<AttrSpec> attrs;
  InferFn infer;
  // A custom op, registered at run time (docs/custom-ops.md): it accepts
  // any attribute (`attrs` is empty; its infer checks what it reads).
  bool custom = false;
  // Optional (custom ops): FLOPs for the cost model, which otherwise
  // charges one FLOP per output element.
  FlopsFn flops;
};

// Built-in schemas live as long as the process; a custom one as long as
// someone holds it (a validation in progress keeps it while the op is
// unregistered meanwhile).
using OpSchemaPtr = std::shared_ptr<const OpSchema>;

// nullptr when unknown. Built-in ops first, then the custom ones.
OpSchemaPtr find_op(const std::string& name);
// The built-in op `name`, nullptr if none (custom ops are not looked at).
const OpSchema* find_builtin_op(const std::string& name);
// The built-in op names, sorted.
std::vector<std::string> builtin_op_names();
// All op names, sorted (custom ops included).
std::vector<std::string> op_names();

// Custom ops (graph/op_registry.cpp). Adds `schema` (custom = true) to the
// process-wide table. Throws Error(INVALID_ARGUMENT) if a built-in or
// custom op already has its name.
void add_custom_op(OpSchemaPtr schema);
// Removes custom op `name`; false if there was none.
bool remove_custom_op(const std::string& name);
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
