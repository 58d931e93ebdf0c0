// A libuv loop running on its own thread, reached from other threads only
// through post() (a mutex-guarded queue; the poster wakes the loop through
// an eventfd watched by a uv_poll_t). SIGPIPE is blocked on that thread, so
// a write to a reset socket fails with EPIPE instead of killing the process.
#pragma once

#include <uv.h>

#include <cstdint>
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
  // stop() has begun, tasks are dropped (returns false). A task that throws
  // is logged and does not stop the loop.
  bool post(std::function<void()> fn);

  // True on the loop thread.
  bool on_loop_thread() const;

  // Runs every task posted before it, then `before_close` on the loop thread,
  // then the close hooks, then closes every handle still open on the loop
  // (uv_walk, without close callbacks), lets pending requests finish and
  // ends the thread. Idempotent; may be called from several threads at once
  // (each returns once the thread has ended). Must not be called on the loop
  // thread.
  void stop(std::function<void()> before_close = nullptr);

  // The LoopThread whose loop runs on the calling thread, or nullptr.
  static LoopThread* current();

  // For owners of handles that need their own close callback (stop()'s walk
  // closes leftovers without one): `fn` runs on the loop thread when stop()
  // starts closing, after before_close and before the walk, and again on
  // every later teardown pass until removed, so it must be idempotent (e.g.
  // Connection::close). Loop thread only. Returns an id for
  // remove_close_hook. The hooks are the loop's (dataplane/loop_hooks.hpp),
  // which is where channels of every transport register theirs.
  uint64_t add_close_hook(std::function<void()> fn);
  void remove_close_hook(uint64_t id);

 private:
  void run();
  void drain();
  // Runs the tasks queued so far; false if there were none.
  bool run_queued();
  // Events come in bursts (a reply is followed by the next request): after
  // handling some, the loop polls its handles and its queue until a short
  // while has passed without a whole frame received or a task run
  // (core/spin.hpp) before it blocks again, and posters do not write the
  // eventfd meanwhile.
  void spin_after_events();
  // With mu_ held, after queuing: whether the poster must write the
  // eventfd.
  bool needs_wake();
  void run_close_hooks();
  // Makes the loop call drain(); called by posters after queuing.
  void wake();

  uv_loop_t loop_{};
  // Not a uv_async_t: libuv 1.44's makes the woken loop spin (and yield)
  // until the waking thread has returned from its write to the eventfd,
  // which on a busy machine costs a context switch per wake-up.
  int wake_fd_ = -1;  // eventfd; closed by the destructor, after the thread
  uv_poll_t wake_{};
  std::mutex mu_;
  std::vector<std::function<void()>> queue_;
  bool wake_pending_ = false;  // an eventfd write not yet answered by drain()
  bool spinning_ = false;      // spin_after_events() takes the queue
  bool stopping_ = false;
  std::thread thread_;
  std::thread::id thread_id_;
  std::mutex join_mu_;  // serialises joins of stop() called from several threads
  // Loop thread only.
  bool stop_task_ran_ = false;
};

}  // namespace genie
