#include "core/log_limiter.hpp"

namespace genie {

void LogLimiter::roll(Clock::time_point now) {
  if (now - start_ < window_) return;
  if (suppressed_ > 0) {
    const auto secs = std::chrono::duration_cast<std::chrono::milliseconds>(now - start_).count() / 1000.0;
    log(level_, suppressed_, " ", what_, " messages suppressed in the last ", secs, " s (at most ", burst_,
        " logged per ", std::chrono::duration_cast<std::chrono::milliseconds>(window_).count(), " ms)");
  }
  start_ = now;
  written_ = 0;
  suppressed_ = 0;
}

void LogLimiter::write(LogLevel level, const std::string& msg, Clock::time_point now) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    roll(now);
    if (written_ >= burst_) {
      ++suppressed_;
      ++suppressed_total_;
      level_ = level;
      return;
    }
    ++written_;
  }
  log(level, msg);
}

void LogLimiter::flush(Clock::time_point now) {
  std::lock_guard<std::mutex> lk(mu_);
  if (suppressed_ > 0) roll(now);
}

uint64_t LogLimiter::suppressed_total() const {
  std::lock_guard<std::mutex> lk(mu_);
  return suppressed_total_;
}

}  // namespace genie
