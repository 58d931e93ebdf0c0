// Semantic analysis (docs/scheduler.md, "Semantic analysis").
#include "sched/analysis.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "sched/cost.hpp"
#include "sched/graph_view.hpp"

namespace genie::sched {

const char* stage_name(Stage s) {
  switch (s) {
    case Stage::Prefill: return "prefill";
    case Stage::Decode: return "decode";
    case Stage::Vision: return "vision";
    case Stage::Forward: return "forward";
    case Stage::Backward: return "backward";
    default: return "unknown";
  }
}

const char* source_name(Source s) {
  switch (s) {
    case Source::Annotation: return "annotation";
    case Source::Inferred: return "inferred";
    default: return "none";
  }
}

const char* pattern_name(PatternKind k) {
  switch (k) {
    case PatternKind::Attention: return "attention";
    case PatternKind::FusedAttention: return "fused_attention";
    case PatternKind::Mlp: return "mlp";
    case PatternKind::ConvNormActivation: return "conv_norm_activation";
    case PatternKind::Residual: return "residual";
    case PatternKind::Embedding: return "embedding";
    case PatternKind::LmHead: return "lm_head";
  }
  return "unknown";
}

namespace {

constexpr int kMaxSteps = 8;

bool is_elementwise_step(OpCode c) {
  return c == OpCode::Mul || c == OpCode::Div || c == OpCode::Add || c == OpCode::Sub ||
         c == OpCode::MaskedFill || c == OpCode::Where || c == OpCode::Cast;
}

const char* step_name(OpCode c) {
  switch (c) {
    case OpCode::Mul:
    case OpCode::Div: return "scale";
    case OpCode::Add:
    case OpCode::Sub:
    case OpCode::MaskedFill:
    case OpCode::Where: return "mask";
    case OpCode::Cast: return "cast";
    case OpCode::Dropout: return "dropout";
    case OpCode::Softmax: return "softmax";
    default: return "?";
  }
}

class Matcher {
 public:
  Matcher(const GraphView& v) : v_(v), g_(v.g) {}

  std::vector<PatternMatch> run() {
    std::vector<PatternMatch> out;
    const std::vector<NodeId>& topo = g_.topo_order();
    for (NodeId id : topo) {
      switch (v_.code[id]) {
        case OpCode::Softmax: attention(id, out); break;
        case OpCode::Attention: add(out, PatternKind::FusedAttention, {id}, ""); break;
        case OpCode::Conv2d: conv_block(id, out); break;
        case OpCode::Embedding: add(out, PatternKind::Embedding, {id}, ""); break;
        case OpCode::Add: residual(id, out); break;
        default:
          if (is_activation(v_.code[id])) mlp(id, out);
      }
    }
    lm_head(out);
    return out;
  }

 private:
  void add(std::vector<PatternMatch>& out, PatternKind k, std::vector<NodeId> nodes, std::string detail) {
    PatternMatch m{k, std::move(nodes), -1, std::move(detail)};
    m.layer = g_.node(m.nodes.front()).ann.layer;
    out.push_back(std::move(m));
  }

  double numel_of(ValueId v) const {
    double n = 1;
    for (int64_t d : g_.value(v).shape) n *= static_cast<double>(d);
    return n;
  }

  // The input of an elementwise step that carries the scores: the larger
  // one, preferring a node output.
  ValueId main_input(NodeId id) const {
    const Node& n = g_.node(id);
    ValueId best = kNone;
    const size_t first = v_.code[id] == OpCode::Where ? 1 : 0;  // where(cond, a, b)
    for (size_t i = first; i < n.inputs.size(); ++i) {
      ValueId x = n.inputs[i];
      if (x == kNone) continue;
      if (best == kNone) {
        best = x;
        continue;
      }
      const double a = numel_of(x), b = numel_of(best);
      if (a > b || (a == b && v_.producer(best) == kNone && v_.producer(x) != kNone)) best = x;
    }
    return best;
  }

