// The semantic tag (dataplane::SemanticTag) of a graph value: what a
// transport that carries tags (dpdk) puts on every packet of the value's
// bytes when they move between nodes, derived from the graph's annotations
// (genie_graph_set_phase / _set_layer / _set_role).
#pragma once

#include <string>

#include "dataplane/transport.hpp"
#include "graph/graph.hpp"

namespace genie {

// Value `v` of `g`: its dtype; its role (KV cache where the scheduler's
// analysis found it one, `kv_cache`, else its annotated role, else by kind:
// a constant is a weight, a node output an activation, an input an input);
// the phase and layer of the node producing it, or for an input or
// constant of the first nodes consuming it that carry a phase / a layer.
// Unknown parts stay zero / kNoLayer.
dataplane::SemanticTag semantic_tag(const Graph& g, ValueId v, bool kv_cache = false);

// "phase/role/layer" ("decode/kv_cache/3", "unknown/unspecified/-" when
// nothing is known): how logs and statistics name a tag.
std::string tag_name(const dataplane::SemanticTag& tag);

}  // namespace genie
