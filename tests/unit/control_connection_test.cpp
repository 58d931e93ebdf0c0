// LoopThread and the TCP transport's framed connection (speaking control's
// message types) over real TCP on 127.0.0.1: frames of many sizes with
// payloads landing in caller buffers, pipelining, every way a connection
// ends, hostile peers on raw sockets, and loop shutdown.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "control/loop_thread.hpp"
#include "control/wire.hpp"
#include "core/error.hpp"
#include "core/spin.hpp"
#include "dataplane/loop_hooks.hpp"
#include "dataplane/tcp/connection.hpp"
#include "dataplane/tcp/socket_buffers.hpp"

// ---------------------------------------------------------------------------
// Global allocation watch: the largest single operator new request since the
// last reset, to prove an oversize frame is refused before anything is
// allocated for it. (Replacing every non-aligned form keeps new/delete
// pairs consistent for AddressSanitizer.)
// ---------------------------------------------------------------------------
namespace {
std::atomic<size_t> g_largest_alloc{0};
void note_alloc(size_t n) {
  size_t cur = g_largest_alloc.load(std::memory_order_relaxed);
  while (n > cur && !g_largest_alloc.compare_exchange_weak(cur, n, std::memory_order_relaxed)) {
  }
}
}  // namespace

void* operator new(size_t n) {
  note_alloc(n);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) { return operator new(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  note_alloc(n);
  return std::malloc(n == 0 ? 1 : n);
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  note_alloc(n);
  return std::malloc(n == 0 ? 1 : n);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace genie {
namespace {

using namespace std::chrono_literals;
using dataplane::PayloadSink;
using wire::FrameHeader;
using wire::MsgType;

// The TCP transport's connection with control's message types and headers:
// a frame of a type control does not know closes it from its header.
class Connection : public dataplane::tcp::Connection {
 public:
  struct Handlers {
    std::function<PayloadSink(const FrameHeader&, std::string&& msg)> on_frame;
    std::function<void(genie_status_t status, const std::string& detail)> on_close;
  };

  static std::shared_ptr<Connection> create(uv_loop_t* loop, uint32_t max_message, Handlers handlers) {
    dataplane::ChannelHandlers h;
    h.types = wire::frame_types();
    if (handlers.on_frame)
      h.on_frame = [f = std::move(handlers.on_frame)](const dataplane::FrameHeader& fh, std::string&& msg) {
        return f(wire::from_frame(fh), std::move(msg));
      };
    h.on_close = std::move(handlers.on_close);
    std::shared_ptr<Connection> c(new Connection(loop, max_message, std::move(h)));
    c->init();
    return c;
  }

  void send(MsgType type, uint64_t request_id, uint32_t flags, std::string msg, const void* payload = nullptr,
            uint64_t payload_len = 0, std::shared_ptr<void> keep = nullptr,
            std::function<void(genie_status_t)> done = nullptr) {
    dataplane::tcp::Connection::send(static_cast<uint16_t>(type), request_id, flags, std::move(msg), payload,
                                     payload_len, std::move(keep), std::move(done));
  }

 private:
  using dataplane::tcp::Connection::Connection;
};

constexpr auto kWait = 10s;

// Runs f on the loop thread and returns its result.
template <class F>
auto on_loop(LoopThread& lt, F f) -> decltype(f()) {
  std::packaged_task<decltype(f())()> task(std::move(f));
  auto fut = task.get_future();
  EXPECT_TRUE(lt.post([&task] { task(); }));
  if (fut.wait_for(kWait) != std::future_status::ready) {
    // The task still refers to this frame: nothing to do but stop here.
    std::fprintf(stderr, "FATAL: a task posted to the loop did not run within %llds\n",
                 static_cast<long long>(kWait.count()));
    std::abort();
  }
  return fut.get();
}

// Pseudo-random bytes (xorshift64), distinct per seed, so that a byte landing
// at the wrong offset or in the wrong buffer shows.
std::shared_ptr<std::vector<uint8_t>> pattern(size_t n, uint64_t seed) {
  auto v = std::make_shared<std::vector<uint8_t>>(n);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(v->data() + i, &x, 8);
  }
  for (; i < n; ++i) (*v)[i] = static_cast<uint8_t>(x >> (8 * (i % 8)) ^ i);
  return v;
}

// One side of a connection: records what arrives (thread-safe) and, on the
// loop thread, receives payloads into buffers of its own and optionally
// echoes every frame back, payload included.
struct Peer : std::enable_shared_from_this<Peer> {
  struct Got {
    FrameHeader h;
    std::string msg;
    std::shared_ptr<std::vector<uint8_t>> payload;  // set when it completed
  };

  // Policy, set before the connection exists.
  bool echo = false;
  bool refuse_payloads = false;
  // Called on the loop thread after the echo of a frame without payload
  // was sent, before the handler returns.
  std::function<void(const FrameHeader&)> after_echo;
  MsgType throw_on = static_cast<MsgType>(0);

  std::weak_ptr<Connection> conn;  // loop thread only

  mutable std::mutex mu;
  std::condition_variable cv;
  std::vector<Got> frames;
  int closes = 0;
  genie_status_t close_status = 1;
  std::string close_detail;
  bool frame_after_close = false;

  Connection::Handlers handlers() {
    auto self = shared_from_this();
    Connection::Handlers h;
    h.on_frame = [self](const FrameHeader& fh, std::string&& msg) {
      return self->on_frame(fh, std::move(msg));
    };
    h.on_close = [self](genie_status_t st, const std::string& d) {
      std::lock_guard<std::mutex> lk(self->mu);
      ++self->closes;
      self->close_status = st;
      self->close_detail = d;
      self->cv.notify_all();
    };
    return h;
  }

  PayloadSink on_frame(const FrameHeader& fh, std::string&& msg) {
    if (fh.type == throw_on) fail(GENIE_ERR_NOT_FOUND, "handler refused ", wire::type_name(fh.type));
    size_t idx;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (closes > 0) frame_after_close = true;
      frames.push_back({fh, msg, nullptr});
      idx = frames.size() - 1;
      cv.notify_all();
    }
    if (fh.payload_len == 0) {
      if (echo) conn.lock()->send(fh.type, fh.request_id, fh.flags, msg);
      if (echo && after_echo) after_echo(fh);
      return {};
    }
    if (refuse_payloads) return {};
    auto buf = std::make_shared<std::vector<uint8_t>>(fh.payload_len);
    PayloadSink s;
    s.dst = buf->data();
    s.keep = buf;
    s.done = [self = shared_from_this(), idx, buf, fh, msg = std::move(msg)] {
      {
        std::lock_guard<std::mutex> lk(self->mu);
        self->frames[idx].payload = buf;
        self->cv.notify_all();
      }
      if (self->echo)
        self->conn.lock()->send(fh.type, fh.request_id, fh.flags, msg, buf->data(), buf->size(), buf);
    };
    return s;
  }

  template <class Pred>
  bool wait(Pred pred, std::chrono::milliseconds limit = kWait) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, limit, [&] { return pred(); });
  }
  bool wait_closed() {
    return wait([&] { return closes > 0; });
  }
  bool wait_frames(size_t n) {
    return wait([&] { return frames.size() >= n; });
  }
  bool wait_payloads(size_t n) {
    return wait([&] {
      size_t done = 0;
      for (const auto& g : frames) done += g.payload ? 1 : 0;
      return done >= n;
    });
  }
};

