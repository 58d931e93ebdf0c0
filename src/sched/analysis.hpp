// Semantic analysis: what a graph means, from its annotations when present
// and from its structure otherwise.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.hpp"

namespace genie::sched {

// What kind of work the graph is (one per graph).
enum class Stage : int32_t { Unknown = 0, Prefill, Decode, Vision, Forward, Backward };
const char* stage_name(Stage s);  // "unknown", "prefill", "decode", "vision", "forward", "backward"

enum class Source : int32_t { None = 0, Annotation, Inferred };
const char* source_name(Source s);  // "none", "annotation", "inferred"

enum class PatternKind : int32_t {
  Attention = 0,        // matmul(q, kT) -> [scale, mask, softmax, dropout ...] -> matmul(p, v)
  FusedAttention,       // the `attention` op
  Mlp,                  // linear/matmul [+bias] -> activation [-> dropout] [* gate] -> linear/matmul
  ConvNormActivation,   // conv2d [-> norm] -> activation
  Residual,             // add(x, f(x)) with f a non-empty subgraph of x
  Embedding,            // the `embedding` op
  LmHead,               // the final projection to the vocabulary
};
const char* pattern_name(PatternKind k);  // "attention", "fused_attention", "mlp", ...

struct PatternMatch {
  PatternKind kind;
  std::vector<NodeId> nodes;  // members, in topological order; nodes.front() is the entry
  int32_t layer = -1;         // annotation of the entry node, when annotated
  std::string detail;         // e.g. "scale, mask, softmax, dropout" for attention
};

// A KV cache: a persistent graph input read by attention.
struct KvCache {
  ValueId value = kNone;        // the graph input holding the past keys or values
  Source source = Source::None; // Annotation: role kv_cache; Inferred: found from the graph
  std::vector<NodeId> nodes;    // nodes that must run where the cache lives (append .. attention)
};

struct Analysis {
  Stage stage = Stage::Unknown;
  Source stage_source = Source::None;
  std::string stage_evidence;      // one sentence: why
  Modality modality = Modality::Unknown;
  std::vector<PatternMatch> patterns;
  std::vector<KvCache> kv_caches;
  // Per NodeId: index into `patterns` of the first pattern the node belongs
  // to, or -1.
  std::vector<int32_t> node_pattern;
  // Per ValueId: index into `kv_caches` of the cache the value is (the input
  // or a value derived from it on the way to attention), or -1.
  std::vector<int32_t> value_kv;
};

// Analyses a validated graph. `bound_shapes` as for Graph::validate. Never
// throws for a graph that validated (a pattern that does not fit is simply
// not reported).
Analysis analyze(const Graph& g, const std::unordered_map<ValueId, Shape>* bound_shapes = nullptr);

struct GraphView;
// The same over indexes plan_graph already built; `shapes` per ValueId (see
// value_shapes in cost.hpp).
Analysis analyze(const GraphView& view, const std::vector<const Shape*>& shapes);
std::vector<PatternMatch> match_patterns(const GraphView& view);

// Only the pattern matching part of analyze (for benchmarks and tests).
std::vector<PatternMatch> match_patterns(const Graph& g);

}  // namespace genie::sched
