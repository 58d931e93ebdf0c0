// The DPDK transport's engine: the process's one EAL, its ethdev port, the
// mbuf pools and the polling thread that runs every session's protocol
// (dataplane/dpdk/session.cpp). Channels and listeners (transport.cpp) live
// on their owners' loops and reach the engine only through run() and
// the Mailbox each session shares with its channel.
//
// Configuration (environment, read once, at the first use):
//   GENIE_DPDK_EAL    EAL arguments (whitespace-separated), replacing the
//                     defaults "-l <first allowed cpu> --no-huge -m 512
//                     --no-shconf --no-pci --no-telemetry --log-level=*:warning".
//                     A port comes from a --vdev there (net_ring0,
//                     net_memif0,role=server,socket=..., net_af_packet0,iface=...)
//                     or a NIC bound to DPDK.
//   GENIE_DPDK_PORT   the ethdev name to use (default: the first port).
//   GENIE_DPDK_MTU    bytes of Genie header and fragment per packet
//                     (default: 9000 on net_ring and net_memif, which pass
//                     chained buffers of any length; the port's MTU else).
//   GENIE_DPDK_WINDOW packets in flight per session, counted from the
//                     cumulative ack (default 512, at most 4096).
//   GENIE_DPDK_BACKLOG_MB  received bytes a channel's owner has not taken
//                     yet before the window closes (default 256).
//   GENIE_DPDK_RTO_MS first retransmission timeout (default 20; doubles per
//                     retry up to 1 s), GENIE_DPDK_RETRIES retries per packet
//                     (default 12), GENIE_DPDK_CONNECT_MS (default 3000),
//                     GENIE_DPDK_NACK_US (default 200): at most one Nack per
//                     interval, and a Nack re-sends packets at least this old.
//   GENIE_DPDK_TEST_{DROP,CORRUPT,DUP,REORDER}  test only: per-mille of
//                     transmitted packets dropped, corrupted (one header byte
//                     flipped), duplicated, or swapped with the next;
//                     GENIE_DPDK_TEST_DROP_AFTER=N: every packet after the
//                     first N is dropped (the link goes down).
#pragma once

#include <rte_ether.h>
#include <rte_mbuf.h>
#include <uv.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dataplane/dpdk/mbuf_stash.hpp"
#include "dataplane/dpdk/wire.hpp"
#include "dataplane/plugin.hpp"

namespace genie::dataplane::dpdk {

struct Segment {
  const uint8_t* data;
  uint32_t len;
};

// What the polling thread hands a channel or listener (on its loop).
struct Event {
  enum Kind { Connected, ConnectFailed, Data, SendDone, Closed } kind;
  explicit Event(Kind k) : kind(k) {}
  genie_status_t status = GENIE_OK;
  std::string detail;
  // Data: the next packets of the session's byte stream (the frames sent
  // one after another), in sequence order, each an mbuf chain trimmed to
  // its payload; the channel copies them out and gives them back
  // (Engine::give_back). `size` is their payload bytes.
  std::vector<rte_mbuf*> mbufs;
  // Where their payload bytes lie, in order (taken on the polling thread, so
  // that the channel's thread reads the bytes and never the mbufs' own
  // cache lines, which the polling thread writes again when it reuses them).
  std::vector<Segment> segs;
  std::vector<SemanticTag> tags;  // of each tensor that starts in mbufs, in order
  uint64_t size = 0;
  Channel::Done done;
  std::shared_ptr<void> keep;
};

// Shared by a session (polling thread) and its channel (loop thread).
struct Mailbox {
  std::mutex mu;
  std::condition_variable cv;   // an event arrived (a loop being torn down waits for Closed)
  uv_async_t* async = nullptr;  // while the channel's handle is open
  std::deque<Event> events;
  std::atomic<uint64_t> backlog{0};  // payload bytes of Data events not yet taken

