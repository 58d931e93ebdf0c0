// Synchronous tensor writes and reads on the caller's own socket (the
// direct link, control/client/direct.hpp): that they take it, that the
// bytes are right, that they mix with calls through the loop (callers on
// several threads: server_client_test.cpp, PipelinesCallsFromManyThreads),
// and that every failure (a bad CRC, a lost
// server, a timeout, close() from another thread) ends the call with the
// framed path's error and leaves the client usable.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "control/client.hpp"
#include "control/client/direct.hpp"
#include "control/client/direct_io.hpp"
#include "core/log.hpp"
#include "dataplane/registry.hpp"
#include "graph/graph.hpp"
#include "server/server.hpp"
#include "server_client_testing.hpp"
#include "server_testing.hpp"

namespace genie {
namespace {

using Clock = std::chrono::steady_clock;
using wire::MsgType;

Config config(int port, int64_t timeout_ms = 5000, bool direct = true) {
  Config c = client_config(port, timeout_ms);
  c.direct_calls = direct;
  return c;
}

std::unique_ptr<Server> start_server() { return start_server_offering("direct-server", {}); }

// The first synchronous transfers of a session take the loop; the direct
// link opens after them (kDirectAfterCalls).
void warm_up(RemoteClient& c) {
  const uint64_t id = c.tensor_alloc(DType::F32, {1}, "cpu:0");
  float v = 0;
  for (uint64_t i = 0; i < kDirectAfterCalls; ++i) c.tensor_read(id, 0, &v, sizeof v);
  EXPECT_EQ(c.direct_transfers(), 0u);
  c.tensor_free(id);
}

// Writes and reads back a tensor of each size; each pair of calls must
// take the direct link (*calls counts them).
void round_trips(RemoteClient& c, std::initializer_list<size_t> sizes, uint64_t* calls) {
  for (size_t n : sizes) {
    SCOPED_TRACE(n);
    const auto src = random_bytes(n, static_cast<uint32_t>(n));
    const uint64_t id = c.tensor_alloc(DType::Bool, {static_cast<int64_t>(n)}, "cpu:0");
    c.tensor_write(id, 0, src.data(), n);
    std::vector<uint8_t> back(n, 0xee);
    c.tensor_read(id, 0, back.data(), n);
    EXPECT_TRUE(back == src);
    *calls += 2;
    EXPECT_EQ(c.direct_transfers(), *calls);
    c.tensor_free(id);
  }
}

class DirectTest : public ::testing::Test {
 protected:
  void SetUp() override { set_log_level(LogLevel::Error); }
};

TEST_F(DirectTest, SynchronousTransfersTakeTheCallersOwnSocket) {
  auto server = start_server();
  FrameProxy proxy(server->port());
  auto c = RemoteClient::connect(config(proxy.port(), 20000), "direct-a");
  EXPECT_EQ(proxy.accepted(), 2);  // control and data connections
  warm_up(*c);
  EXPECT_EQ(proxy.accepted(), 2);  // the first calls open nothing
  uint64_t calls = 0;
  // Around the read-ahead too: a payload read whole from the buffer with
  // its header, and one whose rest goes straight to the caller's buffer.
  constexpr size_t ra = dataplane::tcp::kReadAhead;
  round_trips(*c, {size_t{0}, size_t{1}, ra - 60, ra - 1, ra, ra + 1, size_t{4096}, size_t{64} << 10, kDirectMaxBytes},
              &calls);
  // One more connection, opened once and kept.
  EXPECT_EQ(proxy.accepted(), 3);
  // Larger transfers take the loop.
  const size_t big = kDirectMaxBytes + 1;
  const auto src = random_bytes(big, 5);
  const uint64_t bid = c->tensor_alloc(DType::Bool, {static_cast<int64_t>(big)}, "cpu:0");
  c->tensor_write(bid, 0, src.data(), big);
  std::vector<uint8_t> back(big);
  c->tensor_read(bid, 0, back.data(), big);
  EXPECT_TRUE(back == src);
  EXPECT_EQ(c->direct_transfers(), calls);

  // Off: the same calls go through the loop.
  auto off = RemoteClient::connect(config(server->port(), 5000, false), "direct-b");
  const uint64_t id = off->tensor_alloc(DType::F32, {2}, "cpu:0");
  for (uint64_t i = 0; i < 2 * kDirectAfterCalls; ++i) {
    const float v[2] = {1, float(i)};
    off->tensor_write(id, 0, v, sizeof v);
    float got[2] = {};
    off->tensor_read(id, 0, got, sizeof got);
    EXPECT_EQ(got[1], float(i));
  }
  EXPECT_EQ(off->direct_transfers(), 0u);
}

TEST_F(DirectTest, ServerErrorsComeBackAndTheLinkStaysUsable) {
  auto server = start_server();
  auto c = RemoteClient::connect(config(server->port()), "direct-a");
  warm_up(*c);
  uint8_t b[8] = {};
  expect_error(GENIE_ERR_NOT_FOUND, [&] { c->tensor_read(999, 0, b, 8); });
  const uint64_t id = c->tensor_alloc(DType::F32, {2}, "cpu:0");
  expect_error(GENIE_ERR_SIZE_MISMATCH, [&] { c->tensor_read(id, 4, b, 8); });
  // A refused write with a payload: the server closes that connection; the
  // next call opens another.
  expect_error(GENIE_ERR_SIZE_MISMATCH, [&] { c->tensor_write(id, 4, b, 8); });
  expect_error(GENIE_ERR_NOT_FOUND, [&] { c->tensor_write(999, 0, b, 8); });
  const float v[2] = {3, 4};
  c->tensor_write(id, 0, v, sizeof v);
  float got[2] = {};
  c->tensor_read(id, 0, got, sizeof got);
  EXPECT_EQ(got[0], 3.0f);
  EXPECT_EQ(got[1], 4.0f);
  EXPECT_EQ(c->direct_transfers(), 2u);
}

// Over a data transport with blocking channels (ucx), the direct link is
// that transport's channel driven by the caller: the same transfers land,
// errors come back as on TCP, and a refused write's closed channel is
// replaced by the next call.
TEST_F(DirectTest, OverUcxTheLinkIsTheTransportsBlockingChannel) {
  ::setenv("GENIE_TRANSPORT_PATH", GENIE_PLUGIN_DIR ":" GENIE_TEST_PLUGIN_DIR, 1);
  ::setenv("UCX_TLS", "tcp,self,sm", 0);  // no RDMA device needed; one set outside wins
#if defined(__SANITIZE_ADDRESS__)
  ::setenv("UCX_MEM_EVENTS", "no", 0);  // UCX's memory hooks and LeakSanitizer's exit-time scan do not mix
#endif
  const dataplane::TransportLookup ucx = dataplane::lookup_transport("ucx");
  if (!ucx.transport) GTEST_SKIP() << "ucx is not available here: " << ucx.reason;
  auto server = start_server_offering("direct-ucx", {"tcp", "ucx"});
  Config cfg = config(server->port(), 20000);
  cfg.transport = "ucx";  // demanded: no fall back to TCP
  cfg.local_rma = false;  // else the server on this host grants the tensors (server_local_rma_test.cpp)
  auto c = RemoteClient::connect(cfg, "direct-ucx");
  warm_up(*c);
  uint64_t calls = 0;
  round_trips(*c, {size_t{1}, size_t{4096}, size_t{64} << 10, kDirectMaxBytes}, &calls);
  uint8_t b[8] = {};
  expect_error(GENIE_ERR_NOT_FOUND, [&] { c->tensor_read(999, 0, b, 8); });
  const uint64_t id = c->tensor_alloc(DType::F32, {2}, "cpu:0");
  expect_error(GENIE_ERR_SIZE_MISMATCH, [&] { c->tensor_write(id, 4, b, 8); });
  const float v[2] = {3, 4};
  c->tensor_write(id, 0, v, sizeof v);
  float got[2] = {};
  c->tensor_read(id, 0, got, sizeof got);
  EXPECT_EQ(got[0], 3.0f);
  EXPECT_EQ(got[1], 4.0f);
  EXPECT_EQ(c->direct_transfers(), calls + 2);
}

// Graph submissions (asynchronous, through the loop on the control
// connection) between direct writes and reads: each submission sees the
// write before it, each read the graph's result.
TEST_F(DirectTest, InterleavesWithSubmissionsThroughTheLoop) {
  auto server = start_server();
  auto c = RemoteClient::connect(config(server->port()), "direct-a");
  warm_up(*c);
  Graph g("neg");
  g.add_input("x", DType::F32, {4});
  g.add_node("neg", "n", {"x"}, {"y"});
  g.mark_output("y");
  g.validate();
  const std::string json = graph_to_json(g);
  const uint64_t x = c->tensor_alloc(DType::F32, {4}, "cpu:0");
  for (int i = 0; i < 50; ++i) {
    const float in[4] = {float(i), float(-i), 0.5f, float(2 * i)};
    c->tensor_write(x, 0, in, sizeof in);
    std::promise<RemoteResult> done;
    // On the direct link: the read below shares it, and this thread
    // collects the completion.
    auto s = c->submit(json, {{"x", x}}, [&](RemoteResult&& r) { done.set_value(std::move(r)); });
    // A direct call while the submission is in flight.
    float again[4] = {};
    c->tensor_read(x, 0, again, sizeof again);
    EXPECT_EQ(again[3], float(2 * i));
    if (s) c->collect(*s, Clock::time_point::max());
    RemoteResult r = done.get_future().get();
    ASSERT_EQ(r.status, GENIE_OK) << r.detail;
    ASSERT_EQ(r.outputs.size(), 1u);
    float out[4] = {};
    c->tensor_read(r.outputs[0].tensor_id, 0, out, sizeof out);
    for (int k = 0; k < 4; ++k) EXPECT_EQ(out[k], -in[k]) << i << " " << k;
    c->tensor_free(r.outputs[0].tensor_id);
  }
  EXPECT_EQ(c->direct_transfers(), 150u);
}

TEST_F(DirectTest, AReplyWithABadCrcFailsWithProtocolAndTheNextCallWorks) {
  auto server = start_server();
  FrameProxy proxy(server->port());
  auto c = RemoteClient::connect(config(proxy.port()), "direct-a");
  warm_up(*c);
  const uint64_t id = c->tensor_alloc(DType::F32, {2}, "cpu:0");
  const float v[2] = {5, 6};
  c->tensor_write(id, 0, v, sizeof v);  // opens the direct link
  ASSERT_EQ(c->direct_transfers(), 1u);
  proxy.corrupt(MsgType::Ok);
  float got[2] = {7, 7};
  const std::string d = expect_error(GENIE_ERR_PROTOCOL, [&] { c->tensor_read(id, 0, got, sizeof got); });
  EXPECT_NE(d.find("CRC"), std::string::npos) << d;
  EXPECT_EQ(proxy.corrupted(), 1);
  EXPECT_EQ(got[0], 7.0f);  // the payload of a refused reply is not taken
  proxy.release();
  c->tensor_read(id, 0, got, sizeof got);
  EXPECT_EQ(got[1], 6.0f);
  EXPECT_EQ(c->direct_transfers(), 2u);
  EXPECT_EQ(proxy.accepted(), 4);  // a new direct link; the session's own connections stayed
}

TEST_F(DirectTest, ServerClosingMidCallFailsWithConnectionAndTheSessionResumes) {
  auto server = start_server();
  FrameProxy proxy(server->port());
  auto c = RemoteClient::connect(config(proxy.port(), 5000), "direct-a");
  warm_up(*c);
  const size_t n = 1 << 20;
  const auto src = random_bytes(n, 9);
  const uint64_t id = c->tensor_alloc(DType::Bool, {static_cast<int64_t>(n)}, "cpu:0");
  c->tensor_write(id, 0, src.data(), n);
  proxy.hold(MsgType::Ok);
  std::vector<uint8_t> back(n);
  auto pending = std::async(std::launch::async, [&] {
    const auto t0 = Clock::now();
    expect_error(GENIE_ERR_CONNECTION, [&] { c->tensor_read(id, 0, back.data(), n); });
    return ms_since(t0);
  });
  for (int i = 0; i < 500 && proxy.held() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(proxy.held(), 1);  // the read is in flight on the direct link
  const int accepted = proxy.accepted();
  proxy.cut();
  EXPECT_LT(pending.get(), 2000);
  proxy.release();
  // The session comes back (its control and data connections are accepted
  // again: a read made before the client has seen the loss of its loop's
  // connections could be sent on one of them); the next reads find the
  // tensor intact.
  ASSERT_TRUE(eventually([&] { return proxy.accepted() >= accepted + 2; })) << proxy.accepted();
  c->tensor_read(id, 0, back.data(), n);
  EXPECT_TRUE(back == src);
  c->tensor_read(id, 0, back.data(), n);
  EXPECT_TRUE(back == src);
  EXPECT_EQ(server->stats().sessions(), 1u);
}

TEST_F(DirectTest, ALinkTheServerClosedWhileQuietIsReplaced) {
  auto server = start_server();
  FrameProxy proxy(server->port());
  auto c = RemoteClient::connect(config(proxy.port(), 5000), "direct-a");
  warm_up(*c);
  const auto src = random_bytes(4096, 21);
  const uint64_t id = c->tensor_alloc(DType::Bool, {4096}, "cpu:0");
  c->tensor_write(id, 0, src.data(), src.size());
  const uint64_t before = c->direct_transfers();
  ASSERT_GT(before, 0u);
  ASSERT_EQ(proxy.accepted(), 3);  // control, data, the direct link
  proxy.cut_last();                // the direct link, as a server that dropped it would
  std::this_thread::sleep_for(kDirectQuietCheck * 20);
  // Checked before use: the call goes on a new link, not the closed one.
  std::vector<uint8_t> back(src.size());
  c->tensor_read(id, 0, back.data(), back.size());
  EXPECT_TRUE(back == src);
  EXPECT_EQ(c->direct_transfers(), before + 1);
  EXPECT_EQ(proxy.accepted(), 4);
  EXPECT_EQ(server->stats().sessions(), 1u);
}

TEST_F(DirectTest, NoReplyWithinTheTimeoutFailsWithTimeout) {
  auto server = start_server();
  FrameProxy proxy(server->port());
  auto c = RemoteClient::connect(config(proxy.port(), 500), "direct-a");
  warm_up(*c);
  const uint64_t id = c->tensor_alloc(DType::Bool, {1 << 16}, "cpu:0");
  const auto src = random_bytes(1 << 16, 3);
  c->tensor_write(id, 0, src.data(), src.size());
  proxy.hold(MsgType::Ok);
  std::vector<uint8_t> dst(1 << 16);
  const auto t0 = Clock::now();
  expect_error(GENIE_ERR_TIMEOUT, [&] { c->tensor_read(id, 0, dst.data(), dst.size()); });
  EXPECT_GE(ms_since(t0), 450);
  EXPECT_LT(ms_since(t0), 3000);
  proxy.release();
  c->tensor_read(id, 0, dst.data(), dst.size());
  EXPECT_TRUE(dst == src);
}

TEST_F(DirectTest, CloseFromAnotherThreadEndsABlockedCallWithShutdown) {
  auto server = start_server();
  FrameProxy proxy(server->port());
  auto c = RemoteClient::connect(config(proxy.port(), 20000), "direct-a");
  warm_up(*c);
  const uint64_t id = c->tensor_alloc(DType::F32, {4}, "cpu:0");
  const float v[4] = {};
  c->tensor_write(id, 0, v, sizeof v);
  proxy.hold(MsgType::Ok);
  auto pending = std::async(std::launch::async, [&] {
    float got[4];
    const auto t0 = Clock::now();
    expect_error(GENIE_ERR_SHUTDOWN, [&] { c->tensor_read(id, 0, got, sizeof got); });
    return ms_since(t0);
  });
  for (int i = 0; i < 500 && proxy.held() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(proxy.held(), 1);
  c->close();
  EXPECT_LT(pending.get(), 5000);
  expect_error(GENIE_ERR_SHUTDOWN, [&] { c->tensor_write(id, 0, v, sizeof v); });
}

}  // namespace
}  // namespace genie
