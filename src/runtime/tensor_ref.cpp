#include "runtime/tensor_ref.hpp"

#include <cstring>

#include "control/client.hpp"
#include "exec/backend_loader.hpp"
#include "exec/transfer.hpp"

namespace genie {

namespace {
// The backend holding a tensor in device memory.
DeviceRef backend_of(const TensorData& t) {
  return DeviceRef{device_backend(t.device().kind).backend.get(), t.device().index};
}
}  // namespace

void TensorRef::write(size_t offset, const void* src, size_t n) const {
  if (n == 0) return;
  if (remote_)
    remote_->client->tensor_write(remote_->id, offset, src, n);
  else if (local_->host_accessible())
    std::memcpy(local_->bytes() + offset, src, n);
  else
    write_tensor(backend_of(*local_), *local_, offset, src, n);
}

void TensorRef::read(size_t offset, void* dst, size_t n) const {
  if (n == 0) return;
  if (remote_)
    remote_->client->tensor_read(remote_->id, offset, dst, n);
  else if (local_->host_accessible())
    std::memcpy(dst, local_->bytes() + offset, n);
  else
    read_tensor(backend_of(*local_), *local_, offset, dst, n);
}

}  // namespace genie
