#include "graph/binding.hpp"

#include "core/error.hpp"

namespace genie {

std::vector<size_t> bind_inputs(const Graph& graph, const std::vector<std::string>& names,
                                const std::vector<TensorDesc>& tensors,
                                std::unordered_map<ValueId, Shape>* bound_shapes) {
  check(names.size() == tensors.size(), GENIE_ERR_INVALID_ARGUMENT, names.size(), " input names but ",
        tensors.size(), " tensors");
  std::unordered_map<std::string, size_t> by_name;
  for (size_t i = 0; i < names.size(); ++i) {
    const ValueId v = graph.find_value(names[i]);
    check(v != kNone && graph.value(v).kind == ValueKind::Input, GENIE_ERR_INVALID_GRAPH, "'", names[i],
          "' is not an input of the graph");
    check(by_name.emplace(names[i], i).second, GENIE_ERR_INVALID_GRAPH, "input '", names[i],
          "' is bound twice");
  }
  std::vector<size_t> order;
  order.reserve(graph.inputs().size());
  for (ValueId in : graph.inputs()) {
    const Value& val = graph.value(in);
    auto it = by_name.find(val.name);
    check(it != by_name.end(), GENIE_ERR_INVALID_GRAPH, "graph input '", val.name,
          "' is not bound to a tensor");
    const TensorDesc& t = tensors[it->second];
    if (t.dtype != val.dtype)
      fail(GENIE_ERR_DTYPE_MISMATCH, "input '", val.name, "' is declared ", dtype_name(val.dtype),
           " but the tensor is ", dtype_name(t.dtype));
    bool ok = t.shape.size() == val.shape.size();
    for (size_t d = 0; ok && d < val.shape.size(); ++d) ok = val.shape[d] == -1 || val.shape[d] == t.shape[d];
    if (!ok)
      fail(GENIE_ERR_SHAPE_MISMATCH, "input '", val.name, "' is declared ", shape_str(val.shape),
           " but the tensor is ", shape_str(t.shape));
    if (bound_shapes) (*bound_shapes)[in] = t.shape;
    order.push_back(it->second);
  }
  return order;
}

}  // namespace genie