class ControlConnection : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = on_loop(lt_, [this] {
      EXPECT_EQ(0, uv_tcp_init(lt_.loop(), &listener_));
      listener_.data = this;
      sockaddr_in addr{};
      uv_ip4_addr("127.0.0.1", 0, &addr);
      EXPECT_EQ(0, uv_tcp_bind(&listener_, reinterpret_cast<const sockaddr*>(&addr), 0));
      EXPECT_EQ(0, uv_listen(reinterpret_cast<uv_stream_t*>(&listener_), 64, on_connection));
      sockaddr_in bound{};
      int len = sizeof bound;
      uv_tcp_getsockname(&listener_, reinterpret_cast<sockaddr*>(&bound), &len);
      return static_cast<int>(ntohs(bound.sin_port));
    });
    ASSERT_GT(port_, 0);
  }

  void TearDown() override {
    // Server connections still open are closed by LoopThread's close hooks.
    lt_.stop([this] { uv_close(reinterpret_cast<uv_handle_t*>(&listener_), nullptr); });
  }

  static void on_connection(uv_stream_t* server, int status) {
    auto* self = static_cast<ControlConnection*>(server->data);
    ASSERT_EQ(status, 0);
    std::shared_ptr<Peer> peer;
    {
      std::lock_guard<std::mutex> lk(self->mu_);
      peer = self->next_server_peer_ ? std::move(self->next_server_peer_) : std::make_shared<Peer>();
      self->next_server_peer_ = nullptr;
    }
    peer->echo = peer->echo || self->server_echo_;
    auto conn = Connection::create(server->loop, self->server_max_, peer->handlers());
    peer->conn = conn;
    conn->set_buffer_sizes(4 << 20);
    const int rc = conn->accept_from(server);
    EXPECT_EQ(rc, 0) << uv_strerror(rc);
    if (rc != 0) conn->close(GENIE_ERR_CONNECTION, "accept failed");
    std::lock_guard<std::mutex> lk(self->mu_);
    self->server_peers_.push_back(peer);
    self->server_conns_.push_back(conn);
    self->cv_.notify_all();
  }

  // The n-th accepted connection's peer (waits for it).
  std::shared_ptr<Peer> server_peer(size_t n) {
    std::unique_lock<std::mutex> lk(mu_);
    if (!cv_.wait_for(lk, kWait, [&] { return server_peers_.size() > n; })) return nullptr;
    return server_peers_[n];
  }

  struct Connected {
    std::shared_ptr<Connection> conn;
    std::shared_ptr<Peer> peer;
  };

  Connected connect_client(std::shared_ptr<Peer> peer = nullptr, const std::string& host = "127.0.0.1",
                           uint32_t max_message = wire::kDefaultMaxMessage) {
    if (!peer) peer = std::make_shared<Peer>();
    std::promise<std::pair<genie_status_t, std::string>> result;
    auto conn = on_loop(lt_, [&] {
      auto c = Connection::create(lt_.loop(), max_message, peer->handlers());
      peer->conn = c;
      c->set_nodelay(true);
      c->set_buffer_sizes(4 << 20);
      c->connect(host, port_, [&result](genie_status_t st, const std::string& d) {
        result.set_value({st, d});
      });
      return c;
    });
    auto r = result.get_future().get();
    EXPECT_EQ(r.first, GENIE_OK) << r.second;
    return {conn, peer};
  }

  // A blocking POSIX socket connected to the listener, for hostile bytes.
  int raw_connect() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(0, ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr)) << std::strerror(errno);
    timeval tv{10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
  }

  static void raw_send(int fd, const std::string& bytes) {
    ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }

  // True once the server closed the raw socket (EOF or reset).
  static bool raw_sees_close(int fd) {
    char buf[256];
    for (;;) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
  }

  LoopThread lt_;
  uv_tcp_t listener_{};
  int port_ = 0;
  uint32_t server_max_ = wire::kDefaultMaxMessage;
  bool server_echo_ = false;

  std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<Peer> next_server_peer_;
  std::vector<std::shared_ptr<Peer>> server_peers_;
  std::vector<std::shared_ptr<Connection>> server_conns_;
};

// ---------------------------------------------------------------------------
// Exchanging frames
// ---------------------------------------------------------------------------

TEST_F(ControlConnection, FramesOfManySizesLandInCallerBuffersBothWays) {
  server_echo_ = true;
  auto client = connect_client();
  EXPECT_EQ(on_loop(lt_, [&] { return client.conn->peer(); }), "127.0.0.1:" + std::to_string(port_));

  struct Sent {
    std::string msg;
    std::shared_ptr<std::vector<uint8_t>> payload;
  };
  std::vector<Sent> sent;
  const size_t msg_sizes[] = {0, 1, 1000, 70000};
  const size_t payload_sizes[] = {0, 1, 4097, size_t{1} << 20};
  uint32_t seed = 1;
  for (size_t m : msg_sizes) {
    for (size_t p : payload_sizes) {
      auto msg_bytes = pattern(m, seed++);
      sent.push_back({std::string(msg_bytes->begin(), msg_bytes->end()), pattern(p, seed++)});
    }
  }
  sent.push_back({"big", pattern(size_t{64} << 20, seed++)});

  std::vector<genie_status_t> dones(sent.size(), 1);
  on_loop(lt_, [&] {
    for (size_t i = 0; i < sent.size(); ++i) {
      auto& s = sent[i];
      client.conn->send(MsgType::TensorWrite, 100 + i, 0, s.msg, s.payload->data(), s.payload->size(),
                        s.payload, [&dones, i](genie_status_t st) { dones[i] = st; });
    }
    return 0;
  });

  auto server = server_peer(0);
  ASSERT_TRUE(server);
  size_t with_payload = 0;
  for (const auto& s : sent) with_payload += s.payload->empty() ? 0 : 1;
  ASSERT_TRUE(server->wait_payloads(with_payload));
  ASSERT_TRUE(client.peer->wait_frames(sent.size()));
  ASSERT_TRUE(client.peer->wait_payloads(with_payload));

  for (auto* side : {server.get(), client.peer.get()}) {
    std::lock_guard<std::mutex> lk(side->mu);
    ASSERT_EQ(side->frames.size(), sent.size());
    for (size_t i = 0; i < sent.size(); ++i) {
      const auto& g = side->frames[i];
      EXPECT_EQ(g.h.type, MsgType::TensorWrite);
      EXPECT_EQ(g.h.request_id, 100 + i);
      EXPECT_EQ(g.h.payload_len, sent[i].payload->size());
      EXPECT_EQ(g.msg, sent[i].msg) << "frame " << i;
      if (sent[i].payload->empty()) {
        EXPECT_FALSE(g.payload);
      } else {
        ASSERT_TRUE(g.payload) << "frame " << i;
        EXPECT_TRUE(*g.payload == *sent[i].payload) << "payload bytes of frame " << i;
      }
    }
  }
  on_loop(lt_, [&] { return 0; });  // the send callbacks ran before the echoes were read
  for (size_t i = 0; i < dones.size(); ++i) EXPECT_EQ(dones[i], GENIE_OK) << i;
}

