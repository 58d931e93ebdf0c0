// One-sided transfers between local processes (control/client/rma_local.hpp):
// over ucx, a server reached on a loopback address grants the client its
// host tensors at allocation, and the client's writes and reads copy
// straight into and out of them. The bytes must be the server's (a graph
// computes with what one-sided writes put there), out-of-range and freed
// tensors must get the server's errors, and nothing is granted where it
// must not be (a remote peer, the switch off, TCP), nor acted on when the
// grant names a process that is not the server.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <future>
#include <vector>

#include "control/client.hpp"
#include "control/client/rma_local.hpp"
#include "core/log.hpp"
#include "dataplane/registry.hpp"
#include "graph/graph.hpp"
#include "server/rma.hpp"
#include "server/server.hpp"
#include "server_client_testing.hpp"
#include "server_testing.hpp"

namespace genie {
namespace {

class LocalRmaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    set_log_level(std::getenv("GENIE_TEST_LOG") ? LogLevel::Debug : LogLevel::Error);
    ::setenv("GENIE_TRANSPORT_PATH", GENIE_PLUGIN_DIR ":" GENIE_TEST_PLUGIN_DIR, 1);
    ::setenv("UCX_TLS", "tcp,self,sm", 0);  // no RDMA device needed; one set outside wins
#if defined(__SANITIZE_ADDRESS__)
    ::setenv("UCX_MEM_EVENTS", "no", 0);  // UCX's memory hooks and LeakSanitizer's exit-time scan do not mix
#endif
  }
  // A client of `server` whose data transport is ucx (demanded: no fall
  // back to TCP), or skipped where ucx is missing.
  std::shared_ptr<RemoteClient> ucx_client(Server& server, bool local_rma = true) {
    Config cfg = client_config(server.port(), 20000);
    cfg.transport = "ucx";
    cfg.local_rma = local_rma;
    return RemoteClient::connect(cfg, "local-rma-client");
  }
  bool have_ucx() {
    const dataplane::TransportLookup ucx = dataplane::lookup_transport("ucx");
    why_not_ = ucx.reason;
    return ucx.transport != nullptr;
  }
  std::string why_not_;
};

TEST_F(LocalRmaTest, TransfersAreOneSidedAndTheBytesAreTheServers) {
  if (!have_ucx()) GTEST_SKIP() << "ucx is not available here: " << why_not_;
  auto server = start_server_offering("local-rma", {"tcp", "ucx"});
  auto c = ucx_client(*server);
  const int64_t n = (4 << 20) / 4 + 3;  // floats: several pages, a ragged end
  Graph g("neg");
  g.add_input("x", DType::F32, {n});
  g.add_node("neg", "n", {"x"}, {"y"});
  g.mark_output("y");
  g.validate();
  const uint64_t x = c->tensor_alloc(DType::F32, {n}, "cpu:0");
  std::vector<float> want(static_cast<size_t>(n));
  for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<float>(i % 1000) - 500.0f;
  // Whole, then in pieces at unaligned offsets.
  c->tensor_write(x, 0, want.data(), want.size() * sizeof(float));
  for (size_t at : {size_t{1}, size_t{4093}, want.size() / 2}) {
    for (size_t i = at; i < at + 1000; ++i) want[i] = static_cast<float>(i);
    c->tensor_write(x, at * sizeof(float), want.data() + at, 1000 * sizeof(float));
  }
  EXPECT_EQ(c->local_transfers(), 4u);
  // The server computes with what the one-sided writes put there...
  std::promise<RemoteResult> done;
  auto s = c->submit(graph_to_json(g), {{"x", x}}, [&](RemoteResult&& r) { done.set_value(std::move(r)); });
  if (s) c->collect(*s, std::chrono::steady_clock::time_point::max());
  RemoteResult r = done.get_future().get();
  ASSERT_EQ(r.status, GENIE_OK) << r.detail;
  ASSERT_EQ(r.outputs.size(), 1u);
  // ... and its output, which it did not grant, comes back through it.
  std::vector<float> y(want.size(), 1.0f);
  c->tensor_read(r.outputs[0].tensor_id, 0, y.data(), y.size() * sizeof(float));
  EXPECT_EQ(c->local_transfers(), 4u);
  size_t wrong = 0;
  for (size_t i = 0; i < y.size(); ++i) wrong += y[i] != -want[i];
  EXPECT_EQ(wrong, 0u);
  // One-sided reads of the same memory, whole and in pieces.
  std::vector<float> back(want.size(), 0.0f);
  c->tensor_read(x, 0, back.data(), back.size() * sizeof(float));
  EXPECT_TRUE(back == want);
  float piece[3] = {};
  c->tensor_read(x, (want.size() - 3) * sizeof(float), piece, sizeof piece);
  EXPECT_EQ(piece[2], want.back());
  EXPECT_EQ(c->local_transfers(), 6u);
  EXPECT_EQ(c->direct_transfers(), 0u);
  c->tensor_free(r.outputs[0].tensor_id);
  c->tensor_free(x);
}