  // matmul(q, kT) -> [scale | mask | cast]* -> softmax -> [dropout | cast]* -> matmul(p, v)
  void attention(NodeId softmax, std::vector<PatternMatch>& out) {
    std::vector<NodeId> up;
    std::string steps;
    ValueId x = g_.node(softmax).inputs[0];
    NodeId m1 = kNone;
    for (int i = 0; i < kMaxSteps; ++i) {
      const NodeId p = v_.producer(x);
      if (p == kNone) return;
      if (v_.code[p] == OpCode::Matmul) {
        m1 = p;
        break;
      }
      if (!is_elementwise_step(v_.code[p])) return;
      up.push_back(p);
      x = main_input(p);
    }
    if (m1 == kNone || g_.value(g_.node(m1).outputs[0]).shape.size() < 2) return;
    std::vector<NodeId> down;
    ValueId y = g_.node(softmax).outputs[0];
    NodeId m2 = kNone;
    for (int i = 0; i < kMaxSteps; ++i) {
      const NodeId c = v_.sole_consumer(y);
      if (c == kNone) return;
      if (v_.code[c] == OpCode::Matmul) {
        if (g_.node(c).inputs[0] != y) return;
        m2 = c;
        break;
      }
      if (v_.code[c] != OpCode::Dropout && v_.code[c] != OpCode::Cast) return;
      down.push_back(c);
      y = g_.node(c).outputs[0];
    }
    if (m2 == kNone) return;
    std::vector<NodeId> nodes{m1};
    for (auto it = up.rbegin(); it != up.rend(); ++it) {
      nodes.push_back(*it);
      steps += step_name(v_.code[*it]);
      steps += ", ";
    }
    nodes.push_back(softmax);
    steps += "softmax";
    for (NodeId d : down) {
      nodes.push_back(d);
      steps += ", ";
      steps += step_name(v_.code[d]);
    }
    nodes.push_back(m2);
    add(out, PatternKind::Attention, std::move(nodes), std::move(steps));
  }

  bool is_projection(NodeId id) const {
    return id != kNone && (v_.code[id] == OpCode::Matmul || v_.code[id] == OpCode::Linear);
  }

  // [linear | matmul [+ bias]] -> activation [-> dropout] [* gate] -> linear | matmul
  void mlp(NodeId act, std::vector<PatternMatch>& out) {
    std::vector<NodeId> nodes;
    NodeId p = v_.producer(g_.node(act).inputs[0]);
    if (p != kNone && v_.code[p] == OpCode::Add) {  // bias added after a matmul
      const Node& a = g_.node(p);
      NodeId proj = kNone;
      for (ValueId in : a.inputs)
        if (is_projection(v_.producer(in))) proj = v_.producer(in);
      if (proj == kNone) return;
      nodes.push_back(proj);
      nodes.push_back(p);
    } else if (is_projection(p)) {
      nodes.push_back(p);
    } else {
      return;
    }
    nodes.push_back(act);
    std::string detail = g_.node(act).op;
    ValueId y = g_.node(act).outputs[0];
    for (int i = 0; i < kMaxSteps; ++i) {
      const NodeId c = v_.sole_consumer(y);
      if (c == kNone) return;
      const OpCode cc = v_.code[c];
      if (is_projection(c)) {
        if (g_.node(c).inputs[0] != y) return;
        nodes.push_back(c);
        add(out, PatternKind::Mlp, std::move(nodes), std::move(detail));
        return;
      }
      if (cc == OpCode::Dropout) {
        detail += ", dropout";
      } else if (cc == OpCode::Mul) {  // gated (SwiGLU / GeGLU): act(x W1) * (x W3)
        detail += ", gate";
      } else {
        return;
      }
      nodes.push_back(c);
      y = g_.node(c).outputs[0];
    }
  }

