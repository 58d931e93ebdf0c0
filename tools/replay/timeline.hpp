// What a rank records while it replays: trace events for --trace (off by
// default: recording is one pointer test per place when off) and the
// compute and communication intervals the "exposed communication" figure is
// computed from. Times are nanoseconds since the rank's start, which every
// rank takes when the launcher releases them together, so all ranks share
// one clock to within that release.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace genie::replay {

enum class TraceLevel { Off, Node, Event };

struct TraceEvent {
  std::string name;
  std::string cat;  // "comp", "comm", "send", "recv", "wait"
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  int lane = 0;  // a thread row within the rank
};

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Timeline(TraceLevel level) : level_(level) {}

  void start() { t0_ = Clock::now(); }
  int64_t now_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0_).count();
  }
  TraceLevel level() const { return level_; }
  bool events() const { return level_ == TraceLevel::Event; }

  void add(TraceEvent e) {
    std::lock_guard<std::mutex> lk(mu_);
    events_.push_back(std::move(e));
  }
  // Intervals of compute (busy) and communication, for exposed communication.
  void interval(bool comm, int64_t begin, int64_t end) {
    std::lock_guard<std::mutex> lk(mu_);
    (comm ? comm_ : comp_).push_back({begin, end});
  }

  std::vector<TraceEvent> take_events() {
    std::lock_guard<std::mutex> lk(mu_);
    return std::move(events_);
  }
  // Time during which communication ran and no compute did.
  int64_t exposed_comm_ns() const;

 private:
  TraceLevel level_;
  Clock::time_point t0_ = Clock::now();
  mutable std::mutex mu_;
  std::vector<TraceEvent> events_;
  std::vector<std::pair<int64_t, int64_t>> comm_, comp_;
};

}  // namespace genie::replay
