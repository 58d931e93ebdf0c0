// Brief busy-waiting before a thread goes to sleep.
//
// On the virtual machines Genie runs on, waking a thread that sleeps on
// another vCPU (futex, epoll) costs tens of microseconds, several times a
// loopback round trip; one synchronous remote call used to pass four such
// wake-ups. A thread that expects its answer within microseconds (a caller
// waiting for a reply, an event loop right after it sent one) therefore
// polls for a short, bounded while first, yielding the CPU between checks
// so that a thread it waits for can run on the same core. The bound keeps
// the cost of a wait that does not pay off small.
//
// Spinning pays only while the CPUs have room: a thread that never sleeps
// loses the scheduler's preference for threads that wake up, so on an
// oversubscribed machine each step of a round trip would wait for a whole
// time slice (milliseconds). So there is no spinning while the machine has
// more runnable threads than CPUs plus a round trip's own (spin_allowed),
// and a yield that took long (another thread wanted the CPU) ends the spin
// there: the thread sleeps as it would without it.
#pragma once

#include <chrono>
#include <thread>

namespace genie {

// How long a caller waiting for a server's reply, or an event loop after
// it handled events, polls before it sleeps. Above a loopback round trip
// with a tiny graph (tens of microseconds), far below any heartbeat or
// timeout.
inline constexpr std::chrono::microseconds kReplySpin{200};
inline constexpr std::chrono::microseconds kLoopSpin{100};
// A yield that returns later than this ran another thread in between.
inline constexpr std::chrono::microseconds kSpinPreempted{20};

// Whether the machine has room for spinning: runnable threads (the kernel's
// instantaneous count, /proc/loadavg) at most the usable CPUs plus two.
// Sampled at most every few milliseconds; false where it cannot be read.
bool spin_allowed();

// Calls `step` (which returns true when the wait is over) until it returns
// true, `budget` has passed or a yield between calls was preempted.
// Returns the last result of `step`.
template <class Step>
bool spin_until(Step&& step, std::chrono::microseconds budget) {
  using clock = std::chrono::steady_clock;
  if (!spin_allowed()) return step();
  const auto until = clock::now() + budget;
  for (;;) {
    if (step()) return true;
    const auto before = clock::now();
    if (before >= until) return false;
    std::this_thread::yield();
    if (clock::now() - before > kSpinPreempted) return step();
  }
}

}  // namespace genie
