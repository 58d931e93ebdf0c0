#include "control/loop_thread.hpp"

#include <pthread.h>
#include <signal.h>

#include <cstdlib>
#include <exception>

#include "core/error.hpp"
#include "core/log.hpp"

namespace genie {
namespace {

thread_local LoopThread* tls_current = nullptr;

// Exceptions must not unwind through libuv's C frames; a failing task is the
// task owner's bug, not a reason to take the loop (and every connection on
// it) down.
void run_guarded(const std::function<void()>& fn, const char* what) {
  try {
    fn();
  } catch (const std::exception& e) {
    log(LogLevel::Error, "loop thread: ", what, " threw: ", e.what());
  } catch (...) {
    log(LogLevel::Error, "loop thread: ", what, " threw a non-standard exception");
  }
}

void close_leftover(uv_handle_t* h, void*) {
  if (!uv_is_closing(h)) uv_close(h, nullptr);
}

}  // namespace

LoopThread::LoopThread() {
  int rc = uv_loop_init(&loop_);
  if (rc != 0) fail(GENIE_ERR_INTERNAL, "uv_loop_init: ", uv_strerror(rc));
  rc = uv_async_init(&loop_, &wake_, [](uv_async_t* a) { static_cast<LoopThread*>(a->data)->drain(); });
  if (rc != 0) {
    uv_loop_close(&loop_);
    fail(GENIE_ERR_INTERNAL, "uv_async_init: ", uv_strerror(rc));
  }
  wake_.data = this;
  // Held while the thread starts so that thread_id_ is published before the
  // loop thread reads it (run() takes the lock first).
  std::lock_guard<std::mutex> lk(mu_);
  try {
    thread_ = std::thread([this] { run(); });
  } catch (...) {
    uv_close(reinterpret_cast<uv_handle_t*>(&wake_), nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);
    uv_loop_close(&loop_);
    throw;
  }
  thread_id_ = thread_.get_id();
}

LoopThread::~LoopThread() {
  if (on_loop_thread()) {
    // The loop's memory is this object: nothing sane can follow.
    log(LogLevel::Error, "LoopThread destroyed on its own loop thread");
    std::abort();
  }
  stop();
}

bool LoopThread::on_loop_thread() const { return std::this_thread::get_id() == thread_id_; }

LoopThread* LoopThread::current() { return tls_current; }

bool LoopThread::post(std::function<void()> fn) {
  std::lock_guard<std::mutex> lk(mu_);
  if (stopping_) return false;
  queue_.push_back(std::move(fn));
  // Sent under the lock: wake_ is closed only after stopping_ was set under
  // this lock, so no send can race with (or follow) its close.
  uv_async_send(&wake_);
  return true;
}

void LoopThread::drain() {
  // uv_async_send coalesces wake-ups, so one callback takes everything
  // queued; tasks posted by these tasks wake the loop again.
  std::vector<std::function<void()>> batch;
  {
    std::lock_guard<std::mutex> lk(mu_);
    batch.swap(queue_);
  }
  for (auto& fn : batch) {
    if (fn) run_guarded(fn, "posted task");
  }
}

void LoopThread::stop(std::function<void()> before_close) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!stopping_) {
      stopping_ = true;
      // Queued last (nothing can be queued after it), so every task posted
      // before stop() runs first.
      queue_.push_back([this, before_close = std::move(before_close)] {
        if (before_close) run_guarded(before_close, "before_close");
        stop_task_ran_ = true;
        uv_stop(&loop_);
      });
      uv_async_send(&wake_);
    }
  }
  if (on_loop_thread()) {
    log(LogLevel::Error, "LoopThread::stop called on the loop thread: not waiting for it");
    return;
  }
  std::lock_guard<std::mutex> jl(join_mu_);
  if (thread_.joinable()) thread_.join();
}

uint64_t LoopThread::add_close_hook(std::function<void()> fn) {
  const uint64_t id = next_hook_++;
  close_hooks_.emplace(id, std::move(fn));
  return id;
}

void LoopThread::remove_close_hook(uint64_t id) { close_hooks_.erase(id); }

void LoopThread::run_close_hooks() {
  // Hooks remove themselves (or others) and may add new ones: iterate over
  // a snapshot of ids, calling a copy of each function.
  std::vector<uint64_t> ids;
  ids.reserve(close_hooks_.size());
  for (const auto& [id, fn] : close_hooks_) ids.push_back(id);
  for (uint64_t id : ids) {
    auto it = close_hooks_.find(id);
    if (it == close_hooks_.end()) continue;
    std::function<void()> fn = it->second;
    if (fn) run_guarded(fn, "close hook");
  }
}

void LoopThread::run() {
  { std::lock_guard<std::mutex> lk(mu_); }
  tls_current = this;
  // Connections write with writev, which raises SIGPIPE when the peer has
  // reset the connection; blocked here, the write fails with EPIPE instead
  // of killing the process, without touching the process-wide disposition.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  // uv_run returns only through uv_stop (wake_ keeps the loop alive); a
  // uv_stop from anyone but the stop task must not end the thread while
  // post() still accepts tasks.
  while (!stop_task_ran_) uv_run(&loop_, UV_RUN_DEFAULT);
  // Teardown: close what is left and run the loop until every close
  // callback ran and every request (e.g. a getaddrinfo on the thread pool)
  // finished; callbacks may open new handles, so repeat until
  // uv_loop_close stops answering UV_EBUSY.
  for (;;) {
    run_close_hooks();
    uv_walk(&loop_, close_leftover, nullptr);
    uv_run(&loop_, UV_RUN_ONCE);
    if (uv_loop_close(&loop_) == 0) break;
  }
  close_hooks_.clear();
  tls_current = nullptr;
}

}  // namespace genie
