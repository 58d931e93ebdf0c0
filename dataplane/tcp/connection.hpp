// A framed TCP connection on a libuv loop (dataplane/frame.hpp): the TCP
// transport's Channel, which control's connections (control/connection.hpp)
// reach through the Channel interface.
//
// Reads are a state machine: header -> message -> payload. A message's
// buffer grows as its bytes arrive (never to the claimed length up front),
// charged to the owner's MessageBudget when there is one. The payload of a
// frame goes wherever the owner says when the header and message have
// arrived (PayloadSink). Small frames are read through a 16 KiB buffer, as
// many as one system call brings; a message or payload with at least that
// much still to come is read straight into place (tensor memory), with no
// copy. Writes send header, message and payload with one writev, at once
// when the kernel takes them (uv_try_write), else through uv_write; the
// payload is not copied either, so its memory must stay valid until the
// frame's `done` runs.
//
// All methods must be called on the loop thread. Lifetime and the order of
// callbacks once closing are the Channel's (dataplane/transport.hpp); a
// LoopThread stopping closes Connections still open on its loop with
// GENIE_ERR_SHUTDOWN "event loop stopped" (dataplane/loop_hooks.hpp).
//
// Writes go through writev: a peer that resets the connection makes it raise
// SIGPIPE, which LoopThread blocks on its thread. Used on another loop, the
// owner must block or ignore SIGPIPE on that loop's thread.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "dataplane/frame.hpp"
#include "dataplane/transport.hpp"

namespace genie::dataplane::tcp {

class TlsContext;

// "ip:port" or "[ip6]:port"; empty for another address family.
std::string format_address(const sockaddr_storage& ss);

class Connection : public Channel, public std::enable_shared_from_this<Connection> {
 public:
  // A frame of a type handlers.types does not accept closes the connection
  // with GENIE_ERR_PROTOCOL from its header.
  using Handlers = ChannelHandlers;

  // Takes a connected (or accepted) TCP handle's place: creates the uv_tcp_t
  // on `loop`; call accept_from() or connect() next.
  static std::shared_ptr<Connection> create(uv_loop_t* loop, uint32_t max_message, Handlers handlers);

  // Accepts a pending connection from `server` and starts reading.
  // Returns a libuv error code (0 on success); after a failure the
  // connection must still be closed.
  int accept_from(uv_stream_t* server);

  // Connects to host:port: a numeric IPv4/IPv6 address (IPv6 optionally in
  // brackets), or a name resolved with uv_getaddrinfo on libuv's thread pool
  // (the first IPv4 address is tried, else the first IPv6 one). `cb(status,
  // detail)` runs exactly once on the loop thread, never before connect()
  // returns, when connected (reading has started) or failed with
  // GENIE_ERR_CONNECTION naming the target and the reason (bad port,
  // unresolvable name, refused, or close() before it was established). A
  // failure closes the connection: cb runs from its close, just before
  // on_close. Misuse is answered before connect() returns, without closing:
  // a second connect() (or one after accept_from) gets
  // GENIE_ERR_INVALID_ARGUMENT, one after close() GENIE_ERR_CONNECTION.
  void connect(const std::string& host, int port, std::function<void(genie_status_t, const std::string&)> cb);

  // Sets TCP_NODELAY (control) or large socket buffers (data:
  // SO_SNDBUF/SO_RCVBUF, which turns off Linux's buffer autotuning). Either
  // may be called before connect() (applied to the socket before the SYN, so
  // the receive window scale can use the size) or after accept_from().
  void set_nodelay(bool on) override;
  // Speaks TLS (tls.hpp) with `ctx`'s side and settings; before connect()
  // (whose cb then runs once the TLS handshake has finished) or
  // accept_from().
  void set_tls(std::shared_ptr<const TlsContext> ctx);
  void set_buffer_sizes(int bytes) override;

  // Channel::set_max_message: the limit the next frame header is checked
  // against, and sends too.
  void set_max_message(uint32_t bytes) override;
  // Charges the buffer of each message as it grows (ChannelOptions::budget);
  // call before reading starts.
  void set_message_budget(std::shared_ptr<MessageBudget> budget);

  // Sends one frame: at once when the kernel takes it (then `done` has run
  // with GENIE_OK before send() returns), else queued. `payload`
  // (payload_len bytes) must stay valid until `done` runs; `keep` is held
  // until then. `done(status)` (may be empty) runs on the loop thread once
  // the bytes are handed to the kernel or the write failed. Frames are sent
  // in call order. Only after connect()'s cb reported success or
  // accept_from() succeeded. Without queuing anything, `done` runs before
  // send() returns with GENIE_ERR_CONNECTION once close() has begun or when
  // libuv refuses the write (which also closes the connection),
  // GENIE_ERR_TOO_LARGE for a message over the max_message this connection
  // was created with (the peer would drop the connection), and
  // GENIE_ERR_INVALID_ARGUMENT for payload == nullptr with payload_len > 0.
  // A write error closes the connection with GENIE_ERR_CONNECTION.
  void send(uint16_t type, uint64_t request_id, uint32_t flags, std::string msg,
            const void* payload = nullptr, uint64_t payload_len = 0, std::shared_ptr<void> keep = nullptr,
            Done done = nullptr) override;

  // Between cork() and the matching uncork(), sent frames are held and then
  // written together, with one system call when the kernel takes them all
  // (nests; `done`s run at the uncork). The connection corks itself while
  // it hands the frames of one read to on_frame, so replies to requests
  // that arrived together leave together. close() writes what is held
  // first, as far as the kernel takes it at once.
  void cork() override;
  void uncork() override;

  // Closes the connection (idempotent: the first status wins); on_close
  // runs with `status` from the loop after close() returned, never inside it.
  void close(genie_status_t status = GENIE_OK, const std::string& detail = "closed") override;

  // True once close() has begun (on_close may not have run yet).
  bool closed() const override { return closing_; }
  // Peer address "ip:port" (empty if unknown).
  std::string peer() const override;
  std::string peer_identity() const override;
  std::vector<std::string> peer_names() const override;
  std::string channel_binding() const override;
  // Bytes queued in libuv but not yet written to the kernel.
  size_t write_queue_size() const;

  ~Connection() override;

 protected:
  // For create() and subclasses' own create(): construct, then init()
  // (which creates the handle and takes the self reference).
  Connection(uv_loop_t* loop, uint32_t max_message, Handlers handlers);
  void init();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  bool closing_ = false;
};

}  // namespace genie::dataplane::tcp
