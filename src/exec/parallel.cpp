#include "exec/parallel.hpp"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>

#include "exec/thread_pool.hpp"

namespace genie {

namespace {

// One split call. Shared with the helper tasks, which may start after the
// call has returned: they then only touch `next` and leave.
struct Job {
  int64_t n = 0;
  int64_t chunk = 0;
  int64_t chunks = 0;
  // Valid while a claimed chunk is unfinished: the caller waits for all of them.
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> finished{0};
  std::atomic<uint64_t> by_helpers{0};
  std::mutex mu;
  std::condition_variable cv;
  std::exception_ptr error;  // under mu

  // Claims and runs chunks until none is left.
  void work(bool helper) {
    for (;;) {
      const int64_t c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= chunks) return;
      const int64_t begin = c * chunk;
      try {
        (*fn)(begin, std::min(n, begin + chunk));
      } catch (...) {
        std::lock_guard<std::mutex> lk(mu);
        if (!error) error = std::current_exception();
      }
      if (helper) by_helpers.fetch_add(1, std::memory_order_relaxed);
      if (finished.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) {
        std::lock_guard<std::mutex> lk(mu);
        cv.notify_all();
      }
    }
  }
};

}  // namespace

void Parallel::for_range(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) const {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t units = n / grain;  // whole grains
  const int workers = pool_ ? pool_->size() : 1;
  int helpers = 0;
  if (units >= 2 && workers > 1) {
    helpers = units >= kLargeGrains ? workers - 1 : pool_->idle_workers();
    helpers = static_cast<int>(std::min<int64_t>({helpers, workers - 1, units - 1}));
  }
  if (helpers <= 0) {
    fn(0, n);
    return;
  }
  auto job = std::make_shared<Job>();
  // A few chunks per thread, so that a thread slowed by other work on the
  // machine leaves its share to the others.
  const int64_t want = std::min<int64_t>(units, int64_t{4} * (helpers + 1));
  job->n = n;
  job->chunk = (n + want - 1) / want;
  job->chunks = (n + job->chunk - 1) / job->chunk;
  job->fn = &fn;
  for (int i = 0; i < helpers; ++i) pool_->post([job] { job->work(true); });
  job->work(false);
  {
    std::unique_lock<std::mutex> lk(job->mu);
    job->cv.wait(lk, [&] { return job->finished.load(std::memory_order_acquire) == job->chunks; });
  }
  splits_.fetch_add(1, std::memory_order_relaxed);
  chunks_.fetch_add(static_cast<uint64_t>(job->chunks), std::memory_order_relaxed);
  helper_chunks_.fetch_add(job->by_helpers.load(std::memory_order_relaxed), std::memory_order_relaxed);
  if (job->error) std::rethrow_exception(job->error);
}

Parallel::Stats Parallel::stats() const {
  Stats s;
  s.splits = splits_.load(std::memory_order_relaxed);
  s.chunks = chunks_.load(std::memory_order_relaxed);
  s.helper_chunks = helper_chunks_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace genie
