// The transport interface (dataplane/transport.hpp), run the same way over
// every transport this build has: TCP (built in), the loopback plugin,
// the UCX plugin where UCX was found (over UCX's TCP and shared memory
// here: UCX_TLS=tcp,self,sm unless the environment says otherwise) and,
// where DPDK is installed, the dpdk plugin over an in-process net_ring port
// (EAL starts once per process: ctest runs each case in its own), loaded
// by name. A listener on one loop, a connecting channel on another:
// frames with payloads landing in the receiver's sinks, order, message
// limits both ways, the order of callbacks at close, loop teardown,
// capabilities, registered memory and remote memory access.
#include <gtest/gtest.h>

#if __has_include(<ucp/api/ucp_version.h>)
#include <ucp/api/ucp_version.h>
#endif

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "dataplane/registry.hpp"
#include "dataplane/transport_bytes.hpp"
#include "dataplane_testing.hpp"

#ifdef GENIE_TEST_UCX
#include <ucp/api/ucp.h>
#endif

namespace genie::dataplane {
namespace {

using testing::kWait;
using testing::pattern;
using testing::TestLoop;

// One end of a channel: records frames, payloads (received into buffers of
// its own), sends' completions and the close, in the order they happened.
struct End : std::enable_shared_from_this<End> {
  struct Got {
    FrameHeader h;
    std::string msg;
    std::shared_ptr<std::vector<uint8_t>> payload;
    bool payload_done = false;
  };

  bool refuse_payloads = false;
  std::shared_ptr<Channel> ch;  // the accepted channel (listening end)

  std::mutex mu;
  std::condition_variable cv;
  std::vector<Got> frames;
  std::vector<std::string> events;
  int closes = 0;
  genie_status_t close_status = 1;
  std::string close_detail;

  void note(const std::string& e) {
    std::lock_guard<std::mutex> lk(mu);
    events.push_back(e);
    cv.notify_all();
  }

  template <class Pred>
  bool wait(Pred pred) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, kWait, pred);
  }

  ChannelHandlers handlers(FrameTypes types = {}) {
    auto self = shared_from_this();
    ChannelHandlers h;
    h.types = types;
    h.on_frame = [self](const FrameHeader& fh, std::string&& msg) -> PayloadSink {
      std::lock_guard<std::mutex> lk(self->mu);
      const size_t i = self->frames.size();
      self->frames.push_back({fh, std::move(msg), nullptr, false});
      self->cv.notify_all();
      if (fh.payload_len == 0 || self->refuse_payloads) return {};
      auto buf = std::make_shared<std::vector<uint8_t>>(fh.payload_len);
      self->frames[i].payload = buf;
      return PayloadSink{buf->data(), buf, [self, i] {
                           std::lock_guard<std::mutex> lk2(self->mu);
                           self->frames[i].payload_done = true;
                           self->cv.notify_all();
                         }};
    };
    h.on_close = [self](genie_status_t st, const std::string& d) {
      std::lock_guard<std::mutex> lk(self->mu);
      ++self->closes;
      self->close_status = st;
      self->close_detail = d;
      self->events.push_back("on_close");
      self->cv.notify_all();
    };
    return h;
  }
};

bool accepts_only_7(uint16_t type) { return type == 7; }

// The test of what a process gets without GENIE_UCX_RMA (each test runs in
// a process of its own).
bool default_rma_test() {
  return std::string(::testing::UnitTest::GetInstance()->current_test_info()->name())
             .find("NoEmulatedRmaByDefault") != std::string::npos;
}

class Transports : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    testing::use_build_plugins();
    if (GetParam() == "dpdk") testing::use_dpdk_ring();
    ::setenv("UCX_TLS", "tcp,self,sm", 0);  // no RDMA device needed; one set outside wins
    // RMA without RDMA hardware, as the RMA tests need it (docs/ucx.md,
    // "Software-emulated RMA"; UcxDefaults below checks what a process gets
    // without it).
    if (GetParam() == "ucx" && !default_rma_test()) ::setenv("GENIE_UCX_RMA", "always", 0);
#if defined(__SANITIZE_ADDRESS__)
    // UCX's memory hooks and LeakSanitizer's exit-time scan do not mix.
    ::setenv("UCX_MEM_EVENTS", "no", 0);
