// The connection's state (Connection::Impl), shared by the files that
// implement it, one job each: connection.cpp (connect and accept, the
// owner's settings), connection_read.cpp (framed reads),
// connection_write.cpp (the corked write queue), connection_tls.cpp (the
// TLS filter) and connection_close.cpp (close ordering). Private to
// dataplane/tcp.
#pragma once

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <vector>

#include "dataplane/tcp/connection.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/metrics.hpp"
#include "dataplane/guarded.hpp"
#include "dataplane/loop_hooks.hpp"
#include "dataplane/tcp/socket_buffers.hpp"
#include "dataplane/tcp/tls.hpp"
#include "dataplane/transport_bytes.hpp"

namespace genie::dataplane::tcp::connection_detail {

// libuv takes size_t lengths, but a single read or write syscall moves at
// most ~2 GiB on Linux anyway; 1 GiB pieces keep every length comfortably
// inside int-sized arithmetic wherever it lands.
constexpr size_t kMaxChunk = size_t{1} << 30;
// Small frames are read through a buffer of this size, many per system call;
// a message or payload with at least this much still to come is read
// straight into its place.
constexpr size_t kReadBuffer = 16 << 10;
// A message's buffer grows as its bytes arrive, never to the length its
// header claims before they do: by at least this much at a time, else by
// what has arrived (so it doubles).
constexpr size_t kMessageGrowth = 64 << 10;

inline std::string peer_of(const uv_tcp_t* tcp) {
  sockaddr_storage ss{};
  int len = sizeof ss;
  if (uv_tcp_getpeername(tcp, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
  return format_address(ss);
}

// For callbacks after which there is nothing left to close.
template <class Fn>
void guarded_log(Fn&& fn, const char* what) {
  genie_status_t status = GENIE_OK;
  std::string detail;
  if (!guarded(std::forward<Fn>(fn), &status, &detail, what)) {
    log(LogLevel::Error, "connection: ", what, " failed: ", detail);
  }
}

}  // namespace genie::dataplane::tcp::connection_detail

namespace genie::dataplane::tcp {

using namespace connection_detail;  // NOLINT: the implementation files' shared helpers

struct Connection::Impl {
  enum class Stage { Header, Message, Payload };

  // One frame to write: its header and message, the caller's payload, and
  // whom to tell once the kernel has it.
  struct OutFrame {
    uint8_t header[kFrameHeaderSize];
    std::string msg;
    const char* payload = nullptr;
    uint64_t payload_len = 0;
    std::shared_ptr<void> keep;
    std::function<void(genie_status_t)> done;

    uint64_t size() const { return kFrameHeaderSize + msg.size() + payload_len; }
  };

  // Frames the kernel did not take at once; owned by libuv from uv_write
  // until on_write.
  struct WriteReq {
    uv_write_t req{};
    std::vector<OutFrame> frames;
    std::vector<uv_buf_t> bufs;  // into `frames`, built once they are in place
  };

  // A name lookup in flight. Heap-owned because it may outlive the
  // Connection's handle (uv_cancel cannot stop a lookup already running);
  // it holds the Connection until its callback.
  struct Resolve {
    uv_getaddrinfo_t req{};
    std::shared_ptr<Connection> conn;
  };

  Connection* owner;
  uv_loop_t* loop;
  uv_tcp_t tcp{};
  uint32_t max_message;
  Handlers handlers;
  // Where the message buffer's bytes are charged (null: nowhere), and how
  // many it holds there now.
  std::shared_ptr<MessageBudget> budget;
  uint64_t charged = 0;
  // The Connection's own reference, dropped by the handle's close callback.
  std::shared_ptr<Connection> self;

  genie_status_t close_status = GENIE_OK;
  std::string close_detail;

  // Read state: which segment of the current frame is arriving and how much
  // of it is here. alloc_cb hands libuv either the missing part of a large
  // segment, or `staging` (`staged`), from which land() copies the bytes of
  // as many frames as one read brought.
  Stage stage = Stage::Header;
  size_t got = 0;
  uint8_t header[kFrameHeaderSize] = {0};
  FrameHeader frame;
  std::string msg;
  PayloadSink sink;
  uint64_t payload_got = 0;
  std::unique_ptr<char[]> staging = std::make_unique_for_overwrite<char[]>(kReadBuffer);
  bool staged = false;

  std::function<void(genie_status_t, const std::string&)> connect_cb;
  bool connect_called = false;
  bool connect_failed = false;  // the close under way is connect's failure
  bool established = false;     // connected or accepted: reads and writes may start
  uv_connect_t connect_req{};
  Resolve* resolving = nullptr;
  std::string target;  // host:port being connected to, for messages

  bool nodelay = false;
  int buffer_bytes = 0;
  std::string peer;

  uint64_t hook_id = 0;  // in the loop's close hooks (loop_hooks.hpp); 0: none

  // Frames sent while corked (Connection::cork, and while on_read hands
  // frames to the owner), written together by the last uncork.
  int cork_depth = 0;
  std::vector<OutFrame> corked;
  // While the owner handles the last frame a read holds (`unread`: the
  // bytes of the read after the piece being landed), what it sends leaves
  // at once, with the frames corked before it: the reply does not wait for
  // the rest of the handler (its cleanup), and there is no later frame of
  // the read whose reply could share the write.
  size_t unread = 0;
  bool reply_now = false;
  // Empty vectors whose buffers the next write reuses (a write made from a
  // completion inside another finds them taken and allocates its own).
  std::vector<OutFrame> spare_frames;
  std::vector<uv_buf_t> spare_bufs;

  // TLS (tls.hpp), when set_tls() gave a context: every byte read goes
  // through `tls` to land(), every frame written through it.
  std::shared_ptr<const TlsContext> tls_ctx;
  std::unique_ptr<TlsSession> tls;
  std::string tls_host;               // the host connected to, for the server's certificate
  std::vector<OutFrame> tls_waiting;  // sent before the handshake finished

  Impl(Connection* o, uv_loop_t* l, uint32_t max, Handlers h)
      : owner(o), loop(l), max_message(max), handlers(std::move(h)) {}

  uv_stream_t* stream() { return reinterpret_cast<uv_stream_t*>(&tcp); }
  uv_handle_t* handle() { return reinterpret_cast<uv_handle_t*>(&tcp); }

  // Sizes the message buffer to `size` bytes (at most msg_len), charging
  // what it allocates to the budget. False when the budget refuses: then
  // nothing changed.
  bool grow_message(size_t size) { return grow_charged(msg, size, budget.get(), charged); }

  // A vector done with, kept (emptied) for the next write if none is kept.
  template <class T>
  static void recycle(std::vector<T>& v, std::vector<T>& spare) {
    v.clear();
    if (spare.capacity() == 0) spare.swap(v);
  }

  // A write of bytes the TLS session produced.
  struct RawWrite {
    uv_write_t req{};
    std::string bytes;
  };

  // ---- connecting and accepting (connection.cpp) -----------------------------

  // Connected: a peer on this host gets a smaller pipe (socket_buffers.hpp).
  void apply_buffer_sizes();

  void finish_connect(genie_status_t status, const std::string& detail);

  // A failed connect closes the connection; the close callback answers
  // connect's cb (so it never runs inside connect()), then on_close.
  void fail_connect(const std::string& detail);

  int start_reading();

  void start_connect(const sockaddr* addr);

  static void on_resolved(uv_getaddrinfo_t* req, int status, addrinfo* res);

  static void on_connected(uv_connect_t* req, int status);

  // ---- reading (connection_read.cpp) -----------------------------------------

  // Gives the message buffer's charge back (the buffer was handed over or
  // dropped).
  void release_charge();

  static void on_alloc(uv_handle_t* h, size_t, uv_buf_t* buf);

  // `n` bytes at `p` (read into `staging`, or decrypted from it): copies
  // each piece where the current segment goes, frame after frame. Stops
  // when the connection closes.
  void land(const char* p, size_t n);

  static void on_read(uv_stream_t* s, ssize_t nread, const uv_buf_t*);

  std::string eof_detail() const;

  // `n` bytes of the current segment are in place: read there directly
  // (on_alloc never spans two segments) or copied there by land().
  void consume(size_t n);

  void message_arrived();

  void payload_arrived();

  // ---- writing (connection_write.cpp) ----------------------------------------

  // Iovecs for `frames`; they point into the frames, which must not move
  // afterwards. Payloads go in kMaxChunk pieces.
  static std::vector<uv_buf_t> bufs_of(std::vector<OutFrame>& frames, std::vector<uv_buf_t> bufs = {});

  static void finish_frames(std::vector<OutFrame>& frames, genie_status_t status);

  static void count_sent(const std::vector<OutFrame>& frames);

  // Writes `frames`, in order, with one system call when the kernel takes
  // them all (the common case for small frames): no write request, no
  // completion round through the loop. What it does not take is queued
  // with uv_write. Frames the kernel took are reported done before this
  // returns. `closing`: called by close(), which has already begun, so a
  // failure only fails the frames.
  // `frames` keeps its buffer (for recycle) unless TLS takes them.
  void write_frames(std::vector<OutFrame>&& frames, bool closing);

  void uncork();

  void write_corked();

  static void on_write(uv_write_t* req, int status);

  // ---- TLS (connection_tls.cpp) ----------------------------------------------

  // `n` bytes of ciphertext in `staging`: the plaintext they complete lands
  // like bytes read without TLS.
  void tls_read(size_t n);

  // Encrypts `frames` and writes the records. The plaintext is copied into
  // them, so the frames are done once encrypted.
  void tls_write(std::vector<OutFrame> frames, bool closing);

  // Bytes the TLS session produced, written in order after everything
  // written before. Returns false (and closes unless `closing`) on failure.
  bool write_raw(std::string bytes, bool closing);

  // ---- closing (connection_close.cpp) ----------------------------------------

  static void on_closed(uv_handle_t* h);
};

}  // namespace genie::dataplane::tcp