TEST_F(LocalRmaTest, OutOfRangeAndFreedTensorsGetTheServersErrors) {
  if (!have_ucx()) GTEST_SKIP() << "ucx is not available here: " << why_not_;
  auto server = start_server_offering("local-rma", {"tcp", "ucx"});
  auto c = ucx_client(*server);
  const uint64_t id = c->tensor_alloc(DType::F32, {2}, "cpu:0");
  const float v[4] = {1, 2, 3, 4};
  float got[4] = {};
  c->tensor_write(id, 0, v, 8);
  c->tensor_read(id, 0, got, 8);
  EXPECT_EQ(got[1], 2.0f);
  EXPECT_EQ(c->local_transfers(), 2u);
  // Out of range: not copied, but asked of the server, which refuses.
  expect_error(GENIE_ERR_SIZE_MISMATCH, [&] { c->tensor_read(id, 0, got, 12); });
  expect_error(GENIE_ERR_SIZE_MISMATCH, [&] { c->tensor_read(id, 8, got, 4); });
  EXPECT_EQ(c->local_transfers(), 2u);
  // Freed: the grant goes with it, and the server answers.
  const uint64_t gone = c->tensor_alloc(DType::F32, {2}, "cpu:0");
  c->tensor_write(gone, 0, v, 8);
  EXPECT_EQ(c->local_transfers(), 3u);
  c->tensor_free(gone);
  // The free reaches the server with the next request (or within
  // kFreeFlushMs); the reads meanwhile go through the server, never to the
  // memory the free gives back.
  EXPECT_TRUE(eventually([&] {
    try {
      c->tensor_read(gone, 0, got, 8);
      return false;
    } catch (const Error& e) {
      return e.code() == GENIE_ERR_NOT_FOUND;
    }
  }));
  expect_error(GENIE_ERR_NOT_FOUND, [&] { c->tensor_write(gone, 0, v, 8); });
  EXPECT_EQ(c->local_transfers(), 3u);
  // A refused write's payload closes the connection it came on; the
  // session, and the grants made in it, stand.
  expect_error(GENIE_ERR_SIZE_MISMATCH, [&] { c->tensor_write(id, 0, v, 16); });
  c->tensor_write(id, 0, v + 2, 8);
  c->tensor_read(id, 0, got, 8);
  EXPECT_EQ(got[0], 3.0f);
  EXPECT_EQ(got[1], 4.0f);
  EXPECT_EQ(c->local_transfers(), 5u);
  c->tensor_free(id);
}

TEST_F(LocalRmaTest, NothingOneSidedWithTheSwitchOffOrOverTcp) {
  if (!have_ucx()) GTEST_SKIP() << "ucx is not available here: " << why_not_;
  auto server = start_server_offering("local-rma", {"tcp", "ucx"});
  for (const bool over_ucx : {true, false}) {
    SCOPED_TRACE(over_ucx ? "ucx, GENIE_LOCAL_RMA=0" : "tcp");
    std::shared_ptr<RemoteClient> c;
    if (over_ucx) {
      c = ucx_client(*server, false);
    } else {
      c = RemoteClient::connect(client_config(server->port(), 20000), "local-rma-client");
    }
    const uint64_t id = c->tensor_alloc(DType::Bool, {4096}, "cpu:0");
    const auto src = random_bytes(4096, 3);
    std::vector<uint8_t> back(4096);
    for (int i = 0; i < 8; ++i) {
      c->tensor_write(id, 0, src.data(), src.size());
      c->tensor_read(id, 0, back.data(), back.size());
    }
    EXPECT_TRUE(back == src);
    EXPECT_EQ(c->local_transfers(), 0u);
    EXPECT_GT(c->direct_transfers(), 0u);  // the caller-driven path instead
  }
}

TEST(LocalGrant, OnlyForLoopbackPeersAndHostTensors) {
  TensorData t(DType::Bool, Shape{64});
  for (const char* peer : {"127.0.0.1:5000", "127.3.4.5:1", "[::1]:5000"}) {
    wire::TensorAllocReply r;
    grant_local(peer, t, &r);
    ASSERT_TRUE(r.has_grant()) << peer;
    EXPECT_EQ(r.grant().pid(), static_cast<uint64_t>(::getpid()));
    EXPECT_EQ(r.grant().address(), reinterpret_cast<uint64_t>(t.bytes()));
    EXPECT_EQ(r.grant().length(), 64u);
  }
  for (const char* peer : {"10.0.0.1:5000", "[2001:db8::1]:5000", "192.168.1.1:1", ""}) {
    wire::TensorAllocReply r;
    grant_local(peer, t, &r);
    EXPECT_FALSE(r.has_grant()) << peer;
  }
  TensorData empty(DType::Bool, Shape{0});
  wire::TensorAllocReply r;
  grant_local("127.0.0.1:5000", empty, &r);
  EXPECT_FALSE(r.has_grant());
}

// The client acts on a grant only when it names the process that listens
// where the client connected (that address and port): any other process
// (another of the same user, one listening on the port at another address,
// a pid of another namespace) is refused.
TEST(LocalGrant, TheGrantMustNameTheProcessListeningOnThePort) {
  // Started first, so that it never holds the listener.
  const pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  int port = 0;
  const int fd = listen_local(&port);
  ASSERT_GE(fd, 0);
  const auto self = static_cast<uint64_t>(::getpid());
  EXPECT_EQ(check_listener(self, "127.0.0.1", port), "");
  EXPECT_EQ(check_listener(self, "localhost", port), "");
  // Listening on the port, but not on the address the client connected to.
  const std::string elsewhere = check_listener(self, "127.0.0.2", port);
  EXPECT_NE(elsewhere.find("no socket listens on 127.0.0.2 port"), std::string::npos) << elsewhere;
  const std::string other = check_listener(static_cast<uint64_t>(child), "127.0.0.1", port);
  EXPECT_NE(other.find("holds no socket listening on port"), std::string::npos) << other;
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(fd);
  const std::string none = check_listener(self, "127.0.0.1", port);
  EXPECT_NE(none.find("no socket listens on 127.0.0.1 port"), std::string::npos) << none;
}

}  // namespace
}  // namespace genie
