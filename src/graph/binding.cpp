#include "graph/binding.hpp"

#include <algorithm>
#include <utility>

#include "core/error.hpp"

namespace genie {

std::vector<size_t> bind_inputs(const Graph& graph, const std::vector<std::string>& names,
                                const std::vector<TensorDesc>& tensors,
                                std::unordered_map<ValueId, Shape>* bound_shapes) {
  check(names.size() == tensors.size(), GENIE_ERR_INVALID_ARGUMENT, names.size(), " input names but ",
        tensors.size(), " tensors");
  // (input value, binding index), by value: each name names an input, once.
  std::vector<std::pair<ValueId, size_t>> bound;
  bound.reserve(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const ValueId v = graph.find_value(names[i]);
    check(v != kNone && graph.value(v).kind == ValueKind::Input, GENIE_ERR_INVALID_GRAPH, "'", names[i],
          "' is not an input of the graph");
    bound.emplace_back(v, i);
  }
  std::sort(bound.begin(), bound.end());
  for (size_t k = 1; k < bound.size(); ++k)
    check(bound[k].first != bound[k - 1].first, GENIE_ERR_INVALID_GRAPH, "input '", names[bound[k].second],
          "' is bound twice");
  std::vector<size_t> order;
  order.reserve(graph.inputs().size());
  for (ValueId in : graph.inputs()) {
    const Value& val = graph.value(in);
    const auto it = std::lower_bound(bound.begin(), bound.end(), std::make_pair(in, size_t{0}));
    check(it != bound.end() && it->first == in, GENIE_ERR_INVALID_GRAPH, "graph input '", val.name,
          "' is not bound to a tensor");
    const size_t b = it->second;
    const TensorDesc& t = tensors[b];
    if (t.dtype != val.dtype)
      fail(GENIE_ERR_DTYPE_MISMATCH, "input '", val.name, "' is declared ", dtype_name(val.dtype),
           " but the tensor is ", dtype_name(t.dtype));
    bool ok = t.shape.size() == val.shape.size();
    for (size_t d = 0; ok && d < val.shape.size(); ++d) ok = val.shape[d] == -1 || val.shape[d] == t.shape[d];
    if (!ok)
      fail(GENIE_ERR_SHAPE_MISMATCH, "input '", val.name, "' is declared ", shape_str(val.shape),
           " but the tensor is ", shape_str(t.shape));
    order.push_back(b);
  }
  if (bound_shapes) *bound_shapes = input_shapes(graph, tensors, order);
  return order;
}

std::unordered_map<ValueId, Shape> input_shapes(const Graph& graph, const std::vector<TensorDesc>& tensors,
                                                const std::vector<size_t>& order) {
  std::unordered_map<ValueId, Shape> shapes;
  for (size_t k = 0; k < order.size(); ++k) shapes[graph.inputs()[k]] = tensors[order[k]].shape;
  return shapes;
}

}  // namespace genie