#endif
    TransportLookup got = lookup_transport(GetParam());
    if (!got.transport && GetParam() == "ucx")
      GTEST_SKIP() << "ucx is not available here (UCX not found at build time, or it does not start): "
                   << got.reason;
    // A transport whose hardware or libraries this machine lacks says so
    // (UNSUPPORTED); the two this build always has must load.
    if (!got.transport && got.status == GENIE_ERR_UNSUPPORTED && GetParam() != "tcp" &&
        GetParam() != "loopback")
      GTEST_SKIP() << GetParam() << " is not available here: " << got.reason;
    ASSERT_TRUE(got.transport) << got.reason;
    t_ = got.transport;
  }

  struct Pair {
    std::shared_ptr<End> client = std::make_shared<End>();
    std::shared_ptr<End> server = std::make_shared<End>();
    std::shared_ptr<Listener> listener;
    std::shared_ptr<Channel> c;  // the client's channel
  };

  // A listener on the server loop and a channel to it from the client loop,
  // both ends connected.
  Pair open(ChannelOptions server_opts = {}, ChannelOptions client_opts = {}, FrameTypes server_types = {}) {
    Pair p;
    auto server = p.server;
    p.listener = server_loop_.run([&] {
      return t_->listen(server_loop_.loop(), "127.0.0.1:0", server_opts, [server, server_types](Listener& l) {
        auto ch = l.accept(server->handlers(server_types));
        std::lock_guard<std::mutex> lk(server->mu);
        server->ch = ch;
        server->cv.notify_all();
      });
    });
    const std::string addr = server_loop_.run([&] { return p.listener->address(); });
    EXPECT_FALSE(addr.empty());
    auto client = p.client;
    p.c = client_loop_.run([&] {
      return t_->connect(client_loop_.loop(), addr, client_opts, client->handlers(),
                         [client](genie_status_t st, const std::string& d) {
                           client->note(st == GENIE_OK ? "connected" : "connect failed: " + d);
                         });
    });
    EXPECT_TRUE(client->wait([&] { return !client->events.empty(); }));
    EXPECT_EQ(client->events.front(), "connected");
    EXPECT_TRUE(server->wait([&] { return server->ch != nullptr; }));
    return p;
  }

  // Sends from the client's loop; `done` statuses land in client->events.
  void send(Pair& p, uint64_t rid, std::string msg, std::shared_ptr<std::vector<uint8_t>> payload = nullptr,
            uint16_t type = 7) {
    client_loop_.run([&] {
      auto client = p.client;
      const void* data = payload ? payload->data() : nullptr;
      const uint64_t len = payload ? payload->size() : 0;
      p.c->send(type, rid, 3, std::move(msg), data, len, payload, [client, rid](genie_status_t st) {
        client->note("done " + std::to_string(rid) + " " + std::to_string(st));
      });
    });
  }

  // Channel::put (or get) from the client's end; its status and detail.
  std::pair<genie_status_t, std::string> remote_access(Pair& p, bool put,
                                                       const std::shared_ptr<MemoryRegion>& local,
                                                       uint64_t loff, const MemoryDescriptor& d,
                                                       uint64_t roff, uint64_t len) {
    std::promise<std::pair<genie_status_t, std::string>> done;
    client_loop_.run([&] {
      auto cb = [&done](genie_status_t st, const std::string& why) { done.set_value({st, why}); };
      if (put)
        p.c->put(local, loff, d, roff, len, cb);
      else
        p.c->get(local, loff, d, roff, len, cb);
    });
    auto f = done.get_future();
    EXPECT_EQ(f.wait_for(kWait), std::future_status::ready);
    return f.get();
  }

  std::shared_ptr<Transport> t_;
  TestLoop server_loop_;
  TestLoop client_loop_;
};

TEST_P(Transports, CapabilitiesSayWhatTheTransportDoes) {
  const Capabilities& c = t_->capabilities();
  EXPECT_EQ(c.name, GetParam());
  EXPECT_TRUE(c.reliable);
  EXPECT_TRUE(c.ordered);
  EXPECT_FALSE(c.gpu_memory);
  EXPECT_GE(c.max_message, kDefaultMaxMessage);
  if (GetParam() == "tcp") {
    EXPECT_FALSE(c.zero_copy);  // the kernel's socket buffers sit in between
    EXPECT_FALSE(c.rma);
  } else if (GetParam() == "loopback") {
    EXPECT_TRUE(c.zero_copy);  // sender's buffer straight into the sink
    EXPECT_TRUE(c.rma);
  } else if (GetParam() == "ucx") {
    EXPECT_TRUE(c.zero_copy);  // rendezvous data lands in the sink; put/get in registered memory
    EXPECT_TRUE(c.rma);
  } else {
    EXPECT_TRUE(c.zero_copy);  // dpdk: from the registered receive buffer straight into the sink
    EXPECT_FALSE(c.rma);
  }
}

