// The replay's data plane (tools/replay/fabric.hpp): only a channel that
// presents the run's token counts as a rank, and one that does not may come
// and go without harm to the run.
#include "fabric.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "control/loop_thread.hpp"
#include "core/error.hpp"
#include "dataplane/registry.hpp"

namespace genie::replay {
namespace {

using namespace std::chrono_literals;

constexpr uint16_t kHelloType = 1;  // the Fabric's first frame: request_id is the sender's rank

// A channel to `address` that says Hello as `rank` with `token`; returns
// once the Fabric on the other end has closed it (or after 5 s: false).
bool stranger_hello(const std::string& address, int rank, const std::string& token) {
  LoopThread loop;
  auto transport = dataplane::find_transport("tcp");
  std::shared_ptr<dataplane::Channel> ch;
  std::promise<void> closed;
  loop.post([&] {
    dataplane::ChannelHandlers h;
    h.on_frame = [](const dataplane::FrameHeader&, std::string&&) { return dataplane::PayloadSink{}; };
    h.on_close = [&closed](genie_status_t, const std::string&) { closed.set_value(); };
    ch = transport->connect(loop.loop(), address, dataplane::ChannelOptions{}, std::move(h),
                            [&](genie_status_t st, const std::string&) {
                              if (st == GENIE_OK) ch->send(kHelloType, static_cast<uint64_t>(rank), 0, token);
                            });
  });
  const bool ok = closed.get_future().wait_for(5s) == std::future_status::ready;
  loop.stop([&] {
    if (ch) ch->close();
  });
  return ok;
}

TEST(ReplayFabric, AChannelWithoutTheRunsTokenNeverTakesARanksPlace) {
  Fabric a("tcp", 0, 2, "127.0.0.1", 5000ms, "run-secret");
  Fabric b("tcp", 1, 2, "127.0.0.1", 5000ms, "run-secret");
  // A stranger claims to be rank 1 with a guess, then one with no token:
  // rank 0 closes both, and neither takes rank 1's place nor stops the run.
  EXPECT_TRUE(stranger_hello(a.address(), 1, "guess"));
  EXPECT_TRUE(stranger_hello(a.address(), 1, ""));
  const std::vector<std::string> addrs{a.address(), b.address()};
  std::thread tb([&] { b.connect_all(addrs); });
  ASSERT_NO_THROW(a.connect_all(addrs));
  tb.join();
  // The real rank 1's bytes arrive.
  uint32_t sent = 0x5eed, got = 0;
  auto r = a.irecv(1, 7, &got, sizeof got);
  auto s = b.isend(0, 7, &sent, sizeof sent);
  ASSERT_NO_THROW(b.wait(s, [] { return std::string("the send"); }));
  ASSERT_NO_THROW(a.wait(r, [] { return std::string("the receive"); }));
  EXPECT_EQ(got, sent);
}

// Connections to `address` that never say anything; returns how many of
// them the other end has closed within `wait`.
int silent_closed(const std::string& address, int n, std::chrono::milliseconds wait) {
  const size_t colon = address.rfind(':');
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  inet_pton(AF_INET, address.substr(0, colon).c_str(), &a.sin_addr);
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0)
      fds.push_back(fd);
    else if (fd >= 0)
      ::close(fd);
  }
  std::this_thread::sleep_for(wait);
  int closed = 0;
  for (int fd : fds) {
    pollfd p{fd, POLLIN, 0};
    char c;
    if (::poll(&p, 1, 0) == 1 && ::recv(fd, &c, 1, MSG_DONTWAIT) <= 0) ++closed;
    ::close(fd);
  }
  return closed;
}

TEST(ReplayFabric, SilentConnectionsAreBounded) {
  // 100 connections that never say Hello: past the 64 a rank keeps, each
  // is closed as it arrives; the run's real ranks still join.
  Fabric a("tcp", 0, 2, "127.0.0.1", 5000ms, "run-secret");
  Fabric b("tcp", 1, 2, "127.0.0.1", 5000ms, "run-secret");
  EXPECT_GE(silent_closed(a.address(), 100, 500ms), 100 - 64);
  const std::vector<std::string> addrs{a.address(), b.address()};
  std::thread tb([&] { b.connect_all(addrs); });
  ASSERT_NO_THROW(a.connect_all(addrs));
  tb.join();
}

TEST(ReplayFabric, AChannelWithoutAHelloIsClosedAfterTenSeconds) {
  // A silent connection is kept until the next one arrives more than 10 s
  // after it; then it is closed.
  Fabric a("tcp", 0, 2, "127.0.0.1", 5000ms, "run-secret");
  const std::string addr = a.address();
  const size_t colon = addr.rfind(':');
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(std::stoi(addr.substr(colon + 1))));
  inet_pton(AF_INET, addr.substr(0, colon).c_str(), &sa.sin_addr);
  const int early = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(::connect(early, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  auto closed = [](int fd) {
    pollfd p{fd, POLLIN, 0};
    char c;
    return ::poll(&p, 1, 0) == 1 && ::recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
  };
  std::this_thread::sleep_for(1s);
  EXPECT_FALSE(closed(early)) << "closed before its 10 s";
  std::this_thread::sleep_for(9500ms);
  EXPECT_EQ(silent_closed(addr, 1, 300ms), 0);  // the next arrival, kept
  EXPECT_TRUE(closed(early)) << "still open after 10 s without a Hello";
  ::close(early);
}

TEST(ReplayFabric, RanksOfAnotherRunAreStrangers) {
  // Two ranks whose tokens differ: each refuses the other's channel, so
  // neither run goes on with a rank of the other; both fail, neither hangs.
  Fabric a("tcp", 0, 2, "127.0.0.1", 1500ms, "this-run");
  Fabric other("tcp", 1, 2, "127.0.0.1", 1500ms, "another-run");
  const std::vector<std::string> addrs{a.address(), other.address()};
  auto joined = [&](Fabric& f) {
    try {
      f.connect_all(addrs);
      return true;
    } catch (const Error& e) {
      EXPECT_TRUE(e.code() == GENIE_ERR_CONNECTION || e.code() == GENIE_ERR_TIMEOUT) << e.detail();
      return false;
    }
  };
  auto other_joined = std::async(std::launch::async, [&] { return joined(other); });
  EXPECT_FALSE(joined(a)) << "rank 0 took a rank of another run";
  EXPECT_FALSE(other_joined.get()) << "rank 1 took a rank of another run";
}

}  // namespace
}  // namespace genie::replay
