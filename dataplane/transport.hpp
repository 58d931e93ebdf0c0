// The transport interface: how tensor bytes move between processes.
//
// A Transport registers memory, listens for and connects channels to peers,
// and says what it can do (Capabilities). A Channel carries frames (type,
// request id, flags, a message, an optional payload; dataplane/frame.hpp)
// in both directions; the receiver's handler says where each payload goes
// (PayloadSink), so that bulk bytes land in tensor memory without a copy of
// ours. Transports with remote memory access (caps.rma) also move bytes
// into or out of a peer's registered region (put/get) named by the
// region's descriptor, which the peer sends over the control plane.
//
// Threads: listen(), connect() and every Channel and Listener method run on
// the thread of the uv_loop_t they were given (the owner's loop); every
// callback (send done, frame arrived, payload done, closed, connected, RMA
// done, new connection) runs on that loop's thread, never on a thread of
// the transport's own. capabilities() and register_memory() may be called
// from any thread.
//
// Errors: a call that cannot be started throws genie::Error (status and a
// detail naming the reason), except where a method says its callback
// reports the failure; a callback runs exactly once.
//
// Transports other than "tcp" are plugins (dataplane/plugin.hpp), found by
// name through the registry (dataplane/registry.hpp).
#pragma once

#include <uv.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/blocking.hpp"
#include "dataplane/frame.hpp"
#include "genie.h"

namespace genie::dataplane {

// Where registered memory lives. Only Host is supported by the TCP and
// loopback transports; the others exist for transports that reach pinned
// host or device memory directly (RDMA, GPUDirect).
enum class MemoryKind : uint8_t { Host = 0, PinnedHost = 1, Device = 2 };
const char* memory_kind_name(MemoryKind kind);

struct Capabilities {
  std::string name;         // the registry name, e.g. "tcp"
  bool reliable = false;    // frames are never lost while the channel is open
  bool ordered = false;     // frames arrive in send order
  bool zero_copy = false;   // payloads move without an intermediate copy of ours
  bool gpu_memory = false;  // MemoryKind::Device can be registered
  bool rma = false;         // Channel::put and Channel::get are supported
  // Listen addresses name an endpoint on a link, not on a host: processes
  // whose ports share a link must listen on endpoints that differ (a
  // listen on 0 picks one free in this process only).
  bool link_endpoints = false;
  // The largest message section one frame may carry (payloads are not
  // bounded by it); a channel's ChannelOptions::max_message may lower it.
  uint64_t max_message = 0;
};

// What a peer needs to reach a registered region: encoded with encode(),
// sent over the control plane, decoded there and passed to put/get. `key`
// is the transport's own (e.g. a packed UCX rkey); empty where none is
// needed.
struct MemoryDescriptor {
  std::string transport;  // which transport registered it
  MemoryKind kind = MemoryKind::Host;
  int32_t device = -1;   // device index for MemoryKind::Device
  uint64_t address = 0;  // in the registering process
  uint64_t length = 0;
  std::string key;

  std::string encode() const;
  // Throws Error(PROTOCOL) naming what is wrong with `bytes`.
  static MemoryDescriptor decode(const std::string& bytes);
};

// A registration; unregistered when the last reference goes. The memory
// itself stays the caller's and must outlive the region.
class MemoryRegion {
 public:
  virtual ~MemoryRegion();
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;

  void* data() const { return data_; }
  uint64_t size() const { return desc_.length; }
  MemoryKind kind() const { return desc_.kind; }
  const MemoryDescriptor& descriptor() const { return desc_; }

 protected:
  MemoryRegion(void* data, MemoryDescriptor desc) : data_(data), desc_(std::move(desc)) {}

