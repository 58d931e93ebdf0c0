#include "sched/graph_view.hpp"

namespace genie::sched {

OpCode op_code(const std::string& op) {
  static const std::unordered_map<std::string, OpCode> table = {
      {"matmul", OpCode::Matmul},
      {"linear", OpCode::Linear},
      {"add", OpCode::Add},
      {"sub", OpCode::Sub},
      {"mul", OpCode::Mul},
      {"div", OpCode::Div},
      {"relu", OpCode::Relu},
      {"silu", OpCode::Silu},
      {"tanh", OpCode::Tanh},
      {"sigmoid", OpCode::Sigmoid},
      {"exp", OpCode::Exp},
      {"log", OpCode::Log},
      {"sqrt", OpCode::Sqrt},
      {"neg", OpCode::Neg},
      {"abs", OpCode::Abs},
      {"gelu", OpCode::Gelu},
      {"dropout", OpCode::Dropout},
      {"eq", OpCode::Compare},
      {"ne", OpCode::Compare},
      {"lt", OpCode::Compare},
      {"le", OpCode::Compare},
      {"gt", OpCode::Compare},
      {"ge", OpCode::Compare},
      {"where", OpCode::Where},
      {"masked_fill", OpCode::MaskedFill},
      {"cast", OpCode::Cast},
      {"softmax", OpCode::Softmax},
      {"layer_norm", OpCode::LayerNorm},
      {"rms_norm", OpCode::RmsNorm},
      {"embedding", OpCode::Embedding},
      {"reshape", OpCode::Reshape},
      {"transpose", OpCode::Transpose},
      {"permute", OpCode::Permute},
      {"flatten", OpCode::Flatten},
      {"concat", OpCode::Concat},
      {"split", OpCode::Split},
      {"slice", OpCode::Slice},
      {"reduce_sum", OpCode::Reduce},
      {"reduce_mean", OpCode::Reduce},
      {"reduce_max", OpCode::Reduce},
      {"attention", OpCode::Attention},
      {"conv2d", OpCode::Conv2d},
      {"max_pool2d", OpCode::Pool},
      {"avg_pool2d", OpCode::Pool},
      {"adaptive_avg_pool2d", OpCode::Pool},
      {"adaptive_max_pool2d", OpCode::Pool},
  };
  auto it = table.find(op);
  return it == table.end() ? OpCode::Other : it->second;
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
