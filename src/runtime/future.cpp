#include "runtime/future.hpp"

#include <chrono>
#include <algorithm>

#include "core/error.hpp"
#include "core/spin.hpp"
#include "runtime/context.hpp"

namespace genie {

void FutureState::complete(FutureResult&& r) {
  genie_future_callback_t cb = nullptr;
  void* user = nullptr;
  genie_future_t* handle = nullptr;
  genie_status_t status;
  {
    std::lock_guard<std::mutex> lk(mu_);
    result_ = std::move(r);
    done_ = true;
    done_flag_.store(true, std::memory_order_release);
    status = result_.status;
    if (cb_ && handle_) {
      cb = cb_;
      user = user_;
      handle = handle_;
      cb_running_ = true;
    }
  }
  cv_.notify_all();
  if (cb) {
    cb(handle, status, user);
    {
      std::lock_guard<std::mutex> lk(mu_);
      cb_running_ = false;
    }
    cv_.notify_all();
  }
}

void FutureState::collect(Deadline deadline) {
  if (auto c = client_.lock()) c->collect(*direct_, deadline);
}

void FutureState::watch() {
  if (auto c = client_.lock()) c->watch(*direct_);
}

genie_status_t FutureState::wait(int64_t timeout_ms) {
  // One deadline for every stage below: together they wait timeout_ms.
  const Deadline deadline =
      timeout_ms < 0 ? Deadline::max() : std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  if (direct_ && !done_flag_.load(std::memory_order_acquire)) {
    // A remote submission on the client's direct link: this thread reads
    // its completion (core/spin.hpp's polling included), with no thread
    // between.
    collect(deadline);
  } else if (timeout_ms != 0) {
    // A remote tiny graph completes within tens of microseconds: polling
    // first spares the completing thread a wake-up (core/spin.hpp).
    spin_until([this] { return done_flag_.load(std::memory_order_acquire); },
               timeout_ms < 0 ? kReplySpin
                              : std::min<std::chrono::microseconds>(kReplySpin, std::chrono::milliseconds(timeout_ms)));
  }
  std::unique_lock<std::mutex> lk(mu_);
  if (timeout_ms < 0) {
    cv_.wait(lk, [this] { return done_; });
  } else if (!cv_.wait_until(lk, deadline, [this] { return done_; })) {
    throw Error(GENIE_ERR_TIMEOUT, cat("future still running after ", timeout_ms, " ms"));
  }
  if (result_.status != GENIE_OK) throw Error(result_.status, result_.detail);
  return GENIE_OK;
}

genie_status_t FutureState::poll() {
  // Whatever completion has arrived, without waiting for one.
  if (direct_ && !done_flag_.load(std::memory_order_acquire)) collect(std::chrono::steady_clock::now());
  std::lock_guard<std::mutex> lk(mu_);
  if (!done_) return GENIE_IN_PROGRESS;
  if (result_.status != GENIE_OK) throw Error(result_.status, result_.detail);
  return GENIE_OK;
}

void FutureState::set_callback(genie_future_callback_t cb, void* user, genie_future_t* handle) {
  check(cb != nullptr, GENIE_ERR_INVALID_ARGUMENT, "callback is NULL");
  genie_status_t status;
  {
    std::lock_guard<std::mutex> lk(mu_);
    check(cb_ == nullptr, GENIE_ERR_INVALID_ARGUMENT, "a completion callback is already set");
    cb_ = cb;
    user_ = user;
    handle_ = handle;
    if (!done_) {
      if (direct_) watch();  // the callback runs without anyone waiting
      return;
    }
    status = result_.status;
  }
  cb(handle, status, user);
}

void FutureState::detach() {
  std::unique_lock<std::mutex> lk(mu_);
  if (!done_ && direct_) watch();  // nobody can wait for it any more
  handle_ = nullptr;
  cb_ = nullptr;
  cv_.wait(lk, [this] { return !cb_running_; });
}

void FutureState::require_success() {
  check(done_, GENIE_ERR_INVALID_ARGUMENT, "the future has not completed yet: wait for it first");
  if (result_.status != GENIE_OK) throw Error(result_.status, result_.detail);
  ctx_->check_live();
}

TensorRef FutureState::output(size_t index) {
  std::lock_guard<std::mutex> lk(mu_);
  require_success();
  check(index < result_.outputs.size(), GENIE_ERR_NOT_FOUND, "output index ", index, " out of range (",
        result_.outputs.size(), " outputs)");
  return result_.outputs[index];
}

TensorRef FutureState::output(const std::string& name) {
  std::lock_guard<std::mutex> lk(mu_);
  require_success();
  const std::vector<ValueId>& outs = graph_->outputs();
  for (size_t i = 0; i < outs.size(); ++i)
    if (graph_->value(outs[i]).name == name) return result_.outputs.at(i);
  fail(GENIE_ERR_NOT_FOUND, "no output named '", name, "'");
}

uint64_t FutureState::exec_ns() {
  std::lock_guard<std::mutex> lk(mu_);
  check(done_, GENIE_ERR_INVALID_ARGUMENT, "the future has not completed yet");
  return result_.exec_ns;
}

}  // namespace genie
