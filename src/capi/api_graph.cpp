// C API: graph construction, validation, hashing and JSON.
#include <cstdlib>
#include <cstring>

#include "capi/handles.hpp"

using namespace genie;

namespace {

// Every call that may change a graph reaches it through here: submissions
// keep reusing their snapshot of it only until the version moves.
Graph& G(genie_graph_t* g) {
  GraphObj* h = live<GraphObj>(g);
  h->version.fetch_add(1, std::memory_order_relaxed);
  return h->g;
}
const Graph& G(const genie_graph_t* g) { return live<GraphObj>(g)->g; }

std::string str_arg(const char* s, const char* what) {
  check(s != nullptr, GENIE_ERR_INVALID_ARGUMENT, what, " is NULL");
  return s;
}

Shape decl_shape(const int64_t* shape, size_t ndim, bool allow_dynamic) {
  check(ndim <= GENIE_MAX_DIMS, GENIE_ERR_INVALID_ARGUMENT, "ndim ", ndim, " exceeds GENIE_MAX_DIMS (",
        GENIE_MAX_DIMS, ")");
  check(ndim == 0 || shape != nullptr, GENIE_ERR_INVALID_ARGUMENT, "shape is NULL with ndim ", ndim);
  Shape s(shape, shape + ndim);
  for (size_t i = 0; i < ndim; ++i)
    if (s[i] < (allow_dynamic ? -1 : 0))
      fail(GENIE_ERR_INVALID_ARGUMENT, "dimension ", i, " of ", shape_str(s),
           allow_dynamic ? " is below -1" : " is negative");
  return s;
}

DType dtype_arg(genie_dtype_t dtype) {
  check(dtype_valid(dtype), GENIE_ERR_INVALID_ARGUMENT, "dtype ", static_cast<int>(dtype),
        " is not a genie_dtype_t");
  return static_cast<DType>(dtype);
}

// Copies a C string out through a malloc'd buffer released by genie_free.
char* malloc_copy(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p == nullptr) throw std::bad_alloc();
  std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

// genie_graph_node_name / _op: one string member of node `index`, borrowed.
genie_status_t node_field(const genie_graph_t* graph, size_t index, const char** out,
                          std::string Node::*field) {
  return guard([&] {
    const Graph& g = G(graph);
    check_out(out, "out");
    check(index < g.nodes().size(), GENIE_ERR_NOT_FOUND, "node index ", index, " out of range (",
          g.nodes().size(), " nodes)");
    *out = (g.nodes()[index].*field).c_str();
  });
}

template <class Fn>
genie_status_t annotate(genie_graph_t* graph, const char* node, Fn&& fn) {
  return guard([&] {
    Graph& g = G(graph);
    const std::string n = str_arg(node, "node");
    const NodeId id = g.find_node(n);
    check(id != kNone, GENIE_ERR_NOT_FOUND, "no node named '", n, "'");
    fn(g.node(id).ann);
    g.invalidate();
  });
}

}  // namespace

