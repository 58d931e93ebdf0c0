#include "control/wire_tag.hpp"

#include "core/error.hpp"

namespace genie::wire {

dataplane::SemanticTag tag_from(const SemanticTag& t, bool present) {
  dataplane::SemanticTag tag;
  if (!present) return tag;
  check(t.dtype() <= 0xFF && t.phase() <= 0xFF && t.role() <= 0xFF && t.layer() <= 0xFFFF, GENIE_ERR_PROTOCOL,
        "semantic tag out of range (dtype ", t.dtype(), ", phase ", t.phase(), ", role ", t.role(), ", layer ",
        t.layer(), "): dtype, phase and role take one byte, the layer two");
  tag.dtype = static_cast<uint8_t>(t.dtype());
  tag.phase = static_cast<uint8_t>(t.phase());
  tag.role = static_cast<uint8_t>(t.role());
  tag.layer = static_cast<uint16_t>(t.layer());
  return tag;
}

}  // namespace genie::wire
