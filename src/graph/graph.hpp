// Graph IR: values (edges) and nodes, with semantic annotations.
//
// Values are graph inputs, constants, or node outputs, each with a unique
// name. Nodes apply an operator (see op_schema.hpp) to input values and
// produce output values. Node and value names share no namespace with each
// other: a node and a value may have the same name.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/dtype.hpp"
#include "core/shape.hpp"
#include "core/tensor_data.hpp"
#include "graph/attrs.hpp"

namespace genie {

enum class Phase : int32_t { Unknown = 0, Prefill = 1, Decode = 2, Forward = 3, Backward = 4 };
enum class Modality : int32_t { Unknown = 0, Text = 1, Vision = 2, Audio = 3 };
enum class TensorRole : int32_t {
  Unspecified = 0,
  Weight = 1,
  Activation = 2,
  KvCache = 3,
  Input = 4,
  Output = 5
};

const char* phase_name(Phase p);        // "unknown", "prefill", "decode", "forward", "backward"
const char* modality_name(Modality m);  // "unknown", "text", "vision", "audio"
const char* role_name(TensorRole r);    // "unspecified", "weight", "activation", "kv_cache", "input", "output"
std::optional<Phase> phase_from_name(const std::string& s);
std::optional<Modality> modality_from_name(const std::string& s);
std::optional<TensorRole> role_from_name(const std::string& s);

// Checks a value, node or graph name: 1..255 bytes, no control characters.
// Throws Error(INVALID_ARGUMENT) naming `what` ("value name", ...).
void check_name(const std::string& name, const char* what);

using ValueId = int32_t;
using NodeId = int32_t;
constexpr int32_t kNone = -1;

enum class ValueKind { Input, Constant, NodeOutput };

struct Value {
  std::string name;
  ValueKind kind = ValueKind::NodeOutput;
  DType dtype = DType::Invalid;  // declared (input/constant) or inferred
  Shape shape;                   // declared (-1 = dynamic, inputs only) or inferred
  TensorRole role = TensorRole::Unspecified;
  TensorPtr constant;            // bytes of a constant, else null
  NodeId producer = kNone;       // node producing it (NodeOutput)
  int32_t producer_slot = 0;     // which output of the producer
};

struct Annotations {
  Phase phase = Phase::Unknown;
  std::string module_path;
  int32_t layer = -1;
  Modality modality = Modality::Unknown;
  bool operator==(const Annotations& o) const {
    return phase == o.phase && module_path == o.module_path && layer == o.layer && modality == o.modality;
  }
};

struct Node {
  std::string name;
  std::string op;
  // Input value names as given (resolved to ids by validate); "" = omitted
  // optional input.
  std::vector<std::string> input_names;
  std::vector<ValueId> inputs;   // kNone for an omitted optional input
  std::vector<ValueId> outputs;
  Attrs attrs;
  Annotations ann;
};

class Graph {
 public:
  explicit Graph(std::string name = "") : name_(std::move(name)) {}

  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }

  // Building. Each throws genie::Error with the status the C API documents
  // and leaves the graph unchanged on failure.
  ValueId add_input(const std::string& name, DType dtype, const Shape& shape);
  ValueId add_constant(const std::string& name, TensorPtr data);
  NodeId add_node(const std::string& op, const std::string& name, const std::vector<std::string>& inputs,
                  const std::vector<std::string>& outputs);
  void set_attr(const std::string& node, const std::string& key, AttrValue v);
  void mark_output(const std::string& value);

  // Lookups; nullptr / kNone when absent.
  ValueId find_value(const std::string& name) const;
  NodeId find_node(const std::string& name) const;
  Node& node(NodeId id) { return nodes_.at(static_cast<size_t>(id)); }
  const Node& node(NodeId id) const { return nodes_.at(static_cast<size_t>(id)); }
  Value& value(ValueId id) { return values_.at(static_cast<size_t>(id)); }
  const Value& value(ValueId id) const { return values_.at(static_cast<size_t>(id)); }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<Value>& values() const { return values_; }
  std::vector<Node>& mutable_nodes() { return nodes_; }
  const std::vector<ValueId>& inputs() const { return inputs_; }   // graph inputs, declaration order
  // Names of the marked outputs, in mark order; they may name values added
  // later, so outputs() resolves them only when validate() succeeds.
  const std::vector<std::string>& output_names() const { return output_names_; }
  const std::vector<ValueId>& outputs() const { return outputs_; } // marked outputs, mark order

  // Resolves input names, checks arity and attributes against the op
  // schemas, detects cycles and dangling inputs, requires >= 1 output, and
  // runs shape/dtype inference in topological order. Sets validated().
  // `bound_shapes` optionally overrides the declared shapes of graph inputs
  // (dynamic -1 dims resolved at submission); absent entries use the
  // declaration (which must then be fully static).
  void validate(const std::unordered_map<ValueId, Shape>* bound_shapes = nullptr);
  bool validated() const { return validated_; }
  void invalidate() { validated_ = false; }
  // Node ids in a topological order (valid after validate()).
  const std::vector<NodeId>& topo_order() const { return topo_; }
  // The edges between nodes, for running the graph (valid after
  // validate()): the nodes reading node n's outputs, one entry per reading
  // input slot; how many of node n's input slots read another node's
  // output; how many input slots of all nodes read value v.
  std::span<const NodeId> consumers(NodeId n) const {
    const auto i = static_cast<size_t>(n);
    return {consumers_.data() + consumer_begin_[i], consumers_.data() + consumer_begin_[i + 1]};
  }
  int producer_edges(NodeId n) const { return producer_edges_[static_cast<size_t>(n)]; }
  int readers(ValueId v) const { return readers_[static_cast<size_t>(v)]; }
  // Whether a node runs a custom op (valid after validate()).
  bool has_custom_ops() const { return has_custom_ops_; }

  // Structural hash: ops, edges, shapes, dtypes, attributes, annotations and
  // roles; not constant bytes and not names. Stable across processes.
  uint64_t structural_hash() const;

 private:
  void check_new_value_name(const std::string& name) const;
  // Fills the edge index behind consumers(), producer_edges(), readers().
  void index_edges();

  std::string name_;
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_;
  std::vector<std::string> output_names_;
  std::vector<ValueId> outputs_;
  std::unordered_map<std::string, ValueId> value_index_;
  std::unordered_map<std::string, NodeId> node_index_;
  std::vector<NodeId> topo_;
  std::vector<size_t> consumer_begin_;  // by node, into consumers_ (one more entry than nodes)
  std::vector<NodeId> consumers_;
  std::vector<int> producer_edges_;  // by node
  std::vector<int> readers_;         // by value
  bool has_custom_ops_ = false;
  bool validated_ = false;
};

// JSON codec (docs/graph-format.md). to_json is deterministic; from_json
// throws Error(PARSE) with the JSON path of the problem, or the building
// errors above.
std::string graph_to_json(const Graph& g);
std::unique_ptr<Graph> graph_from_json(const char* text, size_t len);

// The phase of a graph as metrics and traces label it: the phase_name its
// annotated nodes share, "mixed" when they differ, "unknown" when none has
// one.
const char* graph_phase_name(const Graph& g);

}  // namespace genie
