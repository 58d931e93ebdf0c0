// What a tensor handle names: host memory, or a tensor held by the server
// of a remote-mode context (control/remote_tensor.hpp).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "control/remote_tensor.hpp"
#include "core/tensor_data.hpp"
#include "dataplane/transport.hpp"
#include "graph/graph.hpp"

namespace genie {

// What the application says a tensor is (genie_tensor_set_semantics): the
// graph annotations of a value, for a tensor outside any graph. All
// unknown (the default) means "not annotated".
struct TensorSemantics {
  Phase phase = Phase::Unknown;
  TensorRole role = TensorRole::Unspecified;
  int32_t layer = -1;  // -1: unknown
  bool annotated() const { return phase != Phase::Unknown || role != TensorRole::Unspecified || layer >= 0; }
  bool operator==(const TensorSemantics&) const = default;
};

// Host memory (embedded mode, or "cpu" in remote mode) or a tensor on the
// server. Exactly one of the two is set.
class TensorRef {
 public:
  TensorRef() = default;
  explicit TensorRef(TensorPtr local) : local_(std::move(local)) {}
  explicit TensorRef(RemoteTensorPtr remote) : remote_(std::move(remote)) {}
  // Copies share the tensor and its semantics.

  bool is_remote() const { return remote_ != nullptr; }
  const TensorPtr& local() const { return local_; }
  const RemoteTensorPtr& remote() const { return remote_; }
  DType dtype() const { return remote_ ? remote_->dtype : local_->dtype(); }
  const Shape& shape() const { return remote_ ? remote_->shape : local_->shape(); }
  size_t nbytes() const { return remote_ ? remote_->nbytes : local_->nbytes(); }

  // The tensor's semantics, shared by every copy of this TensorRef (every
  // handle of the tensor); any thread. set_semantics takes values already
  // checked (layer below SemanticTag::kNoLayer).
  TensorSemantics semantics() const;
  void set_semantics(const TensorSemantics& s) const;
  // The semantic tag of the tensor's transfers: its dtype and semantics;
  // the untagged (default) tag while it is not annotated.
  dataplane::SemanticTag tag() const;

  // Byte ranges must already be checked against nbytes(). A server tensor's
  // bytes move tagged with `tag`, by default the tensor's own (tag()).
  void write(size_t offset, const void* src, size_t n) const;
  void write(size_t offset, const void* src, size_t n, const dataplane::SemanticTag& tag) const;
  void read(size_t offset, void* dst, size_t n) const;

 private:
  TensorPtr local_;
  RemoteTensorPtr remote_;
  // Phase, role and layer packed in one word, so that a handle annotated on
  // one thread and written on another reads a consistent triple.
  std::shared_ptr<std::atomic<uint64_t>> semantics_ = std::make_shared<std::atomic<uint64_t>>(pack({}));
  static uint64_t pack(const TensorSemantics& s);
};

}  // namespace genie
