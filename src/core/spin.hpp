// Brief busy-waiting before a thread goes to sleep.
//
// On the virtual machines Genie runs on, waking a thread that sleeps on
// another vCPU (futex, epoll) costs tens of microseconds, several times a
// loopback round trip; one synchronous remote call used to pass four such
// wake-ups. A thread that expects its answer within microseconds (a caller
// waiting for a reply, an event loop right after it sent one) therefore
// polls for a short, bounded while first, yielding the CPU between checks
// so that a thread it waits for can run on the same core. The bound keeps
// the cost of a wait that does not pay off small. An event loop counts its
// bound from the last request it received (spin_while), not from the
// first: requests that follow each other a few tens of microseconds apart
// then never wait for a wake-up, where a fixed bound made every few of them
// pay one.
//
// Spinning pays only while the CPUs have room: a thread that never sleeps
// loses the scheduler's preference for threads that wake up, so on an
// oversubscribed machine each step of a round trip would wait for a whole
// time slice (milliseconds). So there is no spinning while the machine has
// more runnable threads than CPUs plus a round trip's own (spin_allowed),
// and a yield that took long (another thread wanted the CPU) ends the spin
// there: the thread sleeps as it would without it. A process pinned to one
// CPU spins too: the peer it waits for is another process (a server pinned
// to a core of its own: a round trip took 54 us instead of 10 without it),
// or a thread of its own, which the yields let run.
#pragma once

#include <chrono>
#include <optional>
#include <thread>

namespace genie {

// How long a caller waiting for a server's reply, or an event loop after
// it last handled events, polls before it sleeps. Above a loopback round trip
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
// The rule spin_allowed applies to `cpus` usable CPUs and `running`
// runnable threads (-1: unknown).
bool spin_room(int cpus, int running);

// Whether a yield that took `took` ran another thread in between (took
// longer than kSpinPreempted).
bool spin_preempted(std::chrono::steady_clock::duration took);

// Tests only: makes spin_allowed() answer `allowed` from now on, whatever
// the machine's load, and with true no yield counts as preempted: a spin
// then behaves as on an idle machine, so what it does can be checked on a
// busy test machine too. std::nullopt goes back to the machine's load.
void override_spin_allowed(std::optional<bool> allowed);

// Tests only: override_spin_allowed(room) for the scope's lifetime.
class SpinRoomForTests {
 public:
  explicit SpinRoomForTests(bool room) { override_spin_allowed(room); }
  ~SpinRoomForTests() { override_spin_allowed(std::nullopt); }
  SpinRoomForTests(const SpinRoomForTests&) = delete;
  SpinRoomForTests& operator=(const SpinRoomForTests&) = delete;
};

// What one step of a spin found.
enum class SpinStep {
  Idle,  // nothing to do yet
  Busy,  // did some work: more may follow soon
  Done,  // the wait is over
};

// Calls `step` until it returns Done, `idle` has passed since the start or
// since its last Busy, a yield between steps was preempted, or the machine
// has no more room for spinning. Returns whether the last step returned
// Done.
template <class Step>
bool spin_while(Step&& step, std::chrono::microseconds idle) {
  using clock = std::chrono::steady_clock;
  if (!spin_allowed()) return step() == SpinStep::Done;
  auto until = clock::now() + idle;
  for (;;) {
    const SpinStep s = step();
    if (s == SpinStep::Done) return true;
    const auto before = clock::now();
    if (s == SpinStep::Busy) {
      // More work is likely soon (the next request after a reply):
      // sleeping now would add a wake-up to it. The machine may have filled
      // up meanwhile.
      until = before + idle;
      if (!spin_allowed()) return false;
    } else if (before >= until) {
      return false;
    }
    std::this_thread::yield();
    if (spin_preempted(clock::now() - before)) return step() == SpinStep::Done;
  }
}

// Calls `step` (which returns true when the wait is over) until it returns
// true, `budget` has passed or a yield between calls was preempted.
// Returns the last result of `step`.
template <class Step>
bool spin_until(Step&& step, std::chrono::microseconds budget) {
  return spin_while([&] { return step() ? SpinStep::Done : SpinStep::Idle; }, budget);
}

}  // namespace genie
