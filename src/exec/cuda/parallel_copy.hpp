// memcpy by several threads, for the CPU's half of staged copies
// (staging.hpp): one core copies pageable memory at a few GB/s where the
// link to the GPU moves 50. Plain C++ (no CUDA), header-only, so that the
// host-only tests check it on every machine.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace genie::cuda {

// Helper threads that copy slices of one range while the caller copies the
// first. One copy at a time: a second caller is told to copy alone.
class CopyCrew {
 public:
  explicit CopyCrew(int helpers) {
    for (int i = 0; i < helpers; ++i) threads_.emplace_back([this, i] { work(i + 1); });
  }

  ~CopyCrew() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    go_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  CopyCrew(const CopyCrew&) = delete;
  CopyCrew& operator=(const CopyCrew&) = delete;

  // Copies n bytes with the helpers and returns true, or returns false at
  // once, having copied nothing, while another caller has them.
  bool copy(void* dst, const void* src, size_t n) {
    if (n == 0) return true;  // nothing to copy (and memcpy takes no null pointer)
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    const size_t parts = threads_.size() + 1;
    // Slices of whole cache lines, parts x part >= n.
    const size_t part = ((n + parts - 1) / parts + 63) / 64 * 64;
    {
      std::lock_guard<std::mutex> lk(mu_);
      dst_ = static_cast<std::byte*>(dst);
      src_ = static_cast<const std::byte*>(src);
      n_ = n;
      part_ = part;
      pending_ = threads_.size();
      ++generation_;
    }
    go_.notify_all();
    std::memcpy(dst, src, std::min(part, n));
    std::unique_lock<std::mutex> lk(mu_);
    done_.wait(lk, [this] { return pending_ == 0; });
    return true;
  }

 private:
  void work(size_t slice) {
    uint64_t seen = 0;
    for (;;) {
      std::byte* dst;
      const std::byte* src;
      size_t n, part;
      {
        std::unique_lock<std::mutex> lk(mu_);
        go_.wait(lk, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        dst = dst_, src = src_, n = n_, part = part_;
      }
      const size_t off = std::min(slice * part, n);
      std::memcpy(dst + off, src + off, std::min(part, n - off));
      std::lock_guard<std::mutex> lk(mu_);
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex busy_;  // held for the length of one copy
  std::mutex mu_;
  std::condition_variable go_, done_;
  bool stop_ = false;
  uint64_t generation_ = 0;
  size_t pending_ = 0;
  std::byte* dst_ = nullptr;
  const std::byte* src_ = nullptr;
  size_t n_ = 0, part_ = 0;
};

// Threads a staged copy uses, the caller included: GENIE_CUDA_COPY_THREADS
// (1 to 64); unset or not a number in that range, 4, or the CPUs there are
// where they are fewer.
inline int default_copy_threads() {
  const unsigned cpus = std::thread::hardware_concurrency();
  return cpus == 0 ? 4 : static_cast<int>(std::min(4u, cpus));
}

inline int copy_threads() {
  const char* v = std::getenv("GENIE_CUDA_COPY_THREADS");
  if (v == nullptr || *v == '\0') return default_copy_threads();
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return *end == '\0' && n >= 1 ? static_cast<int>(std::min<long>(n, 64)) : default_copy_threads();
}

// memcpy through the process's crew of copy_threads() - 1 helpers. Copies
// under kParallelCopyBytes, a setting of 1, or helpers busy with another
// caller's copy are left to the caller alone.
constexpr size_t kParallelCopyBytes = size_t{512} << 10;

inline void parallel_memcpy(void* dst, const void* src, size_t n) {
  if (n == 0) return;
  static const int threads = copy_threads();
  if (threads > 1 && n >= kParallelCopyBytes) {
    // Never destroyed: copies may still run while the process exits.
    static CopyCrew* crew = new CopyCrew(threads - 1);
    if (crew->copy(dst, src, n)) return;
  }
  std::memcpy(dst, src, n);
}

}  // namespace genie::cuda
