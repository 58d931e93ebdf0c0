// Storage for the executor's node outputs, reused across nodes and runs.
//
// A tensor made by the pool takes a buffer of its allocation size that an
// earlier tensor gave back, or a fresh one; its contents are undefined (a
// kernel overwrites every element), so neither the allocation, the page
// faults of fresh memory nor zero-filling are paid again when the same
// graph runs twice. A tensor gives its buffer back when destroyed, also
// after the pool is gone (then it is freed). Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/tensor_data.hpp"

namespace genie {

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  struct Stats {
    uint64_t fresh = 0;     // buffers allocated
    uint64_t reused = 0;    // buffers taken from the idle lists
    size_t idle_bytes = 0;  // bytes held for reuse now
  };

  // Idle buffers beyond `max_idle_bytes` are freed instead of kept.
  static std::shared_ptr<BufferPool> create(size_t max_idle_bytes = kDefaultMaxIdle);
  static constexpr size_t kDefaultMaxIdle = size_t{256} << 20;
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A host buffer of at least `bytes` bytes (Buffer::host_alloc_size),
  // contents undefined (in builds without NDEBUG, all 0xFF: NaN for floats,
  // so a kernel that reads its output before writing it shows); it comes
  // back to the pool when destroyed. Throws Error(OUT_OF_MEMORY).
  Buffer take(size_t bytes);

  Stats stats() const;
  // Frees every idle buffer.
  void trim();

 private:
  explicit BufferPool(size_t max_idle_bytes) : max_idle_(max_idle_bytes) {}
  void give_back(std::byte* p, size_t alloc);

  mutable std::mutex mu_;
  std::unordered_map<size_t, std::vector<std::byte*>> idle_;  // by allocation size
  size_t max_idle_;
  Stats stats_;
};

}  // namespace genie