TEST_P(Transports, FramesAndPayloadsLandInTheReceiversSinksBothWays) {
  Pair p = open();
  const std::vector<size_t> sizes = {0, 1, 4096, 100000, 5u << 20};
  std::vector<std::shared_ptr<std::vector<uint8_t>>> sent;
  for (size_t i = 0; i < sizes.size(); ++i) {
    sent.push_back(sizes[i] ? std::make_shared<std::vector<uint8_t>>(pattern(sizes[i], i)) : nullptr);
    send(p, 100 + i, "message " + std::to_string(i), sent.back());
  }
  ASSERT_TRUE(p.server->wait([&] {
    if (p.server->frames.size() < sizes.size()) return false;
    for (size_t i = 0; i < sizes.size(); ++i)
      if (sizes[i] > 0 && !p.server->frames[i].payload_done) return false;
    return true;
  }));
  {
    std::lock_guard<std::mutex> lk(p.server->mu);
    for (size_t i = 0; i < sizes.size(); ++i) {
      const End::Got& g = p.server->frames[i];
      EXPECT_EQ(g.h.type, 7);
      EXPECT_EQ(g.h.flags, 3u);
      EXPECT_EQ(g.h.request_id, 100 + i);
      EXPECT_EQ(g.h.payload_len, sizes[i]);
      EXPECT_EQ(g.msg, "message " + std::to_string(i));
      if (sizes[i] > 0) EXPECT_TRUE(*g.payload == *sent[i]) << "payload " << i << " differs";
    }
  }
  // Every send completed with GENIE_OK.
  ASSERT_TRUE(p.client->wait([&] { return p.client->events.size() == 1 + sizes.size(); }));
  for (size_t i = 0; i < sizes.size(); ++i)
    EXPECT_EQ(p.client->events[1 + i], "done " + std::to_string(100 + i) + " 0");

  // And back, from the accepting end.
  auto back = std::make_shared<std::vector<uint8_t>>(pattern(300000, 99));
  server_loop_.run([&] { p.server->ch->send(7, 5, 0, "back", back->data(), back->size(), back); });
  ASSERT_TRUE(p.client->wait([&] { return !p.client->frames.empty() && p.client->frames[0].payload_done; }));
  std::lock_guard<std::mutex> lk(p.client->mu);
  EXPECT_EQ(p.client->frames[0].msg, "back");
  EXPECT_TRUE(*p.client->frames[0].payload == *back);
}

// genie_transport_bytes_total (dataplane/transport_bytes.hpp): a frame's
// bytes count as sent by one end and received by the other (both ends are
// in this process), and the transport is listed in the totals a server's
// info shows.
TEST_P(Transports, BytesMovedAreCountedForTheTransport) {
  const std::string name = GetParam();
  const uint64_t sent0 = transport_bytes(name, true).value();
  const uint64_t received0 = transport_bytes(name, false).value();
  Pair p = open();
  auto payload = std::make_shared<std::vector<uint8_t>>(pattern(100000, 3));
  send(p, 1, "counted", payload);
  ASSERT_TRUE(p.server->wait([&] { return !p.server->frames.empty() && p.server->frames[0].payload_done; }));
  ASSERT_TRUE(p.client->wait([&] { return p.client->events.size() == 2; }));  // connected, done
  const uint64_t frame = kFrameHeaderSize + 7 + payload->size();
  if (name == "loopback") {
    // In-process channels hand buffers over: no wire, nothing counted.
    EXPECT_EQ(0u, transport_bytes(name, true).value() - sent0);
    return;
  }
  EXPECT_EQ(frame, transport_bytes(name, true).value() - sent0);
  EXPECT_EQ(frame, transport_bytes(name, false).value() - received0);
  bool listed = false;
  for (const auto& [key, bytes] : transport_byte_totals())
    listed = listed || (key == name + " sent" && bytes >= frame);
  EXPECT_TRUE(listed) << name << " is not in the totals";
}

TEST_P(Transports, ListensAndConnectsOnIpv6Addresses) {
  auto end = std::make_shared<End>();
  auto server = std::make_shared<End>();
  std::shared_ptr<Listener> l;
  try {
    l = server_loop_.run([&] {
      return t_->listen(server_loop_.loop(), "[::1]:0", {}, [server](Listener& l) {
        auto ch = l.accept(server->handlers());
        std::lock_guard<std::mutex> lk(server->mu);
        server->ch = ch;
        server->cv.notify_all();
      });
    });
  } catch (const Error& e) {
    GTEST_SKIP() << "no IPv6 loopback here: " << e.detail();
  }
  const std::string addr = server_loop_.run([&] { return l->address(); });
  ASSERT_EQ(addr.rfind("[::1]:", 0), 0u) << addr;
  auto c = client_loop_.run([&] {
    return t_->connect(client_loop_.loop(), addr, {}, end->handlers(),
                       [end](genie_status_t st, const std::string& d) { end->note(std::to_string(st) + d); });
  });
  ASSERT_TRUE(end->wait([&] { return !end->events.empty(); }));
  EXPECT_EQ(end->events.front(), "0");
  ASSERT_TRUE(server->wait([&] { return server->ch != nullptr; }));
  client_loop_.run([&] { c->send(7, 1, 0, "over v6"); });
  ASSERT_TRUE(server->wait([&] { return !server->frames.empty(); }));
  EXPECT_EQ(server->frames[0].msg, "over v6");
  server_loop_.run([&] { l->close(); });
}