// Both ends of a data connection over 127.0.0.1 (set_buffer_sizes(4 MiB)
// on each) end up with the same-host pipe (dataplane/tcp/socket_buffers.hpp),
// found among this process's sockets by the listener's port.
TEST_F(ControlConnection, DataConnectionsOnThisHostGetTheSameHostPipe) {
  const int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  int v = dataplane::tcp::kSameHostBufferBytes;
  ::setsockopt(probe, SOL_SOCKET, SO_RCVBUF, &v, sizeof v);
  socklen_t len = sizeof v;
  ::getsockopt(probe, SOL_SOCKET, SO_RCVBUF, &v, &len);
  const int same_host_rcvbuf = v;
  v = 4 << 20;
  ::setsockopt(probe, SOL_SOCKET, SO_RCVBUF, &v, sizeof v);
  ::getsockopt(probe, SOL_SOCKET, SO_RCVBUF, &v, &len);
  const int asked_rcvbuf = v;
  ::close(probe);
  if (asked_rcvbuf <= same_host_rcvbuf)
    GTEST_SKIP() << "net.core.rmem_max caps socket buffers at " << asked_rcvbuf
                 << " bytes, no more than the same-host pipe: nothing to shrink";

  Connected c = connect_client();
  ASSERT_NE(c.conn, nullptr);
  ASSERT_NE(server_peer(0), nullptr);  // accepted, its buffers set (on_connection)
  int found = 0;
  for (int fd = 0; fd < 1024; ++fd) {
    sockaddr_in local{}, peer{};
    socklen_t l1 = sizeof local, l2 = sizeof peer;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &l1) != 0 || local.sin_family != AF_INET)
      continue;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &l2) != 0) continue;
    if (ntohs(local.sin_port) != port_ && ntohs(peer.sin_port) != port_) continue;
    int rcv = 0;
    len = sizeof rcv;
    ASSERT_EQ(0, ::getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, &len));
    EXPECT_EQ(rcv, same_host_rcvbuf) << "fd " << fd << " ("
                                     << (ntohs(local.sin_port) == port_ ? "server" : "client")
                                     << " end): not the same-host pipe";
    ++found;
  }
  EXPECT_EQ(found, 2) << "the client's and the server's end of the connection";
}

TEST_F(ControlConnection, KeepHoldsThePayloadUntilDone) {
  auto client = connect_client();
  const auto expected = pattern(size_t{8} << 20, 77);
  std::weak_ptr<std::vector<uint8_t>> weak;
  bool alive_in_done = false;
  genie_status_t status = 1;
  on_loop(lt_, [&] {
    // The frame's `keep` is the only owner of its payload once send returns.
    auto buf = std::make_shared<std::vector<uint8_t>>(*expected);
    weak = buf;
    client.conn->send(MsgType::TensorWrite, 1, 0, "keep", buf->data(), buf->size(), buf,
                      [&](genie_status_t st) {
                        status = st;
                        alive_in_done = !weak.expired();
                      });
    return 0;
  });
  auto server = server_peer(0);
  ASSERT_TRUE(server && server->wait_payloads(1));
  on_loop(lt_, [] { return 0; });
  EXPECT_EQ(on_loop(lt_, [&] { return status; }), GENIE_OK);
  EXPECT_TRUE(on_loop(lt_, [&] { return alive_in_done; })) << "the payload was released before done";
  EXPECT_TRUE(weak.expired()) << "the payload was kept after done";
  std::lock_guard<std::mutex> lk(server->mu);
  EXPECT_TRUE(*server->frames[0].payload == *expected);
}

TEST_F(ControlConnection, ThousandPipelinedFramesArriveInOrder) {
  server_echo_ = true;
  auto client = connect_client();
  constexpr int kFrames = 1000;
  std::vector<int> done_order;
  on_loop(lt_, [&] {
    for (int i = 0; i < kFrames; ++i) {
      client.conn->send(MsgType::Ok, i, 0, "frame " + std::to_string(i), nullptr, 0, nullptr,
                        [&done_order, i](genie_status_t st) {
                          EXPECT_EQ(st, GENIE_OK);
                          done_order.push_back(i);
                        });
    }
    return 0;
  });
  auto server = server_peer(0);
  ASSERT_TRUE(server);
  ASSERT_TRUE(server->wait_frames(kFrames));
  ASSERT_TRUE(client.peer->wait_frames(kFrames));
  for (auto* side : {server.get(), client.peer.get()}) {
    std::lock_guard<std::mutex> lk(side->mu);
    for (int i = 0; i < kFrames; ++i) {
      ASSERT_EQ(side->frames[i].h.request_id, static_cast<uint64_t>(i));
      ASSERT_EQ(side->frames[i].msg, "frame " + std::to_string(i));
    }
  }
  const auto order = on_loop(lt_, [&] { return done_order; });
  ASSERT_EQ(order.size(), static_cast<size_t>(kFrames));
  for (int i = 0; i < kFrames; ++i) ASSERT_EQ(order[i], i);
}

TEST_F(ControlConnection, ConnectsByHostName) {
  server_echo_ = true;
  auto client = connect_client(nullptr, "localhost");
  on_loop(lt_, [&] {
    client.conn->send(MsgType::ServerInfoRequest, 7, 0, "");
    return 0;
  });
  ASSERT_TRUE(client.peer->wait_frames(1));
  std::lock_guard<std::mutex> lk(client.peer->mu);
  EXPECT_EQ(client.peer->frames[0].h.type, MsgType::ServerInfoRequest);
  EXPECT_EQ(client.peer->frames[0].h.request_id, 7u);
}

// ---------------------------------------------------------------------------
// How connections end
// ---------------------------------------------------------------------------

TEST_F(ControlConnection, PeerEofClosesExactlyOnceWithConnection) {
  auto client = connect_client();
  auto server = server_peer(0);
  ASSERT_TRUE(server);
  on_loop(lt_, [&] {
    client.conn->close();
    client.conn->close(GENIE_ERR_INTERNAL, "second close is ignored");
    return 0;
  });
  ASSERT_TRUE(server->wait_closed());
  ASSERT_TRUE(client.peer->wait_closed());
  std::this_thread::sleep_for(50ms);  // room for a wrong second call
  on_loop(lt_, [] { return 0; });
  {
    std::lock_guard<std::mutex> lk(server->mu);
    EXPECT_EQ(server->closes, 1);
    EXPECT_EQ(server->close_status, GENIE_ERR_CONNECTION);
    EXPECT_EQ(server->close_detail, "connection closed by peer");
  }
  std::lock_guard<std::mutex> lk(client.peer->mu);
  EXPECT_EQ(client.peer->closes, 1);
  EXPECT_EQ(client.peer->close_status, GENIE_OK);
  EXPECT_TRUE(on_loop(lt_, [&] { return client.conn->closed(); }));
}

