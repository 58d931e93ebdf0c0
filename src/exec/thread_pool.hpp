// Fixed-size worker pool with one FIFO queue.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace genie {

class ThreadPool {
 public:
  // n <= 0 means std::thread::hardware_concurrency().
  explicit ThreadPool(int n);
  // Runs every task already queued, then joins the workers.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void post(std::function<void()> task);
  int size() const { return static_cast<int>(workers_.size()); }
  // Workers waiting for a task, less the tasks already queued for them: how
  // many more tasks could start at once. A snapshot; it may change at once.
  int idle_workers();
  // Index of the calling worker thread in its pool, or -1 off the pool.
  static int current_worker();

 private:
  void worker_loop(int index);

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  int waiting_ = 0;  // workers blocked on cv_ (under mu_)
  std::vector<std::thread> workers_;
};

}  // namespace genie
