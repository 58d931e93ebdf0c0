#include "exec/transfer.hpp"

#include <cstring>

#include "core/error.hpp"

namespace genie {

TensorPtr copy_tensor(const TensorPtr& src, DeviceRef from, DeviceRef to) {
  check(to.backend != nullptr, GENIE_ERR_INTERNAL, "copy_tensor: no destination backend");
  TensorPtr dst = to.backend->make_tensor(to.index, src->dtype(), src->shape());
  const size_t n = src->nbytes();
  if (n == 0) return dst;
  if (from.backend == to.backend && from.backend != nullptr) {
    to.backend->copy_device(src->buffer(), 0, dst->buffer(), 0, n, nullptr);
  } else if (src->host_accessible()) {
    to.backend->copy_from_host(src->bytes(), dst->buffer(), 0, n, nullptr);
  } else {
    if (from.backend == nullptr)
      fail(GENIE_ERR_INTERNAL, "copy_tensor: ", src->device().str(), " memory without its backend");
    if (dst->host_accessible()) {
      from.backend->copy_to_host(src->buffer(), 0, dst->bytes(), n, nullptr);
    } else {
      // Two device backends: through host memory the source's DMA reaches.
      Buffer staging = from.backend->allocate_pinned(n);
      from.backend->copy_to_host(src->buffer(), 0, staging.data(), n, nullptr);
      to.backend->copy_from_host(staging.data(), dst->buffer(), 0, n, nullptr);
    }
  }
  return dst;
}

void write_tensor(DeviceRef device, TensorData& t, size_t offset, const void* src, size_t n) {
  if (n == 0) return;
  if (t.host_accessible()) {
    std::memcpy(t.bytes() + offset, src, n);
    return;
  }
  if (device.backend == nullptr)
    fail(GENIE_ERR_INTERNAL, "write to ", t.device().str(), " memory without its backend");
  device.backend->copy_from_host(src, t.buffer(), offset, n, nullptr);
}

void read_tensor(DeviceRef device, const TensorData& t, size_t offset, void* dst, size_t n) {
  if (n == 0) return;
  if (t.host_accessible()) {
    std::memcpy(dst, t.bytes() + offset, n);
    return;
  }
  if (device.backend == nullptr)
    fail(GENIE_ERR_INTERNAL, "read from ", t.device().str(), " memory without its backend");
  device.backend->copy_to_host(t.buffer(), offset, dst, n, nullptr);
}

}  // namespace genie