TEST_F(ControlConnection, HandlersAreReleasedAfterOnClose) {
  auto client = connect_client();
  std::weak_ptr<Peer> weak = client.peer;
  auto conn = client.conn;
  client.peer.reset();
  on_loop(lt_, [&] {
    conn->close();
    return 0;
  });
  // The handlers go once the handle's close callback has run, a loop
  // iteration or more later (a TLS or pending write may hold it longer).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!weak.expired() && std::chrono::steady_clock::now() < deadline) {
    on_loop(lt_, [] { return 0; });
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(weak.expired()) << "the connection still holds its handlers 5 s after close()";
}

TEST_F(ControlConnection, PendingWritesCompleteWithConnectionErrorBeforeOnClose) {
  auto client = connect_client();
  auto big = pattern(size_t{32} << 20, 9);
  std::vector<std::string> events;
  on_loop(lt_, [&] {
    for (int i = 0; i < 3; ++i) {
      client.conn->send(MsgType::TensorWrite, i, 0, "w", big->data(), big->size(), big,
                        [&events, i](genie_status_t st) {
                          events.push_back("done " + std::to_string(i) + " " + std::to_string(st));
                        });
    }
    // Runs on the loop, so it sees the order of callbacks on the loop.
    client.conn->close(GENIE_OK, "bye");
    return 0;
  });
  ASSERT_TRUE(client.peer->wait_closed());
  on_loop(lt_, [] { return 0; });
  // The last two writes cannot have reached the kernel (32 MiB each, nobody
  // reading yet); all three report exactly once, before on_close.
  const auto ev = on_loop(lt_, [&] { return events; });
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[2], "done 2 " + std::to_string(GENIE_ERR_CONNECTION));
  EXPECT_EQ(ev[1], "done 1 " + std::to_string(GENIE_ERR_CONNECTION));
  EXPECT_EQ(big.use_count(), 1) << "the write requests still hold the payload";
  std::lock_guard<std::mutex> lk(client.peer->mu);
  EXPECT_EQ(client.peer->close_status, GENIE_OK);
  EXPECT_EQ(client.peer->close_detail, "bye");
}

TEST_F(ControlConnection, SendMisuseIsAnsweredAtOnce) {
  auto client = connect_client(nullptr, "127.0.0.1", 1024);
  const auto statuses = on_loop(lt_, [&] {
    std::vector<genie_status_t> st;
    auto rec = [&st](genie_status_t s) { st.push_back(s); };
    client.conn->send(MsgType::Ok, 1, 0, std::string(1025, 'x'), nullptr, 0, nullptr, rec);
    client.conn->send(MsgType::Ok, 2, 0, "", nullptr, 10, nullptr, rec);
    auto unconnected = Connection::create(lt_.loop(), 1024, {});
    unconnected->send(MsgType::Ok, 3, 0, "", nullptr, 0, nullptr, rec);
    unconnected->close();
    unconnected->send(MsgType::Ok, 4, 0, "", nullptr, 0, nullptr, rec);
    return st;
  });
  EXPECT_EQ(statuses, (std::vector<genie_status_t>{GENIE_ERR_TOO_LARGE, GENIE_ERR_INVALID_ARGUMENT,
                                                   GENIE_ERR_CONNECTION, GENIE_ERR_CONNECTION}));
  // The refused sends did not disturb the connection.
  server_echo_ = true;
  on_loop(lt_, [&] {
    client.conn->send(MsgType::Ok, 5, 0, std::string(1024, 'y'));
    return 0;
  });
  auto server = server_peer(0);
  ASSERT_TRUE(server && server->wait_frames(1));
  std::lock_guard<std::mutex> lk(server->mu);
  EXPECT_EQ(server->frames[0].h.request_id, 5u);
  EXPECT_EQ(server->closes, 0);
}

TEST_F(ControlConnection, RefusedPayloadClosesWithProtocol) {
  auto refusing = std::make_shared<Peer>();
  refusing->refuse_payloads = true;
  next_server_peer_ = refusing;
  auto client = connect_client();
  auto buf = pattern(4096, 3);
  on_loop(lt_, [&] {
    client.conn->send(MsgType::TensorWrite, 11, 0, "m", buf->data(), buf->size(), buf);
    return 0;
  });
  ASSERT_TRUE(refusing->wait_closed());
  ASSERT_TRUE(client.peer->wait_closed());
  std::lock_guard<std::mutex> lk(refusing->mu);
  EXPECT_EQ(refusing->close_status, GENIE_ERR_PROTOCOL);
  EXPECT_NE(refusing->close_detail.find("4096-byte payload of a TensorWrite frame (request 11) was refused"),
            std::string::npos)
      << refusing->close_detail;
}

TEST_F(ControlConnection, WritingToAClosedPeerFailsWithoutSigpipe) {
  // The server drops the connection on the first frame while 64 MiB are
  // still queued: later writes hit a reset socket (EPIPE, which would raise
  // SIGPIPE and kill the process if the loop thread did not block it).
  auto refusing = std::make_shared<Peer>();
  refusing->refuse_payloads = true;
  next_server_peer_ = refusing;
  auto client = connect_client();
  auto buf = pattern(size_t{4} << 20, 4);
  std::vector<genie_status_t> dones;
  on_loop(lt_, [&] {
    for (int i = 0; i < 16; ++i) {
      client.conn->send(MsgType::TensorWrite, i, 0, "m", buf->data(), buf->size(), buf,
                        [&dones](genie_status_t st) { dones.push_back(st); });
    }
    return 0;
  });
  ASSERT_TRUE(refusing->wait_closed());
  ASSERT_TRUE(client.peer->wait_closed());
  on_loop(lt_, [] { return 0; });
  const auto d = on_loop(lt_, [&] { return dones; });
  ASSERT_EQ(d.size(), 16u);
  EXPECT_EQ(d.back(), GENIE_ERR_CONNECTION);
  std::lock_guard<std::mutex> lk(client.peer->mu);
  EXPECT_EQ(client.peer->closes, 1);
  EXPECT_EQ(client.peer->close_status, GENIE_ERR_CONNECTION);
}

TEST_F(ControlConnection, HandlerErrorClosesWithItsStatus) {
  auto thrower = std::make_shared<Peer>();
  thrower->throw_on = MsgType::TensorFree;
  next_server_peer_ = thrower;
  auto client = connect_client();
  on_loop(lt_, [&] {
    client.conn->send(MsgType::TensorFree, 1, 0, "");
    client.conn->send(MsgType::Ok, 2, 0, "");  // never delivered: the connection is closing
    return 0;
  });
  ASSERT_TRUE(thrower->wait_closed());
  std::lock_guard<std::mutex> lk(thrower->mu);
  EXPECT_EQ(thrower->close_status, GENIE_ERR_NOT_FOUND);
  EXPECT_EQ(thrower->close_detail, "handler refused TensorFree");
  EXPECT_TRUE(thrower->frames.empty());
}