extern "C" {

genie_status_t genie_graph_create(const char* name, genie_graph_t** out) {
  return guard([&] {
    check_out(out, "out");
    const std::string n = name ? name : "";
    check(n.size() <= 255, GENIE_ERR_INVALID_ARGUMENT, "graph name is longer than 255 bytes");
    auto h = std::make_unique<GraphObj>();
    h->g.set_name(n);
    *out = publish(std::move(h));
  });
}

void genie_graph_destroy(genie_graph_t* graph) { retire<GraphObj>(graph); }

genie_status_t genie_graph_add_input(genie_graph_t* graph, const char* name, genie_dtype_t dtype,
                                     const int64_t* shape, size_t ndim) {
  return guard([&] {
    Graph& g = G(graph);
    g.add_input(str_arg(name, "name"), dtype_arg(dtype), decl_shape(shape, ndim, true));
  });
}

genie_status_t genie_graph_add_constant(genie_graph_t* graph, const char* name, genie_dtype_t dtype,
                                        const int64_t* shape, size_t ndim, const void* data, size_t nbytes) {
  return guard([&] {
    Graph& g = G(graph);
    const std::string n = str_arg(name, "name");
    const DType t = dtype_arg(dtype);
    Shape s = decl_shape(shape, ndim, false);
    const size_t need = byte_size(s, dtype_size(t));
    if (nbytes != need)
      fail(GENIE_ERR_SIZE_MISMATCH, "constant '", n, "' of ", dtype_name(t), shape_str(s), " needs ", need,
           " bytes, got ", nbytes);
    check(data != nullptr || nbytes == 0, GENIE_ERR_INVALID_ARGUMENT, "data is NULL");
    auto td = std::make_shared<TensorData>(t, std::move(s));
    if (nbytes) std::memcpy(td->bytes(), data, nbytes);
    g.add_constant(n, std::move(td));
  });
}

genie_status_t genie_graph_add_node(genie_graph_t* graph, const char* op, const char* name,
                                    const char* const* inputs, size_t n_inputs, const char* const* outputs,
                                    size_t n_outputs) {
  return guard([&] {
    Graph& g = G(graph);
    const std::string o = str_arg(op, "op");
    const std::string n = str_arg(name, "name");
    check(n_inputs == 0 || inputs != nullptr, GENIE_ERR_INVALID_ARGUMENT, "inputs is NULL with n_inputs ",
          n_inputs);
    check(outputs != nullptr && n_outputs >= 1, GENIE_ERR_INVALID_ARGUMENT, "node '", n,
          "' needs at least one output name");
    check(n_inputs <= 4096 && n_outputs <= 4096, GENIE_ERR_INVALID_ARGUMENT, "node '", n,
          "' has too many inputs or outputs");
    std::vector<std::string> ins, outs;
    for (size_t i = 0; i < n_inputs; ++i) ins.emplace_back(inputs[i] ? inputs[i] : "");
    for (size_t i = 0; i < n_outputs; ++i) outs.push_back(str_arg(outputs[i], "output name"));
    g.add_node(o, n, ins, outs);
  });
}

genie_status_t genie_graph_set_attr_int(genie_graph_t* graph, const char* node, const char* key,
                                        int64_t value) {
  return guard([&] { G(graph).set_attr(str_arg(node, "node"), str_arg(key, "key"), AttrValue(value)); });
}

genie_status_t genie_graph_set_attr_float(genie_graph_t* graph, const char* node, const char* key,
                                          double value) {
  return guard([&] { G(graph).set_attr(str_arg(node, "node"), str_arg(key, "key"), AttrValue(value)); });
}

genie_status_t genie_graph_set_attr_string(genie_graph_t* graph, const char* node, const char* key,
                                           const char* value) {
  return guard([&] {
    G(graph).set_attr(str_arg(node, "node"), str_arg(key, "key"), AttrValue(str_arg(value, "value")));
  });
}

genie_status_t genie_graph_set_attr_ints(genie_graph_t* graph, const char* node, const char* key,
                                         const int64_t* values, size_t count) {
  return guard([&] {
    check(count == 0 || values != nullptr, GENIE_ERR_INVALID_ARGUMENT, "values is NULL with count ", count);
    check(count <= 1u << 20, GENIE_ERR_TOO_LARGE, "attribute list of ", count, " entries");
    G(graph).set_attr(str_arg(node, "node"), str_arg(key, "key"),
                      AttrValue(std::vector<int64_t>(values, values + count)));
  });
}

genie_status_t genie_graph_set_attr_floats(genie_graph_t* graph, const char* node, const char* key,
                                           const double* values, size_t count) {
  return guard([&] {
    check(count == 0 || values != nullptr, GENIE_ERR_INVALID_ARGUMENT, "values is NULL with count ", count);
    check(count <= 1u << 20, GENIE_ERR_TOO_LARGE, "attribute list of ", count, " entries");
    G(graph).set_attr(str_arg(node, "node"), str_arg(key, "key"),
                      AttrValue(std::vector<double>(values, values + count)));
  });
}

genie_status_t genie_graph_set_phase(genie_graph_t* graph, const char* node, genie_phase_t phase) {
  return annotate(graph, node, [&](Annotations& a) {
    check(phase >= GENIE_PHASE_UNKNOWN && phase <= GENIE_PHASE_BACKWARD, GENIE_ERR_INVALID_ARGUMENT, "phase ",
          static_cast<int>(phase), " is not a genie_phase_t");
    a.phase = static_cast<Phase>(phase);
  });
}

genie_status_t genie_graph_set_module(genie_graph_t* graph, const char* node, const char* module_path) {
  return annotate(graph, node, [&](Annotations& a) {
    const std::string m = module_path ? module_path : "";
    check(m.size() <= 4096, GENIE_ERR_INVALID_ARGUMENT, "module path is longer than 4096 bytes");
    a.module_path = m;
  });
}

genie_status_t genie_graph_set_layer(genie_graph_t* graph, const char* node, int32_t layer) {
  return annotate(graph, node, [&](Annotations& a) {
    check(layer >= -1, GENIE_ERR_INVALID_ARGUMENT, "layer ", layer, " is below -1");
    a.layer = layer;
  });
}

genie_status_t genie_graph_set_modality(genie_graph_t* graph, const char* node, genie_modality_t modality) {
  return annotate(graph, node, [&](Annotations& a) {
    check(modality >= GENIE_MODALITY_UNKNOWN && modality <= GENIE_MODALITY_AUDIO, GENIE_ERR_INVALID_ARGUMENT,
          "modality ", static_cast<int>(modality), " is not a genie_modality_t");
    a.modality = static_cast<Modality>(modality);
  });
}

genie_status_t genie_graph_set_role(genie_graph_t* graph, const char* value, genie_tensor_role_t role) {
  return guard([&] {
    Graph& g = G(graph);
    const std::string n = str_arg(value, "value");
    check(role >= GENIE_TENSOR_ROLE_UNSPECIFIED && role <= GENIE_TENSOR_ROLE_OUTPUT,
          GENIE_ERR_INVALID_ARGUMENT, "role ", static_cast<int>(role), " is not a genie_tensor_role_t");
    const ValueId id = g.find_value(n);
    check(id != kNone, GENIE_ERR_NOT_FOUND, "no value named '", n, "'");
    g.value(id).role = static_cast<TensorRole>(role);
    g.invalidate();
  });
}

genie_status_t genie_graph_mark_output(genie_graph_t* graph, const char* value) {
  return guard([&] { G(graph).mark_output(str_arg(value, "value")); });
}

genie_status_t genie_graph_validate(genie_graph_t* graph) {
  return guard([&] { G(graph).validate(); });
}

genie_status_t genie_graph_num_nodes(const genie_graph_t* graph, size_t* out) {
  return guard([&] {
    const Graph& g = G(graph);
    check_out(out, "out");
    *out = g.nodes().size();
  });
}

genie_status_t genie_graph_node_name(const genie_graph_t* graph, size_t index, const char** out) {
  return node_field(graph, index, out, &Node::name);
}

genie_status_t genie_graph_node_op(const genie_graph_t* graph, size_t index, const char** out) {
  return node_field(graph, index, out, &Node::op);
}

genie_status_t genie_graph_num_inputs(const genie_graph_t* graph, size_t* out) {
  return guard([&] {
    const Graph& g = G(graph);
    check_out(out, "out");
    *out = g.inputs().size();
  });
}

genie_status_t genie_graph_input_name(const genie_graph_t* graph, size_t index, const char** out) {
  return guard([&] {
    const Graph& g = G(graph);
    check_out(out, "out");
    check(index < g.inputs().size(), GENIE_ERR_NOT_FOUND, "input index ", index, " out of range (",
          g.inputs().size(), " inputs)");
    *out = g.value(g.inputs()[index]).name.c_str();
  });
}

genie_status_t genie_graph_num_outputs(const genie_graph_t* graph, size_t* out) {
  return guard([&] {
    const Graph& g = G(graph);
    check_out(out, "out");
    *out = g.output_names().size();
  });
}

genie_status_t genie_graph_output_name(const genie_graph_t* graph, size_t index, const char** out) {
  return guard([&] {
    const Graph& g = G(graph);
    check_out(out, "out");
    check(index < g.output_names().size(), GENIE_ERR_NOT_FOUND, "output index ", index, " out of range (",
          g.output_names().size(), " outputs)");
    *out = g.output_names()[index].c_str();
  });
}

genie_status_t genie_graph_value_info(const genie_graph_t* graph, const char* value, genie_dtype_t* dtype,
                                      int64_t* shape, size_t* ndim) {
  return guard([&] {
    const Graph& g = G(graph);
    const std::string n = str_arg(value, "value");
    const ValueId id = g.find_value(n);
    check(id != kNone, GENIE_ERR_NOT_FOUND, "no value named '", n, "'");
    const Value& v = g.value(id);
    check(v.kind != ValueKind::NodeOutput || g.validated(), GENIE_ERR_INVALID_GRAPH, "value '", n,
          "' has no inferred type: validate the graph first");
    if (dtype) *dtype = static_cast<genie_dtype_t>(v.dtype);
    if (shape) std::copy(v.shape.begin(), v.shape.end(), shape);
    if (ndim) *ndim = v.shape.size();
  });
}

genie_status_t genie_graph_hash(const genie_graph_t* graph, uint64_t* out) {
  return guard([&] {
    const Graph& g = G(graph);
    check_out(out, "out");
    *out = g.structural_hash();
  });
}

genie_status_t genie_graph_to_json(const genie_graph_t* graph, char** out_json, size_t* out_len) {
  return guard([&] {
    const Graph& g = G(graph);
    check_out(out_json, "out_json");
    const std::string s = graph_to_json(g);
    *out_json = malloc_copy(s);
    if (out_len) *out_len = s.size();
  });
}

genie_status_t genie_graph_from_json(const char* json, size_t len, genie_graph_t** out) {
  return guard([&] {
    check(json != nullptr, GENIE_ERR_INVALID_ARGUMENT, "json is NULL");
    check_out(out, "out");
    std::unique_ptr<Graph> g = graph_from_json(json, len);
    auto h = std::make_unique<GraphObj>();
    h->g = std::move(*g);
    *out = publish(std::move(h));
  });
}

}  // extern "C"
