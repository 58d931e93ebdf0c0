// Reusable host buffers for payloads: a collective's buffers are as large
// as its data, so allocating (and having the kernel map and zero) fresh
// ones for each collective, or for each payload that arrives before its
// receive, would cost more than the transfer on a busy host. Buffers are
// not zeroed: every byte is written before it is read, and leftovers of an
// earlier collective carry another pattern and fail the check.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>

namespace genie::replay {

class Pool {
 public:
  static constexpr size_t kSmall = 64 << 10;
  static Pool& get() {
    static Pool* p = new Pool;  // never destroyed: rank threads may outlive statics
    return *p;
  }
  std::pair<std::unique_ptr<char[]>, size_t> take(size_t bytes) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = free_.lower_bound(bytes);
    // Small buffers are cheap to allocate; a much larger one is left for
    // a request of its size.
    if (it == free_.end() || bytes < kSmall || it->first > 2 * bytes) return {std::unique_ptr<char[]>(new char[std::max<size_t>(bytes, 1)]), bytes};
    auto out = std::make_pair(std::move(it->second), it->first);
    held_ -= it->first;
    free_.erase(it);
    return out;
  }
  void give(std::unique_ptr<char[]> p, size_t cap) {
    if (cap < kSmall) return;
    std::lock_guard<std::mutex> lk(mu_);
    if (held_ + cap > (size_t{1} << 30)) return;  // keep at most 1 GiB idle
    held_ += cap;
    free_.emplace(cap, std::move(p));
  }

 private:
  std::mutex mu_;
  std::multimap<size_t, std::unique_ptr<char[]>> free_;
  size_t held_ = 0;
};

template <class T>
class Scratch {
 public:
  Scratch() = default;
  explicit Scratch(uint64_t n) { resize(n); }
  ~Scratch() {
    if (mem_) Pool::get().give(std::move(mem_), cap_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  // Room for n elements; the contents are not kept.
  void resize(uint64_t n) {
    if (n * sizeof(T) > cap_ || !mem_) {
      if (mem_) Pool::get().give(std::move(mem_), cap_);
      std::tie(mem_, cap_) = Pool::get().take(n * sizeof(T));
    }
    n_ = n;
  }
  T* data() { return reinterpret_cast<T*>(mem_.get()); }
  uint64_t size() const { return n_; }
  T& operator[](uint64_t i) { return data()[i]; }

 private:
  std::unique_ptr<char[]> mem_;
  size_t cap_ = 0;
  uint64_t n_ = 0;
};

// `bytes` bytes from the pool, given back when the last reference goes.
inline std::shared_ptr<char[]> pooled_bytes(size_t bytes) {
  auto [mem, cap] = Pool::get().take(bytes);
  return std::shared_ptr<char[]>(mem.release(), [cap = cap](char* p) { Pool::get().give(std::unique_ptr<char[]>(p), cap); });
}

}  // namespace genie::replay
