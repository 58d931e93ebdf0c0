#include "graph/graph.hpp"

#include <algorithm>
#include <functional>
#include <queue>

#include "core/error.hpp"
#include "graph/op_schema.hpp"

namespace genie {

namespace {

constexpr const char* kPhaseNames[] = {"unknown", "prefill", "decode", "forward", "backward"};
constexpr const char* kModalityNames[] = {"unknown", "text", "vision", "audio"};
constexpr const char* kRoleNames[] = {"unspecified", "weight", "activation", "kv_cache", "input", "output"};

template <class E, size_t N>
const char* enum_name(E e, const char* const (&names)[N]) {
  const auto i = static_cast<size_t>(e);
  return i < N ? names[i] : "invalid";
}

template <class E, size_t N>
std::optional<E> enum_from_name(const std::string& s, const char* const (&names)[N]) {
  for (size_t i = 0; i < N; ++i)
    if (s == names[i]) return static_cast<E>(i);
  return std::nullopt;
}

std::string unknown_op_message(const std::string& op) {
  std::string msg = cat("unknown op '", op, "'");
  const auto similar = similar_op_names(op);
  for (size_t i = 0; i < similar.size(); ++i)
    msg += cat(i == 0 ? " (did you mean '" : i + 1 == similar.size() ? "' or '" : "', '", similar[i]);
  return msg + (similar.empty() ? " (docs/operators.md lists the operators; a custom op must be registered where "
                                  "the graph runs: docs/custom-ops.md)"
                                : "'?)");
}

// Runs f, adding "node '<name>' (<op>): " to any error so that the caller
// sees which node failed while the status stays that of the cause.
template <class F>
auto in_node(const Node& n, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    throw Error(e.code(), cat("node '", n.name, "' (", n.op, "): ", e.detail()));
  }
}

// Kahn's algorithm; the ready node with the smallest id goes first, so a
// graph built in dependency order keeps its insertion order. Throws
// Error(INVALID_GRAPH) naming a node on a cycle.
std::vector<NodeId> topological_order(const Graph& g, const std::vector<std::vector<ValueId>>& resolved) {
  const size_t n_nodes = resolved.size();
  auto producer = [&](ValueId v) {
    return v == kNone || g.value(v).kind != ValueKind::NodeOutput ? kNone : g.value(v).producer;
  };
  std::vector<int> pending(n_nodes, 0);
  std::vector<std::vector<NodeId>> consumers(n_nodes);
  for (size_t i = 0; i < n_nodes; ++i)
    for (ValueId v : resolved[i])
      if (const NodeId p = producer(v); p != kNone) {
        ++pending[i];
        consumers[p].push_back(static_cast<NodeId>(i));
      }
  std::priority_queue<NodeId, std::vector<NodeId>, std::greater<>> ready;
  for (size_t i = 0; i < n_nodes; ++i)
    if (pending[i] == 0) ready.push(static_cast<NodeId>(i));
  std::vector<NodeId> order;
  while (!ready.empty()) {
    const NodeId id = ready.top();
    ready.pop();
    order.push_back(id);
    for (NodeId c : consumers[id])
      if (--pending[c] == 0) ready.push(c);
  }
  if (order.size() == n_nodes) return order;

  // Every node left over waits on a producer that is also left over; walking
  // producers from one of them must come back to a node already seen, and
  // the walk from there on is a cycle.
  NodeId at = static_cast<NodeId>(std::find_if(pending.begin(), pending.end(), [](int p) { return p > 0; }) -
                                  pending.begin());
  std::vector<int> seen_at(n_nodes, -1);
  std::vector<NodeId> walk;
  while (seen_at[at] < 0) {
    seen_at[at] = static_cast<int>(walk.size());
    walk.push_back(at);
    for (ValueId v : resolved[at])
      if (const NodeId p = producer(v); p != kNone && pending[p] > 0) {
        at = p;
        break;
      }
  }
  std::string path = g.node(at).name;
  size_t shown = 0;
  for (size_t i = walk.size(); i-- > static_cast<size_t>(seen_at[at]);) {
    if (++shown > 8) {  // keep the message short on a long cycle
      path += " -> ...";
      break;
    }
    path += " -> " + g.node(walk[i]).name;
  }
  fail(GENIE_ERR_INVALID_GRAPH, "node '", g.node(at).name, "' (", g.node(at).op, ") is on a cycle: ", path);
}

// Types of the graph inputs (bound shapes replacing the declarations) and
// constants; node outputs are left for inference.
std::vector<ValueType> leaf_types(const Graph& g, const std::unordered_map<ValueId, Shape>* bound_shapes) {
  const std::vector<Value>& values = g.values();
  const std::unordered_map<ValueId, Shape> none;
  const auto& bound = bound_shapes ? *bound_shapes : none;
  for (const auto& [id, shape] : bound)
    check(id >= 0 && static_cast<size_t>(id) < values.size() && values[id].kind == ValueKind::Input,
          GENIE_ERR_INVALID_GRAPH, "a shape is bound to value ", id, ", which is not a graph input");
  std::vector<ValueType> types(values.size());
  for (size_t id = 0; id < values.size(); ++id) {
    const Value& v = values[id];
    if (v.kind == ValueKind::NodeOutput) continue;
    Shape shape = v.shape;
    if (auto it = bound.find(static_cast<ValueId>(id)); it != bound.end()) {
      bool ok = it->second.size() == shape.size();
      for (size_t d = 0; ok && d < shape.size(); ++d)
        ok = it->second[d] >= 0 && (shape[d] == -1 || shape[d] == it->second[d]);
      if (!ok)
        fail(GENIE_ERR_SHAPE_MISMATCH, "input '", v.name, "' is declared ", shape_str(shape),
             " but bound to ", shape_str(it->second));
      shape = it->second;
    }
    if (std::find(shape.begin(), shape.end(), -1) != shape.end())
      fail(GENIE_ERR_INVALID_GRAPH, "input '", v.name, "' has dynamic shape ", shape_str(shape),
           " and no bound shape");
    try {
      byte_size(shape, dtype_size(v.dtype));
    } catch (const Error& e) {
      throw Error(e.code(), cat("value '", v.name, "': ", e.detail()));
    }
    types[id] = {v.dtype, std::move(shape)};
  }
  return types;
}

}  // namespace