  // conv2d [-> norm steps] -> activation
  void conv_block(NodeId conv, std::vector<PatternMatch>& out) {
    std::vector<NodeId> nodes{conv};
    std::string detail = "conv2d";
    bool norm = false;
    ValueId y = g_.node(conv).outputs[0];
    for (int i = 0; i < kMaxSteps; ++i) {
      const NodeId c = v_.sole_consumer(y);
      if (c == kNone) return;
      const OpCode cc = v_.code[c];
      nodes.push_back(c);
      if (is_activation(cc)) {
        detail += ", " + g_.node(c).op;
        add(out, PatternKind::ConvNormActivation, std::move(nodes), std::move(detail));
        return;
      }
      if (cc == OpCode::LayerNorm || cc == OpCode::RmsNorm) {
        if (norm) return;
        norm = true;
        detail += ", " + g_.node(c).op;
      } else if (cc == OpCode::Mul || cc == OpCode::Add || cc == OpCode::Sub || cc == OpCode::Div) {
        if (!norm) detail += ", affine norm";  // batch norm folded into scale and shift
        norm = true;
      } else {
        return;
      }
      y = g_.node(c).outputs[0];
    }
  }

  // add(x, f(x)): one input is an ancestor of the other's producer.
  void residual(NodeId add_id, std::vector<PatternMatch>& out) {
    const Node& n = g_.node(add_id);
    if (n.inputs.size() != 2) return;
    for (int side = 0; side < 2; ++side) {
      const ValueId skip = n.inputs[side], branch = n.inputs[1 - side];
      if (skip == branch || g_.value(skip).shape != g_.value(n.outputs[0]).shape) continue;
      if (reaches(v_.producer(branch), skip)) {
        add(out, PatternKind::Residual, {add_id}, "skip from '" + g_.value(skip).name + "'");
        return;
      }
    }
  }

  // Whether node `from` (or one of its ancestors, within a bounded search)
  // reads value `target`.
  bool reaches(NodeId from, ValueId target) {
    if (from == kNone) return false;
    const NodeId tp = v_.producer(target);
    const int32_t floor = tp == kNone ? -1 : v_.topo_pos[tp];
    if (v_.topo_pos[from] <= floor) return false;
    if (mark_.size() != v_.code.size()) mark_.assign(v_.code.size(), 0);
    if (++gen_ == 0) {  // wrapped: clear the marks
      std::fill(mark_.begin(), mark_.end(), 0);
      gen_ = 1;
    }
    stack_.clear();
    stack_.push_back(from);
    size_t visited = 0;
    bool found = false;
    while (!stack_.empty() && visited < 512 && !found) {
      const NodeId id = stack_.back();
      stack_.pop_back();
      if (mark_[id] == gen_) continue;
      mark_[id] = gen_;
      ++visited;
      for (ValueId in : g_.node(id).inputs) {
        if (in == kNone) continue;
        if (in == target) {
          found = true;
          break;
        }
        const NodeId p = v_.producer(in);
        if (p != kNone && v_.topo_pos[p] > floor && mark_[p] != gen_) stack_.push_back(p);
      }
    }
    return found;
  }

  // The projection to the vocabulary: a matmul/linear whose output's last
  // dim is the vocabulary of an embedding in the graph, and that reaches a
  // graph output through layout, cast or softmax steps only.
  void lm_head(std::vector<PatternMatch>& out) {
    int64_t vocab = -1;
    for (size_t i = 0; i < v_.code.size(); ++i)
      if (v_.code[i] == OpCode::Embedding) {
        const Shape& w = g_.value(g_.node(static_cast<NodeId>(i)).inputs[1]).shape;
        if (w.size() == 2) vocab = w[0];
      }
    if (vocab <= 0) return;
    for (NodeId id : g_.topo_order()) {
      if (!is_projection(id)) continue;
      const Shape& s = g_.value(g_.node(id).outputs[0]).shape;
      if (s.empty() || s.back() != vocab) continue;
      ValueId y = g_.node(id).outputs[0];
      for (int i = 0; i < kMaxSteps && !v_.is_output[y]; ++i) {
        const NodeId c = v_.n_consumers(y) == 1 ? *v_.consumers_begin(y) : kNone;
        if (c == kNone || !(is_layout(v_.code[c]) || v_.code[c] == OpCode::Softmax || v_.code[c] == OpCode::Slice))
          break;
        y = g_.node(c).outputs[0];
      }
      if (v_.is_output[y]) add(out, PatternKind::LmHead, {id}, "vocabulary " + std::to_string(vocab));
    }
  }

