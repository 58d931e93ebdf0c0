// One thread running posted tasks in order: where the master makes the
// blocking calls of multi-node work (RemoteClient calls to workers, waiting
// for a local sub-graph), so that its loop thread never waits.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace genie {

class TaskThread {
 public:
  TaskThread() : thread_([this] { run(); }) {}
  // Runs the tasks still queued, then joins.
  ~TaskThread() { stop(); }
  TaskThread(const TaskThread&) = delete;
  TaskThread& operator=(const TaskThread&) = delete;

  // False once stop() has begun (the task is not run).
  bool post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stopping_) return false;
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
    return true;
  }

  bool on_this_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

  void stop() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lk(mu_);
    while (true) {
      cv_.wait(lk, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and nothing left
      auto task = std::move(tasks_.front());
      tasks_.pop_front();
      lk.unlock();
      task();  // tasks catch their own errors
      lk.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace genie
