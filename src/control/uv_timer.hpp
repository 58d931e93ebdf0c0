// A uv_timer_t with C++ ownership. The handle's memory must outlive
// uv_close, so it lives on the heap and is freed by the close callback;
// destroying the Timer only starts the close. Everything here runs on the
// loop thread, and every Timer must be destroyed before the loop stops.
#pragma once

#include <uv.h>

#include <cstdint>
#include <exception>
#include <functional>

#include "core/log.hpp"

namespace genie {

class Timer {
 public:
  explicit Timer(uv_loop_t* loop) : h_(new Handle) {
    uv_timer_init(loop, &h_->timer);
    h_->timer.data = h_;
  }
  ~Timer() {
    // The callback may be running right now (a timer that destroys its own
    // owner): the std::function stays alive until the close callback.
    uv_close(reinterpret_cast<uv_handle_t*>(&h_->timer),
             [](uv_handle_t* h) { delete static_cast<Handle*>(h->data); });
  }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  // (Re)arms the timer to run `fn` once after `ms` milliseconds, then every
  // `repeat_ms` when that is not 0. Not from within the timer's own
  // callback (that would destroy the running `fn`).
  void start(uint64_t ms, std::function<void()> fn, uint64_t repeat_ms = 0) {
    h_->fn = std::move(fn);
    uv_timer_start(
        &h_->timer,
        [](uv_timer_t* t) {
          try {  // nothing may unwind through libuv
            static_cast<Handle*>(t->data)->fn();
          } catch (const std::exception& e) {
            log(LogLevel::Error, "timer callback threw: ", e.what());
          }
        },
        ms, repeat_ms);
  }
  void stop() { uv_timer_stop(&h_->timer); }

 private:
  struct Handle {
    uv_timer_t timer{};
    std::function<void()> fn;
  };
  Handle* h_;
};

}  // namespace genie