TEST_F(ControlConnection, ConnectRefusedReportsThenCloses) {
  // A port that was free a moment ago.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(0, ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr));
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  const int dead_port = ntohs(addr.sin_port);

  auto peer = std::make_shared<Peer>();
  std::promise<std::pair<genie_status_t, std::string>> result;
  std::atomic<bool> returned{false};
  std::atomic<bool> cb_before_return{false};
  std::atomic<bool> cb_after_close{false};
  on_loop(lt_, [&] {
    auto c = Connection::create(lt_.loop(), 1024, peer->handlers());
    c->connect("127.0.0.1", dead_port, [&](genie_status_t st, const std::string& d) {
      cb_before_return = !returned;
      std::lock_guard<std::mutex> lk(peer->mu);
      cb_after_close = peer->closes > 0;
      result.set_value({st, d});
    });
    returned = true;
    return 0;
  });
  const auto r = result.get_future().get();
  EXPECT_EQ(r.first, GENIE_ERR_CONNECTION);
  EXPECT_NE(r.second.find("cannot connect to 127.0.0.1:" + std::to_string(dead_port)), std::string::npos)
      << r.second;
  EXPECT_NE(r.second.find("refused"), std::string::npos) << r.second;
  EXPECT_FALSE(cb_before_return);
  EXPECT_FALSE(cb_after_close);
  ASSERT_TRUE(peer->wait_closed());
  std::lock_guard<std::mutex> lk(peer->mu);
  EXPECT_EQ(peer->closes, 1);
  EXPECT_EQ(peer->close_status, GENIE_ERR_CONNECTION);
}

TEST_F(ControlConnection, ConnectFailuresNeverAnswerInsideConnect) {
  auto peer = std::make_shared<Peer>();
  std::vector<std::string> events;
  on_loop(lt_, [&] {
    auto bad_port = Connection::create(lt_.loop(), 1024, {});
    bad_port->connect("127.0.0.1", 70000, [&](genie_status_t st, const std::string& d) {
      events.push_back("bad port " + std::to_string(st) + " " + d);
    });
    // Closed while its name is being resolved.
    auto closed_early = Connection::create(lt_.loop(), 1024, peer->handlers());
    closed_early->connect("localhost", port_, [&](genie_status_t st, const std::string& d) {
      events.push_back("closed early " + std::to_string(st) + " " + d);
    });
    closed_early->close(GENIE_OK, "changed my mind");
    events.push_back("returned");
    return 0;
  });
  ASSERT_TRUE(peer->wait_closed());
  const auto ev = on_loop(lt_, [&] { return events; });
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0], "returned");
  const std::string conn_err = std::to_string(GENIE_ERR_CONNECTION);
  EXPECT_TRUE(ev[1].find("port out of range") != std::string::npos ||
              ev[2].find("port out of range") != std::string::npos);
  for (int i = 1; i < 3; ++i)
    EXPECT_NE(ev[i].find(" " + conn_err + " cannot connect to "), std::string::npos) << ev[i];
  std::lock_guard<std::mutex> lk(peer->mu);
  EXPECT_EQ(peer->close_status, GENIE_OK);
  EXPECT_EQ(peer->close_detail, "changed my mind");
}

// ---------------------------------------------------------------------------
// Hostile peers (raw sockets)
// ---------------------------------------------------------------------------

TEST_F(ControlConnection, GarbageClosesThatConnectionOnlyWithProtocol) {
  server_echo_ = true;
  auto good = connect_client();
  auto good_server = server_peer(0);
  ASSERT_TRUE(good_server);

  const int fd = raw_connect();
  auto bad_server = server_peer(1);
  ASSERT_TRUE(bad_server);
  raw_send(fd, "GET / HTTP/1.1\r\nHost: genie\r\nUser-Agent: curl/7.88\r\nAccept: */*\r\n\r\n");
  EXPECT_TRUE(raw_sees_close(fd));
  ::close(fd);
  ASSERT_TRUE(bad_server->wait_closed());
  {
    std::lock_guard<std::mutex> lk(bad_server->mu);
    EXPECT_EQ(bad_server->close_status, GENIE_ERR_PROTOCOL);
    EXPECT_NE(bad_server->close_detail.find("magic"), std::string::npos) << bad_server->close_detail;
    EXPECT_TRUE(bad_server->frames.empty());
  }

  // The other connection on the same loop is untouched.
  auto buf = pattern(100000, 5);
  on_loop(lt_, [&] {
    good.conn->send(MsgType::TensorWrite, 1, 0, "after", buf->data(), buf->size(), buf);
    return 0;
  });
  ASSERT_TRUE(good.peer->wait_payloads(1));
  std::lock_guard<std::mutex> lk(good.peer->mu);
  EXPECT_TRUE(*good.peer->frames[0].payload == *buf);
  EXPECT_EQ(good.peer->closes, 0);
}

struct HostileCase {
  const char* name;
  std::string (*bytes)();
  genie_status_t status;
  const char* detail;
};
void PrintTo(const HostileCase& c, std::ostream* os) { *os << c.name; }

FrameHeader plain(MsgType t = MsgType::Hello) {
  FrameHeader h;
  h.type = t;
  h.request_id = 1;
  return h;
}
std::string encode(FrameHeader h, const std::string& msg) {
  uint8_t header[wire::kHeaderSize];
  wire::encode_header(h, msg.data(), msg.size(), header);
  return std::string(reinterpret_cast<char*>(header), sizeof header) + msg;
}

// A header of type t claiming a msg_len-byte message (its bytes not sent).
std::string claiming(MsgType t, uint32_t msg_len) {
  std::string b = encode(plain(t), "");
  std::memcpy(&b[12], &msg_len, 4);  // little-endian host
  return b;
}

class ControlHostilePeer : public ControlConnection, public ::testing::WithParamInterface<HostileCase> {};