 private:
  void* data_;
  MemoryDescriptor desc_;
};

// What a frame's payload is, for transports that carry it with the bytes
// (the DPDK header has room for it; others ignore it): the graph's semantic
// annotations of the tensor (graph/graph.hpp: Phase, TensorRole, the layer
// index) and its element type. Zero / kNoLayer where unknown.
struct SemanticTag {
  static constexpr uint16_t kNoLayer = 0xFFFF;
  uint8_t dtype = 0;  // genie_dtype_t + 1; 0: unknown
  uint8_t phase = 0;  // graph::Phase
  uint8_t role = 0;   // graph::TensorRole
  uint16_t layer = kNoLayer;
  bool operator==(const SemanticTag&) const = default;
};

// Where the payload of an incoming frame goes.
struct PayloadSink {
  void* dst = nullptr;         // payload_len bytes are written here
  std::shared_ptr<void> keep;  // held until the payload has been read
  // Runs on the loop thread after the last payload byte arrived, before the
  // next frame is delivered; never runs when the channel closes first (then
  // only `keep` is released, before on_close). May call close() or send().
  std::function<void()> done;
};

struct ChannelHandlers {
  // The frame types the owner understands: a frame of another type closes
  // the channel with GENIE_ERR_PROTOCOL before its message is read.
  FrameTypes types;
  // A whole frame arrived (header and message; the CRC checked where the
  // transport has one). For a frame with payload_len > 0 the handler returns
  // where to put the payload; a sink with dst == nullptr means "refuse": the
  // channel closes with GENIE_ERR_PROTOCOL. dst must have room for all
  // payload_len bytes: check payload_len against the range the message
  // names before returning it. For payload_len == 0 the return value is
  // ignored. May call close() (e.g. with its own detail before refusing)
  // and send(). An exception it throws closes the channel: a genie::Error
  // with its status and detail, anything else with GENIE_ERR_INTERNAL.
  std::function<PayloadSink(const FrameHeader&, std::string&& msg)> on_frame;
  // The channel closed: `status` is GENIE_OK for an orderly close by this
  // side, GENIE_ERR_CONNECTION for the peer's close or a lost link,
  // GENIE_ERR_PROTOCOL (or VERSION_MISMATCH) for a malformed frame, with a
  // detail message. Called exactly once, after which no handler runs
  // again; the handlers are destroyed right after it.
  std::function<void(genie_status_t status, const std::string& detail)> on_close;
};

namespace tcp {
class TlsContext;
}

// Bytes that messages still arriving may hold, shared by every channel of
// one owner (a server's listeners): a transport that buffers a message as
// its bytes arrive charges what it allocates here and gives it back once the
// message is handed over (or the channel closes). A channel whose message
// would pass the limit is closed with GENIE_ERR_TOO_LARGE, so that many
// peers each sending part of a large message cannot together exhaust the
// owner's memory. Any thread.
class MessageBudget {
 public:
  explicit MessageBudget(uint64_t limit) : limit_(limit) {}
  // Takes n bytes; false (taking nothing) when that would pass the limit.
  bool take(uint64_t n) {
    uint64_t used = used_.load(std::memory_order_relaxed);
    do {
      if (n > limit_ || used > limit_ - n) return false;
    } while (!used_.compare_exchange_weak(used, used + n, std::memory_order_relaxed));
    return true;
  }
  void give(uint64_t n) { used_.fetch_sub(n, std::memory_order_relaxed); }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  uint64_t limit() const { return limit_; }

 private:
  const uint64_t limit_;
  std::atomic<uint64_t> used_{0};
};

// Sizes a message buffer `msg` to `size` bytes (it only grows, as the bytes
// arrive, never to what a header claims) and charges what the string
// allocates to `budget` (null: nothing to charge), on top of `charged`,
// which it updates. False, changing nothing, when the budget refuses.
inline bool grow_charged(std::string& msg, size_t size, MessageBudget* budget, uint64_t& charged) {
  if (msg.size() >= size) return true;
  if (budget) {
    // At most what the string allocates to grow: `size`, or double its
    // capacity (the standard library's growth).
    const uint64_t after = std::max<uint64_t>(size, 2 * uint64_t{msg.capacity()});
    if (after > charged) {
      if (!budget->take(after - charged)) return false;
      charged = after;
    }
  }
  msg.resize(size);
  return true;
}

struct ChannelOptions {
  uint32_t max_message = kDefaultMaxMessage;  // larger messages are refused, both ways
  bool nodelay = false;                       // latency over batching (TCP_NODELAY)
  int buffer_bytes = 0;                       // socket buffer sizes; 0: the system's
  // The TCP transport only (others do not encrypt, and ignore it): speak
  // TLS 1.3 with this side's settings (dataplane/tcp/tls.hpp).
  std::shared_ptr<const tcp::TlsContext> tls;

  // Where a listener's channels (or a connecting one) charge the messages
  // they are receiving; null: not bounded beyond max_message.
  std::shared_ptr<MessageBudget> budget;
};

// One connection to a peer. Owned through std::shared_ptr; it keeps itself
// alive until it has closed, so every Channel must be closed: by close(), by
// the peer, by a malformed frame, or by the owner's loop stopping (a
// LoopThread closes channels still open on its loop with GENIE_ERR_SHUTDOWN).
//
// Callback order, once close() has begun (by either side): no on_frame and
// no PayloadSink::done runs any more and no byte is written to a sink's dst;
// then every pending send's done runs (GENIE_OK if its bytes had left, i.e.
// reached the kernel or the peer, GENIE_ERR_CONNECTION otherwise), a connect
// still pending gets its callback with GENIE_ERR_CONNECTION, the sink of an
// unfinished payload is released (its `keep` dropped, `done` not run), and
// on_close runs last.
class Channel {
 public:
  using Done = std::function<void(genie_status_t)>;
  using RmaDone = std::function<void(genie_status_t, const std::string& detail)>;

