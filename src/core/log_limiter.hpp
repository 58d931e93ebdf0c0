// A bound on how fast one kind of log line is written: at most `burst`
// lines per window; the lines past it are counted, and one summary line
// says how many were suppressed once the window has ended. A peer that
// provokes a log line per connection (failed authentication, malformed
// frames) then cannot fill the disk or drown the other lines.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "core/log.hpp"

namespace genie {

class LogLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  // `what` names the lines in the summary ("refused connections").
  LogLimiter(std::string what, int burst, int64_t window_ms)
      : what_(std::move(what)), burst_(burst), window_(std::chrono::milliseconds(window_ms)) {}

  // Writes `msg` at `level` unless this window's burst is spent (then counts
  // it); writes the summary of an ended window first. Any thread.
  void write(LogLevel level, const std::string& msg, Clock::time_point now = Clock::now());
  // Writes the summary of an ended window that suppressed lines (call it
  // now and then, so the summary comes even when no line follows).
  void flush(Clock::time_point now = Clock::now());

  uint64_t suppressed_total() const;

 private:
  void roll(Clock::time_point now);  // with mu_ held

  const std::string what_;
  const int burst_;
  const Clock::duration window_;
  mutable std::mutex mu_;
  Clock::time_point start_{};
  int written_ = 0;
  uint64_t suppressed_ = 0;
  LogLevel level_ = LogLevel::Warn;  // of the suppressed lines
  uint64_t suppressed_total_ = 0;
};

}  // namespace genie