TEST_P(Transports, ThousandFramesArriveInSendOrder) {
  Pair p = open();
  client_loop_.run([&] {
    for (uint64_t i = 0; i < 1000; ++i) p.c->send(7, i, 0, std::to_string(i));
  });
  ASSERT_TRUE(p.server->wait([&] { return p.server->frames.size() == 1000; }));
  std::lock_guard<std::mutex> lk(p.server->mu);
  for (uint64_t i = 0; i < 1000; ++i) {
    ASSERT_EQ(p.server->frames[i].h.request_id, i);
    ASSERT_EQ(p.server->frames[i].msg, std::to_string(i));
  }
}

TEST_P(Transports, OversizeMessagesAreRefusedBySenderAndReceiver) {
  // The sender's own limit: refused at once, the channel stays usable.
  ChannelOptions small;
  small.max_message = 1024;
  Pair p = open({}, small);
  send(p, 1, std::string(2000, 'x'));
  ASSERT_TRUE(p.client->wait([&] { return p.client->events.size() == 2; }));
  EXPECT_EQ(p.client->events[1], "done 1 " + std::to_string(GENIE_ERR_TOO_LARGE));
  send(p, 2, "fits");
  ASSERT_TRUE(p.server->wait([&] { return p.server->frames.size() == 1; }));
  EXPECT_EQ(p.server->frames[0].msg, "fits");

  // The receiver's limit: a peer that sends more is dropped with PROTOCOL.
  Pair q = open(small, {});
  send(q, 3, std::string(2000, 'y'));
  ASSERT_TRUE(q.server->wait([&] { return q.server->closes == 1; }));
  EXPECT_EQ(q.server->close_status, GENIE_ERR_PROTOCOL);
  EXPECT_NE(q.server->close_detail.find("exceeds the maximum message size of 1024"), std::string::npos)
      << q.server->close_detail;
  EXPECT_TRUE(q.server->frames.empty());
  ASSERT_TRUE(q.client->wait([&] { return q.client->closes == 1; }));
  EXPECT_EQ(q.client->close_status, GENIE_ERR_CONNECTION);
}

// A server's listeners share one bound on the bytes that messages still
// arriving hold (ChannelOptions::budget): a message the budget cannot
// hold closes its channel with TOO_LARGE, one it can is delivered and its
// bytes are given back.
TEST_P(Transports, MessagesStillArrivingAreChargedToTheBudget) {
  if (GetParam() == "loopback")
    GTEST_SKIP()
        << "loopback hands over messages its peer in this process already allocated: nothing to bound";
  ChannelOptions tight;
  tight.budget = std::make_shared<MessageBudget>(256 << 10);
  Pair p = open(tight, {});
  send(p, 1, std::string(64 << 10, 'a'));  // fits: delivered, and given back
  ASSERT_TRUE(p.server->wait([&] { return p.server->frames.size() == 1; }));
  EXPECT_EQ(tight.budget->used(), 0u);
  send(p, 2, std::string(1 << 20, 'b'));  // more than the budget holds
  ASSERT_TRUE(p.server->wait([&] { return p.server->closes == 1; }));
  EXPECT_EQ(p.server->close_status, GENIE_ERR_TOO_LARGE);
  EXPECT_NE(p.server->close_detail.find("messages still arriving"), std::string::npos)
      << p.server->close_detail;
  EXPECT_EQ(p.server->frames.size(), 1u);
  ASSERT_TRUE(p.client->wait([&] { return p.client->closes == 1; }));
  EXPECT_EQ(tight.budget->used(), 0u);  // nothing stays charged after the close
}

TEST_P(Transports, UnknownTypesAndRefusedPayloadsCloseWithProtocol) {
  Pair p = open({}, {}, FrameTypes{accepts_only_7, nullptr});
  send(p, 1, "ok", nullptr, 7);
  send(p, 2, "unknown", nullptr, 8);
  ASSERT_TRUE(p.server->wait([&] { return p.server->closes == 1; }));
  EXPECT_EQ(p.server->close_status, GENIE_ERR_PROTOCOL);
  EXPECT_NE(p.server->close_detail.find("unknown message type 8"), std::string::npos)
      << p.server->close_detail;
  EXPECT_EQ(p.server->frames.size(), 1u);

  Pair q = open();
  q.server->refuse_payloads = true;
  send(q, 1, "refused", std::make_shared<std::vector<uint8_t>>(64, 1));
  ASSERT_TRUE(q.server->wait([&] { return q.server->closes == 1; }));
  EXPECT_EQ(q.server->close_status, GENIE_ERR_PROTOCOL);
  EXPECT_NE(q.server->close_detail.find("was refused"), std::string::npos) << q.server->close_detail;
}