const char* phase_name(Phase p) { return enum_name(p, kPhaseNames); }
const char* modality_name(Modality m) { return enum_name(m, kModalityNames); }
const char* role_name(TensorRole r) { return enum_name(r, kRoleNames); }
const char* graph_phase_name(const Graph& g) {
  Phase seen = Phase::Unknown;
  for (const Node& n : g.nodes()) {
    const Phase p = n.ann.phase;
    if (p == Phase::Unknown || p == seen) continue;
    if (seen != Phase::Unknown) return "mixed";
    seen = p;
  }
  return phase_name(seen);
}
std::optional<Phase> phase_from_name(const std::string& s) { return enum_from_name<Phase>(s, kPhaseNames); }
std::optional<Modality> modality_from_name(const std::string& s) {
  return enum_from_name<Modality>(s, kModalityNames);
}
std::optional<TensorRole> role_from_name(const std::string& s) {
  return enum_from_name<TensorRole>(s, kRoleNames);
}

void check_name(const std::string& name, const char* what) {
  check(!name.empty(), GENIE_ERR_INVALID_ARGUMENT, what, " is empty");
  if (name.size() > 255)
    fail(GENIE_ERR_INVALID_ARGUMENT, what, " is ", name.size(), " bytes long (at most 255): '",
         name.substr(0, 32), "...'");
  for (unsigned char c : name)
    check(c >= 0x20 && c != 0x7f, GENIE_ERR_INVALID_ARGUMENT, what, " contains control character 0x",
          std::hex, static_cast<int>(c));
}

void Graph::check_new_value_name(const std::string& name) const {
  check_name(name, "value name");
  check(value_index_.count(name) == 0, GENIE_ERR_INVALID_GRAPH, "value name '", name, "' is already used");
}

ValueId Graph::add_input(const std::string& name, DType dtype, const Shape& shape) {
  check_new_value_name(name);
  check(dtype_size(dtype) != 0, GENIE_ERR_INVALID_ARGUMENT, "input '", name, "': invalid dtype ",
        static_cast<int>(dtype));
  check(shape.size() <= GENIE_MAX_DIMS, GENIE_ERR_INVALID_ARGUMENT, "input '", name, "': rank ", shape.size(),
        " exceeds ", GENIE_MAX_DIMS);
  Shape known = shape;  // the static part must fit even before -1 dims are bound
  for (int64_t& d : known) {
    if (d < -1)
      fail(GENIE_ERR_INVALID_ARGUMENT, "input '", name, "': dimension ", d, " in ", shape_str(shape),
           " (only -1, dynamic, may be negative)");
    if (d == -1) d = 1;
  }
  byte_size(known, dtype_size(dtype));

  const auto id = static_cast<ValueId>(values_.size());
  Value v;
  v.name = name;
  v.kind = ValueKind::Input;
  v.dtype = dtype;
  v.shape = shape;
  values_.push_back(std::move(v));
  value_index_.emplace(name, id);
  inputs_.push_back(id);
  invalidate();
  return id;
}

