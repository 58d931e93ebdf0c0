// A master's waits for stages it sent to workers (server/multinode.hpp),
// held by no thread: each wait ends exactly once, by whichever comes first
// of the worker's reply (finish), its deadline, or stop(). One timer thread
// watches the deadlines of them all.
//
// Each session may have at most `max_per_session` waits at once, so that
// one tenant whose workers stall cannot take what the others' multi-node
// graphs need (ServerOptions::session_max_stages).
//
// Threads: every member may be called from any thread; `expire` callbacks
// run on the timer thread or on stop()'s caller, never under the lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace genie {

class StageWaits {
 public:
  using Clock = std::chrono::steady_clock;
  // Called once when a wait ends without its reply: `stopping` true when
  // stop() ended it, false at its deadline.
  using Expire = std::function<void(bool stopping)>;

  explicit StageWaits(size_t max_per_session);
  // Stops (expiring every wait left) and joins the timer thread.
  ~StageWaits();
  StageWaits(const StageWaits&) = delete;
  StageWaits& operator=(const StageWaits&) = delete;

  // A wait of `session` until `deadline`: its id, for finish(). Throws
  // Error(OUT_OF_MEMORY) naming the bound (and `what`, the stage) when the
  // session has max_per_session waits already, Error(SHUTDOWN) once stop()
  // has run; `expire` is then never called.
  uint64_t add(uint64_t session, Clock::time_point deadline, Expire expire, const std::string& what);
  // The reply of wait `id` came: true when it came first (the wait ends
  // here, its `expire` is never called), false when the wait had ended.
  bool finish(uint64_t id);
  // Ends every wait now (their `expire(true)`), and any added later at once.
  void stop();
  // Waits of `session` now.
  size_t waiting(uint64_t session) const;
  size_t max_per_session() const { return max_per_session_; }

 private:
  struct Wait {
    uint64_t session = 0;
    Clock::time_point deadline;
    Expire expire;
  };
  void run();
  // Removes wait `it` (under mu_).
  Expire take(std::unordered_map<uint64_t, Wait>::iterator it);

  const size_t max_per_session_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, Wait> waits_;
  std::multimap<Clock::time_point, uint64_t> by_deadline_;
  std::unordered_map<uint64_t, size_t> per_session_;
  std::thread timer_;
};

}  // namespace genie
