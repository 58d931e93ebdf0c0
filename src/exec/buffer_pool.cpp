#include "exec/buffer_pool.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/error.hpp"

namespace genie {

std::shared_ptr<BufferPool> BufferPool::create(size_t max_idle_bytes) {
  return std::shared_ptr<BufferPool>(new BufferPool(max_idle_bytes));
}

BufferPool::~BufferPool() { trim(); }

Buffer BufferPool::take(size_t nbytes) {
  const size_t alloc = Buffer::host_alloc_size(nbytes);  // whole cache lines, never zero
  std::byte* p = nullptr;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = idle_.find(alloc);
    if (it != idle_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      stats_.idle_bytes -= alloc;
      ++stats_.reused;
    } else {
      ++stats_.fresh;
    }
  }
  if (p == nullptr) {
    p = static_cast<std::byte*>(std::aligned_alloc(64, alloc));
    if (p == nullptr) fail(GENIE_ERR_OUT_OF_MEMORY, "cannot allocate ", nbytes, " bytes of host memory");
  }
#ifndef NDEBUG
  std::memset(p, 0xFF, alloc);
#endif
  std::weak_ptr<BufferPool> weak = weak_from_this();
  try {
    return Buffer(p, alloc, MemoryKind::Host, Device{}, [weak, alloc](std::byte* q) {
      if (auto pool = weak.lock())
        pool->give_back(q, alloc);
      else
        std::free(q);
    });
  } catch (const std::bad_alloc&) {
    std::free(p);
    throw;
  }
}

void BufferPool::give_back(std::byte* p, size_t alloc) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stats_.idle_bytes + alloc <= max_idle_) {
      try {
        idle_[alloc].push_back(p);
        stats_.idle_bytes += alloc;
        return;
      } catch (...) {  // no memory for the list entry: free the buffer instead
      }
    }
  }
  std::free(p);
}

BufferPool::Stats BufferPool::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

void BufferPool::trim() {
  std::unordered_map<size_t, std::vector<std::byte*>> idle;
  {
    std::lock_guard<std::mutex> lk(mu_);
    idle.swap(idle_);
    stats_.idle_bytes = 0;
  }
  for (auto& [size, list] : idle)
    for (std::byte* p : list) std::free(p);
}

}  // namespace genie
