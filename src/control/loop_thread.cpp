#include "control/loop_thread.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "core/error.hpp"
#include "core/spin.hpp"
#include "dataplane/loop_hooks.hpp"
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
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    const int err = errno;
    uv_loop_close(&loop_);
    fail(GENIE_ERR_INTERNAL, "eventfd: ", std::strerror(err));
  }
  rc = uv_poll_init(&loop_, &wake_, wake_fd_);
  if (rc != 0) {
    uv_loop_close(&loop_);
    ::close(wake_fd_);
    fail(GENIE_ERR_INTERNAL, "uv_poll_init: ", uv_strerror(rc));
  }
  wake_.data = this;
  rc = uv_poll_start(&wake_, UV_READABLE,
                     [](uv_poll_t* p, int, int) { static_cast<LoopThread*>(p->data)->drain(); });
  if (rc != 0) {
    uv_close(reinterpret_cast<uv_handle_t*>(&wake_), nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);
    uv_loop_close(&loop_);
    ::close(wake_fd_);
    fail(GENIE_ERR_INTERNAL, "uv_poll_start: ", uv_strerror(rc));
  }
  // Held while the thread starts so that thread_id_ is published before the
  // loop thread reads it (run() takes the lock first).
  std::lock_guard<std::mutex> lk(mu_);
  try {
    thread_ = std::thread([this] { run(); });
  } catch (...) {
    uv_close(reinterpret_cast<uv_handle_t*>(&wake_), nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);
    uv_loop_close(&loop_);
    ::close(wake_fd_);
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
  ::close(wake_fd_);
}

bool LoopThread::on_loop_thread() const { return std::this_thread::get_id() == thread_id_; }

LoopThread* LoopThread::current() { return tls_current; }

bool LoopThread::post(std::function<void()> fn) {
  bool wake_loop;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_) return false;
    queue_.push_back(std::move(fn));
    wake_loop = needs_wake();
  }
  // Outside the lock, so that the woken loop does not block on it. Only the
  // first task since the last drain writes: the others ride along.
  if (wake_loop) wake();
  return true;
}

bool LoopThread::needs_wake() {
  // A spinning loop takes the queue itself (run()).
  if (wake_pending_ || spinning_) return false;
  wake_pending_ = true;
  return true;
}

void LoopThread::wake() {
  // The fd stays open until the destructor, which cannot run while a
  // caller is still inside post() or stop().
  const uint64_t one = 1;
  while (::write(wake_fd_, &one, sizeof one) < 0 && errno == EINTR) {
  }
}

void LoopThread::drain() {
  // Reset before taking the queue: a task queued after the swap below finds
  // wake_pending_ cleared and writes again.
  uint64_t count;
  while (::read(wake_fd_, &count, sizeof count) < 0 && errno == EINTR) {
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    wake_pending_ = false;
  }
  run_queued();
}

bool LoopThread::run_queued() {
  std::vector<std::function<void()>> batch;
  {
    std::lock_guard<std::mutex> lk(mu_);
    batch.swap(queue_);
  }
  for (auto& fn : batch) {
    if (fn) run_guarded(fn, "posted task");
  }
  return !batch.empty();
}

void LoopThread::spin_after_events() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    spinning_ = true;
  }
  // Busy while requests keep arriving or tasks keep being posted.
  spin_while(
      [this] {
        const uint64_t frames = dataplane::frames_received_here();
        uv_run(&loop_, UV_RUN_NOWAIT);
        if (stop_task_ran_) return SpinStep::Done;
        const bool tasks = run_queued();
        if (stop_task_ran_) return SpinStep::Done;
        return tasks || dataplane::frames_received_here() != frames ? SpinStep::Busy : SpinStep::Idle;
      },
      kLoopSpin);
  bool queued;
  {
    std::lock_guard<std::mutex> lk(mu_);
    spinning_ = false;
    queued = !queue_.empty();
  }
  // Posted while the loop was deciding to stop spinning: nobody woke it.
  if (queued && !stop_task_ran_) run_queued();
}

void LoopThread::stop(std::function<void()> before_close) {
  bool first = false;
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
      first = needs_wake();
    }
  }
  if (first) wake();
  if (on_loop_thread()) {
    log(LogLevel::Error, "LoopThread::stop called on the loop thread: not waiting for it");
    return;
  }
  std::lock_guard<std::mutex> jl(join_mu_);
  if (thread_.joinable()) thread_.join();
}

uint64_t LoopThread::add_close_hook(std::function<void()> fn) {
  return dataplane::add_close_hook(&loop_, std::move(fn));
}

void LoopThread::remove_close_hook(uint64_t id) { dataplane::remove_close_hook(&loop_, id); }

void LoopThread::run_close_hooks() { dataplane::run_close_hooks(&loop_); }

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
  while (!stop_task_ran_) {
    uv_run(&loop_, UV_RUN_ONCE);
    if (!stop_task_ran_) spin_after_events();
  }
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
  dataplane::clear_close_hooks(&loop_);
  tls_current = nullptr;
}

}  // namespace genie
