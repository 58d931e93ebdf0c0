// RemoteClient against a real in-process Server: byte round trips, pipelined
// calls, graphs, authentication, version checks, failures and reconnection.
//
// Connection failures are made deterministic with FrameProxy
// (server_client_testing.hpp), a small TCP relay between client and server
// that can hold back frames of chosen types (server -> client) and cut
// every connection on demand.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "control/client.hpp"
#include "control/loop_thread.hpp"
#include "control/wire.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/spin.hpp"
#include "genie.pb.h"
#include "graph/graph.hpp"
#include "server/server.hpp"
#include "server_client_testing.hpp"
#include "server_testing.hpp"

namespace genie {
namespace {

using Clock = std::chrono::steady_clock;
using wire::MsgType;

std::unique_ptr<Server> start_server(const std::string& token = "", int64_t grace_ms = 30000) {
  ServerOptions o;
  o.port = 0;
  o.auth_token = token;
  o.session_grace_ms = grace_ms;
  o.num_threads = 2;
  o.node_id = "test-server";
  return std::make_unique<Server>(o);
}

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override { set_log_level(LogLevel::Error); }
};

// ---------------------------------------------------------------------------

TEST_F(ClientTest, ConnectsAndDescribesTheServer) {
  auto server = start_server();
  auto c = RemoteClient::connect(client_config(server->port()), "client-a");
  EXPECT_TRUE(c->connected());
  EXPECT_EQ(c->server_node_id(), "test-server");
  ASSERT_EQ(c->server_devices().size(), 1u);
  EXPECT_EQ(c->server_devices()[0], "cpu:0");
  const std::string info = c->server_info_json();
  EXPECT_NE(info.find("\"node_id\":\"test-server\""), std::string::npos) << info;
  EXPECT_NE(info.find("\"sessions\":1"), std::string::npos) << info;
  c->close();
  EXPECT_FALSE(c->connected());
  expect_error(GENIE_ERR_SHUTDOWN, [&] { c->server_info_json(); });
}

TEST_F(ClientTest, RoundTripsBytesOfEverySize) {
  auto server = start_server();
  auto c = RemoteClient::connect(client_config(server->port(), 20000), "client-a");
  for (size_t n : {size_t{1}, size_t{7}, size_t{4096}, (size_t{1} << 20) + 3, size_t{64} << 20}) {
    SCOPED_TRACE(n);
    const auto src = random_bytes(n, static_cast<uint32_t>(n));
    const uint64_t id = c->tensor_alloc(DType::Bool, {static_cast<int64_t>(n)}, "cpu:0");
    // A fresh tensor reads back as zeros.
    std::vector<uint8_t> back(n, 0xab);
    c->tensor_read(id, 0, back.data(), n);
    EXPECT_TRUE(back == std::vector<uint8_t>(n, 0));
    c->tensor_write(id, 0, src.data(), n);
    std::fill(back.begin(), back.end(), 0);
    c->tensor_read(id, 0, back.data(), n);
    EXPECT_TRUE(back == src);
    if (n > 2) {
      // Ranges inside the tensor.
      const uint8_t mid[2] = {1, 2};
      c->tensor_write(id, n / 2, mid, 2);
      uint8_t got[3] = {};
      c->tensor_read(id, n / 2 - 1, got, 3);
      EXPECT_EQ(got[0], src[n / 2 - 1]);
      EXPECT_EQ(got[1], 1);
      EXPECT_EQ(got[2], 2);
    }
    c->tensor_free(id);
  }
  // Frees are ordered before the next request on the control connection.
  c->server_info_json();
  EXPECT_EQ(server->stats().tensors(), 0u);
}

TEST_F(ClientTest, ServerErrorsComeBackWithTheirStatus) {
  auto server = start_server();
  auto c = RemoteClient::connect(client_config(server->port()), "client-a");
  uint8_t b[8] = {};
  expect_error(GENIE_ERR_NOT_FOUND, [&] { c->tensor_read(12345, 0, b, 8); });
  expect_error(GENIE_ERR_UNSUPPORTED, [&] { c->tensor_alloc(DType::F32, {2}, "gpu:7"); });
  const uint64_t id = c->tensor_alloc(DType::F32, {2}, "cpu:0");
  expect_error(GENIE_ERR_SIZE_MISMATCH, [&] { c->tensor_read(id, 4, b, 8); });
  // The connection is still good after errors.
  const float v[2] = {1.5f, -2.0f};
  c->tensor_write(id, 0, v, sizeof v);
  float got[2] = {};
  c->tensor_read(id, 0, got, sizeof got);
  EXPECT_EQ(got[0], 1.5f);
  EXPECT_EQ(got[1], -2.0f);
}

TEST_F(ClientTest, PipelinesCallsFromManyThreads) {
  auto server = start_server();
  auto c = RemoteClient::connect(client_config(server->port(), 20000), "client-a");
  constexpr int kThreads = 8, kRounds = 40;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        const size_t n = 1000 + 4096 * static_cast<size_t>(t);
        const uint64_t id = c->tensor_alloc(DType::Bool, {static_cast<int64_t>(n)}, "cpu:0");
        for (int r = 0; r < kRounds; ++r) {
          const auto src = random_bytes(n, static_cast<uint32_t>(t * 1000 + r));
          c->tensor_write(id, 0, src.data(), n);
          std::vector<uint8_t> back(n);
          c->tensor_read(id, 0, back.data(), n);
          if (back != src) ++failures;
          if (r % 10 == 0) c->server_info_json();
        }
        c->tensor_free(id);
      } catch (const Error& e) {
        ADD_FAILURE() << "thread " << t << ": " << e.detail();
        ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  // One caller at a time drives the direct link (control/client/direct.hpp)
  // while the others pipeline through the loop; the bytes above are right
  // either way.
  EXPECT_GT(c->direct_transfers(), 0u);
  c->server_info_json();
  EXPECT_EQ(server->stats().tensors(), 0u);
}

TEST_F(ClientTest, ReadsFromManyThreadsShareTheDataLinkAcrossTheServersReadWindow) {
  auto server = start_server();
  auto c = RemoteClient::connect(client_config(server->port(), 20000), "client-a");
  // 24 MiB: one read of it is more than the server's 16 MiB read window,
  // so the small reads of the other threads wait behind it or pass with it.
  const size_t n = size_t{24} << 20;
  const auto src = random_bytes(n, 99);
  const uint64_t id = c->tensor_alloc(DType::Bool, {static_cast<int64_t>(n)}, "cpu:0");
  c->tensor_write(id, 0, src.data(), n);
  constexpr int kThreads = 6, kRounds = 12;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int r = 0; r < kRounds; ++r) {
          // Thread 0 reads the whole tensor; the others read 64 KiB pieces.
          const size_t len = t == 0 ? n : size_t{64} << 10;
          const size_t off = t == 0 ? 0 : (static_cast<size_t>(t * 7919 + r * 104729) << 6) % (n - len);
          std::vector<uint8_t> back(len);
          c->tensor_read(id, off, back.data(), len);
          if (!std::equal(back.begin(), back.end(), src.begin() + static_cast<ptrdiff_t>(off))) ++failures;
        }
      } catch (const Error& e) {
        ADD_FAILURE() << "thread " << t << ": " << e.detail();
        ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

Graph add_graph() {
  Graph g("add");
  g.add_input("a", DType::F32, {4});
  g.add_input("b", DType::F32, {-1});
  g.add_node("add", "sum", {"a", "b"}, {"c"});
  g.add_node("relu", "act", {"c"}, {"d"});
  g.mark_output("d");
  g.mark_output("c");
  return g;
}

TEST_F(ClientTest, SubmitsGraphsAndReportsOutputs) {
  auto server = start_server();
  auto c = RemoteClient::connect(client_config(server->port()), "client-a");
  const uint64_t a = c->tensor_alloc(DType::F32, {4}, "cpu:0");
  const uint64_t b = c->tensor_alloc(DType::F32, {4}, "cpu:0");
  const float av[4] = {1, -2, 3, -4}, bv[4] = {0.5f, 0.5f, -5, 5};
  c->tensor_write(a, 0, av, sizeof av);
  c->tensor_write(b, 0, bv, sizeof bv);
  Graph g = add_graph();
  std::unordered_map<ValueId, Shape> shapes{{g.find_value("b"), {4}}};
  g.validate(&shapes);

  std::promise<RemoteResult> done;
  std::atomic<int> calls{0};
  std::thread::id done_thread;
  c->submit(graph_to_json(g), {{"a", a}, {"b", b}}, [&](RemoteResult&& r) {
    ++calls;
    done_thread = std::this_thread::get_id();
    done.set_value(std::move(r));
  });
  RemoteResult r = done.get_future().get();
  ASSERT_EQ(r.status, GENIE_OK) << r.detail;
  EXPECT_NE(done_thread, std::this_thread::get_id());
  ASSERT_EQ(r.outputs.size(), 2u);
  EXPECT_EQ(r.outputs[0].name, "d");
  EXPECT_EQ(r.outputs[1].name, "c");
  EXPECT_EQ(r.outputs[0].dtype, DType::F32);
  EXPECT_EQ(r.outputs[0].shape, Shape{4});
  float d[4], sum[4];
  c->tensor_read(r.outputs[0].tensor_id, 0, d, sizeof d);
  c->tensor_read(r.outputs[1].tensor_id, 0, sum, sizeof sum);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(sum[i], av[i] + bv[i]);
    EXPECT_EQ(d[i], std::max(0.0f, av[i] + bv[i]));
  }
  // An output feeds the next graph without leaving the server.
  std::promise<RemoteResult> done2;
  c->submit(graph_to_json(g), {{"a", r.outputs[1].tensor_id}, {"b", r.outputs[0].tensor_id}},
            [&](RemoteResult&& r2) { done2.set_value(std::move(r2)); });
  RemoteResult r2 = done2.get_future().get();
  ASSERT_EQ(r2.status, GENIE_OK) << r2.detail;
  float sum2[4];
  c->tensor_read(r2.outputs[1].tensor_id, 0, sum2, sizeof sum2);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(sum2[i], sum[i] + d[i]);
  EXPECT_EQ(calls.load(), 1);

  // Refused by the server: submit() has already returned, so the refusal
  // arrives through `done`, with the server's status and detail.
  std::promise<RemoteResult> refused;
  c->submit(graph_to_json(g), {{"a", 999}, {"b", b}},
            [&](RemoteResult&& r3) { refused.set_value(std::move(r3)); });
  const RemoteResult r3 = refused.get_future().get();
  EXPECT_EQ(r3.status, GENIE_ERR_NOT_FOUND) << r3.detail;
  EXPECT_NE(r3.detail.find("no tensor 999"), std::string::npos) << r3.detail;
  EXPECT_TRUE(r3.outputs.empty());
  c->server_info_json();
  EXPECT_EQ(server->stats().tensors(), 6u);
  EXPECT_EQ(server->stats().graphs_executed(), 2u);
  // Goodbye frees the session's tensors at once.
  c->close();
  for (int i = 0; i < 200 && server->stats().tensors() != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(server->stats().tensors(), 0u);
  EXPECT_EQ(server->stats().sessions(), 0u);
}

TEST_F(ClientTest, OversizeMessagesFailAtOnce) {
  auto server = start_server();
  Config cfg = client_config(server->port(), 20000);
  cfg.max_message_bytes = 4096;
  auto c = RemoteClient::connect(cfg, "client-a");
  // A graph whose constant alone exceeds the limit.
  Graph g("big");
  auto k = std::make_shared<TensorData>(DType::F32, Shape{4096});
  g.add_input("a", DType::F32, {4096});
  g.add_constant("k", k);
  g.add_node("add", "sum", {"a", "k"}, {"c"});
  g.mark_output("c");
  g.validate();
  const uint64_t a = c->tensor_alloc(DType::F32, {4096}, "cpu:0");
  bool ran = false;
  const auto t0 = Clock::now();
  const std::string d = expect_error(GENIE_ERR_TOO_LARGE, [&] {
    c->submit(graph_to_json(g), {{"a", a}}, [&](RemoteResult&&) { ran = true; });
  });
  EXPECT_LT(ms_since(t0), 1000);
  EXPECT_NE(d.find("GENIE_MAX_MESSAGE"), std::string::npos) << d;
  EXPECT_FALSE(ran);
  EXPECT_TRUE(c->connected());
}

// Submissions do not wait for the server: with every GraphDone held back,
// submit() still returns at once, many times over from one thread; released,
// every completion arrives with its own results.
TEST_F(ClientTest, SubmitReturnsWithoutWaitingAndManyGraphsPipeline) {
  auto server = start_server();
  FrameProxy proxy(server->port());
  auto c = RemoteClient::connect(client_config(proxy.port(), 20000), "client-a");
  constexpr int kGraphs = 64;
  Graph g = add_graph();
  std::unordered_map<ValueId, Shape> shapes{{g.find_value("b"), {4}}};
  g.validate(&shapes);
  const uint64_t a = c->tensor_alloc(DType::F32, {4}, "cpu:0");
  const float av[4] = {1, -2, 3, -4};
  c->tensor_write(a, 0, av, sizeof av);
  // A different b per graph: the server's cached graph meets new data each time.
  std::vector<uint64_t> bs;
  for (int i = 0; i < kGraphs; ++i) {
    bs.push_back(c->tensor_alloc(DType::F32, {4}, "cpu:0"));
    const float bv[4] = {float(i), float(-i), 0.5f * float(i), 1};
    c->tensor_write(bs.back(), 0, bv, sizeof bv);
  }

  proxy.hold(MsgType::GraphDone);
  std::mutex mu;
  std::vector<int> order;
  std::vector<RemoteResult> results(kGraphs);
  std::promise<void> all_done;
  const auto t0 = Clock::now();
  for (int i = 0; i < kGraphs; ++i) {
    c->submit(graph_to_json(g), {{"a", a}, {"b", bs[static_cast<size_t>(i)]}}, [&, i](RemoteResult&& r) {
      std::lock_guard<std::mutex> lk(mu);
      results[static_cast<size_t>(i)] = std::move(r);
      order.push_back(i);
      if (order.size() == kGraphs) all_done.set_value();
    });
  }
  EXPECT_LT(ms_since(t0), 2000);
  // Every graph reaches the server (and runs) while no completion came back.
  ASSERT_TRUE(eventually([&] { return proxy.held() == kGraphs; })) << proxy.held() << " held";
  {
    std::lock_guard<std::mutex> lk(mu);
    EXPECT_TRUE(order.empty());
  }
  proxy.release();
  ASSERT_EQ(all_done.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  // Tiny graphs run on the server's loop as they arrive: completions come
  // back in submission order.
  for (int i = 0; i < kGraphs; ++i) EXPECT_EQ(order[static_cast<size_t>(i)], i);
  for (int i = 0; i < kGraphs; ++i) {
    const RemoteResult& r = results[static_cast<size_t>(i)];
    ASSERT_EQ(r.status, GENIE_OK) << r.detail;
    ASSERT_EQ(r.outputs.size(), 2u);
    float sum[4];
    c->tensor_read(r.outputs[1].tensor_id, 0, sum, sizeof sum);
    const float bv[4] = {float(i), float(-i), 0.5f * float(i), 1};
    for (int k = 0; k < 4; ++k) EXPECT_EQ(sum[k], av[k] + bv[k]) << "graph " << i << " element " << k;
  }
  EXPECT_EQ(server->stats().graphs_executed(), static_cast<uint64_t>(kGraphs));
}

// What the server refuses at submission reaches the completion (the caller
// has long returned), and the connection stays usable for the next ones.
TEST_F(ClientTest, RefusedSubmissionsReportThroughTheCompletion) {
  auto server = start_server();
  auto c = RemoteClient::connect(client_config(server->port()), "client-a");
  const uint64_t a = c->tensor_alloc(DType::F32, {4}, "cpu:0");
  const uint64_t wide = c->tensor_alloc(DType::F32, {5}, "cpu:0");
  Graph g = add_graph();
  std::unordered_map<ValueId, Shape> shapes{{g.find_value("b"), {4}}};
  g.validate(&shapes);
  std::promise<RemoteResult> p1, p2, p3;
  // An id this session never had, then one it freed, then a good one: all
  // in flight at once, each answered on its own.
  c->tensor_free(wide);
  c->submit(graph_to_json(g), {{"a", a}, {"b", 12345}},
            [&](RemoteResult&& r) { p1.set_value(std::move(r)); });
  c->submit(graph_to_json(g), {{"a", wide}, {"b", a}}, [&](RemoteResult&& r) { p2.set_value(std::move(r)); });
  c->submit(graph_to_json(g), {{"a", a}, {"b", a}}, [&](RemoteResult&& r) { p3.set_value(std::move(r)); });
  const RemoteResult r1 = p1.get_future().get();
  EXPECT_EQ(r1.status, GENIE_ERR_NOT_FOUND) << r1.detail;
  EXPECT_NE(r1.detail.find("12345"), std::string::npos) << r1.detail;
  const RemoteResult r2 = p2.get_future().get();
  EXPECT_EQ(r2.status, GENIE_ERR_NOT_FOUND) << r2.detail;
  const RemoteResult r3 = p3.get_future().get();
  EXPECT_EQ(r3.status, GENIE_OK) << r3.detail;
  EXPECT_TRUE(c->connected());
  EXPECT_EQ(server->stats().graphs_executed(), 1u);
}

// A TensorFree rides with the next request on the control connection; with
// no request coming, it still reaches the server within milliseconds.
TEST_F(ClientTest, FreesReachTheServerWithoutAnotherRequest) {
  auto server = start_server();
  auto c = RemoteClient::connect(client_config(server->port()), "client-a");
  std::vector<uint64_t> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(c->tensor_alloc(DType::F32, {4}, "cpu:0"));
  EXPECT_EQ(server->stats().tensors(), 10u);
  for (uint64_t id : ids) c->tensor_free(id);
  EXPECT_TRUE(eventually([&] { return server->stats().tensors() == 0; }, 2000)) << server->stats().tensors();
  // And ahead of a request: the allocation is answered after the frees.
  const uint64_t a = c->tensor_alloc(DType::F32, {4}, "cpu:0");
  c->tensor_free(a);
  c->tensor_alloc(DType::F32, {4}, "cpu:0");
  EXPECT_EQ(server->stats().tensors(), 1u);
}

TEST_F(ClientTest, AuthenticatesWithTheSharedToken) {
  auto server = start_server("s3cret-token-0123456");
  Config good = client_config(server->port());
  good.auth_token = "s3cret-token-0123456";
  auto c = RemoteClient::connect(good, "client-a");
  EXPECT_TRUE(c->connected());
  const uint64_t id = c->tensor_alloc(DType::I32, {1}, "cpu:0");
  const int32_t v = 7;
  c->tensor_write(id, 0, &v, 4);

  Config wrong = good;
  wrong.auth_token = "not-the-token-0123456";
  std::string d = expect_error(GENIE_ERR_AUTH, [&] { RemoteClient::connect(wrong, "client-b"); });
  EXPECT_NE(d.find("127.0.0.1:" + std::to_string(server->port())), std::string::npos) << d;

  Config missing = good;
  missing.auth_token.clear();
  d = expect_error(GENIE_ERR_AUTH, [&] { RemoteClient::connect(missing, "client-c"); });
  EXPECT_NE(d.find("requires authentication"), std::string::npos) << d;
  EXPECT_GE(server->stats().connections_refused(), 1u);
  EXPECT_EQ(server->stats().sessions(), 1u);
}

// A fake server that answers the client's Hello with `reply`.
void fake_server_once(int lfd, MsgType type, const google::protobuf::Message& reply, uint32_t flags) {
  const int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(fd, 0);
  wire::FrameHeader h;
  std::string msg;
  ASSERT_TRUE(recv_frame(fd, &h, &msg));
  EXPECT_EQ(h.type, MsgType::Hello);
  wire::Hello hello;
  ASSERT_TRUE(hello.ParseFromString(msg));
  EXPECT_EQ(hello.protocol_version(), wire::kProtocolVersion);
  EXPECT_EQ(hello.abi_version(), static_cast<uint32_t>(GENIE_ABI_VERSION));
  EXPECT_EQ(hello.node_id(), "client-v");
  send_frame(fd, type, h.request_id, reply, flags);
  char c;
  while (::recv(fd, &c, 1, 0) > 0) {
  }
  ::close(fd);
}

TEST_F(ClientTest, VersionMismatchIsReportedWithBothVersions) {
  // What the real server says to a client from the future.
  auto server = start_server();
  const int fd = connect_local(server->port());
  ASSERT_GE(fd, 0);
  wire::Hello hello;
  hello.set_protocol_version(wire::kProtocolVersion + 1);
  hello.set_abi_version(GENIE_ABI_VERSION);
  hello.set_node_id("future-client");
  send_frame(fd, MsgType::Hello, 1, hello);
  wire::FrameHeader h;
  std::string msg;
  ASSERT_TRUE(recv_frame(fd, &h, &msg));
  EXPECT_EQ(h.type, MsgType::ErrorReply);
  wire::ErrorReply e;
  ASSERT_TRUE(e.ParseFromString(msg));
  EXPECT_EQ(e.status(), GENIE_ERR_VERSION_MISMATCH);
  ::close(fd);

  // The client passes that refusal on, and refuses a server from the future.
  int port = 0;
  const int lfd = listen_local(&port);
  ASSERT_GE(lfd, 0);
  std::thread fake([&] { fake_server_once(lfd, MsgType::ErrorReply, e, wire::kFlagError); });
  std::string d = expect_error(GENIE_ERR_VERSION_MISMATCH,
                               [&] { RemoteClient::connect(client_config(port), "client-v"); });
  EXPECT_NE(d.find("protocol"), std::string::npos) << d;
  fake.join();

  wire::Welcome w;
  w.set_session_token(std::string(32, 'x'));
  w.set_server_node_id("future-server");
  w.set_protocol_version(wire::kProtocolVersion + 1);
  w.set_abi_version(GENIE_ABI_VERSION);
  std::thread fake2([&] { fake_server_once(lfd, MsgType::Welcome, w, 0); });
  d = expect_error(GENIE_ERR_VERSION_MISMATCH,
                   [&] { RemoteClient::connect(client_config(port), "client-v"); });
  EXPECT_NE(d.find(std::to_string(wire::kProtocolVersion + 1)), std::string::npos) << d;
  fake2.join();
  ::close(lfd);
}

TEST_F(ClientTest, ConnectFailuresNameTheAddressAndRespectTheTimeout) {
  int port = 0;
  const int lfd = listen_local(&port);
  ASSERT_GE(lfd, 0);
  // Listening but never answering: the kernel completes the TCP handshake,
  // the Hello gets no reply.
  auto t0 = Clock::now();
  std::string d =
      expect_error(GENIE_ERR_TIMEOUT, [&] { RemoteClient::connect(client_config(port, 500), "c"); });
  EXPECT_GE(ms_since(t0), 450);
  EXPECT_LT(ms_since(t0), 3000);
  EXPECT_NE(d.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << d;
  ::close(lfd);
  // Nobody listening.
  t0 = Clock::now();
  d = expect_error(GENIE_ERR_CONNECTION, [&] { RemoteClient::connect(client_config(port, 5000), "c"); });
  EXPECT_LT(ms_since(t0), 2000);
  EXPECT_NE(d.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << d;
}

TEST_F(ClientTest, RequestWithoutReplyTimesOutAndTheLateReplyIsDiscarded) {
  auto server = start_server();
  FrameProxy proxy(server->port());
  // The framed path through the loop: its late reply must not reach the
  // caller's buffer (the direct link: server_direct_test.cpp).
  Config cfg = client_config(proxy.port(), 500);
  cfg.direct_calls = false;
  auto c = RemoteClient::connect(cfg, "client-a");
  const uint64_t id = c->tensor_alloc(DType::Bool, {1 << 16}, "cpu:0");
  const auto src = random_bytes(1 << 16, 3);
  c->tensor_write(id, 0, src.data(), src.size());
  proxy.hold(MsgType::Ok);
  {
    auto dst = std::make_unique<uint8_t[]>(1 << 16);
    const auto t0 = Clock::now();
    expect_error(GENIE_ERR_TIMEOUT, [&] { c->tensor_read(id, 0, dst.get(), 1 << 16); });
    EXPECT_GE(ms_since(t0), 450);
    EXPECT_LT(ms_since(t0), 3000);
  }  // dst is freed: the late payload must not land in it (ASan would see it)
  proxy.release();
  std::vector<uint8_t> back(1 << 16);
  c->tensor_read(id, 0, back.data(), back.size());
  EXPECT_TRUE(back == src);
  EXPECT_EQ(proxy.accepted(), 2);  // no reconnect was needed
}

TEST_F(ClientTest, ConnectionLossFailsCallsInFlightThenReconnectsWithTensorsIntact) {
  auto server = start_server("", 30000);
  FrameProxy proxy(server->port());
  // The framed path through the loop (the direct link:
  // server_direct_test.cpp).
  Config cfg = client_config(proxy.port(), 5000);
  cfg.direct_calls = false;
  auto c = RemoteClient::connect(cfg, "client-a");
  const size_t n = 3 << 20;
  const auto src = random_bytes(n, 11);
  const uint64_t id = c->tensor_alloc(DType::Bool, {static_cast<int64_t>(n)}, "cpu:0");
  c->tensor_write(id, 0, src.data(), n);
  ASSERT_EQ(proxy.accepted(), 2);

  // A read whose reply is held when the connection is cut fails at once.
  proxy.hold(MsgType::Ok);
  std::vector<uint8_t> back(n);
  auto pending = std::async(std::launch::async, [&] {
    const auto t0 = Clock::now();
    expect_error(GENIE_ERR_CONNECTION, [&] { c->tensor_read(id, 0, back.data(), n); });
    return ms_since(t0);
  });
  for (int i = 0; i < 500 && proxy.held() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(proxy.held(), 1);  // the reply is on its way: the read is in flight
  proxy.cut();
  EXPECT_LT(pending.get(), 2000);
  proxy.release();

  // The next call waits for the reconnect and finds the tensor intact.
  c->tensor_read(id, 0, back.data(), n);
  EXPECT_TRUE(back == src);
  EXPECT_TRUE(c->connected());
  EXPECT_EQ(proxy.accepted(), 4);
  EXPECT_EQ(server->stats().sessions(), 1u);
}

TEST_F(ClientTest, GraphInFlightFailsWithConnectionWhenTheConnectionIsCut) {
  auto server = start_server();
  FrameProxy proxy(server->port());
  auto c = RemoteClient::connect(client_config(proxy.port(), 5000), "client-a");
  const uint64_t a = c->tensor_alloc(DType::F32, {4}, "cpu:0");
  Graph g = add_graph();
  std::unordered_map<ValueId, Shape> shapes{{g.find_value("b"), {4}}};
  g.validate(&shapes);
  proxy.hold(MsgType::GraphDone);
  std::promise<RemoteResult> done;
  c->submit(graph_to_json(g), {{"a", a}, {"b", a}}, [&](RemoteResult&& r) { done.set_value(std::move(r)); });
  // In flight: its completion is on the way back (one not yet sent when
  // the loss is seen waits for the resumed session instead).
  ASSERT_TRUE(eventually([&] { return proxy.held() == 1; })) << proxy.held();
  proxy.cut();
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(3)), std::future_status::ready);
  const RemoteResult r = f.get();
  EXPECT_EQ(r.status, GENIE_ERR_CONNECTION) << r.detail;
  EXPECT_TRUE(r.outputs.empty());
  // Still usable after the reconnect.
  std::promise<RemoteResult> done2;
  proxy.release();
  c->submit(graph_to_json(g), {{"a", a}, {"b", a}},
            [&](RemoteResult&& r2) { done2.set_value(std::move(r2)); });
  EXPECT_EQ(done2.get_future().get().status, GENIE_OK);
}

TEST_F(ClientTest, CallsThatMeetALossBeforeTheyAreSentWaitForTheResumedSession) {
  auto server = start_server();
  FrameProxy proxy(server->port());
  Config cfg = client_config(proxy.port(), 5000);
  cfg.direct_calls = false;  // every call through the loop
  auto c = RemoteClient::connect(cfg, "client-a");
  const uint64_t a = c->tensor_alloc(DType::F32, {4}, "cpu:0");
  const float av[4] = {1, -2, 3, -4};
  c->tensor_write(a, 0, av, sizeof av);
  Graph g = add_graph();
  std::unordered_map<ValueId, Shape> shapes{{g.find_value("b"), {4}}};
  g.validate(&shapes);

  // The loop is held while the connections are cut and two calls are
  // made: each finds the session ready, and the loop sees the loss before
  // it gets to them. A task that posts itself again keeps the loop in its
  // spin, where each step reads the sockets first and then runs what was
  // posted (LoopThread::spin_after_events).
  SpinRoomForTests room(true);
  LoopThread& lt = *c->loop_thread();
  std::atomic<bool> busy{true};
  std::atomic<int> runs{0};
  std::function<void()> again = [&] {
    ++runs;
    if (busy) lt.post(again);
  };
  ASSERT_TRUE(lt.post(again));
  // Spinning by now: what is posted next waits for the spin's next step
  // (a task posted to a loop that is not spinning could run from the
  // wake-up inside that step's read of the sockets instead).
  ASSERT_TRUE(eventually([&] { return runs > 100; }));
  std::promise<void> entered, go;
  auto go_f = go.get_future().share();
  ASSERT_TRUE(lt.post([&entered, go_f] {
    entered.set_value();
    go_f.wait();
  }));
  entered.get_future().wait();
  proxy.cut();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the FINs are in
  std::promise<RemoteResult> done;
  c->submit(graph_to_json(g), {{"a", a}, {"b", a}}, [&](RemoteResult&& r) { done.set_value(std::move(r)); });
  auto read = std::async(std::launch::async, [&] {
    float back[4] = {};
    c->tensor_read(a, 0, back, sizeof back);
    return std::vector<float>(back, back + 4);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the read is posted
  go.set_value();
  busy = false;

  // Neither was sent before the loss: both go on the resumed session.
  const RemoteResult r = done.get_future().get();
  ASSERT_EQ(r.status, GENIE_OK) << r.detail;
  EXPECT_EQ(read.get(), (std::vector<float>{1, -2, 3, -4}));
  float sum[4];
  c->tensor_read(r.outputs[1].tensor_id, 0, sum, sizeof sum);
  EXPECT_EQ(std::vector<float>(sum, sum + 4), (std::vector<float>{2, -4, 6, -8}));
  EXPECT_EQ(proxy.accepted(), 4);  // one reconnect
  EXPECT_EQ(server->stats().sessions(), 1u);
}

TEST_F(ClientTest, SessionLostAfterTheGracePeriodFailsForGood) {
  auto server = start_server("", 0);  // no grace: a lost connection ends the session
  FrameProxy proxy(server->port());
  auto c = RemoteClient::connect(client_config(proxy.port(), 3000), "client-a");
  const uint64_t id = c->tensor_alloc(DType::F32, {4}, "cpu:0");
  proxy.cut();
  // Let the client notice the loss first: a call racing with it would fail
  // with the loss itself rather than with the lost session.
  for (int i = 0; i < 300 && c->connected(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  float b[4];
  const auto t0 = Clock::now();
  std::string d = expect_error(GENIE_ERR_CONNECTION, [&] { c->tensor_read(id, 0, b, sizeof b); });
  EXPECT_LT(ms_since(t0), 3500);
  EXPECT_NE(d.find("session"), std::string::npos) << d;
  // Nothing pretends to work afterwards, and the stray session was ended.
  expect_error(GENIE_ERR_CONNECTION, [&] { c->tensor_alloc(DType::F32, {4}, "cpu:0"); });
  EXPECT_FALSE(c->connected());
  for (int i = 0; i < 200 && server->stats().sessions() != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(server->stats().sessions(), 0u);
}

TEST_F(ClientTest, ServerStopMidCallFailsWithConnectionWithinTheTimeout) {
  auto server = start_server();
  auto c = RemoteClient::connect(client_config(server->port(), 2000), "client-a");
  const size_t n = 8 << 20;
  const uint64_t id = c->tensor_alloc(DType::Bool, {static_cast<int64_t>(n)}, "cpu:0");
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint8_t> buf(n, static_cast<uint8_t>(t));
      while (!stop) {
        try {
          if (t % 2)
            c->tensor_write(id, 0, buf.data(), n);
          else
            c->tensor_read(id, 0, buf.data(), n);
        } catch (const Error& e) {
          if (e.code() != GENIE_ERR_CONNECTION) {
            ADD_FAILURE() << status_name(e.code()) << ": " << e.detail();
            ++bad;
          }
          return;
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto t0 = Clock::now();
  server->stop();
  for (auto& th : threads) th.join();
  EXPECT_LT(ms_since(t0), 6000);  // each call waits at most the 2 s timeout for a reconnect
  stop = true;
  EXPECT_EQ(bad.load(), 0);
  server->wait();
  server.reset();
  const auto t1 = Clock::now();
  expect_error(GENIE_ERR_CONNECTION, [&] { c->server_info_json(); });
  EXPECT_LT(ms_since(t1), 2500);
  // Closing with the server gone does not hang.
  const auto t2 = Clock::now();
  c.reset();
  EXPECT_LT(ms_since(t2), 1000);
}

TEST_F(ClientTest, CloseFailsGraphsInFlightWithShutdownAndSaysGoodbye) {
  auto server = start_server();
  FrameProxy proxy(server->port());
  auto c = RemoteClient::connect(client_config(proxy.port(), 5000), "client-a");
  const uint64_t a = c->tensor_alloc(DType::F32, {4}, "cpu:0");
  Graph g = add_graph();
  std::unordered_map<ValueId, Shape> shapes{{g.find_value("b"), {4}}};
  g.validate(&shapes);
  proxy.hold(MsgType::GraphDone);
  std::promise<RemoteResult> done;
  c->submit(graph_to_json(g), {{"a", a}, {"b", a}}, [&](RemoteResult&& r) { done.set_value(std::move(r)); });
  const auto t0 = Clock::now();
  c->close();
  EXPECT_LT(ms_since(t0), 2500);
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_EQ(f.get().status, GENIE_ERR_SHUTDOWN);
  expect_error(GENIE_ERR_SHUTDOWN, [&] { c->tensor_alloc(DType::F32, {4}, "cpu:0"); });
  c->tensor_free(a);  // ignored after close
}

}  // namespace
}  // namespace genie
