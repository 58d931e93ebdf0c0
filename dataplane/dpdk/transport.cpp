// The DPDK transport ("dpdk"), a plugin: channels as sessions of the Genie
// packet protocol over one DPDK ethdev port (docs/dpdk.md). The engine
// (engine.hpp) runs every session on its polling thread; the classes here
// live on their owners' loops and meet the engine through commands
// (Engine::run) and each session's Mailbox, drained on a uv_async.
//
// Addresses are "host:endpoint": the endpoint (1..65535; 0 in listen()
// picks one) names a listener behind the peer's port; the host part names
// the peer for messages only, since the port is a point-to-point link (a
// memif or veth pair, a ring): every packet leaves through this process's
// port (GENIE_DPDK_PORT) and a Syn is broadcast on it.
#include <rte_memory.h>

#include <array>
#include <chrono>
#include <cstring>
#include <future>
#include <limits>
#include <set>

#include "core/error.hpp"
#include "dataplane/async_channel.hpp"
#include "dataplane/dpdk/session.hpp"
#include "dataplane/guarded.hpp"
#include "dataplane/plugin.hpp"

namespace genie::dataplane::dpdk {
namespace {

constexpr const char* kName = "dpdk";
const TransportHost* g_host = nullptr;

// "host:endpoint" as listen() reports it ("[v6]:endpoint" for a v6 host).
std::string canonical(const std::string& address, int* endpoint) {
  std::string host;
  split_address(address, &host, endpoint);
  if (host.empty()) fail(GENIE_ERR_INVALID_ARGUMENT, "DPDK address '", address, "' has no host part");
  return host.find(':') != std::string::npos ? cat('[', host, "]:", *endpoint) : cat(host, ':', *endpoint);
}

// genie_transport_bytes_total{transport="dpdk"} (dataplane/transport_bytes.hpp).
void count_bytes(bool sent, uint64_t n) {
  static metrics::Counter& out = g_host->byte_counter(kName, true);
  static metrics::Counter& in = g_host->byte_counter(kName, false);
  (sent ? out : in).add(static_cast<double>(n));
}

class DpdkChannel final : public AsyncChannel<DpdkChannel> {
 public:
  DpdkChannel(Engine& eng, uv_loop_t* loop, std::shared_ptr<Session> s, uint32_t max_message,
              std::shared_ptr<MessageBudget> budget, ChannelHandlers handlers, std::string peer)
      : AsyncChannel(g_host, kName, loop, std::move(handlers), std::move(peer)),
        eng_(eng),
        session_(std::move(s)),
        box_(session_->box),
        max_message_(max_message),
        budget_(std::move(budget)) {}

  ~DpdkChannel() override {
    release_charge();
    // Received buffers nobody will read (the channel finished before the
    // engine's last events were handled) go back to the pool.
    std::lock_guard<std::mutex> lk(box_->mu);
    for (Event& e : box_->events)
      if (e.kind == Event::Data) eng_.give_back(e.mbufs);
  }

  void start(bool established, Transport::ConnectFn on_connected) {
    established_ = established;
    connect_cb_ = std::move(on_connected);
    open_handle();
    std::lock_guard<std::mutex> lk(box_->mu);
    box_->async = &async_;
    if (!box_->events.empty()) uv_async_send(&async_);
  }

  void send(uint16_t type, uint64_t request_id, uint32_t flags, std::string msg, const void* payload,
            uint64_t payload_len, std::shared_ptr<void> keep, Done done) override {
    send_tagged(SemanticTag(), type, request_id, flags, std::move(msg), payload, payload_len, std::move(keep),
                std::move(done));
  }

  SemanticTag received_tag() const override { return cur_tag_; }

