// A libuv loop running on its own thread, reached from other threads only
// through post() (a mutex-guarded queue drained by a uv_async_t).
#pragma once

#include <uv.h>

#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace genie {

class LoopThread {
 public:
  // Starts the thread and its loop.
  LoopThread();
  // Runs stop() if not yet done and joins the thread.
  ~LoopThread();
  LoopThread(const LoopThread&) = delete;
  LoopThread& operator=(const LoopThread&) = delete;

  uv_loop_t* loop() { return &loop_; }

  // Runs fn on the loop thread, in post order. Safe from any thread,
  // including the loop thread itself (runs on the next iteration). After
  // stop() has begun, tasks are dropped (returns false).
  bool post(std::function<void()> fn);

  // True on the loop thread.
  bool on_loop_thread() const;

  // Runs `before_close` on the loop thread, then closes every handle still
  // open on the loop (uv_walk), lets their close callbacks run and ends the
  // thread. Idempotent; must not be called on the loop thread.
  void stop(std::function<void()> before_close = nullptr);

 private:
  void drain();

  uv_loop_t loop_{};
  uv_async_t wake_{};
  std::mutex mu_;
  std::vector<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;
  std::thread::id thread_id_;
};

}  // namespace genie