  void post(Event e);
};

struct Session;

// A listener's endpoint: sessions the polling thread opened for it, waiting
// for the listener's loop to accept them.
struct ListenBox {
  std::mutex mu;
  uv_async_t* async = nullptr;
  std::deque<std::shared_ptr<Session>> incoming;
};

struct EngineConfig {
  uint32_t mtu = 1500;  // Genie header + fragment
  uint32_t window = 512;
  uint32_t rto_ms = 20;
  uint32_t retries = 12;
  uint32_t connect_ms = 3000;
  uint32_t nack_us = 200;  // at most one Nack per interval; a packet is re-sent on a Nack once this old
  uint64_t backlog_limit = 256ull << 20;
  uint32_t drop = 0, corrupt = 0, dup = 0, reorder = 0;  // per mille, tests only
  uint64_t drop_after = 0;                               // tests only; 0: never
  uint32_t tx_mbufs = 8191;  // per transmit pool (GENIE_DPDK_TEST_TX_MBUFS makes it small)
};

// Counters written by the polling thread only (count() below: no locked
// instruction on the hot path) and read by any thread.
struct EngineStats {
  std::atomic<uint64_t> tx_packets{0}, rx_packets{0}, retransmits{0}, crc_drops{0}, duplicates{0},
      nacks_sent{0}, test_dropped{0}, test_corrupted{0};
  std::atomic<uint64_t> rx_registered{0};  // Data packets whose payload the port wrote into rx_mem
  std::atomic<uint64_t> probes{0};         // tail-loss probes sent
};

// Adds n to a counter that only the polling thread writes.
inline void count(std::atomic<uint64_t>& c, uint64_t n = 1) {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

// The receive pool's memory: anonymous pages registered with EAL
// (rte_extmem_register, and rte_dev_dma_map where the device supports it)
// that back every receive mbuf (rte_pktmbuf_pool_create_extbuf), so that a
// payload lands in registered memory and is copied once, into the sink.
struct RxMemory {
  uint8_t* base = nullptr;
  size_t length = 0;
  uint32_t mbufs = 0;
  uint16_t elt_size = 0;
  bool iova_va = false;     // IOVAs are the virtual addresses (IOVA-as-VA mode)
  bool dma_mapped = false;  // rte_dev_dma_map accepted it for the port's device
  bool holds(const void* p) const {
    return static_cast<const uint8_t*>(p) >= base && static_cast<const uint8_t*>(p) < base + length;
  }
};

class Engine {
 public:
  // The process's engine, started on first use. Throws Error(UNSUPPORTED)
  // naming the reason (EAL failed, no port, ...), again on every call.
  static Engine& get(const TransportHost* host);
  // The engine if it started, else nullptr.
  static Engine* started();

  // Runs fn on the polling thread, soon (in call order).
  void run(std::function<void()> fn);

  // Listener endpoints (any thread). bind: 0 picks a free id; throws
  // Error(IO) when taken.
  uint16_t bind(uint16_t endpoint, std::shared_ptr<ListenBox> box);
  void unbind(uint16_t endpoint);

  const EngineConfig& config() const { return cfg_; }
  EngineStats& stats() { return stats_; }
  uint32_t fragment_bytes() const { return cfg_.mtu - kPacketHeaderSize; }
  const std::string& port_name() const { return port_name_; }
  const std::string& gpu_reason() const { return gpu_reason_; }
  uint16_t gpu_count() const { return gpus_; }
  const TransportHost* host() const { return host_; }

  // Polling thread only.
  uint64_t now_ns() const;
  // The clock as read at this turn of the polling loop (once a turn, not per
  // packet: timers tick in milliseconds).
  uint64_t now() const { return now_; }
  // True when the mbufs for one more packet (a header mbuf and two
  // attached ones) are in hand: a new packet is given a sequence number
  // only then, so an empty pool delays it rather than losing it.
  bool can_send() { return hdr_stash_.ensure(1) && ext_stash_.ensure(2); }
  // Packets waiting for room in the port's transmit ring: no new data is
  // sent past this (the window bounds it too).
  bool tx_backlogged() const { return txq_.size() >= kTxBacklog; }
  // The last receive burst was full: more packets are waiting.
  bool rx_busy() const { return rx_busy_; }
  // Gives `s` a fresh session id and enters it in the table.
  void adopt(const std::shared_ptr<Session>& s);
  void forget(uint32_t id);
  // Sends a packet with header h (crc filled in here) and an optional
  // mbuf chain as its payload (taken).
  void transmit(const PacketHeader& h, const rte_ether_addr& dst, const uint8_t* inline_bytes,
                uint16_t inline_len, rte_mbuf* tail);
  // An mbuf over [data, data + len) of the caller's memory (an external
  // buffer: no copy); released(arg) runs when the driver lets go of it.
  // nullptr when the pool is empty.
  // shinfo's reference count goes up by one; its free_cb runs on the
  // polling thread when the last mbuf over it is freed.
  rte_mbuf* attach(const void* data, uint16_t len, rte_mbuf_ext_shared_info* shinfo);
  // Received mbufs a channel is done with (any thread): freed on the
  // polling thread, where the mempool caches and free callbacks live.
  void give_back(std::vector<rte_mbuf*>& mbufs);
  // Receive mbufs held by channels across the process, and the most before
  // every session advertises a closed window (the pool must keep room for
  // the port's receive ring).
  std::atomic<uint64_t>& held_mbufs() { return rx_held_; }
  bool rx_pool_full() const { return rx_held_.load(std::memory_order_relaxed) >= held_limit_; }
  const RxMemory& rx_memory() const { return rx_mem_; }
  rte_mempool* rx_pool() const { return rx_pool_; }
  rte_mempool* tx_pool() const { return pool_; }  // header mbufs
  // Polling thread: the transmit pools' sizes and the mbufs not in use
  // (in the pool or in hand in a stash): header pool, then attach pool.
  void tx_pools(uint64_t out[4]) const;
  void send_rst(uint32_t dst_session, uint32_t src_session, const rte_ether_addr& dst);

 private:
  Engine(const TransportHost* host);
  void start();
  void poll();
  bool handle(rte_mbuf* m);  // true: a session kept m
  void prefer_lifo_pools();
  void setup_rx_pool(int socket, uint16_t room);
  void flush();
  Session* find(uint32_t id);

  static constexpr size_t kTxBacklog = 1024;
  static constexpr const char* kLifoPoolOps = "stack";

  const TransportHost* host_;
  EngineConfig cfg_;
  EngineStats stats_;
  uint16_t port_ = 0;
  std::string port_name_;
  bool loopback_port_ = false;  // net_ring: our own packets come back to us
  rte_ether_addr mac_{};
  rte_mempool* pool_ = nullptr;
  rte_mempool* ext_pool_ = nullptr;
  rte_mempool* rx_pool_ = nullptr;
  MbufStash<MempoolSource> hdr_stash_, ext_stash_;
  RxMemory rx_mem_;
  std::atomic<uint64_t> rx_held_{0};
  uint64_t held_limit_ = 0;
  std::mutex back_mu_;
  std::vector<rte_mbuf*> back_;  // given back by channels, freed by the polling thread
  uint16_t gpus_ = 0;
  std::string gpu_reason_;

  std::mutex mu_;  // guards cmds_ and listeners_
  std::vector<std::function<void()>> cmds_;
  std::map<uint16_t, std::shared_ptr<ListenBox>> listeners_;
  uint16_t next_endpoint_ = 1;

  std::map<uint32_t, std::shared_ptr<Session>> sessions_;  // polling thread
  // The session the last packet went to (most packets of a burst go to the
  // same one); a session forgotten meanwhile is kept alive in retired_
  // until the end of the burst, as a packet being handled may be its own.
  uint32_t last_id_ = 0;
  Session* last_ = nullptr;
  std::vector<std::shared_ptr<Session>> retired_;
  uint64_t now_ = 0;
  bool rx_busy_ = false;
  std::vector<rte_mbuf*> txq_;
  rte_mbuf* held_ = nullptr;  // test reorder: sent after the next packet
  uint64_t rng_ = 0x9e3779b97f4a7c15ull;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace genie::dataplane::dpdk
