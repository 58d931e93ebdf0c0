// Protobuf messages to and from the bytes of a frame's message section.
#pragma once

#include <google/protobuf/arena.h>
#include <google/protobuf/message.h>
#include <google/protobuf/stubs/logging.h>

#include <string>

#include "control/wire.hpp"
#include "core/error.hpp"

namespace genie::wire {

// Serialises `m`. Throws Error(INTERNAL) if it cannot be (a required field
// unset, or more than 2 GiB).
std::string encode_msg(const google::protobuf::Message& m);

// Parses bytes received in a frame of type `type` into m. Throws
// Error(PROTOCOL) naming the frame type and M when they are not a valid M.
template <class M>
void parse_into(M& m, const std::string& bytes, MsgType type) {
  // Bytes from the network: libprotobuf would log a line to stderr for each
  // bad string field (invalid UTF-8), a log flood any peer could cause. The
  // failure is reported once, as the error below.
  google::protobuf::LogSilencer quiet;
  if (!m.ParseFromString(bytes)) {
    fail(GENIE_ERR_PROTOCOL, "malformed ", type_name(type), " frame: ", bytes.size(),
         " bytes do not parse as ", M::descriptor()->full_name());
  }
}

template <class M>
M parse_msg(const std::string& bytes, MsgType type) {
  M m;
  parse_into(m, bytes, type);
  return m;
}

// An arena whose first block is inside it (on the stack, as a local): the
// messages of a submission and its completion, built or parsed on it, take
// no allocation each (protobuf allocates every string and repeated message
// of a message on the heap otherwise).
class ScratchArena {
 public:
  ScratchArena() : arena_(options(block_)) {}
  ScratchArena(const ScratchArena&) = delete;
  ScratchArena& operator=(const ScratchArena&) = delete;
  // A message that lives as long as this arena.
  template <class M>
  M* make() {
    return google::protobuf::Arena::CreateMessage<M>(&arena_);
  }

 private:
  static google::protobuf::ArenaOptions options(char* block) {
    google::protobuf::ArenaOptions o;
    o.initial_block = block;
    o.initial_block_size = kBlock;
    return o;
  }
  static constexpr size_t kBlock = 2048;
  alignas(16) char block_[kBlock];  // before arena_, which is built on it
  google::protobuf::Arena arena_;
};

}  // namespace genie::wire