ValueId Graph::add_constant(const std::string& name, TensorPtr data) {
  check_new_value_name(name);
  check(data != nullptr, GENIE_ERR_INVALID_ARGUMENT, "constant '", name, "' has no data");
  check(data->shape().size() <= GENIE_MAX_DIMS, GENIE_ERR_INVALID_ARGUMENT, "constant '", name, "': rank ",
        data->shape().size(), " exceeds ", GENIE_MAX_DIMS);
  const auto id = static_cast<ValueId>(values_.size());
  Value v;
  v.name = name;
  v.kind = ValueKind::Constant;
  v.dtype = data->dtype();
  v.shape = data->shape();
  v.constant = std::move(data);
  values_.push_back(std::move(v));
  value_index_.emplace(name, id);
  invalidate();
  return id;
}

NodeId Graph::add_node(const std::string& op, const std::string& name, const std::vector<std::string>& inputs,
                       const std::vector<std::string>& outputs) {
  check_name(name, "node name");
  for (const std::string& in : inputs)
    if (!in.empty()) check_name(in, "input name");
  for (const std::string& out : outputs) check_name(out, "output name");
  const OpSchemaPtr schema = find_op(op);
  if (!schema) fail(GENIE_ERR_UNKNOWN_OP, "node '", name, "': ", unknown_op_message(op));
  try {
    check_arity(*schema, inputs, outputs.size());
  } catch (const Error& e) {
    throw Error(e.code(), cat("node '", name, "': ", e.detail()));
  }
  check(node_index_.count(name) == 0, GENIE_ERR_INVALID_GRAPH, "node name '", name, "' is already used");
  for (size_t i = 0; i < outputs.size(); ++i) {
    check_new_value_name(outputs[i]);
    check(std::find(outputs.begin(), outputs.begin() + i, outputs[i]) == outputs.begin() + i,
          GENIE_ERR_INVALID_GRAPH, "node '", name, "' names output '", outputs[i], "' twice");
  }

  const auto id = static_cast<NodeId>(nodes_.size());
  Node n;
  n.name = name;
  n.op = op;
  n.input_names = inputs;
  for (size_t slot = 0; slot < outputs.size(); ++slot) {
    Value v;
    v.name = outputs[slot];
    v.producer = id;
    v.producer_slot = static_cast<int32_t>(slot);
    n.outputs.push_back(static_cast<ValueId>(values_.size()));
    value_index_.emplace(v.name, n.outputs.back());
    values_.push_back(std::move(v));
  }
  nodes_.push_back(std::move(n));
  node_index_.emplace(name, id);
  invalidate();
  return id;
}

void Graph::set_attr(const std::string& node, const std::string& key, AttrValue v) {
  const NodeId id = find_node(node);
  check(id != kNone, GENIE_ERR_NOT_FOUND, "no node named '", node, "'");
  Node& n = nodes_[id];
  const OpSchemaPtr schema = find_op(n.op);
  if (!schema) fail(GENIE_ERR_UNKNOWN_OP, "node '", node, "': ", unknown_op_message(n.op));
  try {
    check_attr(*schema, key, v);
  } catch (const Error& e) {
    throw Error(e.code(), cat("node '", node, "' (", n.op, "): ", e.detail()));
  }
  if (auto* s = std::get_if<std::string>(&v))
    check(s->find('\0') == std::string::npos, GENIE_ERR_INVALID_ATTRIBUTE, "node '", node, "': attribute '",
          key, "' contains a NUL byte");
  // Store floats as floats even when given as ints, so that the hash and the
  // JSON export do not depend on how the caller spelled the number.
  // A custom op declares no attribute types: values are kept as given.
  const auto spec = std::find_if(schema->attrs.begin(), schema->attrs.end(),
                                 [&](const AttrSpec& s) { return s.name == key; });
  const bool typed = spec != schema->attrs.end();
  if (typed && spec->type == AttrType::Float && std::holds_alternative<int64_t>(v))
    v = static_cast<double>(std::get<int64_t>(v));
  if (typed && spec->type == AttrType::Floats && std::holds_alternative<std::vector<int64_t>>(v)) {
    const auto& ints = std::get<std::vector<int64_t>>(v);
    v = std::vector<double>(ints.begin(), ints.end());
  }
  n.attrs.set(key, std::move(v));
  invalidate();
}

void Graph::mark_output(const std::string& value) {
  check_name(value, "output name");
  check(std::find(output_names_.begin(), output_names_.end(), value) == output_names_.end(),
        GENIE_ERR_INVALID_GRAPH, "value '", value, "' is already marked as an output");
  output_names_.push_back(value);
  invalidate();
}

ValueId Graph::find_value(const std::string& name) const {
  auto it = value_index_.find(name);
  return it == value_index_.end() ? kNone : it->second;
}

NodeId Graph::find_node(const std::string& name) const {
  auto it = node_index_.find(name);
  return it == node_index_.end() ? kNone : it->second;
}