  void send_tagged(const SemanticTag& tag, uint16_t type, uint64_t request_id, uint32_t flags, std::string msg,
                   const void* payload, uint64_t payload_len, std::shared_ptr<void> keep, Done done) override {
    auto refuse = [&](genie_status_t st) {
      if (done) log_guarded([&] { done(st); }, "send done");
    };
    if (closing_ || !established_) return refuse(GENIE_ERR_CONNECTION);
    if (payload_len > 0 && payload == nullptr) return refuse(GENIE_ERR_INVALID_ARGUMENT);
    if (msg.size() > max_message_) return refuse(GENIE_ERR_TOO_LARGE);
    auto m = std::make_shared<TxMsg>();
    FrameHeader fh;
    fh.type = type;
    fh.flags = flags;
    fh.request_id = request_id;
    fh.payload_len = payload_len;
    m->prefix.resize(kFrameHeaderSize + msg.size());
    encode_frame_header(fh, msg.data(), msg.size(), reinterpret_cast<uint8_t*>(m->prefix.data()));
    std::memcpy(m->prefix.data() + kFrameHeaderSize, msg.data(), msg.size());
    m->payload = static_cast<const uint8_t*>(payload);
    m->payload_len = payload_len;
    count_bytes(true, m->prefix.size() + payload_len);
    m->tag = tag;
    m->keep = std::move(keep);
    m->done = std::move(done);
    eng_.run([s = session_, m = std::move(m)]() mutable { s->enqueue(std::move(m)); });
  }

  void close(genie_status_t status, const std::string& detail) override {
    if (closing_) return;
    closing_ = true;
    close_status_ = status;
    close_detail_ = detail;
    eng_.run([s = session_, status, detail] { s->close(status, detail); });
  }

  void set_max_message(uint32_t bytes) override { max_message_ = bytes; }

  // The loop is being torn down: whatever is left of it is swept right
  // after the close hooks, so the close completes here. The session ends
  // without lingering (SHUTDOWN resets it); its last events are awaited
  // briefly and handled now.
  void on_teardown() {
    close(GENIE_ERR_SHUTDOWN, "event loop stopped");
    if (finished_) return;
    {
      std::unique_lock<std::mutex> lk(box_->mu);
      box_->cv.wait_for(lk, std::chrono::seconds(2), [&] {
        for (const Event& e : box_->events)
          if (e.kind == Event::Closed) return true;
        return false;
      });
    }
    process();
    if (!finished_) {
      // The engine did not answer in time: never signal a handle that is
      // about to be swept.
      std::lock_guard<std::mutex> lk(box_->mu);
      box_->async = nullptr;
    }
  }

  void on_wake() { process(); }
  void release_before_close() { sink_ = PayloadSink(); }  // an unfinished payload's: done not run

 private:
  void process() {
    std::deque<Event> events;
    {
      std::lock_guard<std::mutex> lk(box_->mu);
      events.swap(box_->events);
    }
    for (Event& e : events) {
      switch (e.kind) {
        case Event::Connected:
          if (closing_) break;
          established_ = true;
          if (auto cb = std::exchange(connect_cb_, nullptr))
            log_guarded([&] { cb(GENIE_OK, {}); }, "connect callback");
          break;
        case Event::ConnectFailed: connect_failed_ = e.detail; break;
        case Event::Data:
          box_->backlog.fetch_sub(e.size, std::memory_order_relaxed);
          count_bytes(false, e.size);
          tags_.insert(tags_.end(), e.tags.begin(), e.tags.end());
          for (size_t i = 0; i < e.segs.size() && !closing_; ++i) consume(e.segs[i].data, e.segs[i].len);
          eng_.give_back(e.mbufs);
          break;
        case Event::SendDone:
          if (e.done) log_guarded([&] { e.done(e.status); }, "send done");
          break;
        case Event::Closed:
          if (!closing_) {
            closing_ = true;
            close_status_ = e.status;
            close_detail_ = e.detail;
          }
          finish();
          break;
      }
    }
  }

