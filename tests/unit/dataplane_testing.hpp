// Helpers for the data plane's tests: a libuv loop on its own thread that
// tears down the way LoopThread does (close hooks first), and where the
// transport plugins of this build are.
#pragma once

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <uv.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/loop_hooks.hpp"

namespace genie::dataplane::testing {

constexpr auto kWait = std::chrono::seconds(10);

// Plugins built with this tree: libgenie_transport_loopback.so in the build
// directory, the test plugins (bad ABI, misnamed, failing) in its
// test-plugins folder.
inline void use_build_plugins() {
  ::setenv("GENIE_TRANSPORT_PATH", GENIE_PLUGIN_DIR ":" GENIE_TEST_PLUGIN_DIR, 1);
}

// n bytes of a reproducible pseudo-random pattern (xorshift from `seed`).
inline std::vector<uint8_t> pattern(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[i] = static_cast<uint8_t>(x);
  }
  return v;
}

// The dpdk plugin's EAL on an in-process net_ring port (its transmit ring
// is its receive ring), unless GENIE_DPDK_EAL already says otherwise.
inline void use_dpdk_ring() {
  int cpu = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    while (cpu < CPU_SETSIZE - 1 && !CPU_ISSET(cpu, &set)) ++cpu;
  const std::string eal =
      "-l " + std::to_string(cpu) +
      " --no-huge -m 256 --no-shconf --no-pci --no-telemetry --log-level=*:warning --vdev=net_ring0";
  ::setenv("GENIE_DPDK_EAL", eal.c_str(), 0);
}

class TestLoop {
 public:
  TestLoop() {
    // A peer that resets makes writev raise SIGPIPE (LoopThread blocks it).
    ::signal(SIGPIPE, SIG_IGN);
    uv_loop_init(&loop_);
    uv_async_init(&loop_, &async_, [](uv_async_t* a) { static_cast<TestLoop*>(a->data)->drain(); });
    async_.data = this;
    thread_ = std::thread([this] { uv_run(&loop_, UV_RUN_DEFAULT); });
  }

  // Closes what is still open through its close hooks (with
  // GENIE_ERR_SHUTDOWN), runs the loop until every handle is gone.
  ~TestLoop() {
    post([this] {
      run_close_hooks(&loop_);
      uv_close(reinterpret_cast<uv_handle_t*>(&async_), nullptr);
    });
    thread_.join();
    clear_close_hooks(&loop_);
    EXPECT_EQ(uv_loop_close(&loop_), 0) << "a handle outlived its close";
  }

  uv_loop_t* loop() { return &loop_; }

  void post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      tasks_.push_back(std::move(fn));
    }
    uv_async_send(&async_);
  }

  // Runs f on the loop thread and returns its result (rethrows).
  template <class F>
  auto run(F f) -> decltype(f()) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto fut = task.get_future();
    post([&task] { task(); });
    if (fut.wait_for(kWait) != std::future_status::ready) {
      std::fprintf(stderr, "FATAL: a task posted to the loop did not run within 10 s\n");
      std::abort();
    }
    return fut.get();
  }

 private:
  void drain() {
    std::deque<std::function<void()>> tasks;
    {
      std::lock_guard<std::mutex> lk(mu_);
      tasks.swap(tasks_);
    }
    for (auto& t : tasks) t();
  }

  uv_loop_t loop_{};
  uv_async_t async_{};
  std::mutex mu_;
  std::deque<std::function<void()>> tasks_;
  std::thread thread_;
};

}  // namespace genie::dataplane::testing