  virtual ~Channel();

  // Sends one frame. `payload` (payload_len bytes) must stay valid until
  // `done` runs; `keep` is held until then. `done(status)` (may be empty)
  // runs on the loop thread once the bytes have left or the send failed,
  // possibly before send() returns. Frames arrive in call order where
  // capabilities say `ordered`. Only once connected (or accepted). Without
  // sending anything, `done` gets GENIE_ERR_CONNECTION when the channel is
  // closing or not yet connected, GENIE_ERR_TOO_LARGE for a message over
  // max_message, GENIE_ERR_INVALID_ARGUMENT for payload == nullptr with
  // payload_len > 0.
  virtual void send(uint16_t type, uint64_t request_id, uint32_t flags, std::string msg,
                    const void* payload = nullptr, uint64_t payload_len = 0,
                    std::shared_ptr<void> keep = nullptr, Done done = nullptr) = 0;

  // send() with the payload's semantic tag, which a transport that carries
  // tags (dpdk) puts on every packet of the frame and the receiver's
  // received_tag() reports; the default ignores the tag.
  virtual void send_tagged(const SemanticTag& tag, uint16_t type, uint64_t request_id, uint32_t flags,
                           std::string msg, const void* payload, uint64_t payload_len, std::shared_ptr<void> keep,
                           Done done) {
    (void)tag;
    send(type, request_id, flags, std::move(msg), payload, payload_len, std::move(keep), std::move(done));
  }

  // Inside on_frame: the tag the frame was sent with (send_tagged), where
  // the transport carries tags; a default SemanticTag elsewhere.
  virtual SemanticTag received_tag() const { return {}; }

  // Closes the channel (idempotent: the first status wins); on_close runs
  // with `status` from the loop after close() returned, never inside it.
  virtual void close(genie_status_t status = GENIE_OK, const std::string& detail = "closed") = 0;

  // True once close() has begun (on_close may not have run yet).
  virtual bool closed() const = 0;

  // The peer's address, as the transport names it (empty if unknown).
  virtual std::string peer() const = 0;

  // Who the peer proved to be, where the transport authenticates peers:
  // for TCP with TLS, "sha256:" and the hex SHA-256 of the certificate it
  // presented. Empty: no certificate (or a transport without TLS).
  virtual std::string peer_identity() const { return {}; }
  // The names in that certificate ("CN:..." and "URI:..." entries, see
  // tcp::TlsSession::peer_names); empty without one.
  virtual std::vector<std::string> peer_names() const { return {}; }
  // A value both ends of this channel share and no other channel has (TLS:
  // the RFC 9266 tls-exporter), to bind authentication answers to the
  // channel they travel on. Empty: the transport has none.
  virtual std::string channel_binding() const { return {}; }

  // Hints a transport may ignore (the defaults do nothing). Between cork()
  // and the matching uncork(), sent frames may be held and written together
  // (nests; their `done`s may run at the uncork). set_nodelay: latency over
  // batching; set_buffer_sizes: bulk transfer, size the kernel's buffers.
  virtual void cork() {}
  virtual void uncork() {}
  virtual void set_nodelay(bool on) {}
  virtual void set_buffer_sizes(int bytes) {}

  // Changes the largest message this channel accepts (and sends) from the
  // next frame header on; a frame whose header has arrived keeps the limit
  // it was checked against. A server accepts with a small limit and raises
  // it once the peer has authenticated, so that an unauthenticated peer
  // cannot make it hold more than a small frame. Transports that read
  // frames from a byte stream must honour it; the default does nothing
  // (for transports whose messages arrive already allocated by a peer in
  // this process).
  virtual void set_max_message(uint32_t bytes) {}

  // True where put/get on this channel, although supported, are carried by
  // the transport's own messages through the peer's CPU rather than by a
  // one-sided path between these two ends (UCX without an RMA lane to this
  // peer: shared memory with peer-failure handling, or plain TCP; see
  // docs/ucx.md). Bulk bytes then move at least as fast as a framed
  // payload, and callers choose that. Known once the channel is connected
  // (the accepting side: once a frame arrived); false before. Any thread.
  virtual bool rma_emulated() const { return false; }

