// Read-only indexes over a validated graph shared by analysis and placement:
// an operator code per node (no string compares on hot paths), the
// consumers of every value (CSR), and each node's topological position.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/graph.hpp"

namespace genie::sched {

enum class OpCode : uint8_t {
  Other = 0, Matmul, Linear, Add, Sub, Mul, Div, Relu, Silu, Tanh, Sigmoid, Exp, Log, Sqrt, Neg, Abs,
  Gelu, Dropout, Compare, Where, MaskedFill, Cast, Softmax, LayerNorm, RmsNorm, Embedding, Reshape,
  Transpose, Permute, Flatten, Concat, Split, Slice, Reduce, Attention, Conv2d, Pool,
};
OpCode op_code(const std::string& op);
// The class's name ("matmul", "compare", "reduce", "pool", "other"), stable
// across versions (learned corrections are kept on disk under it), and back
// (false for a name no class has).
const char* op_class_name(OpCode c);
bool op_class_from_name(const std::string& name, OpCode* out);

inline bool is_activation(OpCode c) {
  return c == OpCode::Relu || c == OpCode::Gelu || c == OpCode::Silu || c == OpCode::Tanh || c == OpCode::Sigmoid;
}
inline bool is_layout(OpCode c) {
  return c == OpCode::Reshape || c == OpCode::Transpose || c == OpCode::Permute || c == OpCode::Flatten ||
         c == OpCode::Cast;
}

struct GraphView {
  explicit GraphView(const Graph& g);

  const Graph& g;
  std::vector<OpCode> code;             // per node
  std::vector<int32_t> topo_pos;        // per node: position in g.topo_order()
  std::vector<int32_t> cons_begin;      // per value + 1: CSR offsets into cons
  std::vector<NodeId> cons;             // consumers (a node reading a value twice appears twice)
  std::vector<uint8_t> is_output;       // per value: a marked graph output

  NodeId producer(ValueId v) const { return v == kNone ? kNone : g.value(v).producer; }
  OpCode producer_code(ValueId v) const {
    const NodeId p = producer(v);
    return p == kNone ? OpCode::Other : code[p];
  }
  int32_t n_consumers(ValueId v) const { return cons_begin[v + 1] - cons_begin[v]; }
  const NodeId* consumers_begin(ValueId v) const { return cons.data() + cons_begin[v]; }
  const NodeId* consumers_end(ValueId v) const { return cons.data() + cons_begin[v + 1]; }
  // The only consumer of v, or kNone when it has none, several, or v is a graph output.
  NodeId sole_consumer(ValueId v) const {
    return (n_consumers(v) == 1 && !is_output[v]) ? cons[cons_begin[v]] : kNone;
  }
};

}  // namespace genie::sched
