// Reusable host buffers for payloads: a collective's buffers are as large
// as its data, so allocating (and having the kernel map and zero) fresh
// ones for each collective, or for each payload that arrives before its
// receive, would cost more than the transfer on a busy host. Buffers are
// not zeroed: every byte is written before it is read, and leftovers of an
// earlier collective carry another pattern and fail the check.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <new>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

namespace genie::replay {

// A pool buffer: malloc'd, or for 2 MiB and more, aligned to 2 MiB and
// asked to be backed by huge pages (transparent huge pages in `madvise`
// mode): a transfer between local processes (UCX's cma) looks up and pins
// every page of both buffers, and 4 KiB pages made that lookup cost a third
// as much as the copy itself.
struct FreeBytes {
  void operator()(char* p) const { std::free(p); }
};
using Bytes = std::unique_ptr<char[], FreeBytes>;

inline Bytes alloc_bytes(size_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20;
  if (bytes < kHuge) {
    void* p = std::malloc(std::max<size_t>(bytes, 1));
    if (!p) throw std::bad_alloc();
    return Bytes(static_cast<char*>(p));
  }
  const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
  void* p = std::aligned_alloc(kHuge, rounded);
  if (!p) throw std::bad_alloc();
  madvise(p, rounded, MADV_HUGEPAGE);  // a hint: without it, 4 KiB pages
  return Bytes(static_cast<char*>(p));
}

class Pool {
 public:
  static constexpr size_t kSmall = 64 << 10;
  static Pool& get() {
    static Pool* p = new Pool;  // never destroyed: rank threads may outlive statics
    return *p;
  }
  // What a buffer is for: a collective's own buffers (Scratch), whose
  // sizes the trace tells in advance, or a payload held until its receive
  // is posted, which depends on timing. Each use has its own free buffers,
  // so that a payload that came early never takes a buffer reserved for a
  // collective.
  enum Use { kCollective = 0, kStaging = 1 };

  std::pair<Bytes, size_t> take(size_t bytes, Use use) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto& free = free_[use];
      auto it = free.lower_bound(bytes);
      // Small buffers are cheap to allocate; a much larger one is left for
      // a request of its size.
      if (it != free.end() && bytes >= kSmall && it->first <= 2 * bytes) {
        auto out = std::make_pair(std::move(it->second), it->first);
        held_ -= it->first;
        free.erase(it);
        return out;
      }
      if (bytes >= kSmall) fresh_[use] += bytes;
    }
    return {alloc_bytes(bytes), bytes};
  }
  void give(Bytes p, size_t cap, Use use) {
    if (cap < kSmall) return;
    std::lock_guard<std::mutex> lk(mu_);
    if (held_ + cap > kMaxIdle) return;
    held_ += cap;
    free_[use].emplace(cap, std::move(p));
  }

  // Puts `count` buffers of `bytes` each in the pool, with every page
  // touched, so that a collective that takes them later neither waits for
  // the kernel to map and zero them nor has its transfers fault on them
  // (the first collective of a run would otherwise be several times slower
  // than the rest). Returns the bytes added; stops at the idle bound.
  uint64_t reserve(size_t bytes, size_t count) {
    if (bytes < kSmall) return 0;
    uint64_t added = 0;
    for (size_t n = 0; n < count; ++n) {
      {
        std::lock_guard<std::mutex> lk(mu_);
        if (held_ + bytes > kMaxIdle) break;
      }
      Bytes p = alloc_bytes(bytes);
      for (size_t o = 0; o < bytes; o += 4096) p[o] = 0;
      p[bytes - 1] = 0;
      give(std::move(p), bytes, kCollective);
      added += bytes;
    }
    return added;
  }
  // Bytes allocated afresh for `use` (buffers of at least kSmall) so far.
  uint64_t fresh_bytes(Use use) {
    std::lock_guard<std::mutex> lk(mu_);
    return fresh_[use];
  }

 private:
  std::mutex mu_;
  std::multimap<size_t, Bytes> free_[2];  // by use
  size_t held_ = 0;
  uint64_t fresh_[2] = {0, 0};
  static constexpr size_t kMaxIdle = size_t{1} << 30;  // keep at most 1 GiB idle
};

template <class T>
class Scratch {
 public:
  Scratch() = default;
  explicit Scratch(uint64_t n) { resize(n); }
  ~Scratch() {
    if (mem_) Pool::get().give(std::move(mem_), cap_, Pool::kCollective);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  // Room for n elements; the contents are not kept.
  void resize(uint64_t n) {
    if (n * sizeof(T) > cap_ || !mem_) {
      if (mem_) Pool::get().give(std::move(mem_), cap_, Pool::kCollective);
      std::tie(mem_, cap_) = Pool::get().take(n * sizeof(T), Pool::kCollective);
    }
    n_ = n;
  }
  T* data() { return reinterpret_cast<T*>(mem_.get()); }
  uint64_t size() const { return n_; }
  T& operator[](uint64_t i) { return data()[i]; }

 private:
  Bytes mem_;
  size_t cap_ = 0;
  uint64_t n_ = 0;
};

// Bytes of this process's anonymous memory backed by transparent huge
// pages (/proc/self/smaps_rollup), 0 where the kernel does not say.
inline uint64_t huge_page_bytes() {
  std::ifstream f("/proc/self/smaps_rollup");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("AnonHugePages:", 0) == 0) return std::strtoull(line.c_str() + 14, nullptr, 10) * 1024;
  return 0;
}

// `bytes` bytes from the pool, given back when the last reference goes.
inline std::shared_ptr<char[]> pooled_bytes(size_t bytes) {
  auto [mem, cap] = Pool::get().take(bytes, Pool::kStaging);
  return std::shared_ptr<char[]>(mem.release(), [cap = cap](char* p) { Pool::get().give(Bytes(p), cap, Pool::kStaging); });
}

}  // namespace genie::replay
