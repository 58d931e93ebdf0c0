// Intra-op parallelism: one kernel's work split into chunks that run on the
// calling worker and on idle workers of the executor's pool.
//
// The caller always takes part: it claims chunks until none are left, then
// waits only for chunks other workers have already claimed. A helper task
// that starts after the work is gone finds nothing to claim and returns, so
// a busy pool (independent nodes running in parallel) never blocks a kernel
// and no extra threads are created: helpers are asked for only when workers
// are idle, or when the work is large enough that a worker freeing up later
// still has chunks to take. Which thread runs a chunk never changes what it
// computes, so kernels that split independent rows give the same bits as
// their serial loop.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

namespace genie {

class ThreadPool;

class Parallel {
 public:
  // pool == nullptr (or a pool of one worker) runs everything serially.
  explicit Parallel(ThreadPool* pool) : pool_(pool) {}
  Parallel(const Parallel&) = delete;
  Parallel& operator=(const Parallel&) = delete;

  // From this many grains of work, helpers are asked for even when no
  // worker is idle (they take what is left when they start).
  static constexpr int64_t kLargeGrains = 16;

  // Calls fn(begin, end) on disjoint chunks that together cover [0, n),
  // each of at least `grain` items except possibly the last, and returns
  // when all have run. Serial (one call fn(0, n)) when n < 2·grain or no
  // worker can help. The first exception a chunk throws is rethrown here
  // after every claimed chunk has finished. Safe to call from any thread,
  // concurrently; fn must be safe to call concurrently on disjoint ranges
  // and must not call for_range itself.
  void for_range(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) const;

  struct Stats {
    uint64_t splits = 0;         // for_range calls that asked for helpers
    uint64_t chunks = 0;         // chunks of those calls
    uint64_t helper_chunks = 0;  // of which run by a worker other than the caller
  };
  Stats stats() const;

 private:
  ThreadPool* pool_;
  mutable std::atomic<uint64_t> splits_{0};
  mutable std::atomic<uint64_t> chunks_{0};
  mutable std::atomic<uint64_t> helper_chunks_{0};
};

}  // namespace genie
