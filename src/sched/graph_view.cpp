#include "sched/graph_view.hpp"

namespace genie::sched {

OpCode op_code(const std::string& op) {
  // Derived from the op table (graph/op_table.def): its second column.
  static const std::unordered_map<std::string, OpCode> table = {
#define GENIE_OP(name, sched_class, cuda) {#name, OpCode::sched_class},
#include "graph/op_table.def"
#undef GENIE_OP
  };
  auto it = table.find(op);
  return it == table.end() ? OpCode::Other : it->second;
}

namespace {

// In the order of the enumerators.
constexpr const char* kClassNames[] = {
    "other",    "matmul",    "linear",    "add",       "sub",         "mul",     "div",     "relu",
    "silu",     "tanh",      "sigmoid",   "exp",       "log",         "sqrt",    "neg",     "abs",
    "gelu",     "dropout",   "compare",   "where",     "masked_fill", "cast",    "softmax", "layer_norm",
    "rms_norm", "embedding", "reshape",   "transpose", "permute",     "flatten", "concat",  "split",
    "slice",    "reduce",    "attention", "conv2d",    "pool",
};
static_assert(sizeof kClassNames / sizeof *kClassNames == static_cast<size_t>(OpCode::Pool) + 1,
              "one name per OpCode");

}  // namespace

const char* op_class_name(OpCode c) {
  const size_t i = static_cast<size_t>(c);
  return i < sizeof kClassNames / sizeof *kClassNames ? kClassNames[i] : "other";
}

bool op_class_from_name(const std::string& name, OpCode* out) {
  for (size_t i = 0; i < sizeof kClassNames / sizeof *kClassNames; ++i)
    if (name == kClassNames[i]) {
      *out = static_cast<OpCode>(i);
      return true;
    }
  return false;
}

GraphView::GraphView(const Graph& graph) : g(graph) {
  const size_t n_nodes = g.nodes().size(), n_values = g.values().size();
  code.resize(n_nodes);
  topo_pos.assign(n_nodes, 0);
  for (size_t i = 0; i < n_nodes; ++i) code[i] = op_code(g.nodes()[i].op);
  const std::vector<NodeId>& topo = g.topo_order();
  for (size_t i = 0; i < topo.size(); ++i) topo_pos[topo[i]] = static_cast<int32_t>(i);
  cons_begin.assign(n_values + 1, 0);
  for (const Node& n : g.nodes())
    for (ValueId v : n.inputs)
      if (v != kNone) ++cons_begin[v + 1];
  for (size_t v = 0; v < n_values; ++v) cons_begin[v + 1] += cons_begin[v];
  cons.resize(static_cast<size_t>(cons_begin[n_values]));
  std::vector<int32_t> fill(cons_begin.begin(), cons_begin.end() - 1);
  for (size_t i = 0; i < n_nodes; ++i)
    for (ValueId v : g.nodes()[i].inputs)
      if (v != kNone) cons[static_cast<size_t>(fill[v]++)] = static_cast<NodeId>(i);
  is_output.assign(n_values, 0);
  for (ValueId v : g.outputs()) is_output[v] = 1;
}

}  // namespace genie::sched
