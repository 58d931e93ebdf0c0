// Protobuf messages to and from the bytes of a frame's message section.
#pragma once

#include <google/protobuf/message.h>
#include <google/protobuf/stubs/logging.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "control/wire.hpp"
#include "core/error.hpp"

namespace genie::wire {

// Serialises `m`. Throws Error(INTERNAL) if it cannot be (a required field
// unset, or more than 2 GiB).
std::string encode_msg(const google::protobuf::Message& m);

// Appends the encoding of SubmitFrees{free_tensor_ids: ids} to *out: after
// an encoded GraphSubmit or GraphSubmitDelta, it adds those frees to it (a
// parser merges concatenated encodings). What SubmitFrees::AppendToString
// writes, without building the message.
void append_submit_frees(std::string* out, const std::vector<uint64_t>& ids);

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

// A message of type M kept by the thread from one use to the next: parsed
// into or built again, it takes no allocation once its strings and repeated
// fields have grown to their usual sizes (Clear() keeps them). A submission
// and its completion each cost a few allocations otherwise, or an arena's
// set-up and clean-up, which cost more than the allocations they save.
// `bytes` is about what it will hold (the message parsed, the text it will
// carry): past kKeepBytes, and in a use nested in another of the same type,
// it is a message of its own, so that the thread keeps no large buffer.
template <class M>
class ReusedMsg {
 public:
  explicit ReusedMsg(size_t bytes) {
    Slot& s = slot();
    if (s.busy || bytes > kKeepBytes) {
      own_ = std::make_unique<M>();
      m_ = own_.get();
    } else {
      s.busy = true;
      m_ = &s.msg;
      m_->Clear();
    }
  }
  ~ReusedMsg() {
    if (!own_) slot().busy = false;
  }
  ReusedMsg(const ReusedMsg&) = delete;
  ReusedMsg& operator=(const ReusedMsg&) = delete;
  M& operator*() { return *m_; }
  M* operator->() { return m_; }

  static constexpr size_t kKeepBytes = 64 * 1024;

 private:
  struct Slot {
    M msg;
    bool busy = false;
  };
  static Slot& slot() {
    thread_local Slot s;
    return s;
  }
  M* m_;
  std::unique_ptr<M> own_;
};

}  // namespace genie::wire
