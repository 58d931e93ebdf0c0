#include "core/buffer.hpp"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

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

Buffer Buffer::host_zeroed(size_t size) {
  const size_t alloc = host_alloc_size(size);
  if (alloc < kMapThreshold) {
    Buffer b = host(size);
    std::memset(b.data(), 0, alloc);
    return b;
  }
  // Page-aligned, so 64-byte aligned too.
  void* p = ::mmap(nullptr, alloc, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fail(GENIE_ERR_OUT_OF_MEMORY, "cannot map ", size, " bytes of host memory");
  // Transparent huge pages where the system leaves them to the program
  // ("madvise"): a tensor's bytes are copied in and out whole (one copy
  // between processes pins and maps each page), and 2 MiB pages made those
  // copies of 4-16 MiB twice as fast here (docs/ucx.md). Advice only: a
  // kernel without THP ignores it.
  if (alloc >= kHugePageBytes) ::madvise(p, alloc, MADV_HUGEPAGE);
  try {
    return Buffer(static_cast<std::byte*>(p), alloc, MemoryKind::Host, Device{},
                  [alloc](std::byte* q) { ::munmap(q, alloc); });
  } catch (...) {
    ::munmap(p, alloc);
    throw;
  }
}

}  // namespace genie
