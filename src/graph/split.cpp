// Per-device stages of a planned graph: the contract is in graph_split.hpp.
#include "graph/split.hpp"

#include <unordered_set>

#include "core/error.hpp"

namespace genie {

std::vector<Stage> split_stages(const Graph& g, const std::vector<int>& node_device,
                                const std::vector<NodeId>& order,
                                const std::unordered_map<ValueId, Shape>* bound_shapes) {
  const size_t n = g.nodes().size();
  check(node_device.size() == n && order.size() == n, GENIE_ERR_INVALID_ARGUMENT, "plan of ", order.size(),
        " nodes (", node_device.size(), " placed) for a graph of ", n);
  std::vector<int> stage_of(n, -1);
  std::vector<Stage> stages;
  for (NodeId id : order) {
    check(id >= 0 && static_cast<size_t>(id) < n && stage_of[static_cast<size_t>(id)] < 0,
          GENIE_ERR_INVALID_ARGUMENT, "plan order names node ", id, " twice or out of range");
    const int dev = node_device[static_cast<size_t>(id)];
    if (stages.empty() || stages.back().device != dev) stages.push_back(Stage{dev, {}, {}, {}, nullptr});
    stages.back().nodes.push_back(id);
    stage_of[static_cast<size_t>(id)] = static_cast<int>(stages.size()) - 1;
  }
  // Where each value is read: which stages, and whether the graph returns it.
  std::vector<std::vector<int>> readers(g.values().size());
  for (size_t s = 0; s < stages.size(); ++s)
    for (NodeId id : stages[s].nodes)
      for (ValueId v : g.node(id).inputs)
        if (v != kNone) readers[static_cast<size_t>(v)].push_back(static_cast<int>(s));
  std::unordered_set<ValueId> graph_outputs(g.outputs().begin(), g.outputs().end());

  for (size_t s = 0; s < stages.size(); ++s) {
    Stage& st = stages[s];
    auto sub = std::make_shared<Graph>(g.name().empty() ? "stage" : g.name() + ".stage" + std::to_string(s));
    std::unordered_set<ValueId> have;
    for (NodeId id : st.nodes) {
      const Node& node = g.node(id);
      for (ValueId v : node.inputs) {
        if (v == kNone || have.count(v)) continue;
        const Value& val = g.value(v);
        const NodeId prod = val.producer;
        if (val.kind == ValueKind::NodeOutput) {
          const int ps = stage_of[static_cast<size_t>(prod)];
          check(ps >= 0 && ps <= static_cast<int>(s), GENIE_ERR_INVALID_ARGUMENT, "plan order runs node '",
                node.name, "' before the producer of '", val.name, "'");
          if (ps == static_cast<int>(s)) continue;  // produced in this stage, earlier
        }
        if (val.kind == ValueKind::Constant) {
          sub->add_constant(val.name, val.constant);
        } else {
          const Shape* shape = &val.shape;
          if (bound_shapes && val.kind == ValueKind::Input)
            if (auto it = bound_shapes->find(v); it != bound_shapes->end()) shape = &it->second;
          sub->add_input(val.name, val.dtype, *shape);
          st.inputs.push_back(v);
        }
        sub->value(sub->find_value(val.name)).role = val.role;
        have.insert(v);
      }
      const NodeId nid = sub->add_node(node.op, node.name, node.input_names, [&] {
        std::vector<std::string> outs;
        for (ValueId o : node.outputs) outs.push_back(g.value(o).name);
        return outs;
      }());
      sub->node(nid).attrs = node.attrs;
      sub->node(nid).ann = node.ann;
      for (ValueId o : node.outputs) {
        have.insert(o);
        sub->value(sub->find_value(g.value(o).name)).role = g.value(o).role;
      }
    }
    for (NodeId id : st.nodes)
      for (ValueId o : g.node(id).outputs) {
        bool needed = graph_outputs.count(o) > 0;
        for (int r : readers[static_cast<size_t>(o)]) needed = needed || r > static_cast<int>(s);
        if (!needed) continue;
        sub->mark_output(g.value(o).name);
        st.outputs.push_back(o);
      }
    if (st.outputs.empty()) {
      // Nothing of it is used: it still runs (as the whole graph would), and
      // a graph needs an output.
      const ValueId o = g.node(st.nodes.back()).outputs.at(0);
      sub->mark_output(g.value(o).name);
      st.outputs.push_back(o);
    }
    sub->validate();
    st.graph = std::move(sub);
  }
  return stages;
}

}  // namespace genie
