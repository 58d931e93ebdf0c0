#include "exec/thread_pool.hpp"

#include <algorithm>

namespace genie {

namespace {
thread_local int t_worker_index = -1;
}  // namespace

int ThreadPool::current_worker() { return t_worker_index; }

ThreadPool::ThreadPool(int n) {
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  if (n <= 0) n = 1;
  workers_.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
}

int ThreadPool::idle_workers() {
  std::lock_guard<std::mutex> lk(mu_);
  return std::max(0, waiting_ - static_cast<int>(queue_.size()));
}

void ThreadPool::worker_loop(int index) {
  t_worker_index = index;
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lk(mu_);
      while (!stopping_ && queue_.empty()) {
        ++waiting_;
        cv_.wait(lk);
        --waiting_;
      }
      if (queue_.empty()) return;  // stopping and drained
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace genie
