#include "control/semantic_tag.hpp"

#include <string>

namespace genie {

namespace {

uint16_t layer_of(int32_t layer) {
  // 0xFFFF is "unknown" on the wire: a layer index that large cannot be told.
  return layer >= 0 && layer < dataplane::SemanticTag::kNoLayer ? static_cast<uint16_t>(layer)
                                                                   : dataplane::SemanticTag::kNoLayer;
}

TensorRole default_role(ValueKind kind) {
  switch (kind) {
    case ValueKind::Constant: return TensorRole::Weight;
    case ValueKind::NodeOutput: return TensorRole::Activation;
    case ValueKind::Input: return TensorRole::Input;
  }
  return TensorRole::Unspecified;
}

}  // namespace

dataplane::SemanticTag semantic_tag(const Graph& g, ValueId v, bool kv_cache) {
  const Value& val = g.value(v);
  dataplane::SemanticTag tag;
  if (val.dtype != DType::Invalid) tag.dtype = static_cast<uint8_t>(static_cast<int32_t>(val.dtype) + 1);
  const TensorRole role = kv_cache                               ? TensorRole::KvCache
                          : val.role != TensorRole::Unspecified ? val.role
                                                                 : default_role(val.kind);
  tag.role = static_cast<uint8_t>(role);
  if (val.kind == ValueKind::NodeOutput && val.producer != kNone) {
    const Annotations& a = g.node(val.producer).ann;
    tag.phase = static_cast<uint8_t>(a.phase);
    tag.layer = layer_of(a.layer);
    return tag;
  }
  // An input or constant belongs to the phase and layer that use it.
  bool have_phase = false, have_layer = false;
  for (const Node& n : g.nodes()) {
    if (have_phase && have_layer) break;
    bool uses = false;
    for (ValueId in : n.inputs) uses = uses || in == v;
    if (!uses) continue;
    if (!have_phase && n.ann.phase != Phase::Unknown) {
      tag.phase = static_cast<uint8_t>(n.ann.phase);
      have_phase = true;
    }
    if (!have_layer && n.ann.layer >= 0) {
      tag.layer = layer_of(n.ann.layer);
      have_layer = true;
    }
  }
  return tag;
}

std::string tag_name(const dataplane::SemanticTag& tag) {
  const std::string layer = tag.layer == dataplane::SemanticTag::kNoLayer ? "-" : std::to_string(tag.layer);
  return std::string(phase_name(static_cast<Phase>(tag.phase))) + "/" +
         role_name(static_cast<TensorRole>(tag.role)) + "/" + layer;
}

}  // namespace genie
