// A block of memory on one device: where it lives (host, pinned host or
// device memory, and which device), its size, and who frees it.
//
// A Buffer owns its block and hands it to its Release when destroyed: a
// device backend's free, a pool that keeps it for reuse, or a closure that
// keeps another buffer's owner alive (a view). An empty Release means
// std::free, for host memory from std::aligned_alloc. Move-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <utility>

#include "core/device.hpp"

namespace genie {

enum class MemoryKind : uint8_t {
  Host = 0,        // pageable host memory
  PinnedHost = 1,  // host memory locked for device DMA (host code may read it)
  Device = 2,      // device memory: only the device's backend may touch the bytes
};
const char* memory_kind_name(MemoryKind k);  // "host", "pinned_host", "device"

class Buffer {
 public:
  using Release = std::function<void(std::byte*)>;

  Buffer() = default;
  // Adopts `data` (`size` bytes of `memory` on `device`).
  Buffer(std::byte* data, size_t size, MemoryKind memory, Device device, Release release)
      : data_(data), size_(size), memory_(memory), device_(std::move(device)), release_(std::move(release)) {}
  ~Buffer() { reset(); }
  Buffer(Buffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        memory_(o.memory_),
        device_(std::move(o.device_)),
        release_(std::move(o.release_)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      reset();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      memory_ = o.memory_;
      device_ = std::move(o.device_);
      release_ = std::move(o.release_);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // `size` bytes of host memory on this process's CPU, 64-byte aligned and
  // rounded up to whole cache lines (never zero bytes), contents undefined.
  // Throws Error(OUT_OF_MEMORY).
  static Buffer host(size_t size);
  // The same, every byte zero. Large blocks come straight from the kernel
  // (anonymous mappings are zero pages until written): nothing is cleared
  // and no page is committed until written, so a tensor that its owner
  // fills afterwards costs its memory once, when filled. Small blocks are
  // cleared here (they come from the heap, where another tensor, perhaps of
  // another session, left its bytes). Throws Error(OUT_OF_MEMORY).
  static Buffer host_zeroed(size_t size);
  static constexpr size_t kMapThreshold = size_t{1} << 20;
  // Mappings from this size on ask for transparent huge pages.
  static constexpr size_t kHugePageBytes = size_t{2} << 20;
  // The allocation host() makes for `size` bytes.
  static size_t host_alloc_size(size_t size) { return ((size + 63) / 64) * 64 + 64; }

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  MemoryKind memory() const { return memory_; }
  const Device& device() const { return device_; }
  // Whether host code may read and write the bytes directly.
  bool host_accessible() const { return memory_ != MemoryKind::Device; }
  explicit operator bool() const { return data_ != nullptr; }

  // Frees the block now (through its Release); the buffer becomes empty.
  // Inline, as the whole class: device backends built as separate shared
  // objects use Buffer without linking libgenie's internals.
  void reset() {
    std::byte* p = std::exchange(data_, nullptr);
    size_ = 0;
    Release release = std::move(release_);
    release_ = nullptr;
    if (p == nullptr) return;
    if (release)
      release(p);
    else
      std::free(p);
  }

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  MemoryKind memory_ = MemoryKind::Host;
  Device device_;
  Release release_;  // empty: std::free
};

}  // namespace genie
