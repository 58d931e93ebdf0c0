// A framed TCP connection on a libuv loop, shared by client and server.
//
// Reads are a state machine: header -> message -> payload. The payload of a
// frame goes wherever the owner says when the header and message have
// arrived (PayloadSink): straight into tensor memory, with no copy through
// an intermediate buffer. Writes send header, message and payload as one
// uv_write of three buffers (writev); the payload is not copied either, so
// its memory must stay valid until the write's completion callback runs.
//
// All methods must be called on the loop thread. The object is owned through
// std::shared_ptr and keeps itself alive until its handle is closed.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "control/wire.hpp"

namespace genie {

// Where the payload of an incoming frame goes.
struct PayloadSink {
  void* dst = nullptr;           // payload_len bytes are written here
  std::shared_ptr<void> keep;    // held until the payload has been read
  // Runs on the loop thread after the last payload byte arrived.
  std::function<void()> done;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  struct Handlers {
    // A whole frame arrived (header and message; CRC checked). For a frame
    // with payload_len > 0 the handler returns where to put the payload; a
    // sink with dst == nullptr means "refuse": the connection closes with
    // Error(PROTOCOL). For payload_len == 0 the return value is ignored.
    std::function<PayloadSink(const wire::FrameHeader&, std::string&& msg)> on_frame;
    // The connection closed: `status` is GENIE_OK for an orderly close by
    // this side, GENIE_ERR_CONNECTION for EOF/reset, GENIE_ERR_PROTOCOL (or
    // VERSION_MISMATCH) for a malformed frame, with a detail message. Called
    // exactly once, after which no handler runs again.
    std::function<void(genie_status_t status, const std::string& detail)> on_close;
  };

  // Takes a connected (or accepted) TCP handle's place: creates the uv_tcp_t
  // on `loop`; call accept_from() or connect() next.
  static std::shared_ptr<Connection> create(uv_loop_t* loop, uint32_t max_message, Handlers handlers);

  // Accepts a pending connection from `server` and starts reading.
  // Returns a libuv error code (0 on success).
  int accept_from(uv_stream_t* server);

  // Connects to host:port (numeric IPv4/IPv6 or a name resolved
  // synchronously); `cb(status, detail)` runs on the loop thread when
  // connected (reading has started) or failed.
  void connect(const std::string& host, int port, std::function<void(genie_status_t, const std::string&)> cb);

  // Sets TCP_NODELAY (control) or large socket buffers (data).
  void set_nodelay(bool on);
  void set_buffer_sizes(int bytes);

  // Queues one frame. `payload` (payload_len bytes) must stay valid until
  // `done` runs; `keep` is held until then. `done(status)` (may be empty)
  // runs on the loop thread once the bytes are handed to the kernel or the
  // write failed. Frames are sent in call order.
  void send(wire::MsgType type, uint64_t request_id, uint32_t flags, std::string msg, const void* payload = nullptr,
            uint64_t payload_len = 0, std::shared_ptr<void> keep = nullptr,
            std::function<void(genie_status_t)> done = nullptr);

  // Closes the connection (idempotent); on_close runs with `status`.
  void close(genie_status_t status = GENIE_OK, const std::string& detail = "closed");

  bool closed() const { return closing_; }
  // Peer address "ip:port" (empty if unknown).
  std::string peer() const;
  // Bytes queued in libuv but not yet written to the kernel.
  size_t write_queue_size() const;

  ~Connection();

 private:
  Connection(uv_loop_t* loop, uint32_t max_message, Handlers handlers);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  bool closing_ = false;
};

}  // namespace genie