  // The session's byte stream (the frames the peer sent, one after
  // another) parsed as the TCP transport parses its socket's: a frame's
  // header and message are gathered and checked, then its payload is
  // copied from the receive buffers straight into the owner's sink.
  void consume(const uint8_t* p, size_t n) {
    genie_status_t st = GENIE_OK;
    std::string detail;
    while (n > 0 && !closing_) {
      if (phase_ == Phase::Header) {
        if (hdr_got_ == 0) {  // a tensor starts: its tag came with its first packet
          cur_tag_ = tags_.empty() ? SemanticTag() : tags_.front();
          if (!tags_.empty()) tags_.pop_front();
        }
        const size_t k = std::min(n, kFrameHeaderSize - hdr_got_);
        std::memcpy(hdr_ + hdr_got_, p, k);
        hdr_got_ += k, p += k, n -= k;
        if (hdr_got_ < kFrameHeaderSize) break;
        if (!guarded([&] { cur_ = decode_frame_header(hdr_, max_message_, handlers_.types); }, &st, &detail,
                     "frame"))
          return close(st, detail);
        msg_.clear();
        msg_got_ = 0;
        phase_ = Phase::Message;
        if (cur_.msg_len == 0) message_complete();
      } else if (phase_ == Phase::Message) {
        const size_t k = std::min<size_t>(n, cur_.msg_len - msg_got_);
        if (!grow_message(msg_got_ + k))
          return close(GENIE_ERR_TOO_LARGE, cat("messages still arriving already hold ", budget_->used(),
                                                " bytes (limit ", budget_->limit(), "): a ", cur_.msg_len,
                                                "-byte message from ", peer(), " was refused"));
        std::memcpy(msg_.data() + msg_got_, p, k);
        msg_got_ += k, p += k, n -= k;
        if (msg_got_ == cur_.msg_len) message_complete();
      } else {
        const size_t k = std::min<uint64_t>(n, cur_.payload_len - payload_got_);
        std::memcpy(static_cast<uint8_t*>(sink_.dst) + payload_got_, p, k);
        payload_got_ += k, p += k, n -= k;
        if (payload_got_ == cur_.payload_len) payload_complete();
      }
    }
  }

  void message_complete() {
    genie_status_t st = GENIE_OK;
    std::string detail;
    hdr_got_ = 0;
    phase_ = Phase::Header;
    if (!guarded([&] { verify_frame_crc(hdr_, msg_.data(), msg_.size(), handlers_.types); }, &st, &detail,
                 "frame"))
      return close(st, detail);
    PayloadSink sink;
    // Handed over (or dropped): its charge goes back first, as the TCP
    // transport gives it back before the owner sees the message.
    std::string msg = std::move(msg_);
    msg_ = std::string();
    release_charge();
    if (handlers_.on_frame &&
        !guarded([&] { sink = handlers_.on_frame(cur_, std::move(msg)); }, &st, &detail, "on_frame"))
      return close(st, detail);
    if (closing_ || cur_.payload_len == 0) return;
    if (sink.dst == nullptr) {
      return close(GENIE_ERR_PROTOCOL, cat("the ", cur_.payload_len, "-byte payload of a ",
                                           frame_type_label(handlers_.types, cur_.type), " frame (request ",
                                           cur_.request_id, ") was refused"));
    }
    sink_ = std::move(sink);
    payload_got_ = 0;
    phase_ = Phase::Payload;
  }

  // The message buffer grows as its bytes arrive, charged to the budget
  // (grow_charged). False when the budget refuses.
  bool grow_message(size_t size) { return grow_charged(msg_, size, budget_.get(), charged_); }

  void release_charge() {
    if (budget_ && charged_ > 0) budget_->give(charged_);
    charged_ = 0;
  }

  void payload_complete() {
    genie_status_t st = GENIE_OK;
    std::string detail;
    phase_ = Phase::Header;
    PayloadSink sink = std::move(sink_);
    sink_ = PayloadSink();
    if (sink.done && !guarded([&] { sink.done(); }, &st, &detail, "payload done")) close(st, detail);
  }

  void finish() {
    if (finished_) return;
    finished_ = true;
    msg_ = std::string();  // a message cut off by the close: its charge goes back
    release_charge();
    {
      std::lock_guard<std::mutex> lk(box_->mu);
      box_->async = nullptr;
    }
    close_handle();
  }