  const GraphView& v_;
  const Graph& g_;
  std::vector<NodeId> stack_;
  std::vector<uint32_t> mark_;  // visited in search number gen_
  uint32_t gen_ = 0;
};

// Follows a KV-cache input forward through layout steps and the concat that
// appends the new step, to the attention reading it. Returns the nodes to
// keep with the cache (empty if no attention reads it).
struct KvWalk {
  std::vector<NodeId> nodes;
  std::vector<ValueId> values;
  bool appended = false;  // passes through a concat with a value computed in the graph
  bool read_by_attention = false;
};

KvWalk walk_kv(const GraphView& v, ValueId cache, const std::vector<int32_t>& node_pattern,
               const std::vector<PatternMatch>& patterns) {
  const Graph& g = v.g;
  KvWalk w;
  std::vector<ValueId> frontier{cache};
  w.values.push_back(cache);
  for (int depth = 0; depth < kMaxSteps && !frontier.empty(); ++depth) {
    std::vector<ValueId> next;
    for (ValueId x : frontier)
      for (const NodeId* c = v.consumers_begin(x); c != v.consumers_end(x); ++c) {
        const NodeId id = *c;
        if (std::find(w.nodes.begin(), w.nodes.end(), id) != w.nodes.end()) continue;
        const OpCode code = v.code[id];
        const Node& n = g.node(id);
        if (code == OpCode::Attention) {
          if (n.inputs.size() > 2 && (n.inputs[1] == x || n.inputs[2] == x)) {
            w.nodes.push_back(id);
            w.read_by_attention = true;
          }
          continue;
        }
        if (code == OpCode::Matmul) {
          const int32_t p = node_pattern[id];
          if (p >= 0 && patterns[p].kind == PatternKind::Attention && n.inputs[1] == x) {
            w.nodes.push_back(id);
            w.read_by_attention = true;
          }
          continue;
        }
        if (code == OpCode::Concat) {
          for (ValueId in : n.inputs)
            if (in != x && v.producer(in) != kNone) w.appended = true;
        } else if (!is_layout(code) && code != OpCode::Slice) {
          continue;
        }
        w.nodes.push_back(id);
        for (ValueId o : n.outputs) {
          w.values.push_back(o);
          next.push_back(o);
        }
      }
    frontier = std::move(next);
  }
  if (!w.read_by_attention) w.nodes.clear();
  return w;
}

Stage stage_of_phase(Phase p) {
  switch (p) {
    case Phase::Prefill: return Stage::Prefill;
    case Phase::Decode: return Stage::Decode;
    case Phase::Forward: return Stage::Forward;
    case Phase::Backward: return Stage::Backward;
    default: return Stage::Unknown;
  }
}

}  // namespace

std::vector<PatternMatch> match_patterns(const GraphView& view) { return Matcher(view).run(); }

std::vector<PatternMatch> match_patterns(const Graph& g) {
  check(g.validated(), GENIE_ERR_INVALID_ARGUMENT, "the graph must be validated before analysis");
  return match_patterns(GraphView(g));
}

Analysis analyze(const GraphView& view, const std::vector<const Shape*>& shapes) {
  const Graph& g = view.g;
  Analysis a;
  a.patterns = match_patterns(view);
  a.node_pattern.assign(g.nodes().size(), -1);
  for (size_t i = 0; i < a.patterns.size(); ++i)
    for (NodeId id : a.patterns[i].nodes)
      if (a.node_pattern[id] < 0) a.node_pattern[id] = static_cast<int32_t>(i);

  // KV caches: annotated, or a graph input appended to and read by attention.
  a.value_kv.assign(g.values().size(), -1);
  for (ValueId in : g.inputs()) {
    const bool annotated = g.value(in).role == TensorRole::KvCache;
    KvWalk w = walk_kv(view, in, a.node_pattern, a.patterns);
    if (!annotated && !(w.appended && w.read_by_attention)) continue;
    KvCache kv;
    kv.value = in;
    kv.source = annotated ? Source::Annotation : Source::Inferred;
    kv.nodes = std::move(w.nodes);
    if (kv.nodes.empty())  // annotated but read by no attention: keep its readers with it
      kv.nodes.assign(view.consumers_begin(in), view.consumers_end(in));
    const int32_t idx = static_cast<int32_t>(a.kv_caches.size());
    for (ValueId x : w.values)
      if (a.value_kv[x] < 0) a.value_kv[x] = idx;
    a.kv_caches.push_back(std::move(kv));
  }

  // Annotations win.
  int counts[8] = {0};
  int vision = 0, annotated = 0;
  for (const Node& n : g.nodes()) {
    if (n.ann.phase != Phase::Unknown) {
      ++counts[static_cast<int>(n.ann.phase) & 7];
      ++annotated;
    }
    if (n.ann.modality == Modality::Vision) ++vision;
    if (n.ann.modality != Modality::Unknown && a.modality == Modality::Unknown) a.modality = n.ann.modality;
  }
  if (annotated > 0) {
    int best = 1;
    for (int p = 1; p < 8; ++p)
      if (counts[p] > counts[best]) best = p;
    a.stage = stage_of_phase(static_cast<Phase>(best));
    a.stage_source = Source::Annotation;
    a.stage_evidence = cat(counts[best], " of ", g.nodes().size(), " nodes are annotated '",
                           phase_name(static_cast<Phase>(best)), "'");
    return a;
  }
  if (vision > 0) {
    a.stage = Stage::Vision;
    a.stage_source = Source::Annotation;
    a.stage_evidence = cat(vision, " of ", g.nodes().size(), " nodes are annotated modality 'vision'");
    return a;
  }

  // Inference: token ids read by an embedding, or pixels read by a conv.
  for (size_t i = 0; i < view.code.size(); ++i) {
    const Node& n = g.nodes()[i];
    if (view.code[i] == OpCode::Embedding && g.value(n.inputs[0]).kind == ValueKind::Input) {
      const ValueId ids = n.inputs[0];
      const Shape& s = *shapes[ids];
      const int64_t seq = s.empty() ? 1 : s.back();
      a.modality = Modality::Text;
      a.stage_source = Source::Inferred;
      if (!a.kv_caches.empty()) {
        const std::string kv = g.value(a.kv_caches.front().value).name;
        a.stage = seq == 1 ? Stage::Decode : Stage::Prefill;
        a.stage_evidence = seq == 1 ? cat("token ids '", g.value(ids).name, "' ", shape_str(s),
                                          ": one new token per sequence against KV cache '", kv, "'")
                                    : cat("token ids '", g.value(ids).name, "' ", shape_str(s), ": ", seq,
                                          " tokens per sequence appended to KV cache '", kv, "' (chunked prefill)");
      } else {
        a.stage = Stage::Prefill;
        a.stage_evidence = cat("token ids '", g.value(ids).name, "' ", shape_str(s),
                               " and no KV cache: the whole prompt at once");
      }
      return a;
    }
  }
  for (size_t i = 0; i < view.code.size(); ++i) {
    const Node& n = g.nodes()[i];
    if (view.code[i] != OpCode::Conv2d) continue;
    const ValueId x = n.inputs[0];
    const Shape& s = *shapes[x];
    if (g.value(x).kind == ValueKind::Input && s.size() == 4 && s[1] >= 1 && s[1] <= 4) {
      a.stage = Stage::Vision;
      a.stage_source = Source::Inferred;
      a.modality = Modality::Vision;
      a.stage_evidence = cat("pixel input '", g.value(x).name, "' ", shape_str(s), " (", s[1],
                             " channels) read by conv2d '", n.name, "'");
      return a;
    }
  }
  if (!a.kv_caches.empty()) {
    a.stage = Stage::Decode;
    a.stage_source = Source::Inferred;
    a.stage_evidence = cat("attention reads KV cache '", g.value(a.kv_caches.front().value).name, "'");
  }
  return a;
}

Analysis analyze(const Graph& g, const std::unordered_map<ValueId, Shape>* bound_shapes) {
  check(g.validated(), GENIE_ERR_INVALID_ARGUMENT, "the graph must be validated before analysis");
  GraphView view(g);
  return analyze(view, value_shapes(g, bound_shapes));
}

}  // namespace genie::sched
