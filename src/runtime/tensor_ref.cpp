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

uint64_t TensorRef::pack(const TensorSemantics& s) {
  return uint64_t{static_cast<uint8_t>(s.phase)} | uint64_t{static_cast<uint8_t>(s.role)} << 8 |
         uint64_t{static_cast<uint32_t>(s.layer)} << 32;
}

TensorSemantics TensorRef::semantics() const {
  const uint64_t v = semantics_->load(std::memory_order_relaxed);
  TensorSemantics s;
  s.phase = static_cast<Phase>(v & 0xFF);
  s.role = static_cast<TensorRole>((v >> 8) & 0xFF);
  s.layer = static_cast<int32_t>(static_cast<uint32_t>(v >> 32));
  return s;
}

void TensorRef::set_semantics(const TensorSemantics& s) const { semantics_->store(pack(s), std::memory_order_relaxed); }

dataplane::SemanticTag TensorRef::tag() const {
  const TensorSemantics s = semantics();
  dataplane::SemanticTag tag;
  if (!s.annotated()) return tag;
  tag.dtype = static_cast<uint8_t>(static_cast<int32_t>(dtype()) + 1);
  tag.phase = static_cast<uint8_t>(s.phase);
  tag.role = static_cast<uint8_t>(s.role);
  if (s.layer >= 0) tag.layer = static_cast<uint16_t>(s.layer);
  return tag;
}

void TensorRef::write(size_t offset, const void* src, size_t n) const { write(offset, src, n, tag()); }

void TensorRef::write(size_t offset, const void* src, size_t n, const dataplane::SemanticTag& tag) const {
  if (n == 0) return;
  if (remote_) {
    remote_->drop_cached();
    remote_->client->tensor_write(remote_->id, offset, src, n, tag);
  } else if (local_->host_accessible()) {
    std::memcpy(local_->bytes() + offset, src, n);
  } else {
    write_tensor(backend_of(*local_), *local_, offset, src, n);
  }
}

void TensorRef::read(size_t offset, void* dst, size_t n) const {
  if (n == 0) return;
  if (remote_) {
    // Bytes its graph's completion carried cost no round trip.
    if (!remote_->read_cached(offset, dst, n)) remote_->client->tensor_read(remote_->id, offset, dst, n, tag());
  } else if (local_->host_accessible()) {
    std::memcpy(dst, local_->bytes() + offset, n);
  } else {
    read_tensor(backend_of(*local_), *local_, offset, dst, n);
  }
}

}  // namespace genie
