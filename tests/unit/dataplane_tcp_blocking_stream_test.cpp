// Framed I/O driven by the calling thread (dataplane/tcp/blocking_stream):
// frames across a socket pair, read-ahead keeping the next frame's bytes,
// what breaks an exchange (bad CRC, refused type, timeout, close), the
// byte counters, and a bounded connect.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/metrics.hpp"
#include "dataplane/tcp/blocking_stream.hpp"

using namespace genie;
using namespace genie::dataplane;
using namespace genie::dataplane::tcp;

namespace {

// Two ends of a non-blocking stream socket, each with its receive buffer.
struct Pair {
  int fd[2] = {-1, -1};
  std::string plain[2];
  size_t taken[2] = {0, 0};
  Pair() { EXPECT_EQ(0, ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fd)); }
  ~Pair() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
  BlockingStream end(int i, std::chrono::milliseconds budget = std::chrono::seconds(5)) {
    return BlockingStream{fd[i], nullptr, &plain[i], &taken[i], Deadline::after(budget)};
  }
};

FrameHeader header(uint16_t type, uint64_t rid) {
  FrameHeader h;
  h.type = type;
  h.request_id = rid;
  return h;
}

Broke broken_by(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const StreamBroken& b) {
    return b.why;
  }
  ADD_FAILURE() << "the exchange did not break";
  return Broke::Closed;
}

uint64_t tcp_bytes(const char* dir) {
  return metrics::counter(metrics::Id::TransportBytes, {"tcp", dir}).value();
}

}  // namespace

TEST(BlockingStream, FramesAndPayloadsArriveWhole) {
  Pair p;
  const uint64_t sent0 = tcp_bytes("sent"), received0 = tcp_bytes("received");
  std::vector<char> payload(256 << 10);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 7);
  // Larger than the socket pair holds: the writer waits for the reader.
  std::thread writer([&] {
    BlockingStream a = p.end(0);
    send_frame(a, header(3, 11), "small", 5, nullptr, 0);
    send_frame(a, header(4, 12), "with payload", 12, payload.data(), payload.size());
  });
  BlockingStream b = p.end(1);
  std::string msg;
  FrameHeader h = read_frame(b, kDefaultMaxMessage, {}, &msg, true);
  EXPECT_EQ(3, h.type);
  EXPECT_EQ(11u, h.request_id);
  EXPECT_EQ("small", msg);
  EXPECT_EQ(0u, h.payload_len);
  h = read_frame(b, kDefaultMaxMessage, {}, &msg, false);
  EXPECT_EQ(4, h.type);
  EXPECT_EQ("with payload", msg);
  ASSERT_EQ(payload.size(), h.payload_len);
  std::vector<char> got(payload.size());
  recv_all(b, got.data(), got.size(), false);
  writer.join();
  EXPECT_EQ(payload, got);
  EXPECT_EQ(p.taken[1], p.plain[1].size());  // nothing left over
  const uint64_t bytes = 2 * kFrameHeaderSize + 5 + 12 + payload.size();
  EXPECT_EQ(bytes, tcp_bytes("sent") - sent0);
  EXPECT_EQ(bytes, tcp_bytes("received") - received0);
}

TEST(BlockingStream, ReadAheadKeepsTheNextFrame) {
  Pair p;
  BlockingStream a = p.end(0);
  send_frame(a, header(1, 1), "one", 3, nullptr, 0);
  send_frame(a, header(1, 2), "two", 3, nullptr, 0);
  BlockingStream b = p.end(1);
  std::string msg;
  EXPECT_EQ(1u, read_frame(b, kDefaultMaxMessage, {}, &msg, false).request_id);
  // Both frames came in one recv: the second waits in the buffer.
  EXPECT_GT(p.plain[1].size(), p.taken[1]);
  EXPECT_EQ(2u, read_frame(b, kDefaultMaxMessage, {}, &msg, false).request_id);
  EXPECT_EQ("two", msg);
}

TEST(BlockingStream, BadFramesBreakTheExchange) {
  Pair p;
  std::string msg;
  BlockingStream a = p.end(0), b = p.end(1);
  // A corrupted message: the CRC no longer matches.
  uint8_t hdr[kFrameHeaderSize];
  encode_frame_header(header(1, 1), "abc", 3, hdr);
  std::string bytes(reinterpret_cast<char*>(hdr), sizeof hdr);
  bytes += "abd";
  iovec one{bytes.data(), bytes.size()};
  send_all(a, &one, 1);
  EXPECT_EQ(Broke::Protocol, broken_by([&] { read_frame(b, kDefaultMaxMessage, {}, &msg, false); }));

  // A type the owner does not accept, refused from its header.
  Pair q;
  BlockingStream c = q.end(0), d = q.end(1);
  send_frame(c, header(9, 1), "x", 1, nullptr, 0);
  const FrameTypes only_one{[](uint16_t t) { return t == 1; }, nullptr};
  EXPECT_EQ(Broke::Protocol, broken_by([&] { read_frame(d, kDefaultMaxMessage, only_one, &msg, false); }));

  // A message over the limit.
  Pair r;
  BlockingStream e = r.end(0), f = r.end(1);
  send_frame(e, header(1, 1), "0123456789", 10, nullptr, 0);
  EXPECT_EQ(Broke::Protocol, broken_by([&] { read_frame(f, 4, {}, &msg, false); }));
}

TEST(BlockingStream, SilenceTimesOutAndACloseIsSeen) {
  Pair p;
  std::string msg;
  BlockingStream b = p.end(1, std::chrono::milliseconds(20));
  EXPECT_EQ(Broke::Timeout, broken_by([&] { read_frame(b, kDefaultMaxMessage, {}, &msg, true); }));
  // Half a header, then the peer goes.
  const char half[10] = {};
  ASSERT_EQ(10, ::send(p.fd[0], half, sizeof half, 0));
  ::close(p.fd[0]);
  p.fd[0] = -1;
  BlockingStream c = p.end(1);
  EXPECT_EQ(Broke::Closed, broken_by([&] { read_frame(c, kDefaultMaxMessage, {}, &msg, false); }));
  EXPECT_TRUE(!idle_ok(p.fd[1]));
}

TEST(BlockingStream, ConnectIsBoundedAndSaysWhy) {
  const int l = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(0, ::bind(l, reinterpret_cast<sockaddr*>(&a), len));
  ASSERT_EQ(0, ::listen(l, 1));
  ASSERT_EQ(0, ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len));
  const std::string address = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  const auto deadline = StreamClock::now() + std::chrono::seconds(5);
  const int fd = connect_blocking(address, 1 << 20, deadline);
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(idle_ok(fd));
  ::close(fd);
  ::close(l);  // nothing listens there now
  try {
    ::close(connect_blocking(address, 1 << 20, deadline));
    ADD_FAILURE() << "connected to a closed port";
  } catch (const Error& e) {
    EXPECT_EQ(GENIE_ERR_CONNECTION, e.code());
    EXPECT_NE(std::string::npos, e.detail().find(address)) << e.detail();
  }
}
