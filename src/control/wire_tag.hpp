// A semantic tag named by a message (wire::SemanticTag) rather than carried
// on its frame: RMA requests (the bytes move with no frame), TensorFetch and
// TensorImport (a tag that must survive a hop over a transport that drops
// frame tags, e.g. TCP between a master and a worker).
#pragma once

#include "dataplane/transport.hpp"
#include "genie.pb.h"

namespace genie::wire {

// Names `tag` in `msg`'s tag field; leaves it unset for the untagged
// (default) tag.
template <class M>
void put_tag(const dataplane::SemanticTag& tag, M* msg) {
  if (tag == dataplane::SemanticTag()) return;
  SemanticTag* t = msg->mutable_tag();
  t->set_dtype(tag.dtype);
  t->set_phase(tag.phase);
  t->set_role(tag.role);
  t->set_layer(tag.layer);
}

// The tag a message names; the untagged tag when it names none. Throws
// Error(PROTOCOL) for a field too wide for its place in the tag.
dataplane::SemanticTag tag_from(const SemanticTag& t, bool present);

template <class M>
dataplane::SemanticTag tag_of(const M& msg) {
  return tag_from(msg.tag(), msg.has_tag());
}

}  // namespace genie::wire