TEST_P(ControlHostilePeer, ClosesWithTheRightStatusAndDeliversNothing) {
  const int fd = raw_connect();
  auto server = server_peer(0);
  ASSERT_TRUE(server);
  raw_send(fd, GetParam().bytes());
  ::shutdown(fd, SHUT_WR);  // the truncated cases end here
  ASSERT_TRUE(server->wait_closed());
  EXPECT_TRUE(raw_sees_close(fd));
  ::close(fd);
  std::lock_guard<std::mutex> lk(server->mu);
  EXPECT_EQ(server->close_status, GetParam().status);
  EXPECT_NE(server->close_detail.find(GetParam().detail), std::string::npos) << server->close_detail;
  EXPECT_TRUE(server->frames.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Raw, ControlHostilePeer,
    ::testing::Values(
        HostileCase{"WrongVersion",
                    [] {
                      FrameHeader h = plain();
                      h.version = 9;
                      return encode(h, "hi");
                    },
                    GENIE_ERR_VERSION_MISMATCH, "peer speaks wire version 9"},
        HostileCase{"UnknownType", [] { return encode(plain(static_cast<MsgType>(77)), ""); },
                    GENIE_ERR_PROTOCOL, "unknown message type 77"},
        HostileCase{"NonzeroReserved",
                    [] {
                      std::string b = encode(plain(), "");
                      b[39] = 1;
                      return b;
                    },
                    GENIE_ERR_PROTOCOL, "reserved"},
        HostileCase{"HeaderCrcMismatch",
                    [] {
                      std::string b = encode(plain(), "payload-free message");
                      b[16] ^= 1;  // request_id
                      return b;
                    },
                    GENIE_ERR_PROTOCOL, "CRC mismatch"},
        HostileCase{"MessageCrcMismatch",
                    [] {
                      std::string b = encode(plain(), "payload-free message");
                      b[wire::kHeaderSize + 3] ^= 1;
                      return b;
                    },
                    GENIE_ERR_PROTOCOL, "CRC mismatch in a Hello frame"},
        HostileCase{"TruncatedHeader", [] { return encode(plain(), "").substr(0, 17); }, GENIE_ERR_CONNECTION,
                    "connection closed by peer in the middle of a frame (17 of 40 header bytes)"},
        HostileCase{"TruncatedMessage", [] { return encode(plain(), std::string(100, 'm')).substr(0, 90); },
                    GENIE_ERR_CONNECTION,
                    "connection closed by peer in the middle of a frame (50 of 100 message bytes)"}),
    [](const ::testing::TestParamInfo<HostileCase>& info) { return std::string(info.param.name); });

TEST_F(ControlConnection, TruncatedPayloadReleasesTheSinkWithoutDone) {
  const int fd = raw_connect();
  auto server = server_peer(0);
  ASSERT_TRUE(server);
  FrameHeader h = plain(MsgType::TensorWrite);
  h.payload_len = 1000;
  raw_send(fd, encode(h, "tw") + std::string(10, 'p'));
  ASSERT_TRUE(server->wait_frames(1));
  ::shutdown(fd, SHUT_WR);
  ASSERT_TRUE(server->wait_closed());
  ::close(fd);
  std::lock_guard<std::mutex> lk(server->mu);
  EXPECT_EQ(server->close_status, GENIE_ERR_CONNECTION);
  EXPECT_NE(server->close_detail.find("10 of 1000 payload bytes"), std::string::npos) << server->close_detail;
  ASSERT_EQ(server->frames.size(), 1u);
  EXPECT_FALSE(server->frames[0].payload) << "done ran for an incomplete payload";
}

// The loop counts whole frames only (dataplane/loop_hooks.hpp): a frame
// without payload when its message is in, one with a payload when the
// last payload byte is.
TEST_F(ControlConnection, TheLoopCountsWholeFramesOnly) {
  const int fd = raw_connect();
  auto server = server_peer(0);
  ASSERT_TRUE(server);
  auto frames = [&] { return on_loop(lt_, [] { return dataplane::frames_received_here(); }); };
  const uint64_t c0 = frames();
  raw_send(fd, encode(plain(MsgType::TensorFree), "f"));
  ASSERT_TRUE(server->wait_frames(1));
  EXPECT_EQ(frames(), c0 + 1);
  FrameHeader h = plain(MsgType::TensorWrite);
  h.payload_len = 1 << 20;
  raw_send(fd, encode(h, "tw") + std::string(300 << 10, 'p'));
  ASSERT_TRUE(server->wait_frames(2));
  EXPECT_EQ(frames(), c0 + 1) << "a frame counted before its payload was in";
  raw_send(fd, std::string((1 << 20) - (300 << 10), 'q'));
  ASSERT_TRUE(server->wait_payloads(1));
  EXPECT_EQ(frames(), c0 + 2);
  ::close(fd);
  ASSERT_TRUE(server->wait_closed());
}

// Replies to the frames of one read leave together, in one write, and as
// soon as the handler of the read's last frame sends its own: not after
// that handler returns.
TEST_F(ControlConnection, RepliesLeaveWithTheLastFrameOfARead) {
  int fd = -1;
  std::string three;
  for (uint64_t rid = 1; rid <= 3; ++rid) {
    FrameHeader h = plain(MsgType::TensorFree);
    h.request_id = rid;
    three += encode(h, "free");
  }
  std::mutex mu;
  std::vector<std::pair<uint64_t, size_t>> seen;  // request id, echo bytes at the client then
  auto peer = std::make_shared<Peer>();
  peer->echo = true;
  peer->after_echo = [&](const FrameHeader& fh) {
    // How much of the echoes the client can read now; for the last frame,
    // waiting (while its handler runs) until all of them are there.
    size_t have = 0;
    for (auto until = std::chrono::steady_clock::now() + (fh.request_id == 3 ? 5s : 50ms);;) {
      char buf[256];
      const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
      have = n > 0 ? static_cast<size_t>(n) : 0;
      if (have >= three.size() || std::chrono::steady_clock::now() >= until) break;
      std::this_thread::sleep_for(1ms);
    }
    std::lock_guard<std::mutex> lk(mu);
    seen.emplace_back(fh.request_id, have);
  };
  {
    std::lock_guard<std::mutex> lk(mu_);
    next_server_peer_ = peer;
  }
  fd = raw_connect();
  auto server = server_peer(0);
  ASSERT_TRUE(server);
  raw_send(fd, three);  // one segment on loopback: one read
  ASSERT_TRUE(server->wait_frames(3));
  on_loop(lt_, [] { return 0; });  // the last handler has returned
  std::string back(three.size(), '\0');
  ASSERT_EQ(::recv(fd, back.data(), back.size(), MSG_WAITALL), static_cast<ssize_t>(back.size()));
  EXPECT_EQ(back, three);
  std::lock_guard<std::mutex> lk(mu);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], (std::pair<uint64_t, size_t>{1, 0}))
      << "the first reply left before the read's last frame";
  EXPECT_EQ(seen[1], (std::pair<uint64_t, size_t>{2, 0}))
      << "the second reply left before the read's last frame";
  EXPECT_EQ(seen[2], (std::pair<uint64_t, size_t>{3, three.size()}))
      << "the replies waited for the last frame's handler to return";
  ::close(fd);
}

TEST_F(ControlConnection, OversizeMessageIsRefusedBeforeAllocation) {
  const int fd = raw_connect();
  auto server = server_peer(0);
  ASSERT_TRUE(server);
  on_loop(lt_, [] { return 0; });
  g_largest_alloc = 0;
  const auto t0 = std::chrono::steady_clock::now();
  raw_send(fd, claiming(MsgType::GraphSubmit, 1u << 31) + std::string(4096, 'g'));
  ASSERT_TRUE(server->wait_closed());
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  EXPECT_TRUE(raw_sees_close(fd));
  ::close(fd);
  EXPECT_LT(g_largest_alloc.load(), size_t{1} << 20) << "something sized by msg_len was allocated";
  EXPECT_LT(elapsed, 5s);
  std::lock_guard<std::mutex> lk(server->mu);
  EXPECT_EQ(server->close_status, GENIE_ERR_PROTOCOL);
  EXPECT_NE(server->close_detail.find("GraphSubmit message of 2147483648 bytes exceeds the maximum"),
            std::string::npos)
      << server->close_detail;
}

