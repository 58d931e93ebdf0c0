// memcpy by several threads, for the CPU's half of staged copies
// (staging.hpp): one core copies pageable memory at a few GB/s where the
// link to the GPU moves 50. The split is the executor's own intra-op one
// (exec/parallel.hpp) over a pool of the copies' own; no CUDA here, so the
// host-only tests check it on every machine.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "exec/parallel.hpp"
#include "exec/thread_pool.hpp"

namespace genie::cuda {

// Copies of less than two of these stay on the caller's thread.
constexpr size_t kCopyGrain = size_t{256} << 10;

// Copies n bytes with the caller and whichever of `par`'s workers help.
inline void parallel_memcpy(const Parallel& par, void* dst, const void* src, size_t n) {
  if (n == 0) return;  // memcpy takes no null pointer, even for nothing
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  par.for_range(static_cast<int64_t>(n), static_cast<int64_t>(kCopyGrain),
                [d, s](int64_t b, int64_t e) { std::memcpy(d + b, s + b, static_cast<size_t>(e - b)); });
}

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

// The same through the process's copy pool of copy_threads() threads (a
// split takes at most that many, the caller among them; callers at once
// share it). A setting of 1 leaves every copy to its caller.
inline void parallel_memcpy(void* dst, const void* src, size_t n) {
  static const int threads = copy_threads();
  if (threads <= 1 || n < 2 * kCopyGrain) {
    if (n > 0) std::memcpy(dst, src, n);
    return;
  }
  // Never destroyed: copies may still run while the process exits.
  static const Parallel* par = new Parallel(new ThreadPool(threads));
  parallel_memcpy(*par, dst, src, n);
}

}  // namespace genie::cuda
