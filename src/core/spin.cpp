#include "core/spin.hpp"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

namespace genie {
namespace {

constexpr auto kSampleEvery = std::chrono::milliseconds(5);

int usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return CPU_COUNT(&set);
}

// The runnable-thread count: the numerator of /proc/loadavg's fourth field
// ("running/total"); -1 if it cannot be read.
int runnable_threads() {
  const int fd = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[128];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  double l1, l5, l15;
  int running = -1, total;
  if (std::sscanf(buf, "%lf %lf %lf %d/%d", &l1, &l5, &l15, &running, &total) != 5) return -1;
  return running;
}

// -1: sample the load; 0 or 1: override_spin_allowed's answer.
std::atomic<int> g_override{-1};

}  // namespace

bool spin_preempted(std::chrono::steady_clock::duration took) {
  return took > kSpinPreempted && g_override.load(std::memory_order_relaxed) != 1;
}

void override_spin_allowed(std::optional<bool> allowed) {
  g_override.store(allowed ? int{*allowed} : -1, std::memory_order_relaxed);
}

bool spin_room(int cpus, int running) { return running >= 0 && running <= cpus + 2; }

bool spin_allowed() {
  if (const int o = g_override.load(std::memory_order_relaxed); o >= 0) return o == 1;
  static const int cpus = usable_cpus();
  static std::atomic<int64_t> next_sample_ns{0};
  static std::atomic<bool> allowed{false};
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  int64_t due = next_sample_ns.load(std::memory_order_relaxed);
  if (now >= due &&
      next_sample_ns.compare_exchange_strong(
          due, now + std::chrono::duration_cast<std::chrono::nanoseconds>(kSampleEvery).count())) {
    allowed.store(spin_room(cpus, runnable_threads()), std::memory_order_relaxed);
  }
  return allowed.load(std::memory_order_relaxed);
}

}  // namespace genie