TEST_F(ControlConnection, MessageBufferGrowsOnlyWithTheBytesThatArrived) {
  const int fd = raw_connect();
  auto server = server_peer(0);
  ASSERT_TRUE(server);
  on_loop(lt_, [] { return 0; });
  g_largest_alloc = 0;
  // A header claiming 32 MiB, followed by 200 KiB of it only.
  raw_send(fd, claiming(MsgType::GraphSubmit, 32u << 20) + std::string(200 << 10, 'g'));
  std::this_thread::sleep_for(300ms);
  on_loop(lt_, [] { return 0; });
  EXPECT_LT(g_largest_alloc.load(), size_t{2} << 20) << "the message was allocated at its claimed length";
  {
    std::lock_guard<std::mutex> lk(server->mu);
    EXPECT_EQ(server->closes, 0) << server->close_detail;
  }
  ::close(fd);
  ASSERT_TRUE(server->wait_closed());
}

TEST_F(ControlConnection, MessagesStillArrivingAreBoundedByTheBudget) {
  const int fd = raw_connect();
  auto server = server_peer(0);
  ASSERT_TRUE(server);
  auto budget = std::make_shared<dataplane::MessageBudget>(1u << 20);
  on_loop(lt_, [&] {
    server->conn.lock()->set_message_budget(budget);
    return 0;
  });
  // The server closes once the budget is spent, which may cut this send
  // short.
  const std::string bytes = claiming(MsgType::GraphSubmit, 8u << 20) + std::string(2 << 20, 'g');
  EXPECT_GT(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), 1 << 20);
  ASSERT_TRUE(server->wait_closed());
  ::close(fd);
  std::lock_guard<std::mutex> lk(server->mu);
  EXPECT_EQ(server->close_status, GENIE_ERR_TOO_LARGE);
  EXPECT_NE(server->close_detail.find("messages still arriving already hold"), std::string::npos)
      << server->close_detail;
  EXPECT_EQ(budget->used(), 0u) << "the closed connection's charge was not given back";
}

TEST_F(ControlConnection, SetMaxMessageAppliesFromTheNextHeader) {
  const int fd = raw_connect();
  auto server = server_peer(0);
  ASSERT_TRUE(server);
  on_loop(lt_, [&] {
    server->conn.lock()->set_max_message(4096);
    return 0;
  });
  raw_send(fd, encode(plain(MsgType::Hello), std::string(4096, 'h')));
  ASSERT_TRUE(server->wait_frames(1));
  on_loop(lt_, [&] {
    server->conn.lock()->set_max_message(100);
    return 0;
  });
  raw_send(fd, encode(plain(MsgType::Hello), std::string(101, 'h')));
  ASSERT_TRUE(server->wait_closed());
  ::close(fd);
  std::lock_guard<std::mutex> lk(server->mu);
  EXPECT_EQ(server->close_status, GENIE_ERR_PROTOCOL);
  EXPECT_NE(server->close_detail.find("Hello message of 101 bytes exceeds the maximum message size of 100"),
            std::string::npos)
      << server->close_detail;
}

TEST_F(ControlConnection, ClientSideRefusesOversizeMessagesToo) {
  // The client's own limit applies to what the server sends it.
  auto small_client = connect_client(nullptr, "127.0.0.1", 16);
  auto server = server_peer(0);
  ASSERT_TRUE(server);
  on_loop(lt_, [&] {
    server->conn.lock()->send(MsgType::Welcome, 1, 0, std::string(17, 'w'));
    return 0;
  });
  ASSERT_TRUE(small_client.peer->wait_closed());
  std::lock_guard<std::mutex> lk(small_client.peer->mu);
  EXPECT_EQ(small_client.peer->close_status, GENIE_ERR_PROTOCOL);
  EXPECT_NE(small_client.peer->close_detail.find(
                "Welcome message of 17 bytes exceeds the maximum message size of 16"),
            std::string::npos)
      << small_client.peer->close_detail;
}

// ---------------------------------------------------------------------------
// LoopThread
// ---------------------------------------------------------------------------

TEST(ControlLoopThread, PostRunsInOrderOnTheLoopThread) {
  LoopThread lt;
  EXPECT_FALSE(lt.on_loop_thread());
  std::vector<int> order;
  std::atomic<int> off_thread{0};
  for (int i = 0; i < 10000; ++i) {
    ASSERT_TRUE(lt.post([&, i] {
      if (!lt.on_loop_thread() || LoopThread::current() != &lt) ++off_thread;
      order.push_back(i);
    }));
  }
  on_loop(lt, [] { return 0; });
  EXPECT_EQ(off_thread, 0);
  ASSERT_EQ(order.size(), 10000u);
  for (int i = 0; i < 10000; ++i) ASSERT_EQ(order[i], i);
  EXPECT_EQ(LoopThread::current(), nullptr);
}

TEST(ControlLoopThread, PostsFromManyThreadsKeepEachThreadsOrder) {
  LoopThread lt;
  constexpr int kThreads = 4, kEach = 2000;
  std::vector<std::vector<int>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) lt.post([&, t, i] { seen[t].push_back(i); });
    });
  }
  for (auto& th : threads) th.join();
  on_loop(lt, [] { return 0; });
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(seen[t].size(), static_cast<size_t>(kEach));
    for (int i = 0; i < kEach; ++i) ASSERT_EQ(seen[t][i], i);
  }
}

// Round trips between a thread and the loop, each posted right after the
// loop ran the previous one: the loop is then polling its queue (it skips
// the eventfd) or just stopping to (core/spin.hpp). A task stranded by that
// hand-over never runs and the wait below fails; one posted late at every
// step would show as a timeout, not as a slow test.
TEST(ControlLoopThread, TasksPostedWhileTheLoopPollsAllRunPromptly) {
  LoopThread lt;
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  constexpr int kRounds = 3000;
  for (int i = 0; i < kRounds; ++i) {
    ASSERT_TRUE(lt.post([&] {
      {
        std::lock_guard<std::mutex> lk(mu);
        ++done;
      }
      cv.notify_all();
    }));
    std::unique_lock<std::mutex> lk(mu);
    ASSERT_TRUE(cv.wait_for(lk, std::chrono::seconds(5), [&] { return done == i + 1; }))
        << "task " << i << " did not run";
    // Every few rounds, wait past the loop's polling so that the next post
    // meets a loop that has just gone back to sleep.
    if (i % 97 == 0) {
      lk.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(150));
    }
  }
  EXPECT_EQ(done, kRounds);
}