TEST_P(Transports, CloseAnswersEverySendThenOnCloseLastAndOnce) {
  Pair p = open();
  auto big = std::make_shared<std::vector<uint8_t>>(pattern(8u << 20, 1));
  client_loop_.run([&] {
    auto client = p.client;
    for (uint64_t i = 0; i < 3; ++i)
      p.c->send(7, i, 0, "m", big->data(), big->size(), big, [client](genie_status_t st) {
        client->note(st == GENIE_OK || st == GENIE_ERR_CONNECTION ? "done" : "bad");
      });
    p.c->close(GENIE_OK, "bye");
    client->note("close returned");
    EXPECT_TRUE(p.c->closed());
    // Once closing, a send is answered at once.
    p.c->send(7, 9, 0, "late", nullptr, 0, nullptr,
              [client](genie_status_t st) { client->note("late " + std::to_string(st)); });
  });
  ASSERT_TRUE(p.client->wait([&] { return p.client->closes == 1; }));
  std::vector<std::string> ev;
  {
    std::lock_guard<std::mutex> lk(p.client->mu);
    ev = p.client->events;
    EXPECT_EQ(p.client->close_status, GENIE_OK);
    EXPECT_EQ(p.client->close_detail, "bye");
  }
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.back(), "on_close");
  EXPECT_EQ(std::count(ev.begin(), ev.end(), "done"), 3);
  EXPECT_EQ(std::count(ev.begin(), ev.end(), "late " + std::to_string(GENIE_ERR_CONNECTION)), 1);
  const auto close_returned = std::find(ev.begin(), ev.end(), "close returned");
  EXPECT_LT(close_returned - ev.begin(), std::find(ev.begin(), ev.end(), "on_close") - ev.begin());
  // The peer learns of it.
  ASSERT_TRUE(p.server->wait([&] { return p.server->closes == 1; }));
  EXPECT_EQ(p.server->close_status, GENIE_ERR_CONNECTION);
  // No second on_close, whatever else happens.
  client_loop_.run([&] { p.c->close(GENIE_ERR_INTERNAL, "again"); });
  server_loop_.run([] {});
  EXPECT_EQ(p.client->closes, 1);
}

TEST_P(Transports, ConnectToNobodyFailsThenCloses) {
  auto end = std::make_shared<End>();
  // Port 1 on 127.0.0.1: nothing listens there (and no loopback listener).
  client_loop_.run([&] {
    return t_->connect(
        client_loop_.loop(), "127.0.0.1:1", {}, end->handlers(),
        [end](genie_status_t st, const std::string& d) {
          end->note(st == GENIE_ERR_CONNECTION ? "connect failed" : "connect " + std::to_string(st));
          EXPECT_NE(d.find("127.0.0.1:1"), std::string::npos) << d;
        });
  });
  ASSERT_TRUE(end->wait([&] { return end->closes == 1; }));
  EXPECT_EQ(end->close_status, GENIE_ERR_CONNECTION);
  EXPECT_EQ(end->events, (std::vector<std::string>{"connect failed", "on_close"}));
  EXPECT_THROW(client_loop_.run([&] { return t_->connect(client_loop_.loop(), "no port", {}, {}, nullptr); }),
               Error);
}

TEST_P(Transports, LoopTeardownClosesOpenChannelsWithShutdown) {
  Pair p = open();
  auto extra = std::make_unique<TestLoop>();
  auto end = std::make_shared<End>();
  const std::string addr = server_loop_.run([&] { return p.listener->address(); });
  extra->run([&] {
    return t_->connect(
        extra->loop(), addr, {}, end->handlers(),
        [end](genie_status_t st, const std::string&) { end->note(st == GENIE_OK ? "connected" : "failed"); });
  });
  ASSERT_TRUE(end->wait([&] { return !end->events.empty(); }));
  ASSERT_EQ(end->events.front(), "connected");
  extra.reset();
  EXPECT_EQ(end->closes, 1);
  EXPECT_EQ(end->close_status, GENIE_ERR_SHUTDOWN);
  EXPECT_EQ(end->close_detail, "event loop stopped");
}

TEST_P(Transports, RegistersHostMemoryOnly) {
  std::vector<uint8_t> buf(4096);
  auto r = t_->register_memory(buf.data(), buf.size(), MemoryKind::Host);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->data(), buf.data());
  EXPECT_EQ(r->size(), buf.size());
  const MemoryDescriptor& d = r->descriptor();
  EXPECT_EQ(d.transport, GetParam());
  EXPECT_EQ(d.length, buf.size());
  const MemoryDescriptor back = MemoryDescriptor::decode(d.encode());
  EXPECT_EQ(back.transport, d.transport);
  EXPECT_EQ(back.address, d.address);
  EXPECT_EQ(back.length, d.length);
  EXPECT_EQ(back.kind, MemoryKind::Host);
  try {
    MemoryDescriptor::decode(d.encode().substr(0, 12));
    ADD_FAILURE() << "a truncated descriptor decoded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_PROTOCOL);
  }
  try {
    t_->register_memory(nullptr, 10, MemoryKind::Host);
    ADD_FAILURE() << "a null range registered";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_INVALID_ARGUMENT);
  }
  try {
    t_->register_memory(buf.data() + 1, 16, MemoryKind::Device, 0);
    ADD_FAILURE() << "device memory registered without gpu_memory";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_UNSUPPORTED);
    EXPECT_NE(e.detail().find(GetParam()), std::string::npos) << e.detail();
  }
}

