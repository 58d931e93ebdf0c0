#include "runtime/tensor_ref.hpp"

#include <cstring>

#include "control/client.hpp"

namespace genie {

void TensorRef::write(size_t offset, const void* src, size_t n) const {
  if (n == 0) return;
  if (remote_)
    remote_->client->tensor_write(remote_->id, offset, src, n);
  else
    std::memcpy(local_->bytes() + offset, src, n);
}

void TensorRef::read(size_t offset, void* dst, size_t n) const {
  if (n == 0) return;
  if (remote_)
    remote_->client->tensor_read(remote_->id, offset, dst, n);
  else
    std::memcpy(dst, local_->bytes() + offset, n);
}

}  // namespace genie
