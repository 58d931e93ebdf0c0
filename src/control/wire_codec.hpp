// Protobuf messages to and from the bytes of a frame's message section.
#pragma once

#include <google/protobuf/message.h>
#include <google/protobuf/stubs/logging.h>

#include <string>

#include "control/wire.hpp"
#include "core/error.hpp"

namespace genie::wire {

// Serialises `m`. Throws Error(INTERNAL) if it cannot be (a required field
// unset, or more than 2 GiB).
std::string encode_msg(const google::protobuf::Message& m);

// Parses bytes received in a frame of type `type` as M. Throws
// Error(PROTOCOL) naming the frame type and M when they are not a valid M.
template <class M>
M parse_msg(const std::string& bytes, MsgType type) {
  M m;
  // Bytes from the network: libprotobuf would log a line to stderr for each
  // bad string field (invalid UTF-8), a log flood any peer could cause. The
  // failure is reported once, as the error below.
  google::protobuf::LogSilencer quiet;
  if (!m.ParseFromString(bytes)) {
    fail(GENIE_ERR_PROTOCOL, "malformed ", type_name(type), " frame: ", bytes.size(),
         " bytes do not parse as ", M::descriptor()->full_name());
  }
  return m;
}

}  // namespace genie::wire