TEST_P(Transports, RemoteMemoryAccessWhereCapabilitiesSaySo) {
  Pair p = open();
  std::vector<uint8_t> mine = pattern(1000, 5), theirs(1000, 0);
  auto local = t_->register_memory(mine.data(), mine.size(), MemoryKind::Host);
  auto remote = t_->register_memory(theirs.data(), theirs.size(), MemoryKind::Host);
  const MemoryDescriptor rd = MemoryDescriptor::decode(remote->descriptor().encode());  // as a peer gets it
  auto rma = [&](bool put, uint64_t loff, uint64_t roff, uint64_t len, const MemoryDescriptor& d) {
    return remote_access(p, put, local, loff, d, roff, len);
  };
  if (!t_->capabilities().rma) {
    EXPECT_EQ(rma(true, 0, 0, 10, rd).first, GENIE_ERR_UNSUPPORTED);
    EXPECT_EQ(rma(false, 0, 0, 10, rd).first, GENIE_ERR_UNSUPPORTED);
    return;
  }
  EXPECT_EQ(rma(true, 100, 200, 300, rd).first, GENIE_OK);
  EXPECT_EQ(std::memcmp(theirs.data() + 200, mine.data() + 100, 300), 0);
  EXPECT_EQ(theirs[199], 0);
  EXPECT_EQ(theirs[500], 0);
  std::fill(mine.begin(), mine.end(), 0);
  EXPECT_EQ(rma(false, 0, 200, 300, rd).first, GENIE_OK);
  EXPECT_EQ(std::memcmp(mine.data(), theirs.data() + 200, 300), 0);
  const auto outside = rma(true, 0, 900, 200, rd);
  EXPECT_EQ(outside.first, GENIE_ERR_INVALID_ARGUMENT);
  EXPECT_NE(outside.second.find("outside"), std::string::npos) << outside.second;
  MemoryDescriptor other = rd;
  other.transport = GetParam() == "loopback" ? "ucx" : "loopback";
  EXPECT_EQ(rma(true, 0, 0, 10, other).first, GENIE_ERR_INVALID_ARGUMENT);
  // Unregistered: its descriptor names nothing any more. Only a transport
  // that sees both ends can tell; a one-sided RMA transport (ucx) cannot,
  // which is why the control plane checks every range against the regions
  // it handed out before it lets a peer's bytes land (server/rma).
  if (GetParam() == "ucx") {
    MemoryDescriptor keyless = rd;  // a key is what lets the peer reach the region
    keyless.key.clear();
    const auto no_key = rma(true, 0, 0, 10, keyless);
    EXPECT_EQ(no_key.first, GENIE_ERR_INVALID_ARGUMENT);
    EXPECT_NE(no_key.second.find("no key"), std::string::npos) << no_key.second;
    return;
  }
  remote.reset();
  EXPECT_EQ(rma(true, 0, 0, 10, rd).first, GENIE_ERR_INVALID_ARGUMENT);
}

#ifdef GENIE_TEST_UCX
// A key that UCX packs for memory it allocates itself (a shared-memory
// segment, with UCX_TLS=tcp,self,sm): the kind of key a peer could send to
// make the other side copy at addresses it names inside that side's own
// address space. Empty when UCX makes none here.
struct SharedMemoryKey {
  ucp_context_h ctx = nullptr;
  ucp_mem_h memh = nullptr;
  void* address = nullptr;
  std::string key;
  SharedMemoryKey() {
    ucp_params_t p{};
    p.field_mask = UCP_PARAM_FIELD_FEATURES;
    p.features = UCP_FEATURE_RMA | UCP_FEATURE_AM;
    ucp_config_t* cfg = nullptr;
    if (ucp_config_read(nullptr, nullptr, &cfg) != UCS_OK) return;
    const ucs_status_t st = ucp_init(&p, cfg, &ctx);
    ucp_config_release(cfg);
    if (st != UCS_OK) return;
    ucp_mem_map_params_t mp{};
    mp.field_mask =
        UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    mp.length = 4096;
    mp.flags = UCP_MEM_MAP_ALLOCATE;
    if (ucp_mem_map(ctx, &mp, &memh) != UCS_OK) return;
    ucp_mem_attr_t a{};
    a.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
    ucp_mem_query(memh, &a);
    address = a.address;
    void* buf = nullptr;
    size_t size = 0;
    if (ucp_rkey_pack(ctx, memh, &buf, &size) != UCS_OK) return;
    key.assign(static_cast<const char*>(buf), size);
    ucp_rkey_buffer_release(buf);
  }
  ~SharedMemoryKey() {
    if (memh != nullptr) ucp_mem_unmap(ctx, memh);
    if (ctx != nullptr) ucp_cleanup(ctx);
  }
};
#endif