void Graph::validate(const std::unordered_map<ValueId, Shape>* bound_shapes) {
  // Everything is computed into locals and committed at the end, so a graph
  // that fails validation is left exactly as it was.
  const size_t n_nodes = nodes_.size();
  std::vector<OpSchemaPtr> schemas(n_nodes);
  std::vector<std::vector<ValueId>> resolved(n_nodes);
  for (size_t i = 0; i < n_nodes; ++i) {
    const Node& n = nodes_[i];
    schemas[i] = find_op(n.op);
    if (!schemas[i]) fail(GENIE_ERR_UNKNOWN_OP, "node '", n.name, "': ", unknown_op_message(n.op));
    in_node(n, [&] {
      check_arity(*schemas[i], n.input_names, n.outputs.size());
      check_attrs(*schemas[i], n.attrs);
      for (const std::string& name : n.input_names) {
        const ValueId v = name.empty() ? kNone : find_value(name);
        check(name.empty() || v != kNone, GENIE_ERR_INVALID_GRAPH, "input '", name, "' does not exist");
        resolved[i].push_back(v);
      }
    });
  }

  check(!output_names_.empty(), GENIE_ERR_INVALID_GRAPH, "the graph has no outputs (mark at least one)");
  std::vector<ValueId> outputs;
  for (const std::string& name : output_names_) {
    outputs.push_back(find_value(name));
    check(outputs.back() != kNone, GENIE_ERR_INVALID_GRAPH, "output '", name, "' does not exist");
  }

  std::vector<NodeId> order = topological_order(*this, resolved);
  std::vector<ValueType> types = leaf_types(*this, bound_shapes);

  for (NodeId id : order) {
    const Node& n = nodes_[id];
    std::vector<ValueType> in;
    for (ValueId v : resolved[id]) in.push_back(v == kNone ? ValueType{} : types[v]);
    const std::vector<ValueType> out = in_node(n, [&] {
      std::vector<ValueType> r = schemas[id]->infer(in, n.attrs);
      if (r.size() != n.outputs.size())
        fail(schemas[id]->max_outputs < 0 ? GENIE_ERR_INVALID_ATTRIBUTE : GENIE_ERR_INTERNAL,
             "the attributes give ", r.size(), " outputs but the node has ", n.outputs.size());
      for (const ValueType& t : r) {
        if (t.shape.size() > GENIE_MAX_DIMS)
          fail(GENIE_ERR_TOO_LARGE, "output shape ", shape_str(t.shape), " has more than ", GENIE_MAX_DIMS,
               " dimensions");
        byte_size(t.shape, dtype_size(t.dtype));
      }
      return r;
    });
    for (size_t k = 0; k < out.size(); ++k) types[n.outputs[k]] = out[k];
  }

  for (size_t i = 0; i < n_nodes; ++i) nodes_[i].inputs = std::move(resolved[i]);
  for (size_t v = 0; v < values_.size(); ++v)
    if (values_[v].kind == ValueKind::NodeOutput) {
      values_[v].dtype = types[v].dtype;
      values_[v].shape = std::move(types[v].shape);
    }
  outputs_ = std::move(outputs);
  topo_ = std::move(order);
  has_custom_ops_ =
      std::any_of(schemas.begin(), schemas.end(), [](const OpSchemaPtr& s) { return s->custom; });
  index_edges();
  validated_ = true;
}

void Graph::index_edges() {
  const size_t nn = nodes_.size();
  producer_edges_.assign(nn, 0);
  readers_.assign(values_.size(), 0);
  std::vector<size_t> count(nn, 0);  // consuming edges by producing node
  const auto producer = [&](ValueId in) {
    const Value& v = values_[static_cast<size_t>(in)];
    return v.kind == ValueKind::NodeOutput ? v.producer : kNone;
  };
  for (size_t n = 0; n < nn; ++n) {
    for (ValueId in : nodes_[n].inputs) {
      if (in == kNone) continue;
      ++readers_[static_cast<size_t>(in)];
      if (const NodeId p = producer(in); p != kNone) {
        ++producer_edges_[n];
        ++count[static_cast<size_t>(p)];
      }
    }
  }
  consumer_begin_.assign(nn + 1, 0);
  for (size_t n = 0; n < nn; ++n) consumer_begin_[n + 1] = consumer_begin_[n] + count[n];
  consumers_.assign(consumer_begin_[nn], kNone);
  std::vector<size_t> next(consumer_begin_.begin(), consumer_begin_.end() - 1);
  for (size_t n = 0; n < nn; ++n)
    for (ValueId in : nodes_[n].inputs)
      if (in != kNone)
        if (const NodeId p = producer(in); p != kNone)
          consumers_[next[static_cast<size_t>(p)]++] = static_cast<NodeId>(n);
}

}  // namespace genie