  Engine& eng_;
  std::shared_ptr<Session> session_;
  std::shared_ptr<Mailbox> box_;
  uint32_t max_message_;  // set_max_message may change it (loop thread)
  // Where the message being received is charged (null: unbounded beyond
  // max_message), and how much of it is charged now.
  std::shared_ptr<MessageBudget> budget_;
  uint64_t charged_ = 0;
  // the frame being received
  enum class Phase { Header, Message, Payload } phase_ = Phase::Header;
  uint8_t hdr_[kFrameHeaderSize] = {};
  size_t hdr_got_ = 0;
  FrameHeader cur_;
  std::string msg_;
  size_t msg_got_ = 0;
  PayloadSink sink_;
  uint64_t payload_got_ = 0;
  std::deque<SemanticTag> tags_;  // of the tensors whose bytes are arriving, in order
  SemanticTag cur_tag_;           // of the frame being received
};

class DpdkListener final : public Listener, public std::enable_shared_from_this<DpdkListener> {
 public:
  DpdkListener(Engine& eng, uv_loop_t* loop, ChannelOptions options, Transport::ConnectionFn on_connection)
      : eng_(eng), loop_(loop), options_(options), on_connection_(std::move(on_connection)) {}

  void start(const std::string& address) {
    int endpoint = 0;
    const std::string name = canonical(address, &endpoint);
    const std::string host = name.substr(0, name.rfind(':'));
    endpoint_ = eng_.bind(static_cast<uint16_t>(endpoint), box_);
    address_ = cat(host, ':', endpoint_);
    const int rc =
        uv_async_init(loop_, &async_, [](uv_async_t* a) { static_cast<DpdkListener*>(a->data)->take(); });
    if (rc != 0) {
      eng_.unbind(endpoint_);
      fail(GENIE_ERR_INTERNAL, "uv_async_init: ", uv_strerror(rc));
    }
    async_.data = this;
    {
      std::lock_guard<std::mutex> lk(box_->mu);
      box_->async = &async_;
      if (!box_->incoming.empty()) uv_async_send(&async_);  // a Syn came in meanwhile
    }
    self_ = shared_from_this();
    std::weak_ptr<DpdkListener> weak = self_;
    hook_ = g_host->add_close_hook(loop_, [weak] {
      if (auto l = weak.lock()) l->close();
    });
  }

  std::string address() const override { return closing_ ? std::string() : address_; }

  std::shared_ptr<Channel> accept(ChannelHandlers handlers) override {
    if (!current_) fail(GENIE_ERR_INVALID_ARGUMENT, "Listener::accept outside on_connection, or twice");
    std::shared_ptr<Session> s = std::move(current_);
    current_ = nullptr;
    auto ch = std::make_shared<DpdkChannel>(eng_, loop_, s, options_.max_message, options_.budget, std::move(handlers),
                                            cat(address_, "#", ++accepted_));
    ch->start(true, nullptr);
    return ch;
  }

  void close() override {
    if (closing_ || !self_) return;
    closing_ = true;
    eng_.unbind(endpoint_);
    std::deque<std::shared_ptr<Session>> left;
    {
      std::lock_guard<std::mutex> lk(box_->mu);
      box_->async = nullptr;
      left.swap(box_->incoming);
    }
    for (auto& s : left) eng_.run([s] { s->reset("the listener closed"); });
    g_host->remove_close_hook(loop_, hook_);
    uv_close(reinterpret_cast<uv_handle_t*>(&async_), [](uv_handle_t* h) {
      std::shared_ptr<DpdkListener> self = std::move(static_cast<DpdkListener*>(h->data)->self_);
    });
  }

 private:
  void take() {
    if (closing_) return;
    std::deque<std::shared_ptr<Session>> sessions;
    {
      std::lock_guard<std::mutex> lk(box_->mu);
      sessions.swap(box_->incoming);
    }
    for (auto& s : sessions) {
      current_ = s;
      try {
        if (!closing_ && on_connection_) on_connection_(*this);
      } catch (const std::exception& e) {
        g_host->log(LogLevel::Error, cat("dpdk listener ", address_, ": on_connection threw: ", e.what()));
      }
      if (current_) {
        current_ = nullptr;
        eng_.run([s] { s->reset("not accepted"); });
      }
    }
  }