  // Remote memory access, where capabilities say `rma`: copies `length`
  // bytes from `local` at `local_offset` into the peer's region `remote` at
  // `remote_offset` (put), or the other way (get). `local` must stay
  // registered until `done`. `done(status, detail)` runs once on the loop
  // thread: GENIE_OK when the bytes are in place, GENIE_ERR_UNSUPPORTED
  // (before the call returns) on a transport without RMA,
  // GENIE_ERR_INVALID_ARGUMENT for a range outside either region or a
  // descriptor of another transport, GENIE_ERR_CONNECTION once closing.
  virtual void put(const std::shared_ptr<MemoryRegion>& local, uint64_t local_offset,
                   const MemoryDescriptor& remote, uint64_t remote_offset, uint64_t length, RmaDone done);
  virtual void get(const std::shared_ptr<MemoryRegion>& local, uint64_t local_offset,
                   const MemoryDescriptor& remote, uint64_t remote_offset, uint64_t length, RmaDone done);
};

// Listens for channels. Owned through std::shared_ptr and alive until
// close() (or the owner's loop stopping) has finished.
class Listener {
 public:
  virtual ~Listener();
  // The bound address in the form connect() takes, e.g. "127.0.0.1:40123"
  // (the real port when listening on port 0).
  virtual std::string address() const = 0;
  // Takes the connection on_connection announced and starts it with
  // `handlers`. Call from on_connection only, at most once per call (else
  // Error(INVALID_ARGUMENT)); a connection not taken there is closed. One
  // already gone comes back closing: its on_close reports
  // GENIE_ERR_CONNECTION.
  virtual std::shared_ptr<Channel> accept(ChannelHandlers handlers) = 0;
  // Stops listening (idempotent); channels already accepted stay open.
  virtual void close() = 0;
};

class Transport {
 public:
  using ConnectFn = std::function<void(genie_status_t status, const std::string& detail)>;
  using ConnectionFn = std::function<void(Listener& listener)>;

  virtual ~Transport();

  virtual const Capabilities& capabilities() const = 0;

  // Registers [data, data + length) for this transport. Throws
  // Error(INVALID_ARGUMENT) for a null or empty range and
  // Error(UNSUPPORTED) naming the reason for a kind the transport cannot
  // reach (see capabilities().gpu_memory).
  virtual std::shared_ptr<MemoryRegion> register_memory(void* data, uint64_t length, MemoryKind kind,
                                                        int32_t device = -1) = 0;

  // Listens on `address` ("host:port"; port 0 picks a free one, read it back
  // from Listener::address()). `on_connection(listener)` runs on the loop
  // for each incoming channel and should call listener.accept(). Throws
  // Error(IO) naming the address and the reason when it cannot be bound,
  // Error(INVALID_ARGUMENT) when it does not parse.
  virtual std::shared_ptr<Listener> listen(uv_loop_t* loop, const std::string& address,
                                           const ChannelOptions& options, ConnectionFn on_connection) = 0;

  // Connects to `address` (as a listener reports it) and returns the
  // channel at once; send() only once `on_connected(GENIE_OK, "")` ran.
  // `on_connected` runs exactly once on the loop, never before connect()
  // returns; a failure (GENIE_ERR_CONNECTION naming the target and the
  // reason) closes the channel: on_connected runs just before on_close.
  virtual std::shared_ptr<Channel> connect(uv_loop_t* loop, const std::string& address,
                                           const ChannelOptions& options, ChannelHandlers handlers,
                                           ConnectFn on_connected) = 0;

  // Connects to `address` (as a listener reports it) with a channel the
  // calling thread drives itself (dataplane/blocking.hpp), for a caller
  // that sends a request and waits for its answer without an event loop in
  // between; the listener's side is an ordinary Channel. Returns once the
  // channel is connected and may send. Any thread. Throws
  // Error(UNSUPPORTED) on a transport without it (the default; TCP callers
  // use tcp/blocking_stream.hpp on a socket of their own),
  // Error(CONNECTION) naming the target and the reason when it cannot be
  // reached by the deadline, Error(INVALID_ARGUMENT) for an address that
  // does not parse. Only options.max_message applies (the limit of the
  // frames it receives).
  virtual std::unique_ptr<BlockingChannel> connect_blocking(const std::string& address,
                                                            const ChannelOptions& options, Deadline deadline);
};

// The descriptor of host memory [data, data + length) registered with
// `transport`, for transports that reach host memory only (`how` says how
// they move bytes, for the refusal). Throws Error(INVALID_ARGUMENT) for an
// empty range, Error(UNSUPPORTED) naming the transport for another kind.
MemoryDescriptor describe_host_memory(const std::string& transport, const char* how, void* data,
                                      uint64_t length, MemoryKind kind, int32_t device);

// Splits "host:port" or "[v6]:port". Throws Error(INVALID_ARGUMENT) naming
// `address` when there is no port or it is not a number in 0..65535.
void split_address(const std::string& address, std::string* host, int* port);

}  // namespace genie::dataplane
