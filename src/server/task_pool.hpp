// Threads running posted tasks: where a server makes its blocking calls
// (RemoteClient calls to workers and peers, waiting for a local stage of a
// multi-node graph), so that its loop thread never waits. Tasks posted with
// one key (a session) run one at a time, in order; tasks of different keys
// run at once on up to `max_threads` threads, started as needed. So one
// tenant's graph waiting for a worker holds that tenant's later requests
// only, never another tenant's.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace genie {

class TaskPool {
 public:
  explicit TaskPool(size_t max_threads) : max_threads_(max_threads < 1 ? 1 : max_threads) {}
  // Runs the tasks still queued, then joins.
  ~TaskPool() { stop(); }
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  // False once stop() has begun (the task is not run). Any thread.
  bool post(uint64_t key, std::function<void()> task) {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) return false;
    Key& k = keys_[key];
    k.tasks.push_back(std::move(task));
    if (!k.running && k.tasks.size() == 1) ready_.push_back(key);
    // Each idle thread takes one ready key. A thread notified a moment ago
    // still counts as idle until it wakes, so comparing with the keys
    // waiting (not with zero) starts a thread for every key beyond those:
    // tasks posted faster than idle threads wake would otherwise wait for
    // a thread that never comes, behind tasks that block.
    if (ready_.size() > idle_ && threads_.size() < max_threads_)
      threads_.emplace_back([this] { run(); });
    else
      cv_.notify_one();
    return true;
  }

  // Stops taking tasks, runs those queued, joins. Not from a task.
  void stop() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    cv_.notify_all();
    // No thread is added once stopping_ is set.
    for (std::thread& t : threads_)
      if (t.joinable()) t.join();
  }

  size_t threads() const {
    std::lock_guard<std::mutex> lk(mu_);
    return threads_.size();
  }

 private:
  struct Key {
    std::deque<std::function<void()>> tasks;
    bool running = false;
  };

  void run() {
    std::unique_lock<std::mutex> lk(mu_);
    while (true) {
      ++idle_;
      cv_.wait(lk, [&] { return stopping_ || !ready_.empty(); });
      --idle_;
      if (ready_.empty()) return;  // stopping, and nothing left to start
      const uint64_t key = ready_.front();
      ready_.pop_front();
      Key& k = keys_.at(key);  // elements stay put when the map rehashes
      auto task = std::move(k.tasks.front());
      k.tasks.pop_front();
      k.running = true;
      lk.unlock();
      task();  // tasks catch their own errors
      task = nullptr;
      lk.lock();
      k.running = false;
      if (k.tasks.empty()) {
        keys_.erase(key);
      } else {
        ready_.push_back(key);  // behind the other keys waiting: fair
        cv_.notify_one();
      }
    }
  }

  const size_t max_threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<uint64_t, Key> keys_;  // keys with tasks queued or running
  std::deque<uint64_t> ready_;              // keys with tasks queued and none running
  size_t idle_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace genie
