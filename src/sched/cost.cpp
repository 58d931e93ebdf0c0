// Cost model: FLOPs and bytes per operator (docs/scheduler.md, "Cost model").
#include "sched/cost.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "graph/op_schema.hpp"
#include "sched/graph_view.hpp"
#include "sched/learned_cost.hpp"
#include "sched/plan.hpp"

namespace genie::sched {

namespace {

double prod(const Shape& s, size_t from = 0, size_t to = SIZE_MAX) {
  double p = 1;
  to = std::min(to, s.size());
  for (size_t i = from; i < to; ++i) p *= static_cast<double>(s[i]);
  return p;
}

double numel_d(const Shape& s) { return prod(s); }

// FLOPs per output element of elementwise and per-axis operators; -1 for
// the others.
double elementwise_flops(OpCode c) {
  switch (c) {
    case OpCode::Add: case OpCode::Sub: case OpCode::Mul: case OpCode::Div: case OpCode::Relu:
    case OpCode::Neg: case OpCode::Abs: case OpCode::Compare: case OpCode::Where: case OpCode::MaskedFill:
      return 1;
    case OpCode::Exp: case OpCode::Log: case OpCode::Sqrt: case OpCode::Tanh: case OpCode::Sigmoid:
      return 4;
    case OpCode::Silu: return 5;
    case OpCode::Gelu: return 8;
    case OpCode::Softmax: return 5;
    case OpCode::LayerNorm: return 8;
    case OpCode::RmsNorm: return 5;
    case OpCode::Dropout: case OpCode::Cast: return 0;
    default: return -1;
  }
}

}  // namespace

uint64_t value_bytes(DType t, const Shape& s) {
  const double n = std::max(0.0, numel_d(s));  // an unbound dynamic dim counts as empty
  return static_cast<uint64_t>(n) * dtype_size(t);
}

std::vector<const Shape*> value_shapes(const Graph& g, const std::unordered_map<ValueId, Shape>* bound) {
  std::vector<const Shape*> shapes(g.values().size());
  for (size_t v = 0; v < shapes.size(); ++v) {
    shapes[v] = &g.value(static_cast<ValueId>(v)).shape;
    if (bound)
      if (auto it = bound->find(static_cast<ValueId>(v)); it != bound->end()) shapes[v] = &it->second;
  }
  return shapes;
}

OpCost op_cost(const Graph& g, NodeId id, OpCode code, const std::vector<const Shape*>& shapes) {
  const Node& n = g.node(id);
  OpCost c;
  auto in_shape = [&](size_t i) -> const Shape& { return *shapes[n.inputs[i]]; };
  auto has_in = [&](size_t i) { return i < n.inputs.size() && n.inputs[i] != kNone; };
  auto bytes_of = [&](ValueId v) { return value_bytes(g.value(v).dtype, *shapes[v]); };
  for (ValueId v : n.inputs)
    if (v != kNone) c.bytes_read += bytes_of(v);
  for (ValueId v : n.outputs) c.bytes_written += bytes_of(v);
  const Shape& out = *shapes[n.outputs[0]];
  const double out_n = numel_d(out);
  c.code = code;
  c.gemm = code == OpCode::Matmul || code == OpCode::Linear || code == OpCode::Attention || code == OpCode::Conv2d;

  if (code == OpCode::Matmul) {
    // out = [..., m, n]; k from a's last dim (or second last when transposed).
    const Shape& a = in_shape(0);
    int64_t k = 1;
    if (a.size() == 1) {
      k = a[0];
    } else if (!a.empty()) {
      k = n.attrs.get_int("transpose_a", 0) ? a[a.size() - 2] : a.back();
    }
    c.flops = 2.0 * out_n * static_cast<double>(k);
  } else if (code == OpCode::Linear) {
    const Shape& w = in_shape(1);  // [out, in]
    c.flops = 2.0 * out_n * static_cast<double>(w.size() == 2 ? w[1] : 1);
    if (has_in(2)) c.flops += out_n;
  } else if (code == OpCode::Attention) {
    // q [..., Sq, D], k [..., Sk, D], v [..., Sk, Dv]: two matmuls, the
    // scale and the softmax over the [..., Sq, Sk] scores (+ the mask).
    const Shape& q = in_shape(0);
    const Shape& k = in_shape(1);
    const Shape& v = in_shape(2);
    const double batch = prod(q, 0, q.size() - 2);
    const double sq = static_cast<double>(q[q.size() - 2]), d = static_cast<double>(q.back());
    const double sk = static_cast<double>(k[k.size() - 2]), dv = static_cast<double>(v.back());
    const double scores = batch * sq * sk;
    c.flops = 2.0 * scores * d + 2.0 * scores * dv + scores * (1 + 5 + (has_in(3) ? 1 : 0));
  } else if (code == OpCode::Conv2d) {
    const Shape& w = in_shape(1);  // [O, C/groups, kh, kw]
    c.flops = 2.0 * out_n * static_cast<double>(w[1] * w[2] * w[3]);
    if (has_in(2)) c.flops += out_n;
  } else if (code == OpCode::Pool && n.attrs.has("kernel")) {
    const std::vector<int64_t> k = n.attrs.get_ints("kernel", {1, 1});
    c.flops = out_n * static_cast<double>(k.size() == 2 ? k[0] * k[1] : 1);
  } else if (code == OpCode::Pool) {
    c.flops = numel_d(in_shape(0));  // each input element lands in ~one bin
  } else if (code == OpCode::Reduce) {
    c.flops = numel_d(in_shape(0));
  } else if (code == OpCode::Embedding) {
    // A gather: reads the ids and only the rows it looks up.
    c.bytes_read = bytes_of(n.inputs[0]) + bytes_of(n.outputs[0]);
  } else if (code == OpCode::Reshape || code == OpCode::Flatten) {
    c.view_bytes = c.bytes_written;
    c.bytes_read = 0;  // metadata only: the data is not touched
    c.bytes_written = 0;
  } else if (code == OpCode::Transpose || code == OpCode::Permute || code == OpCode::Concat || code == OpCode::Split ||
             code == OpCode::Slice) {
    // copies: slice/split read what they keep.
    if (code == OpCode::Slice) c.bytes_read = c.bytes_written;
  } else if (double f = elementwise_flops(code); f >= 0) {
    c.flops = f * out_n;
  } else if (OpSchemaPtr schema = find_op(n.op); schema && schema->flops) {
    // A custom op that estimates itself (docs/custom-ops.md, "Cost").
    std::vector<ValueType> in, outs;
    for (ValueId v : n.inputs) in.push_back(v == kNone ? ValueType{} : ValueType{g.value(v).dtype, *shapes[v]});
    for (ValueId v : n.outputs) outs.push_back(ValueType{g.value(v).dtype, *shapes[v]});
    const double f = schema->flops(in, outs, n.attrs);
    c.flops = f >= 0 ? f : out_n;  // a failed estimate falls back to the default
  } else {
    c.flops = out_n;  // unknown (custom) op: one FLOP per output element
  }
  return c;
}

OpCost op_cost(const Graph& g, NodeId n, const std::vector<const Shape*>& shapes) {
  return op_cost(g, n, op_code(g.node(n).op), shapes);
}

OpCost op_cost(const Graph& g, NodeId n) { return op_cost(g, n, value_shapes(g, nullptr)); }

std::vector<OpCost> node_costs(const Graph& g, const std::unordered_map<ValueId, Shape>* bound_shapes) {
  const std::vector<const Shape*> shapes = value_shapes(g, bound_shapes);
  std::vector<OpCost> costs;
  costs.reserve(g.nodes().size());
  for (size_t i = 0; i < g.nodes().size(); ++i) costs.push_back(op_cost(g, static_cast<NodeId>(i), shapes));
  return costs;
}

uint64_t cost_signature(const std::vector<OpCost>& costs) {
  // FNV-1a over the op class of each node: sizes left out, so that the
  // steps of a decode loop, whose caches grow by one token each, share one.
  uint64_t h = 0xcbf29ce484222325ull;
  const auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i, v >>= 8) h = (h ^ (v & 0xff)) * 0x100000001b3ull;
  };
  mix(costs.size());
  for (const OpCost& c : costs) {
    mix(static_cast<uint64_t>(c.code));
  }
  return h ? h : 1;
}

bool cost_model_knows(const std::string& op) { return op_code(op) != OpCode::Other; }

double model_seconds(const OpCost& c, const DeviceProfile& d) {
  const double rate = c.gemm || !(d.vector_flops > 0) ? d.peak_flops : d.vector_flops;
  const double compute = c.flops / rate;
  const double memory = static_cast<double>(c.bytes()) / d.mem_bw_bytes_per_s;
  return std::max(compute, memory) + d.op_overhead_s;
}

double predict_seconds(const OpCost& c, const DeviceProfile& d) {
  const double s = model_seconds(c, d);
  return d.learned ? s * d.learned->factor(c.code, c.work()) : s;
}

double predict_seconds(const OpCost& c, const DeviceProfile& d, uint64_t graph, size_t node) {
  double f;
  if (d.learned && d.learned->node_factor(graph, node, &f)) return model_seconds(c, d) * f;
  return predict_seconds(c, d);
}

}  // namespace genie::sched
