// What a tensor handle names: host memory, or a tensor held by the server
// of a remote-mode context (control/remote_tensor.hpp).
#pragma once

#include <cstddef>
#include <memory>

#include "control/remote_tensor.hpp"
#include "core/tensor_data.hpp"

namespace genie {

// Host memory (embedded mode, or "cpu" in remote mode) or a tensor on the
// server. Exactly one of the two is set.
class TensorRef {
 public:
  TensorRef() = default;
  explicit TensorRef(TensorPtr local) : local_(std::move(local)) {}
  explicit TensorRef(RemoteTensorPtr remote) : remote_(std::move(remote)) {}

  bool is_remote() const { return remote_ != nullptr; }
  const TensorPtr& local() const { return local_; }
  const RemoteTensorPtr& remote() const { return remote_; }
  DType dtype() const { return remote_ ? remote_->dtype : local_->dtype(); }
  const Shape& shape() const { return remote_ ? remote_->shape : local_->shape(); }
  size_t nbytes() const { return remote_ ? remote_->nbytes : local_->nbytes(); }

  // Byte ranges must already be checked against nbytes().
  void write(size_t offset, const void* src, size_t n) const;
  void read(size_t offset, void* dst, size_t n) const;

 private:
  TensorPtr local_;
  RemoteTensorPtr remote_;
};

}  // namespace genie
