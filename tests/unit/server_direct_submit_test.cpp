// Graph submissions on the direct link (control/client/direct.hpp,
// "Submissions"): that they take it once the server offers it, that the
// waiting thread reads its own completion, that completions nobody waits
// for still arrive (the watcher), that transfers and submissions share the
// link, and that every failure (a lost server, close()) completes each
// submission the link owed exactly once.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "control/client.hpp"
#include "control/client/direct.hpp"
#include "core/log.hpp"
#include "graph/graph.hpp"
#include "server/server.hpp"
#include "server_client_testing.hpp"
#include "server_testing.hpp"

namespace genie {
namespace {

using Clock = std::chrono::steady_clock;
using wire::MsgType;

Config config(int port, int64_t timeout_ms = 5000) {
  Config c = client_config(port, timeout_ms);
  c.direct_calls = true;
  return c;
}

std::unique_ptr<Server> start_server() { return start_server_offering("direct-server", {}); }

// y = -x over 4 floats.
std::string neg_graph() {
  Graph g("neg");
  g.add_input("x", DType::F32, {4});
  g.add_node("neg", "n", {"x"}, {"y"});
  g.mark_output("y");
  g.validate();
  return graph_to_json(g);
}

// The first synchronous calls of a session take the loop; the direct link
// is used after them (kDirectAfterCalls).
uint64_t warm_up(RemoteClient& c) {
  const uint64_t x = c.tensor_alloc(DType::F32, {4}, "cpu:0");
  const float in[4] = {1, -2, 3, -4};
  for (uint64_t i = 0; i < kDirectAfterCalls; ++i) c.tensor_write(x, 0, in, sizeof in);
  return x;
}

struct Outcome {
  std::promise<RemoteResult> result;
  std::atomic<bool> ran{false};
  std::thread::id thread;
};

std::function<void(RemoteResult&&)> into(Outcome& o) {
  return [&o](RemoteResult&& r) {
    EXPECT_FALSE(o.ran.exchange(true)) << "a completion ran twice";
    o.thread = std::this_thread::get_id();
    o.result.set_value(std::move(r));
  };
}

std::vector<float> read4(RemoteClient& c, uint64_t id) {
  std::vector<float> v(4);
  c.tensor_read(id, 0, v.data(), 16);
  return v;
}

class DirectSubmitTest : public ::testing::Test {
 protected:
  void SetUp() override { set_log_level(LogLevel::Error); }
};

TEST_F(DirectSubmitTest, TheWaitingThreadReadsItsOwnCompletion) {
  auto server = start_server();
  FrameProxy proxy(server->port());
  auto c = RemoteClient::connect(config(proxy.port()), "direct-a");
  const uint64_t x = warm_up(*c);
  for (int i = 0; i < 20; ++i) {
    Outcome o;
    auto s = c->submit(neg_graph(), {{"x", x}}, into(o));
    ASSERT_NE(s, nullptr) << "submission " << i << " took the loop";
    c->collect(*s, Clock::time_point::max());
    ASSERT_TRUE(o.ran.load());
    EXPECT_EQ(o.thread, std::this_thread::get_id());  // no other thread in between
    RemoteResult r = o.result.get_future().get();
    ASSERT_EQ(r.status, GENIE_OK) << r.detail;
    ASSERT_EQ(r.outputs.size(), 1u);
    EXPECT_EQ(read4(*c, r.outputs[0].tensor_id), (std::vector<float>{-1, 2, -3, 4}));
    c->tensor_free(r.outputs[0].tensor_id);
  }
  EXPECT_EQ(c->direct_submits(), 20u);
  EXPECT_EQ(proxy.accepted(), 3);  // control, data, and the direct link
  // The outputs freed above went out ahead of later submissions.
  ASSERT_TRUE(eventually([&] { return server->stats().tensors() == 1; })) << server->stats().tensors();
}

// Submits y = -x on x and waits; the output is freed at once, so that the
// next submission finds the free queued.
void submit_and_free(RemoteClient& c, uint64_t x) {
  Outcome o;
  auto s = c.submit(neg_graph(), {{"x", x}}, into(o));
  ASSERT_NE(s, nullptr) << "the submission took the loop";
  c.collect(*s, Clock::time_point::max());
  RemoteResult r = o.result.get_future().get();
  ASSERT_EQ(r.status, GENIE_OK) << r.detail;
  ASSERT_EQ(r.outputs.size(), 1u);
  c.tensor_free(r.outputs[0].tensor_id);
}

TEST_F(DirectSubmitTest, FreesRideInTheNextSubmission) {
  auto server = start_server();
  auto c = RemoteClient::connect(config(server->port()), "direct-a");
  const uint64_t x = warm_up(*c);
  for (int i = 0; i < 10; ++i) submit_and_free(*c, x);
  EXPECT_EQ(c->direct_submits(), 10u);
  // Each output freed went inside the next submission (one whose flush
  // timer fired first, on a slow machine, goes as a TensorFree frame).
  EXPECT_GE(c->direct_frees_carried(), 1u);
  EXPECT_LE(c->direct_frees_carried(), 9u);
  // The server freed them: x is all that is left.
  ASSERT_TRUE(eventually([&] { return server->stats().tensors() == 1; })) << server->stats().tensors();
}

TEST_F(DirectSubmitTest, FreesInARefusedSubmissionAreFreedToo) {
  auto server = start_server();
  auto c = RemoteClient::connect(config(server->port()), "direct-a");
  const uint64_t x = warm_up(*c);
  const uint64_t wrong = c->tensor_alloc(DType::F32, {8}, "cpu:0");  // the graph takes [4]
  submit_and_free(*c, x);
  Outcome o;
  auto s = c->submit(neg_graph(), {{"x", wrong}}, into(o));
  ASSERT_NE(s, nullptr);
  c->collect(*s, Clock::time_point::max());
  EXPECT_EQ(o.result.get_future().get().status, GENIE_ERR_SHAPE_MISMATCH);
  ASSERT_EQ(c->direct_frees_carried(), 1u);  // the first output's, inside the refused one
  // Never sent again, yet freed: x and `wrong` are left.
  ASSERT_TRUE(eventually([&] { return server->stats().tensors() == 2; })) << server->stats().tensors();
}

TEST_F(DirectSubmitTest, AServerWithoutFreesInSubmissionsGetsTensorFreeFrames) {
  auto server = start_server();
  FrameProxy proxy(server->port());
  proxy.strip_submit_frees();
  auto c = RemoteClient::connect(config(proxy.port()), "direct-a");
  const uint64_t x = warm_up(*c);
  for (int i = 0; i < 10; ++i) submit_and_free(*c, x);
  EXPECT_EQ(c->direct_submits(), 10u);
  EXPECT_EQ(c->direct_frees_carried(), 0u);
  ASSERT_TRUE(eventually([&] { return server->stats().tensors() == 1; })) << server->stats().tensors();
}

TEST_F(DirectSubmitTest, ACollectThatTimesOutLeavesTheSubmissionToFinishLater) {
  auto server = start_server();
  FrameProxy proxy(server->port());
  auto c = RemoteClient::connect(config(proxy.port()), "direct-a");
  const uint64_t x = warm_up(*c);
  proxy.hold(MsgType::GraphDone);
  Outcome o;
  auto s = c->submit(neg_graph(), {{"x", x}}, into(o));
  ASSERT_NE(s, nullptr);
  const auto t0 = Clock::now();
  c->collect(*s, Clock::now() + std::chrono::milliseconds(100));
  EXPECT_GE(ms_since(t0), 90);
  EXPECT_FALSE(o.ran.load());
  proxy.release();
  c->collect(*s, Clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(o.ran.load());
  EXPECT_EQ(o.result.get_future().get().status, GENIE_OK);
}

TEST_F(DirectSubmitTest, CompletionsNobodyWaitsForArriveThroughTheWatcher) {
  auto server = start_server();
  auto c = RemoteClient::connect(config(server->port()), "direct-a");
  const uint64_t x = warm_up(*c);
  constexpr int kGraphs = 32;
  std::vector<Outcome> outs(kGraphs);
  for (int i = 0; i < kGraphs; ++i) {
    // The handle goes at once: nobody will collect.
    EXPECT_NE(c->submit(neg_graph(), {{"x", x}}, into(outs[static_cast<size_t>(i)])), nullptr);
  }
  for (auto& o : outs) {
    auto f = o.result.get_future();
    ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    EXPECT_EQ(f.get().status, GENIE_OK);
    EXPECT_NE(o.thread, std::this_thread::get_id());
  }
  EXPECT_EQ(c->direct_submits(), uint64_t{kGraphs});
}

TEST_F(DirectSubmitTest, ManyInFlightAndTransfersBetweenThem) {
  auto server = start_server();
  auto c = RemoteClient::connect(config(server->port()), "direct-a");
  const uint64_t x = warm_up(*c);
  const uint64_t before = c->direct_transfers();
  constexpr int kGraphs = 16;
  std::vector<Outcome> outs(kGraphs);
  std::vector<std::shared_ptr<RemoteClient::Submission>> subs;
  for (int i = 0; i < kGraphs; ++i) {
    subs.push_back(c->submit(neg_graph(), {{"x", x}}, into(outs[static_cast<size_t>(i)])));
    ASSERT_NE(subs.back(), nullptr);
    // A transfer on the link reads the completions that come before its reply.
    EXPECT_EQ(read4(*c, x), (std::vector<float>{1, -2, 3, -4}));
  }
  EXPECT_EQ(c->direct_transfers(), before + kGraphs);
  // Collected in reverse: whoever reads completes the others.
  for (int i = kGraphs - 1; i >= 0; --i) {
    c->collect(*subs[static_cast<size_t>(i)], Clock::time_point::max());
    ASSERT_TRUE(outs[static_cast<size_t>(i)].ran.load());
  }
  for (auto& o : outs) EXPECT_EQ(o.result.get_future().get().status, GENIE_OK);
}

TEST_F(DirectSubmitTest, WaitersOnManyThreadsEachGetTheirOwn) {
  auto server = start_server();
  auto c = RemoteClient::connect(config(server->port()), "direct-a");
  const uint64_t x = warm_up(*c);
  constexpr int kThreads = 4, kEach = 50;
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        Outcome o;
        auto s = c->submit(neg_graph(), {{"x", x}}, into(o));
        if (s) c->collect(*s, Clock::time_point::max());
        RemoteResult r = o.result.get_future().get();
        if (r.status != GENIE_OK || r.outputs.size() != 1) {
          ++bad;
          continue;
        }
        c->tensor_free(r.outputs[0].tensor_id);
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(c->direct_submits(), 0u);
}

TEST_F(DirectSubmitTest, AServerWithoutItGetsSubmissionsOnTheControlConnection) {
  auto server = start_server();
  FrameProxy proxy(server->port());
  proxy.strip_data_submit();
  auto c = RemoteClient::connect(config(proxy.port()), "direct-a");
  const uint64_t x = warm_up(*c);
  for (int i = 0; i < 5; ++i) {
    Outcome o;
    EXPECT_EQ(c->submit(neg_graph(), {{"x", x}}, into(o)), nullptr);
    EXPECT_EQ(o.result.get_future().get().status, GENIE_OK);
  }
  EXPECT_EQ(c->direct_submits(), 0u);
  // Transfers still take the direct link.
  EXPECT_EQ(read4(*c, x), (std::vector<float>{1, -2, 3, -4}));
  EXPECT_GT(c->direct_transfers(), 0u);
}

TEST_F(DirectSubmitTest, ALostConnectionFailsWhatTheLinkOwedAndTheSessionResumes) {
  auto server = start_server();
  FrameProxy proxy(server->port());
  auto c = RemoteClient::connect(config(proxy.port()), "direct-a");
  const uint64_t x = warm_up(*c);
  proxy.hold(MsgType::GraphDone);
  Outcome waited, unwatched;
  auto s = c->submit(neg_graph(), {{"x", x}}, into(waited));
  ASSERT_NE(s, nullptr);
  auto s2 = c->submit(neg_graph(), {{"x", x}}, into(unwatched));
  ASSERT_NE(s2, nullptr);
  auto pending = std::async(std::launch::async, [&] {
    const auto t0 = Clock::now();
    c->collect(*s, Clock::time_point::max());
    return ms_since(t0);
  });
  ASSERT_TRUE(eventually([&] { return proxy.held() == 2; })) << proxy.held();
  const int accepted = proxy.accepted();
  proxy.cut();
  EXPECT_LT(pending.get(), 3000);
  for (Outcome* o : {&waited, &unwatched}) {
    ASSERT_TRUE(o->ran.load());
    const RemoteResult r = o->result.get_future().get();
    EXPECT_EQ(r.status, GENIE_ERR_CONNECTION) << r.detail;
  }
  proxy.release();
  // The session comes back (its control and data connections are accepted
  // again); the link opens again and submissions take it. A submission
  // made before the client has seen the loss of its loop's connections
  // could be sent on one of them, and fail with it.
  ASSERT_TRUE(eventually([&] { return proxy.accepted() >= accepted + 2; })) << proxy.accepted();
  Outcome again;
  auto s3 = c->submit(neg_graph(), {{"x", x}}, into(again));
  if (s3) c->collect(*s3, Clock::time_point::max());
  const RemoteResult r = again.result.get_future().get();
  ASSERT_EQ(r.status, GENIE_OK) << r.detail;
  EXPECT_EQ(read4(*c, r.outputs[0].tensor_id), (std::vector<float>{-1, 2, -3, 4}));
  EXPECT_EQ(server->stats().sessions(), 1u);
}

// A wrong frame for an owed submission (here a TensorFree where its
// GraphDone belongs) breaks the link: that submission and every other one
// the link owed fail with PROTOCOL, none is lost, and the next submission
// takes a new link.
TEST_F(DirectSubmitTest, AWrongFrameForASubmissionFailsWhatTheLinkOwed) {
  auto server = start_server();
  FrameProxy proxy(server->port());
  auto c = RemoteClient::connect(config(proxy.port()), "direct-a");
  const uint64_t x = warm_up(*c);
  proxy.retype(MsgType::GraphDone, MsgType::TensorFree);
  Outcome third, fourth;
  auto s3 = c->submit(neg_graph(), {{"x", x}}, into(third));
  ASSERT_NE(s3, nullptr);
  auto s4 = c->submit(neg_graph(), {{"x", x}}, into(fourth));
  ASSERT_NE(s4, nullptr);
  const auto t0 = Clock::now();
  c->collect(*s4, Clock::now() + std::chrono::seconds(5));
  EXPECT_LT(ms_since(t0), 4000) << "a submission was lost: its collect waited for the deadline";
  for (Outcome* o : {&third, &fourth}) {
    ASSERT_TRUE(o->ran.load());
    const RemoteResult r = o->result.get_future().get();
    EXPECT_EQ(r.status, GENIE_ERR_PROTOCOL) << r.detail;
  }
  proxy.release();
  Outcome again;
  auto s5 = c->submit(neg_graph(), {{"x", x}}, into(again));
  ASSERT_NE(s5, nullptr);
  c->collect(*s5, Clock::now() + std::chrono::seconds(5));
  const RemoteResult r = again.result.get_future().get();
  ASSERT_EQ(r.status, GENIE_OK) << r.detail;
  EXPECT_EQ(read4(*c, r.outputs[0].tensor_id), (std::vector<float>{-1, 2, -3, 4}));
}

TEST_F(DirectSubmitTest, CloseEndsEveryOwedSubmissionWithShutdown) {
  auto server = start_server();
  auto c = RemoteClient::connect(config(server->port(), 20000), "direct-a");
  const uint64_t id = c->tensor_alloc(DType::F32, {256, 256}, "cpu:0");
  std::vector<float> ones(256 * 256, 1.0f);
  for (uint64_t i = 0; i < kDirectAfterCalls; ++i) c->tensor_write(id, 0, ones.data(), ones.size() * 4);
  Outcome waited, unwatched;
  auto s = c->submit(slow_graph(400), {{"x", id}}, into(waited));
  ASSERT_NE(s, nullptr);
  c->submit(slow_graph(400), {{"x", id}}, into(unwatched));  // handle dropped: the watcher's
  auto pending = std::async(std::launch::async, [&] {
    c->collect(*s, Clock::time_point::max());
    return waited.ran.load();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto t0 = Clock::now();
  c->close();
  EXPECT_LT(ms_since(t0), 5000);
  EXPECT_TRUE(pending.get());
  for (Outcome* o : {&waited, &unwatched}) {
    ASSERT_TRUE(o->ran.load());
    const RemoteResult r = o->result.get_future().get();
    EXPECT_EQ(r.status, GENIE_ERR_SHUTDOWN) << r.detail;
  }
}

}  // namespace
}  // namespace genie