// Tasks posted back to back keep the loop polling (its idle bound counts
// from the last task, core/spin.hpp), so it may not block in uv_run for as
// long as they come. Its timers must still fire meanwhile. Spinning is
// allowed throughout, as on a machine with room for it.
TEST(ControlLoopThread, TimersFireWhileTasksKeepTheLoopBusy) {
  SpinRoomForTests room(true);
  LoopThread lt;
  uv_timer_t timer{};
  std::atomic<int> ticks{0};
  on_loop(lt, [&] {
    uv_timer_init(lt.loop(), &timer);
    timer.data = &ticks;
    uv_timer_start(
        &timer, [](uv_timer_t* t) { ++*static_cast<std::atomic<int>*>(t->data); }, 2, 2);
    return 0;
  });
  // A task that posts itself again: from its first run on, every step of
  // the loop's spin finds a task, on any machine, however its threads are
  // scheduled.
  const auto until = std::chrono::steady_clock::now() + 5s;
  std::atomic<int> runs{0};
  std::function<void()> again = [&] {
    ++runs;
    if (ticks < 5 && std::chrono::steady_clock::now() < until) lt.post(again);
  };
  ASSERT_TRUE(lt.post(again));
  while (ticks < 5 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  EXPECT_GE(ticks.load(), 5) << "the timer fired " << ticks << " times while tasks ran " << runs
                             << " times over 5 s";
  on_loop(lt, [&] {
    uv_close(reinterpret_cast<uv_handle_t*>(&timer), nullptr);
    return 0;
  });
}

TEST(ControlLoopThread, PostFromTheLoopRunsAfterTheCurrentTask) {
  LoopThread lt;
  std::vector<std::string> ev;
  on_loop(lt, [&] {
    lt.post([&] { ev.push_back("inner"); });
    ev.push_back("outer end");
    return 0;
  });
  on_loop(lt, [] { return 0; });
  EXPECT_EQ(ev, (std::vector<std::string>{"outer end", "inner"}));
}

TEST(ControlLoopThread, ThrowingTaskDoesNotStopTheLoop) {
  LoopThread lt;
  lt.post([] { throw std::runtime_error("task failure (expected by the test)"); });
  EXPECT_EQ(on_loop(lt, [] { return 42; }), 42);
}

TEST(ControlLoopThread, StopRunsEarlierTasksThenBeforeCloseAndDropsLaterPosts) {
  LoopThread lt;
  std::vector<std::string> ev;  // loop thread only until stop returns
  for (int i = 0; i < 100; ++i) lt.post([&ev, i] { ev.push_back("task " + std::to_string(i)); });
  bool post_inside = true;
  bool on_loop_inside = false;
  lt.stop([&] {
    on_loop_inside = lt.on_loop_thread();
    post_inside = lt.post([&ev] { ev.push_back("posted by before_close"); });
    ev.push_back("before_close");
  });
  ASSERT_EQ(ev.size(), 101u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(ev[i], "task " + std::to_string(i));
  EXPECT_EQ(ev[100], "before_close");
  EXPECT_TRUE(on_loop_inside);
  EXPECT_FALSE(post_inside);

  auto token = std::make_shared<int>(1);
  EXPECT_FALSE(lt.post([token] { FAIL() << "ran after stop"; }));
  EXPECT_EQ(token.use_count(), 1) << "a dropped task is not kept";
  lt.stop();  // idempotent
}

TEST(ControlLoopThread, StopClosesOpenHandlesAndConnections) {
  auto lt = std::make_unique<LoopThread>();
  uv_timer_t timer{};
  uv_idle_t idle{};
  uv_tcp_t listener{};
  std::atomic<int> ticks{0};
  auto sentinel = std::make_shared<int>(0);
  auto peer = std::make_shared<Peer>();
  std::shared_ptr<Connection> conn;
  on_loop(*lt, [&] {
    uv_timer_init(lt->loop(), &timer);
    timer.data = &ticks;
    uv_timer_start(
        &timer, [](uv_timer_t* t) { ++*static_cast<std::atomic<int>*>(t->data); }, 1, 1);
    uv_idle_init(lt->loop(), &idle);
    uv_idle_start(&idle, [](uv_idle_t*) {});
    uv_tcp_init(lt->loop(), &listener);
    sockaddr_in addr{};
    uv_ip4_addr("127.0.0.1", 0, &addr);
    uv_tcp_bind(&listener, reinterpret_cast<const sockaddr*>(&addr), 0);
    uv_listen(reinterpret_cast<uv_stream_t*>(&listener), 4, [](uv_stream_t*, int) {});
    auto handlers = peer->handlers();
    handlers.on_frame = [sentinel, inner = handlers.on_frame](const FrameHeader& h, std::string&& m) {
      return inner(h, std::move(m));
    };
    conn = Connection::create(lt->loop(), 1024, handlers);
    return 0;
  });
  std::this_thread::sleep_for(20ms);
  lt->stop();  // would never return if a handle stayed open
  EXPECT_GT(ticks.load(), 0);
  const int after_stop = ticks;
  EXPECT_NE(uv_is_closing(reinterpret_cast<uv_handle_t*>(&timer)), 0);
  EXPECT_NE(uv_is_closing(reinterpret_cast<uv_handle_t*>(&idle)), 0);
  EXPECT_NE(uv_is_closing(reinterpret_cast<uv_handle_t*>(&listener)), 0);
  {
    std::lock_guard<std::mutex> lk(peer->mu);
    EXPECT_EQ(peer->closes, 1);
    EXPECT_EQ(peer->close_status, GENIE_ERR_SHUTDOWN);
    EXPECT_EQ(peer->close_detail, "event loop stopped");
  }
  EXPECT_EQ(sentinel.use_count(), 1) << "the connection's handlers outlived the loop";
  EXPECT_TRUE(conn->closed());
  lt.reset();
  std::this_thread::sleep_for(5ms);
  EXPECT_EQ(ticks.load(), after_stop);
}

TEST(ControlLoopThread, WritesToAClosedSocketFailWithEpipeInsteadOfSigpipe) {
  LoopThread lt;
  const int err = on_loop(lt, [] {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return -1;
    ::close(sv[1]);
    const ssize_t n = ::write(sv[0], "x", 1);  // plain write: no MSG_NOSIGNAL
    const int e = n < 0 ? errno : 0;
    ::close(sv[0]);
    return e;
  });
  EXPECT_EQ(err, EPIPE);  // and the process is still alive
}

TEST(ControlLoopThread, ConcurrentStopsAndTheDestructorAllReturn) {
  std::atomic<int> ran{0};
  {
    LoopThread lt;
    for (int i = 0; i < 50; ++i) lt.post([&] { ++ran; });
    std::thread a([&] { lt.stop(); });
    std::thread b([&] { lt.stop(); });
    a.join();
    b.join();
  }
  EXPECT_EQ(ran, 50);
  {
    LoopThread lt;
    lt.post([&] { ++ran; });
  }  // the destructor stops after running what was posted
  EXPECT_EQ(ran, 51);
}

}  // namespace
}  // namespace genie