  Engine& eng_;
  uv_loop_t* loop_;
  ChannelOptions options_;
  Transport::ConnectionFn on_connection_;
  std::shared_ptr<ListenBox> box_ = std::make_shared<ListenBox>();
  uint16_t endpoint_ = 0;
  std::string address_;
  uv_async_t async_{};
  std::shared_ptr<DpdkListener> self_;
  uint64_t hook_ = 0;
  bool closing_ = false;
  uint64_t accepted_ = 0;
  std::shared_ptr<Session> current_;
};

class Region final : public MemoryRegion {
 public:
  Region(void* data, MemoryDescriptor d) : MemoryRegion(data, std::move(d)) {}
};

class DpdkTransport final : public Transport {
 public:
  explicit DpdkTransport(Engine& eng) : eng_(eng) {
    caps_.name = kName;
    caps_.reliable = true;  // acks, retransmission, a CRC on every packet
    caps_.ordered = true;   // tensors are delivered in send order
    // Payloads leave from the caller's memory (external-buffer mbufs) and
    // are copied once on arrival, from the registered receive buffer the
    // port wrote into straight into the sink (docs/dpdk.md).
    caps_.zero_copy = true;
    caps_.gpu_memory = false;
    caps_.rma = false;
    caps_.link_endpoints = true;  // an endpoint names a listener behind a port
    caps_.max_message = std::numeric_limits<uint32_t>::max();
  }

  const Capabilities& capabilities() const override { return caps_; }

  std::shared_ptr<MemoryRegion> register_memory(void* data, uint64_t length, MemoryKind kind,
                                                int32_t device) override {
    const std::string how = cat("sends host memory only: ", eng_.gpu_reason());
    return std::make_shared<Region>(data,
                                    describe_host_memory(kName, how.c_str(), data, length, kind, device));
  }

  std::shared_ptr<Listener> listen(uv_loop_t* loop, const std::string& address, const ChannelOptions& options,
                                   ConnectionFn on_connection) override {
    auto l = std::make_shared<DpdkListener>(eng_, loop, options, std::move(on_connection));
    l->start(address);
    return l;
  }

  std::shared_ptr<Channel> connect(uv_loop_t* loop, const std::string& address, const ChannelOptions& options,
                                   ChannelHandlers handlers, ConnectFn on_connected) override {
    int endpoint = 0;
    const std::string target = canonical(address, &endpoint);
    check(endpoint > 0, GENIE_ERR_INVALID_ARGUMENT, "DPDK address '", address,
          "' names no endpoint (1..65535)");
    auto s = std::make_shared<Session>(eng_);
    auto ch = std::make_shared<DpdkChannel>(eng_, loop, s, options.max_message, options.budget, std::move(handlers),
                                            target);
    ch->start(false, std::move(on_connected));
    eng_.run([this, s, endpoint, max = options.max_message, target] {
      eng_.adopt(s);
      s->connect(static_cast<uint16_t>(endpoint), max, target);
    });
    return ch;
  }

 private:
  Engine& eng_;
  Capabilities caps_;
};

Transport* create(const TransportHost* host) {
  g_host = host;
  return new DpdkTransport(Engine::get(host));
}

}  // namespace
}  // namespace genie::dataplane::dpdk

// For tests and benchmarks (found with dlsym on the loaded plugin): the
// engine's counters, zero before it started: tx, rx, retransmits, CRC
// drops, duplicates, nacks sent, test drops, test corruptions.
extern "C" __attribute__((visibility("default"))) void genie_dpdk_stats(uint64_t out[8]) {
  for (int i = 0; i < 8; ++i) out[i] = 0;
  genie::dataplane::dpdk::Engine* e = genie::dataplane::dpdk::Engine::started();
  if (e == nullptr) return;
  auto& s = e->stats();
  const std::atomic<uint64_t>* c[8] = {&s.tx_packets, &s.rx_packets, &s.retransmits,  &s.crc_drops,
                                       &s.duplicates, &s.nacks_sent, &s.test_dropped, &s.test_corrupted};
  for (int i = 0; i < 8; ++i) out[i] = c[i]->load();
}

GENIE_TRANSPORT_PLUGIN("dpdk", genie::dataplane::dpdk::create)

