#include "core/log.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>

namespace genie {

namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::Warn)};
const char* level_tag(LogLevel l) {
  switch (l) {
    case LogLevel::Error: return "E";
    case LogLevel::Warn: return "W";
    case LogLevel::Info: return "I";
    case LogLevel::Debug: return "D";
    case LogLevel::Trace: return "T";
    default: return "?";
  }
}
}  // namespace

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }

void log_write(LogLevel level, const std::string& msg) {
  using namespace std::chrono;
  const auto now = system_clock::now();
  const std::time_t t = system_clock::to_time_t(now);
  const auto ms = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  localtime_r(&t, &tm);
  char ts[32];
  std::strftime(ts, sizeof ts, "%H:%M:%S", &tm);
  // One fprintf per line so concurrent lines do not interleave.
  std::fprintf(stderr, "[genie %s %s.%03d] %s\n", level_tag(level), ts, static_cast<int>(ms), msg.c_str());
}

}  // namespace genie
