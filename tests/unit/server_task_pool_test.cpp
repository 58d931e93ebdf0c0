// The server's task pool (server/task_pool.hpp): tasks of different keys
// run at once, up to the pool's size, however fast they are posted.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "server/task_pool.hpp"

namespace genie {
namespace {

// Tasks that block until released: as many as the pool has threads, posted
// back to back under different keys after a thread has gone idle, each
// start (a thread notified but not yet awake counted as free for every one
// of them before: the tasks past the first waited, the pool under its size,
// behind a task that blocks; on a server, a tensor call waited so behind
// stages stalled on a worker).
TEST(TaskPool, TasksOfDifferentKeysPostedBackToBackAllStart) {
  constexpr int kThreads = 8;
  TaskPool pool(kThreads);
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  int started = 0;
  for (int round = 0; round < 20; ++round) {
    // One thread idle.
    std::atomic<bool> warm{false};
    ASSERT_TRUE(pool.post(1000 + round, [&] { warm = true; }));
    while (!warm) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    {
      std::lock_guard<std::mutex> lk(mu);
      started = 0;
      release = false;
    }
    for (int k = 0; k < kThreads; ++k)
      ASSERT_TRUE(pool.post(static_cast<uint64_t>(k), [&] {
        std::unique_lock<std::mutex> lk(mu);
        ++started;
        cv.notify_all();
        cv.wait(lk, [&] { return release; });
      }));
    std::unique_lock<std::mutex> lk(mu);
    const bool all = cv.wait_for(lk, std::chrono::seconds(10), [&] { return started == kThreads; });
    const int seen = started;
    release = true;
    cv.notify_all();
    lk.unlock();
    ASSERT_TRUE(all) << "round " << round << ": " << seen << " of " << kThreads
                     << " tasks of different keys started on a pool of " << kThreads << " threads";
    // Every task of the round done before the next.
    std::atomic<bool> drained{false};
    for (int k = 0; k < kThreads; ++k) ASSERT_TRUE(pool.post(static_cast<uint64_t>(k), [] {}));
    ASSERT_TRUE(pool.post(0, [&] { drained = true; }));
    while (!drained) std::this_thread::yield();
  }
  EXPECT_LE(pool.threads(), static_cast<size_t>(kThreads));
}

// Tasks of one key run one at a time, in order.
TEST(TaskPool, TasksOfOneKeyRunInOrder) {
  TaskPool pool(4);
  std::mutex mu;
  std::vector<int> order;
  for (int i = 0; i < 100; ++i)
    ASSERT_TRUE(pool.post(7, [&, i] {
      std::lock_guard<std::mutex> lk(mu);
      order.push_back(i);
    }));
  pool.stop();
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
  EXPECT_FALSE(pool.post(7, [] {})) << "a stopped pool takes tasks";
}

}  // namespace
}  // namespace genie
