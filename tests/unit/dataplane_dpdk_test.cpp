// The dpdk transport's own protocol over an in-process net_ring port, with
// the plugin's test hooks making the link lossy: dropped, corrupted,
// duplicated and reordered packets still give byte-exact frames in order,
// many small fragments through a small window, a slow receiver is not
// overrun, and a dead link or a silent peer ends in a clear error. The
// conformance tests (dataplane_transport_test.cpp) cover the interface.
//
// The engine reads its configuration once per process, so every case sets
// it before the first lookup and needs a process of its own (ctest runs
// each case alone); run by hand, use --gtest_filter with one case.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "dataplane/registry.hpp"
#include "dataplane_testing.hpp"

namespace genie::dataplane {
namespace {

using testing::kWait;
using testing::pattern;
using testing::TestLoop;

struct Stats {
  uint64_t tx, rx, retransmits, crc_drops, duplicates, nacks, test_dropped, test_corrupted;
};

// n counters from the loaded plugin's test hook `name` (transport.cpp);
// zeros when there is none.
std::vector<uint64_t> hook(const char* name, size_t n) {
  std::vector<uint64_t> out(n, 0);
  void* h =
      dlopen((std::string(GENIE_PLUGIN_DIR) + "/libgenie_transport_dpdk.so").c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return out;
  if (auto fn = reinterpret_cast<void (*)(uint64_t*)>(dlsym(h, name))) fn(out.data());
  dlclose(h);
  return out;
}

Stats stats() {
  static_assert(sizeof(Stats) == 8 * sizeof(uint64_t));
  Stats s{};
  const std::vector<uint64_t> v = hook("genie_dpdk_stats", 8);
  std::memcpy(&s, v.data(), sizeof s);
  return s;
}

// One end: frames and payloads received in order, send results, the close.
struct End : std::enable_shared_from_this<End> {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<std::string, std::shared_ptr<std::vector<uint8_t>>>> got;
  int payloads_done = 0;
  std::vector<genie_status_t> sends;
  std::vector<SemanticTag> tags;  // received_tag() in each on_frame
  int closes = 0;
  genie_status_t close_status = GENIE_OK;
  std::string close_detail;
  std::shared_ptr<Channel> ch;
  std::atomic<int> stall_first_ms{0};  // the receiving loop sleeps this long on the first frame

  template <class Pred>
  bool wait(Pred pred, std::chrono::seconds d = kWait) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, d, pred);
  }