// A peer's remote key is walked within its bytes before UCX unpacks it
// (UCX takes no length), and a key that would let the peer name addresses
// inside this process (shared memory) is refused.
// UCX before 1.21 cannot be told not to emulate RMA in software, and its
// emulation lets any peer of the process read and write the process's
// memory: without GENIE_UCX_RMA=always the transport offers no RMA there, and
// a put or get is refused before UCX sees it (docs/ucx.md, "Software-emulated
// RMA").
TEST_P(Transports, NoEmulatedRmaByDefault) {
  if (GetParam() != "ucx") GTEST_SKIP() << "RMA emulation is UCX's";
  ASSERT_EQ(std::getenv("GENIE_UCX_RMA"), nullptr) << "run without GENIE_UCX_RMA";
#if __has_include(<ucp/api/ucp_version.h>)
  const bool can_forbid = UCP_API_VERSION >= UCP_VERSION(1, 21);
#else
  const bool can_forbid = false;
#endif
  EXPECT_EQ(t_->capabilities().rma, can_forbid);
  if (can_forbid) return;
  Pair p = open();
  EXPECT_TRUE(p.c->rma_emulated());
  std::vector<uint8_t> mine = pattern(64, 3), theirs(64, 0);
  auto local = t_->register_memory(mine.data(), mine.size(), MemoryKind::Host);
  auto remote = t_->register_memory(theirs.data(), theirs.size(), MemoryKind::Host);
  const MemoryDescriptor rd = MemoryDescriptor::decode(remote->descriptor().encode());
  EXPECT_EQ(remote_access(p, true, local, 0, rd, 0, 64).first, GENIE_ERR_UNSUPPORTED);
  EXPECT_EQ(remote_access(p, false, local, 0, rd, 0, 64).first, GENIE_ERR_UNSUPPORTED);
  EXPECT_EQ(theirs, std::vector<uint8_t>(64, 0));
}

TEST_P(Transports, ForgedRemoteKeysAreRefusedBeforeUse) {
  if (GetParam() != "ucx") GTEST_SKIP() << "remote keys are the ucx transport's";
  Pair p = open();
  std::vector<uint8_t> mine = pattern(4096, 3), theirs(4096, 0);
  auto local = t_->register_memory(mine.data(), mine.size(), MemoryKind::Host);
  auto remote = t_->register_memory(theirs.data(), theirs.size(), MemoryKind::Host);
  const MemoryDescriptor rd = MemoryDescriptor::decode(remote->descriptor().encode());
  ASSERT_EQ(remote_access(p, true, local, 0, rd, 0, 64).first, GENIE_OK);
  ASSERT_GE(rd.key.size(), 9u);
  const auto forged = [&](const std::string& key, const std::string& why) {
    MemoryDescriptor d = rd;
    d.key = key;
    const auto r = remote_access(p, true, local, 0, d, 0, 64);
    EXPECT_EQ(r.first, GENIE_ERR_INVALID_ARGUMENT) << why;
    EXPECT_NE(r.second.find("the remote key is malformed: "), std::string::npos) << r.second;
    EXPECT_NE(r.second.find(why), std::string::npos) << r.second;
  };
  forged(rd.key.substr(0, 8), "bytes, where a packed key has");
  forged(rd.key + std::string(2000, '\0'), "bytes, where a packed key has");
  forged(std::string(8, '\0') + rd.key.substr(8), "names no memory domain");
  forged(std::string(8, '\xff') + rd.key.substr(8), "ends before the entry of memory domain");
  std::string cuda = rd.key;
  cuda[8] = 1;  // UCS_MEMORY_TYPE_CUDA
  forged(cuda, "memory type 1");
  std::string past = rd.key;
  past[9] = static_cast<char>(200);  // the first domain's entry: 200 bytes
  forged(past, "runs past its end");
#ifdef GENIE_TEST_UCX
  SharedMemoryKey shm;
  if (shm.key.empty() || shm.key.find_first_not_of('\0', 9) == std::string::npos) {
    std::printf("note: UCX made no shared-memory key here; that case is not checked\n");
  } else {
    MemoryDescriptor d = rd;
    d.key = shm.key;
    d.address = reinterpret_cast<uint64_t>(shm.address);
    const auto r = remote_access(p, true, local, 0, d, 0, 64);
    EXPECT_EQ(r.first, GENIE_ERR_INVALID_ARGUMENT);
    EXPECT_NE(r.second.find("shared-memory"), std::string::npos) << r.second;
  }
#endif
  // The channel still works with the real key.
  EXPECT_EQ(remote_access(p, true, local, 0, rd, 0, 4096).first, GENIE_OK);
  EXPECT_EQ(theirs, mine);
}