// For tests and benchmarks: the receive pool over registered memory.
// out: [0] 1 when every receive mbuf's buffer lies in the registered area
// (checked on one taken from the pool) and EAL knows the area as external
// memory, [1] its bytes, [2] its mbufs, [3] Data packets whose payload the
// port wrote there, [4] 1 when the port's device accepted a DMA mapping of
// it, [5] tail-loss probes sent. All zero before the engine started.
extern "C" __attribute__((visibility("default"))) void genie_dpdk_rx_pool(uint64_t out[6]) {
  for (int i = 0; i < 6; ++i) out[i] = 0;
  genie::dataplane::dpdk::Engine* e = genie::dataplane::dpdk::Engine::started();
  if (e == nullptr) return;
  const auto& r = e->rx_memory();
  rte_mbuf* m = rte_pktmbuf_alloc(e->rx_pool());
  const rte_memseg_list* msl = rte_mem_virt2memseg_list(r.base);
  out[0] = m != nullptr && r.holds(m->buf_addr) && r.holds(static_cast<uint8_t*>(m->buf_addr) + m->buf_len - 1) &&
           RTE_MBUF_HAS_PINNED_EXTBUF(m) && msl != nullptr && msl->external;
  if (m != nullptr) rte_pktmbuf_free(m);
  out[1] = r.length;
  out[2] = r.mbufs;
  out[3] = e->stats().rx_registered.load();
  out[4] = r.dma_mapped;
  out[5] = e->stats().probes.load();
}

// For tests: the transmit pools, read on the polling thread. out: [0] the
// header pool's mbufs, [1] how many of them are not in use, [2] and [3]
// the same for the pool of attached mbufs. All zero before the engine
// started.
extern "C" __attribute__((visibility("default"))) void genie_dpdk_tx_pools(uint64_t out[4]) {
  for (int i = 0; i < 4; ++i) out[i] = 0;
  genie::dataplane::dpdk::Engine* e = genie::dataplane::dpdk::Engine::started();
  if (e == nullptr) return;
  auto done = std::make_shared<std::promise<std::array<uint64_t, 4>>>();
  auto f = done->get_future();
  e->run([e, done] {
    std::array<uint64_t, 4> got{};
    e->tx_pools(got.data());
    done->set_value(got);
  });
  if (f.wait_for(std::chrono::seconds(5)) != std::future_status::ready) return;
  const std::array<uint64_t, 4> got = f.get();
  for (int i = 0; i < 4; ++i) out[i] = got[i];
}

// For tests: whether the header pool hands out the mbufs freed last, past
// what its per-lcore cache holds. On the polling thread, takes n mbufs,
// frees them, takes n again and counts those of the first n among them.
// out: [0] n (0 when the pool could not give them), [1] how many came back.
extern "C" __attribute__((visibility("default"))) void genie_dpdk_pool_reuse(uint64_t out[2]) {
  out[0] = out[1] = 0;
  genie::dataplane::dpdk::Engine* e = genie::dataplane::dpdk::Engine::started();
  if (e == nullptr) return;
  auto done = std::make_shared<std::promise<std::array<uint64_t, 2>>>();
  auto f = done->get_future();
  e->run([e, done] {
    constexpr unsigned n = 2048;
    std::vector<rte_mbuf*> first(n), again(n);
    std::array<uint64_t, 2> got{};
    if (rte_pktmbuf_alloc_bulk(e->tx_pool(), first.data(), n) == 0) {
      std::set<rte_mbuf*> seen(first.begin(), first.end());
      rte_pktmbuf_free_bulk(first.data(), n);
      if (rte_pktmbuf_alloc_bulk(e->tx_pool(), again.data(), n) == 0) {
        got[0] = n;
        for (rte_mbuf* m : again) got[1] += seen.count(m);
        rte_pktmbuf_free_bulk(again.data(), n);
      }
    }
    done->set_value(got);
  });
  if (f.wait_for(std::chrono::seconds(5)) != std::future_status::ready) return;
  const std::array<uint64_t, 2> got = f.get();
  out[0] = got[0];
  out[1] = got[1];
}

// For benchmarks: the CRC-32C the transport computes over every packet
// (twice: when it sends the packet and when the receiver verifies it).
extern "C" __attribute__((visibility("default"))) uint32_t genie_dpdk_crc32c(const void* data, size_t len,
                                                                             uint32_t crc) {
  return genie::dataplane::dpdk::crc32c(data, len, crc);
}
