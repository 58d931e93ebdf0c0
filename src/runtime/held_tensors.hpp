// The tensors a remote-mode context holds on its server, by name, so that
// when that server is gone for good (its session cannot be resumed: it died,
// or it stayed unreachable past the reconnect window) each one is reported
// lost by name: on its next use (a clear CONNECTION error naming the tensor
// and the server) and in genie_context_lost_tensors. A lost tensor is never
// recomputed or zero-filled: its bytes lived only on that server.
//
// A tensor's name is the graph value it was last bound to or produced as
// (a graph input at submission, a graph output at completion), else
// "tensor <id>" (its id in the server's session).
//
// Threads: every method from any thread (one mutex).
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "control/remote_tensor.hpp"

namespace genie {

class HeldTensors {
 public:
  // A tensor of this context's session (allocated, or a graph output named
  // `name`; empty: not named yet).
  void add(const RemoteTensorPtr& t, const std::string& name = {});
  // `t` was bound to the graph input `name`.
  void rename(const RemoteTensor& t, const std::string& name);
  std::string name_of(const RemoteTensor& t) const;
  // Whether `t`'s session is gone for good (its server's bytes with it).
  static bool lost(const RemoteTensor& t);
  // Throws Error(CONNECTION) naming the tensor and its server (at
  // `address`) when `t` is lost; `cause` (may be empty) is what the failed
  // call said.
  void check_not_lost(const RemoteTensor& t, const std::string& address, const std::string& cause = {}) const;
  // Every tensor still held (some handle, future or graph keeps it) whose
  // session is gone for good, as a JSON array of {"name", "id", "server",
  // "device", "dtype", "shape", "nbytes"}, by name.
  std::string lost_json() const;

 private:
  struct Entry {
    std::weak_ptr<RemoteTensor> tensor;
    std::string name;
  };
  static std::string label(const RemoteTensor& t, const std::string& name);
  mutable std::mutex mu_;
  std::unordered_map<const RemoteTensor*, Entry> held_;
  size_t pruned_at_ = 64;  // the size past which expired entries are dropped
};

}  // namespace genie