// Transport::connect_blocking (dataplane/blocking.hpp): the calling thread
// drives a channel to an ordinary listener: frames and payloads both ways,
// eager and rendezvous sizes, a deadline, interrupt() from another thread,
// and the peer's close. Transports without blocking channels say so.
TEST_P(Transports, BlockingChannelsTalkToAnOrdinaryListener) {
  auto server = std::make_shared<End>();
  auto listener = server_loop_.run([&] {
    return t_->listen(server_loop_.loop(), "127.0.0.1:0", {}, [server](Listener& l) {
      auto ch = l.accept(server->handlers());
      std::lock_guard<std::mutex> lk(server->mu);
      server->ch = ch;
      server->cv.notify_all();
    });
  });
  const std::string addr = server_loop_.run([&] { return listener->address(); });
  const auto soon = [] { return Deadline(StreamClock::now() + kWait); };
  std::unique_ptr<BlockingChannel> bc;
  try {
    bc = t_->connect_blocking(addr, {}, soon());
  } catch (const Error& e) {
    EXPECT_NE(GetParam(), "ucx") << e.detail();
    EXPECT_EQ(e.code(), GENIE_ERR_UNSUPPORTED) << e.detail();
    EXPECT_NE(e.detail().find("no blocking channels"), std::string::npos) << e.detail();
    server_loop_.run([&] { listener->close(); });
    return;
  }
  ASSERT_TRUE(server->wait([&] { return server->ch != nullptr; }));
  size_t at = 0;
  for (const size_t n : {size_t{0}, size_t{4096}, size_t{1} << 20}) {
    SCOPED_TRACE(n);
    // Caller -> listener: the frame and its payload land in the sink.
    const std::vector<uint8_t> out = pattern(n, 3);
    FrameHeader h;
    h.type = 7;
    h.request_id = 100 + n;
    Deadline d = soon();
    bc->send_frame(h, "ask", 3, n ? out.data() : nullptr, n, d);
    ASSERT_TRUE(server->wait(
        [&] { return server->frames.size() == at + 1 && (n == 0 || server->frames[at].payload_done); }));
    {
      std::lock_guard<std::mutex> lk(server->mu);
      EXPECT_EQ(server->frames[at].h.request_id, 100 + n);
      EXPECT_EQ(server->frames[at].msg, "ask");
      if (n) EXPECT_EQ(*server->frames[at].payload, out);
    }
    ++at;
    // Listener -> caller.
    auto back = std::make_shared<std::vector<uint8_t>>(pattern(n, 4));
    server_loop_.run([&] { server->ch->send(7, 200 + n, 0, "answer", n ? back->data() : nullptr, n, back); });
    std::string msg;
    const FrameHeader got = bc->recv_frame(kDefaultMaxMessage, {}, &msg, d);
    EXPECT_EQ(got.request_id, 200 + n);
    EXPECT_EQ(msg, "answer");
    ASSERT_EQ(got.payload_len, n);
    std::vector<uint8_t> in(n);
    if (n) bc->recv_payload(in.data(), n, d);
    EXPECT_EQ(in, *back);
  }
  EXPECT_TRUE(bc->idle_ok());
  // Nothing comes: the deadline ends the wait.
  std::string msg;
  Deadline brief(StreamClock::now() + std::chrono::milliseconds(50));
  try {
    bc->recv_frame(kDefaultMaxMessage, {}, &msg, brief);
    ADD_FAILURE() << "a frame came from nowhere";
  } catch (const StreamBroken& b) {
    EXPECT_EQ(b.why, Broke::Timeout) << b.detail;
  }
  // Another thread interrupts a blocked wait.
  const std::shared_ptr<Channel> first = server_loop_.run([&] { return server->ch; });
  {
    auto again = t_->connect_blocking(addr, {}, soon());
    std::thread other([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      again->interrupt();
    });
    Deadline d = soon();
    try {
      again->recv_frame(kDefaultMaxMessage, {}, &msg, d);
      ADD_FAILURE() << "an interrupted wait returned a frame";
    } catch (const StreamBroken& b) {
      EXPECT_EQ(b.why, Broke::Closed) << b.detail;
    }
    other.join();
    EXPECT_FALSE(again->idle_ok());
  }
  // The listener's side closes: the caller hears it.
  server_loop_.run([&] { first->close(GENIE_OK, "done"); });
  try {
    Deadline d = soon();
    bc->recv_frame(kDefaultMaxMessage, {}, &msg, d);
    ADD_FAILURE() << "a frame after the peer closed";
  } catch (const StreamBroken& b) {
    EXPECT_EQ(b.why, Broke::Closed) << b.detail;
  }
  bc.reset();
  server_loop_.run([&] { listener->close(); });
}

INSTANTIATE_TEST_SUITE_P(Dataplane, Transports,
                         ::testing::Values("tcp", "loopback", "ucx"
#ifdef GENIE_HAVE_DPDK_TRANSPORT
                                           ,
                                           "dpdk"
#endif
                                           ),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace genie::dataplane
