#include "core/buffer.hpp"

#include <cstdlib>

#include "core/error.hpp"

namespace genie {

const char* memory_kind_name(MemoryKind k) {
  switch (k) {
    case MemoryKind::Host: return "host";
    case MemoryKind::PinnedHost: return "pinned_host";
    case MemoryKind::Device: return "device";
  }
  return "unknown";
}

Buffer Buffer::host(size_t size) {
  const size_t alloc = host_alloc_size(size);
  void* p = std::aligned_alloc(64, alloc);
  if (p == nullptr) fail(GENIE_ERR_OUT_OF_MEMORY, "cannot allocate ", size, " bytes of host memory");
  return Buffer(static_cast<std::byte*>(p), alloc, MemoryKind::Host, Device{}, {});
}

}  // namespace genie