  ChannelHandlers handlers() {
    auto self = shared_from_this();
    ChannelHandlers h;
    h.on_frame = [self](const FrameHeader& fh, std::string&& msg) -> PayloadSink {
      if (const int ms = self->stall_first_ms.exchange(0))
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      std::lock_guard<std::mutex> lk(self->mu);
      if (self->ch) self->tags.push_back(self->ch->received_tag());
      auto buf = std::make_shared<std::vector<uint8_t>>(fh.payload_len);
      self->got.emplace_back(std::move(msg), buf);
      self->cv.notify_all();
      if (fh.payload_len == 0) return {};
      return PayloadSink{buf->data(), buf, [self] {
                           std::lock_guard<std::mutex> lk2(self->mu);
                           ++self->payloads_done;
                           self->cv.notify_all();
                         }};
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
};

class Dpdk : public ::testing::Test {
 protected:
  // Sets the engine's environment, then loads the plugin.
  void start(std::vector<std::pair<const char*, const char*>> env) {
    testing::use_build_plugins();
    testing::use_dpdk_ring();
    for (auto& [k, v] : env) ::setenv(k, v, 1);
    TransportLookup got = lookup_transport("dpdk");
    if (!got.transport) GTEST_SKIP() << "dpdk is not available here: " << got.reason;
    t_ = got.transport;
  }

  // A channel from the client loop to a listener on the server loop.
  bool open(bool expect_connected = true) {
    auto server = server_;
    listener_ = server_loop_.run([&] {
      return t_->listen(server_loop_.loop(), "127.0.0.1:0", {}, [server](Listener& l) {
        auto ch = l.accept(server->handlers());
        std::lock_guard<std::mutex> lk(server->mu);
        server->ch = ch;
        server->cv.notify_all();
      });
    });
    const std::string addr = server_loop_.run([&] { return listener_->address(); });
    auto connected = std::make_shared<std::promise<std::pair<genie_status_t, std::string>>>();
    client_->ch = client_loop_.run([&] {
      return t_->connect(client_loop_.loop(), addr, {}, client_->handlers(),
                         [connected](genie_status_t st, const std::string& d) {
                           connected->set_value({st, d});
                         });
    });
    auto f = connected->get_future();
    if (f.wait_for(kWait) != std::future_status::ready) return false;
    connect_result_ = f.get();
    if (!expect_connected) return connect_result_.first != GENIE_OK;
    return connect_result_.first == GENIE_OK && server_->wait([&] { return server_->ch != nullptr; });
  }

  // Sends from `from` (on its loop); results land in from->sends.
  void send(TestLoop& loop, const std::shared_ptr<End>& from, const std::string& msg,
            std::shared_ptr<std::vector<uint8_t>> payload) {
    loop.run([&] {
      const void* data = payload && !payload->empty() ? payload->data() : nullptr;
      const uint64_t len = data ? payload->size() : 0;
      from->ch->send(7, 1, 0, msg, data, len, payload, [from](genie_status_t st) {
        std::lock_guard<std::mutex> lk(from->mu);
        from->sends.push_back(st);
        from->cv.notify_all();
      });
    });
  }

  // Sends `sizes` payloads from `a` to `b` and checks each arrived exactly.
  void exchange(TestLoop& loop, const std::shared_ptr<End>& a, const std::shared_ptr<End>& b,
                const std::vector<size_t>& sizes, uint64_t seed) {
    std::vector<std::shared_ptr<std::vector<uint8_t>>> sent;
    size_t before;
    int done_before;
    {
      std::lock_guard<std::mutex> lk(b->mu);
      before = b->got.size();
      done_before = b->payloads_done;
    }
    size_t with_payload = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      sent.push_back(std::make_shared<std::vector<uint8_t>>(pattern(sizes[i], seed + i)));
      with_payload += sizes[i] > 0;
      send(loop, a, "m" + std::to_string(seed + i), sent.back());
    }
    ASSERT_TRUE(b->wait(
        [&] {
          return b->got.size() == before + sizes.size() &&
                 b->payloads_done == done_before + static_cast<int>(with_payload);
        },
        std::chrono::seconds(60)))
        << "received " << b->got.size() - before << " of " << sizes.size();
    std::lock_guard<std::mutex> lk(b->mu);
    for (size_t i = 0; i < sizes.size(); ++i) {
      EXPECT_EQ(b->got[before + i].first, "m" + std::to_string(seed + i)) << "out of order at " << i;
      EXPECT_TRUE(*b->got[before + i].second == *sent[i])
          << "payload " << i << " (" << sizes[i] << " bytes) differs";
    }
  }

  std::shared_ptr<Transport> t_;
  std::shared_ptr<End> client_ = std::make_shared<End>();
  std::shared_ptr<End> server_ = std::make_shared<End>();
  std::shared_ptr<Listener> listener_;
  std::pair<genie_status_t, std::string> connect_result_;
  TestLoop server_loop_;
  TestLoop client_loop_;
};

TEST_F(Dpdk, LossyLinkStillDeliversEveryFrameExactlyAndInOrder) {
  start({{"GENIE_DPDK_TEST_DROP", "20"},
         {"GENIE_DPDK_TEST_CORRUPT", "10"},
         {"GENIE_DPDK_TEST_DUP", "10"},
         {"GENIE_DPDK_TEST_REORDER", "20"},
         {"GENIE_DPDK_RTO_MS", "5"},
         {"GENIE_DPDK_CONNECT_MS", "5000"}});
  ASSERT_TRUE(open()) << connect_result_.second;
  exchange(client_loop_, client_, server_, {0, 1, 1400, 100000, 3u << 20, 777, 1u << 20}, 10);
  exchange(server_loop_, server_, client_, {2u << 20, 5, 0, 65536}, 50);
  ASSERT_TRUE(client_->wait([&] { return client_->sends.size() == 7; }));
  for (genie_status_t st : client_->sends) EXPECT_EQ(st, GENIE_OK);
  const Stats s = stats();
  EXPECT_GT(s.test_dropped, 0u);
  EXPECT_GT(s.test_corrupted, 0u);
  EXPECT_GT(s.crc_drops, 0u) << "corrupted packets must be caught by the CRC";
  EXPECT_GT(s.retransmits, 0u);
  EXPECT_GT(s.duplicates, 0u);
  EXPECT_GT(s.nacks, 0u);
}

TEST_F(Dpdk, ManySmallFragmentsThroughASmallWindow) {
  start({{"GENIE_DPDK_MTU", "256"}, {"GENIE_DPDK_WINDOW", "4"}});
  ASSERT_TRUE(open()) << connect_result_.second;
  // 176 bytes a fragment: about 6000 fragments, never more than 4 in flight.
  exchange(client_loop_, client_, server_, {1u << 20, 175, 176, 177, 0, 353}, 3);
}

TEST_F(Dpdk, SlowReceiverIsNotOverrun) {
  start({{"GENIE_DPDK_BACKLOG_MB", "2"}, {"GENIE_DPDK_WINDOW", "64"}});
  ASSERT_TRUE(open()) << connect_result_.second;
  server_->stall_first_ms = 1500;  // the receiving loop is busy elsewhere
  std::vector<size_t> sizes(24, 1u << 20);
  std::thread later([&] {
    // While the receiver sleeps, the sender may finish only what the
    // backlog limit and one window let through.
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    std::lock_guard<std::mutex> lk(client_->mu);
    EXPECT_LT(client_->sends.size(), 8u)
        << "the sender ran " << client_->sends.size() << " MiB ahead of a receiver that takes nothing";
  });
  exchange(client_loop_, client_, server_, sizes, 100);
  later.join();
  ASSERT_TRUE(client_->wait([&] { return client_->sends.size() == sizes.size(); }));
}

TEST_F(Dpdk, DeadLinkEndsInAClearErrorNotAHang) {
  // The link goes down after the handshake and a few packets.
  start({{"GENIE_DPDK_TEST_DROP_AFTER", "40"}, {"GENIE_DPDK_RTO_MS", "5"}, {"GENIE_DPDK_RETRIES", "3"}});
  ASSERT_TRUE(open()) << connect_result_.second;
  send(client_loop_, client_, "lost", std::make_shared<std::vector<uint8_t>>(pattern(1u << 20, 1)));
  send(client_loop_, client_, "also lost", std::make_shared<std::vector<uint8_t>>(pattern(1000, 2)));
  ASSERT_TRUE(client_->wait([&] { return client_->closes == 1; }));
  EXPECT_EQ(client_->close_status, GENIE_ERR_CONNECTION);
  EXPECT_NE(client_->close_detail.find("timed out"), std::string::npos) << client_->close_detail;
  EXPECT_NE(client_->close_detail.find("not acknowledged after 3 retransmissions"), std::string::npos)
      << client_->close_detail;
  std::lock_guard<std::mutex> lk(client_->mu);
  ASSERT_EQ(client_->sends.size(), 2u);
  for (genie_status_t st : client_->sends) EXPECT_EQ(st, GENIE_ERR_CONNECTION);
  for (auto& g : server_->got) EXPECT_NE(g.first, "also lost");  // never a partial frame
}

TEST_F(Dpdk, ConnectToASilentLinkFailsWithTheReason) {
  start({{"GENIE_DPDK_TEST_DROP", "1000"}, {"GENIE_DPDK_CONNECT_MS", "300"}});
  ASSERT_TRUE(open(false));
  EXPECT_EQ(connect_result_.first, GENIE_ERR_CONNECTION);
  EXPECT_NE(connect_result_.second.find("no answer from DPDK endpoint"), std::string::npos)
      << connect_result_.second;
  ASSERT_TRUE(client_->wait([&] { return client_->closes == 1; }));
  EXPECT_EQ(client_->close_status, GENIE_ERR_CONNECTION);
}

TEST_F(Dpdk, ConnectToAnEndpointNobodyListensOnIsRefused) {
  start({});
  auto end = std::make_shared<End>();
  std::promise<std::string> why;
  client_loop_.run([&] {
    return t_->connect(
        client_loop_.loop(), "peer:4242", {}, end->handlers(),
        [&why](genie_status_t st, const std::string& d) { why.set_value(std::to_string(st) + " " + d); });
  });
  auto f = why.get_future();
  ASSERT_EQ(f.wait_for(kWait), std::future_status::ready);
  const std::string d = f.get();
  EXPECT_EQ(d.rfind(std::to_string(GENIE_ERR_CONNECTION), 0), 0u) << d;
  EXPECT_NE(d.find("refused"), std::string::npos) << d;
  EXPECT_NE(d.find("peer:4242"), std::string::npos) << d;
  EXPECT_THROW(client_loop_.run([&] { return t_->connect(client_loop_.loop(), "peer:0", {}, {}, nullptr); }),
               Error);
}

TEST_F(Dpdk, SemanticTagsTravelOnEveryPacketAndReachTheReceiver) {
  start({{"GENIE_DPDK_MTU", "1500"}});
  ASSERT_TRUE(open()) << connect_result_.second;
  SemanticTag kv;
  kv.dtype = 1;
  kv.phase = 2;  // decode
  kv.role = 3;   // KV cache
  kv.layer = 11;
  auto big = std::make_shared<std::vector<uint8_t>>(pattern(300000, 5));  // about 210 packets
  client_loop_.run([&] {
    client_->ch->send_tagged(kv, 7, 1, 0, "kv", big->data(), big->size(), big, nullptr);
    client_->ch->send(7, 2, 0, "untagged", big->data(), 1000, big, nullptr);
  });
  ASSERT_TRUE(server_->wait([&] { return server_->payloads_done == 2; }));
  std::lock_guard<std::mutex> lk(server_->mu);
  ASSERT_EQ(server_->tags.size(), 2u);
  EXPECT_TRUE(server_->tags[0] == kv) << "phase " << int{server_->tags[0].phase} << " role "
                                      << int{server_->tags[0].role} << " layer " << server_->tags[0].layer;
  EXPECT_TRUE(server_->tags[1] == SemanticTag()) << "a frame sent without a tag has none";
  EXPECT_EQ(*server_->got[0].second, *big);
}

// genie_dpdk_rx_pool of the plugin (see transport.cpp).
std::vector<uint64_t> rx_pool() { return hook("genie_dpdk_rx_pool", 6); }

// genie_dpdk_tx_pools of the plugin: header pool size, free; attach pool size, free.
std::vector<uint64_t> tx_pools() { return hook("genie_dpdk_tx_pools", 4); }

// genie_dpdk_pool_reuse of the plugin: mbufs taken, freed and taken again; how many came back.
std::vector<uint64_t> pool_reuse() { return hook("genie_dpdk_pool_reuse", 2); }

TEST_F(Dpdk, PoolsHandOutTheMbufsFreedLast) {
  // A window of packets in flight is larger than a mempool's per-lcore
  // cache; a pool that then hands out its least recently used mbufs (the
  // default FIFO ring) makes every packet miss the CPU caches.
  start({});
  ASSERT_TRUE(open()) << connect_result_.second;
  exchange(client_loop_, client_, server_, {1u << 20}, 1);
  const std::vector<uint64_t> r = pool_reuse();
  ASSERT_EQ(r[0], 2048u) << "the header pool could not give 2048 mbufs";
  EXPECT_EQ(r[1], r[0]) << "mbufs taken right after freeing 2048 were not those 2048";
}

TEST_F(Dpdk, LosslessLinkRetransmitsNothing) {
  // Windows full of packets queued behind each other on the ring: a long
  // queue is not loss, so no probe, timer or Nack may send anything twice.
  start({{"GENIE_DPDK_MTU", "1500"}});
  ASSERT_TRUE(open()) << connect_result_.second;
  exchange(client_loop_, client_, server_, std::vector<size_t>(24, 1u << 20), 1);
  exchange(server_loop_, server_, client_, std::vector<size_t>(8, 1u << 20), 100);
  const Stats s = stats();
  EXPECT_GT(s.tx, 20000u);
  EXPECT_EQ(s.retransmits, 0u);
  EXPECT_EQ(s.duplicates, 0u);
  EXPECT_EQ(s.nacks, 0u);
  EXPECT_EQ(rx_pool()[5], 0u) << "tail-loss probes";
}

TEST_F(Dpdk, ExhaustedTransmitPoolsDelayPacketsAndLoseOrLeakNothing) {
  // 64 header mbufs for a 512-packet window: the pool runs dry in the
  // middle of nearly every burst; packets wait for mbufs, frames still
  // arrive exact, and once both ends closed every mbuf is back.
  start({{"GENIE_DPDK_TEST_TX_MBUFS", "64"}, {"GENIE_DPDK_MTU", "1500"}});
  ASSERT_TRUE(open()) << connect_result_.second;
  const std::vector<uint64_t> before = tx_pools();
  ASSERT_EQ(before[0], 64u);
  ASSERT_EQ(before[2], 129u);
  exchange(client_loop_, client_, server_, {4u << 20, 1, 300000, 0, 1u << 20}, 7);
  exchange(server_loop_, server_, client_, {2u << 20, 100}, 70);
  ASSERT_TRUE(client_->wait([&] { return client_->sends.size() == 5; }));
  for (genie_status_t st : client_->sends) EXPECT_EQ(st, GENIE_OK);
  client_loop_.run([&] { client_->ch->close(); });
  server_loop_.run([&] { server_->ch->close(); });
  ASSERT_TRUE(client_->wait([&] { return client_->closes == 1; }));
  ASSERT_TRUE(server_->wait([&] { return server_->closes == 1; }));
  std::vector<uint64_t> after;
  for (int i = 0; i < 200; ++i) {  // the last Acks and Fins leave the ring
    after = tx_pools();
    if (after[1] == after[0] && after[3] == after[2]) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(after[1], after[0]) << "header mbufs not back in their pool";
  EXPECT_EQ(after[3], after[2]) << "attached mbufs not back in their pool";
}

TEST_F(Dpdk, ReceiveBuffersComeFromAnExtbufPoolOverRegisteredMemory) {
  start({});
  ASSERT_TRUE(open()) << connect_result_.second;
  exchange(client_loop_, client_, server_, {3u << 20, 10}, 2);
  const std::vector<uint64_t> p = rx_pool();
  EXPECT_EQ(p[0], 1u) << "a receive mbuf's buffer is not a pinned external buffer in memory EAL registered";
  EXPECT_GE(p[1], p[2] * 2048) << "every mbuf has room for a packet";
  EXPECT_GT(p[2], 1024u) << "more mbufs than the port's receive ring holds";
  // net_ring hands over the sender's own mbufs, so nothing lands in the
  // pool here (memif and af_packet write into it: sh.dpdk_memif).
  const Stats s = stats();
  EXPECT_GT(s.rx, 0u);
}

TEST_F(Dpdk, CapabilitiesAndDeviceMemorySayWhyNoGpu) {
  start({});
  EXPECT_FALSE(t_->capabilities().gpu_memory);
  EXPECT_TRUE(t_->capabilities().link_endpoints);  // endpoints name listeners behind a port
  std::vector<uint8_t> buf(64);
  try {
    t_->register_memory(buf.data(), buf.size(), MemoryKind::Device, 0);
    ADD_FAILURE() << "device memory registered";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_UNSUPPORTED);
    EXPECT_NE(e.detail().find("gpudev"), std::string::npos) << e.detail();
  }
}

}  // namespace
}  // namespace genie::dataplane
