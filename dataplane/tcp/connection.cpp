#include "dataplane/tcp/connection.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <vector>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/metrics.hpp"
#include "dataplane/guarded.hpp"
#include "dataplane/loop_hooks.hpp"
#include "dataplane/tcp/socket_buffers.hpp"
#include "dataplane/tcp/tls.hpp"

namespace genie::dataplane::tcp {
namespace {

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

std::string peer_of(const uv_tcp_t* tcp) {
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

}  // namespace

std::string format_address(const sockaddr_storage& ss) {
  char ip[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) {
    const auto* sin = reinterpret_cast<const sockaddr_in*>(&ss);
    if (uv_ip4_name(sin, ip, sizeof ip) != 0) return {};
    return cat(ip, ':', ntohs(sin->sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    if (uv_ip6_name(sin6, ip, sizeof ip) != 0) return {};
    return cat('[', ip, "]:", ntohs(sin6->sin6_port));
  }
  return {};
}

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

  // Connected: a peer on this host gets a smaller pipe (socket_buffers.hpp).
  void apply_buffer_sizes() {
    if (buffer_bytes <= 0) return;
    uv_os_fd_t fd;
    if (uv_fileno(handle(), &fd) != 0) return;
    const int bytes = set_socket_buffers(fd, buffer_bytes, true);
    if (bytes != buffer_bytes)
      log(LogLevel::Debug, "connection: ", peer, " is on this host: ", bytes, "-byte buffers");
  }

  void finish_connect(genie_status_t status, const std::string& detail) {
    auto cb = std::move(connect_cb);
    connect_cb = nullptr;
    if (cb) guarded_log([&] { cb(status, detail); }, "connect callback");
  }

  // A failed connect closes the connection; the close callback answers
  // connect's cb (so it never runs inside connect()), then on_close.
  void fail_connect(const std::string& detail) {
    if (owner->closing_) return;
    connect_failed = true;
    owner->close(GENIE_ERR_CONNECTION, detail);
  }

  int start_reading() {
    established = true;
    if (peer.empty()) peer = peer_of(&tcp);
    apply_buffer_sizes();
    if (tls_ctx) tls = std::make_unique<TlsSession>(tls_ctx, tls_host);
    return uv_read_start(stream(), on_alloc, on_read);
  }

  void start_connect(const sockaddr* addr) {
    // Our own socket, so that buffer sizes are set before the SYN (the
    // window scale is fixed by the handshake).
    const int fd = ::socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      fail_connect(
          cat("cannot connect to ", target, ": socket: ", uv_strerror(uv_translate_sys_error(errno))));
      return;
    }
    if (buffer_bytes > 0) set_socket_buffers(fd, buffer_bytes, false);
    int rc = uv_tcp_open(&tcp, fd);
    if (rc != 0) {
      ::close(fd);
      fail_connect(cat("cannot connect to ", target, ": ", uv_strerror(rc)));
      return;
    }
    if (nodelay) uv_tcp_nodelay(&tcp, 1);
    rc = uv_tcp_connect(&connect_req, &tcp, addr, on_connected);
    if (rc != 0) fail_connect(cat("cannot connect to ", target, ": ", uv_strerror(rc)));
  }

  // ---- reading ------------------------------------------------------------

  // Sizes the message buffer to `size` bytes (at most msg_len), charging
  // what it allocates to the budget. False when the budget refuses: then
  // nothing changed.
  bool grow_message(size_t size) { return grow_charged(msg, size, budget.get(), charged); }

  // Gives the message buffer's charge back (the buffer was handed over or
  // dropped).
  void release_charge() {
    if (budget && charged > 0) budget->give(charged);
    charged = 0;
  }

  static void on_alloc(uv_handle_t* h, size_t, uv_buf_t* buf) {
    auto* c = static_cast<Impl*>(h->data);
    c->staged = false;
    if (c->tls) {
      // Ciphertext: all of it goes through staging and the TLS session.
      c->staged = true;
      buf->base = c->staging.get();
      buf->len = kReadBuffer;
      return;
    }
    if (c->stage == Stage::Message && c->frame.msg_len - c->got >= kReadBuffer) {
      // Straight into the message, which grows by what has arrived so far:
      // a peer must send the bytes it claims before they are allocated.
      const size_t left = c->frame.msg_len - c->got;
      const size_t want = c->got + std::min(left, std::max(kMessageGrowth, c->got));
      if (c->grow_message(want)) {
        buf->base = c->msg.data() + c->got;
        buf->len = c->msg.size() - c->got;
        return;
      }
      // Over budget: read through the staging buffer, where land() refuses.
    }
    if (c->stage == Stage::Payload && c->frame.payload_len - c->payload_got >= kReadBuffer) {
      buf->base = static_cast<char*>(c->sink.dst) + c->payload_got;
      buf->len = static_cast<size_t>(std::min<uint64_t>(c->frame.payload_len - c->payload_got, kMaxChunk));
      return;
    }
    c->staged = true;
    buf->base = c->staging.get();
    buf->len = kReadBuffer;
  }

  // `n` bytes at `p` (read into `staging`, or decrypted from it): copies
  // each piece where the current segment goes, frame after frame. Stops
  // when the connection closes.
  void land(const char* p, size_t n) {
    while (n > 0 && !owner->closing_) {
      char* dst = nullptr;
      uint64_t need = 0;
      switch (stage) {
        case Stage::Header:
          dst = reinterpret_cast<char*>(header) + got;
          need = kFrameHeaderSize - got;
          break;
        case Stage::Message:
          need = frame.msg_len - got;
          if (!grow_message(got + static_cast<size_t>(std::min<uint64_t>(n, need)))) {
            owner->close(GENIE_ERR_TOO_LARGE, cat("messages still arriving already hold ", budget->used(),
                                                  " bytes (limit ", budget->limit(), "): a ", frame.msg_len,
                                                  "-byte ", frame_type_label(handlers.types, frame.type),
                                                  " message from ", peer, " was refused"));
            return;
          }
          dst = msg.data() + got;
          break;
        case Stage::Payload:
          dst = static_cast<char*>(sink.dst) + payload_got;
          need = frame.payload_len - payload_got;
          break;
      }
      const size_t take = static_cast<size_t>(std::min<uint64_t>(n, need));
      std::memcpy(dst, p, take);
      p += take;
      n -= take;
      unread = n;
      consume(take);
    }
    unread = 0;
  }

  static void on_read(uv_stream_t* s, ssize_t nread, const uv_buf_t*) {
    auto* c = static_cast<Impl*>(s->data);
    if (c->owner->closing_) return;
    if (nread == UV_EOF) {
      c->owner->close(GENIE_ERR_CONNECTION, c->eof_detail());
      return;
    }
    if (nread < 0) {
      c->owner->close(GENIE_ERR_CONNECTION,
                      cat("connection to ", c->peer, " lost: ", uv_strerror(static_cast<int>(nread))));
      return;
    }
    if (nread == 0) return;
    // Counted whether or not metrics are served: server info and
    // `genie top` show it too.
    static metrics::Counter& received = metrics::counter(metrics::Id::TransportBytes, {"tcp", "received"});
    received.add(static_cast<double>(nread));
    // Replies to the frames of this read leave together (uncork).
    ++c->cork_depth;
    if (c->tls)
      c->tls_read(static_cast<size_t>(nread));
    else if (c->staged)
      c->land(c->staging.get(), static_cast<size_t>(nread));
    else
      c->consume(static_cast<size_t>(nread));
    c->uncork();
  }

  std::string eof_detail() const {
    if (tls && !tls->handshake_done())
      return "connection closed by peer during the TLS handshake (does the peer serve TLS?)";
    if (stage == Stage::Header && got == 0) return "connection closed by peer";
    std::string where;
    switch (stage) {
      case Stage::Header: where = cat(got, " of ", kFrameHeaderSize, " header bytes"); break;
      case Stage::Message: where = cat(got, " of ", frame.msg_len, " message bytes"); break;
      case Stage::Payload: where = cat(payload_got, " of ", frame.payload_len, " payload bytes"); break;
    }
    return cat("connection closed by peer in the middle of a frame (", where, ")");
  }

  // `n` bytes of the current segment are in place: read there directly
  // (on_alloc never spans two segments) or copied there by land().
  void consume(size_t n) {
    switch (stage) {
      case Stage::Header: {
        got += n;
        if (got < kFrameHeaderSize) return;
        got = 0;
        try {
          frame = decode_frame_header(header, max_message, handlers.types);
        } catch (const Error& e) {
          owner->close(e.code(), e.detail());
          return;
        }
        if (frame.msg_len == 0) {
          msg.clear();
          message_arrived();
          return;
        }
        // Empty: the buffer grows as the bytes arrive (grow_message).
        msg.clear();
        stage = Stage::Message;
        return;
      }
      case Stage::Message:
        got += n;
        if (got < frame.msg_len) return;
        got = 0;
        message_arrived();
        return;
      case Stage::Payload:
        payload_got += n;
        if (payload_got < frame.payload_len) return;
        payload_arrived();
        return;
    }
  }

  void message_arrived() {
    if (frame.payload_len == 0) note_frame_received();
    stage = Stage::Header;
    try {
      verify_frame_crc(header, msg.data(), msg.size(), handlers.types);
    } catch (const Error& e) {
      owner->close(e.code(), e.detail());
      return;
    }
    std::string m = std::move(msg);
    msg = std::string();
    release_charge();
    PayloadSink s;
    genie_status_t st = GENIE_OK;
    std::string detail;
    if (handlers.on_frame) {
      reply_now = unread == 0 && frame.payload_len == 0;
      const bool ok = guarded([&] { s = handlers.on_frame(frame, std::move(m)); }, &st, &detail, "on_frame");
      reply_now = false;
      if (!ok) {
        owner->close(st, detail);
        return;
      }
    }
    if (owner->closing_ || frame.payload_len == 0) return;
    if (s.dst == nullptr) {
      owner->close(GENIE_ERR_PROTOCOL, cat("the ", frame.payload_len, "-byte payload of a ",
                                           frame_type_label(handlers.types, frame.type), " frame (request ",
                                           frame.request_id, ") was refused"));
      return;
    }
    sink = std::move(s);
    payload_got = 0;
    stage = Stage::Payload;
  }

  void payload_arrived() {
    note_frame_received();
    PayloadSink s = std::move(sink);
    sink = PayloadSink();
    payload_got = 0;
    stage = Stage::Header;
    if (!s.done) return;
    genie_status_t st = GENIE_OK;
    std::string detail;
    reply_now = unread == 0;
    const bool ok = guarded([&] { s.done(); }, &st, &detail, "payload done");
    reply_now = false;
    if (!ok) owner->close(st, detail);
  }

  // ---- connecting -----------------------------------------------------------

  static void on_resolved(uv_getaddrinfo_t* req, int status, addrinfo* res) {
    std::unique_ptr<Resolve> r(static_cast<Resolve*>(req->data));
    std::unique_ptr<addrinfo, void (*)(addrinfo*)> ai(res, uv_freeaddrinfo);
    Impl* c = r->conn->impl_.get();
    c->resolving = nullptr;
    if (r->conn->closing_) return;  // the close callback answers connect's cb
    if (status != 0) {
      c->fail_connect(cat("cannot connect to ", c->target, ": cannot resolve host: ", uv_strerror(status)));
      return;
    }
    const addrinfo* pick = nullptr;
    for (const addrinfo* a = res; a != nullptr && pick == nullptr; a = a->ai_next) {
      if (a->ai_family == AF_INET) pick = a;
    }
    for (const addrinfo* a = res; a != nullptr && pick == nullptr; a = a->ai_next) {
      if (a->ai_family == AF_INET6) pick = a;
    }
    if (pick == nullptr) {
      c->fail_connect(cat("cannot connect to ", c->target, ": no IPv4 or IPv6 address"));
      return;
    }
    c->start_connect(pick->ai_addr);
  }

  static void on_connected(uv_connect_t* req, int status) {
    auto* c = static_cast<Impl*>(req->handle->data);
    if (c->owner->closing_) return;  // the close callback answers connect's cb
    if (status != 0) {
      c->fail_connect(cat("cannot connect to ", c->target, ": ", uv_strerror(status)));
      return;
    }
    const int rc = c->start_reading();
    if (rc != 0) {
      c->fail_connect(cat("cannot read from ", c->target, ": ", uv_strerror(rc)));
      return;
    }
    if (c->tls) {
      // Connected once the TLS handshake has finished (tls_read).
      c->tls->start();
      c->write_raw(c->tls->take_output(), false);
      return;
    }
    c->finish_connect(GENIE_OK, std::string());
  }

  // ---- writing and closing -------------------------------------------------

  // Iovecs for `frames`; they point into the frames, which must not move
  // afterwards. Payloads go in kMaxChunk pieces.
  static std::vector<uv_buf_t> bufs_of(std::vector<OutFrame>& frames, std::vector<uv_buf_t> bufs = {}) {
    bufs.clear();
    bufs.reserve(frames.size() * 3);
    for (OutFrame& f : frames) {
      bufs.push_back(uv_buf_init(reinterpret_cast<char*>(f.header), kFrameHeaderSize));
      if (!f.msg.empty()) {
        uv_buf_t b;
        b.base = f.msg.data();
        b.len = f.msg.size();
        bufs.push_back(b);
      }
      for (uint64_t off = 0; off < f.payload_len;) {
        const uint64_t n = std::min<uint64_t>(f.payload_len - off, kMaxChunk);
        uv_buf_t b;
        b.base = const_cast<char*>(f.payload + off);  // libuv's buffers are not const; it only reads them
        b.len = static_cast<size_t>(n);
        bufs.push_back(b);
        off += n;
      }
    }
    return bufs;
  }

  static void finish_frames(std::vector<OutFrame>& frames, genie_status_t status) {
    for (OutFrame& f : frames)
      if (f.done) guarded_log([&] { f.done(status); }, "send done");
  }

  // Writes `frames`, in order, with one system call when the kernel takes
  // them all (the common case for small frames): no write request, no
  // completion round through the loop. What it does not take is queued
  // with uv_write. Frames the kernel took are reported done before this
  // returns. `closing`: called by close(), which has already begun, so a
  // failure only fails the frames.
  // A vector done with, kept (emptied) for the next write if none is kept.
  template <class T>
  static void recycle(std::vector<T>& v, std::vector<T>& spare) {
    v.clear();
    if (spare.capacity() == 0) spare.swap(v);
  }

  static void count_sent(const std::vector<OutFrame>& frames) {
    uint64_t bytes = 0;
    for (const OutFrame& f : frames) bytes += f.size();
    static metrics::Counter& sent = metrics::counter(metrics::Id::TransportBytes, {"tcp", "sent"});
    sent.add(static_cast<double>(bytes));
  }

  // `frames` keeps its buffer (for recycle) unless TLS takes them.
  void write_frames(std::vector<OutFrame>&& frames, bool closing) {
    count_sent(frames);
    if (tls) return tls_write(std::move(frames), closing);
    std::vector<uv_buf_t> bufs = bufs_of(frames, std::move(spare_bufs));
    int n = uv_try_write(stream(), bufs.data(), static_cast<unsigned>(bufs.size()));
    recycle(bufs, spare_bufs);
    if (n == UV_EAGAIN) n = 0;
    if (n < 0) {
      finish_frames(frames, GENIE_ERR_CONNECTION);
      if (!closing) owner->close(GENIE_ERR_CONNECTION, cat("write to ", peer, " failed: ", uv_strerror(n)));
      return;
    }
    uint64_t left = static_cast<uint64_t>(n);
    size_t taken = 0;
    while (taken < frames.size() && left >= frames[taken].size()) left -= frames[taken++].size();
    if (taken < frames.size()) {
      auto w = std::make_unique<WriteReq>();
      w->frames.assign(std::make_move_iterator(frames.begin() + static_cast<ptrdiff_t>(taken)),
                       std::make_move_iterator(frames.end()));
      frames.resize(taken);
      w->bufs = bufs_of(w->frames);
      // Skip what the kernel already took of the first frame.
      size_t first = 0;
      while (left > 0) {
        uv_buf_t& b = w->bufs[first];
        const uint64_t k = std::min<uint64_t>(left, b.len);
        b.base += k;
        b.len -= k;
        left -= k;
        if (b.len == 0) ++first;
      }
      w->req.data = w.get();
      const int rc = uv_write(&w->req, stream(), w->bufs.data() + first,
                              static_cast<unsigned>(w->bufs.size() - first), on_write);
      if (rc != 0) {
        // libuv never runs the callback of a call that failed.
        finish_frames(frames, GENIE_OK);
        finish_frames(w->frames, GENIE_ERR_CONNECTION);
        if (!closing)
          owner->close(GENIE_ERR_CONNECTION, cat("write to ", peer, " failed: ", uv_strerror(rc)));
        return;
      }
      (void)w.release();  // owned by libuv until on_write
    }
    finish_frames(frames, GENIE_OK);
  }

  void uncork() {
    if (--cork_depth > 0) return;
    write_corked();
  }

  void write_corked() {
    if (corked.empty() || owner->closing_) return;
    std::vector<OutFrame> frames = std::move(spare_frames);
    frames.swap(corked);  // corked keeps a buffer for the next frames
    write_frames(std::move(frames), false);
    recycle(frames, spare_frames);
  }

  static void on_write(uv_write_t* req, int status) {
    std::unique_ptr<WriteReq> w(static_cast<WriteReq*>(req->data));
    auto* c = static_cast<Impl*>(req->handle->data);
    finish_frames(w->frames, status == 0 ? GENIE_OK : GENIE_ERR_CONNECTION);
    // ECANCELED: the handle is closing and already knows why.
    if (status != 0 && status != UV_ECANCELED) {
      c->owner->close(GENIE_ERR_CONNECTION, cat("write to ", c->peer, " failed: ", uv_strerror(status)));
    }
  }

  // ---- TLS -------------------------------------------------------------------

  // `n` bytes of ciphertext in `staging`: the plaintext they complete lands
  // like bytes read without TLS.
  void tls_read(size_t n) {
    std::string plain;
    const TlsSession::Result r = tls->feed(staging.get(), n, &plain);
    if (r == TlsSession::Result::Plaintext) {
      write_raw(tls_ctx->plaintext_refusal(), true);
      owner->close(GENIE_ERR_PROTOCOL,
                   cat("refused a connection without TLS from ", peer, ": this server requires TLS"));
      return;
    }
    write_raw(tls->take_output(), false);  // handshake messages, alerts
    if (r == TlsSession::Result::Failed) {
      if (owner->closing_) return;
      if (connect_cb) connect_failed = true;  // connect's cb reports it
      owner->close(tls->error_status(), connect_cb ? cat("cannot connect to ", target, ": ", tls->error())
                                                   : cat(tls->error(), " (peer ", peer, ")"));
      return;
    }
    if (tls->handshake_done() && !tls_waiting.empty()) {
      std::vector<OutFrame> frames = std::move(tls_waiting);
      tls_waiting.clear();
      write_frames(std::move(frames), false);
    }
    if (tls->handshake_done() && connect_cb) finish_connect(GENIE_OK, std::string());
    if (!plain.empty() && !owner->closing_) land(plain.data(), plain.size());
  }

  // Encrypts `frames` and writes the records. The plaintext is copied into
  // them, so the frames are done once encrypted.
  void tls_write(std::vector<OutFrame> frames, bool closing) {
    if (!tls->handshake_done()) {
      for (OutFrame& f : frames) tls_waiting.push_back(std::move(f));
      return;
    }
    for (const uv_buf_t& b : bufs_of(frames)) {
      if (!tls->encrypt(b.base, b.len)) {
        finish_frames(frames, GENIE_ERR_CONNECTION);
        if (!closing) owner->close(GENIE_ERR_CONNECTION, cat(tls->error(), " (peer ", peer, ")"));
        return;
      }
    }
    const bool ok = write_raw(tls->take_output(), closing);
    finish_frames(frames, ok ? GENIE_OK : GENIE_ERR_CONNECTION);
  }

  // Bytes the TLS session produced, written in order after everything
  // written before. Returns false (and closes unless `closing`) on failure.
  struct RawWrite {
    uv_write_t req{};
    std::string bytes;
  };
  bool write_raw(std::string bytes, bool closing) {
    if (bytes.empty() || !established) return true;
    uv_buf_t b;
    b.base = bytes.data();
    b.len = bytes.size();
    int n = uv_try_write(stream(), &b, 1);
    if (n == UV_EAGAIN) n = 0;
    if (n >= 0 && static_cast<size_t>(n) == bytes.size()) return true;
    int rc = n;
    if (n >= 0) {
      auto w = std::make_unique<RawWrite>();
      w->bytes = std::move(bytes);
      b.base = w->bytes.data() + n;
      b.len = w->bytes.size() - static_cast<size_t>(n);
      w->req.data = w.get();
      rc = uv_write(&w->req, stream(), &b, 1, [](uv_write_t* req, int status) {
        std::unique_ptr<RawWrite> done(static_cast<RawWrite*>(req->data));
        auto* c = static_cast<Impl*>(req->handle->data);
        if (status != 0 && status != UV_ECANCELED)
          c->owner->close(GENIE_ERR_CONNECTION, cat("write to ", c->peer, " failed: ", uv_strerror(status)));
      });
      if (rc == 0) {
        (void)w.release();  // owned by libuv until its callback
        return true;
      }
    }
    if (!closing) owner->close(GENIE_ERR_CONNECTION, cat("write to ", peer, " failed: ", uv_strerror(rc)));
    return false;
  }

  static void on_closed(uv_handle_t* h) {
    auto* c = static_cast<Impl*>(h->data);
    // Declared first, destroyed last: the Connection outlives everything
    // below, and may die with it.
    std::shared_ptr<Connection> self = std::move(c->self);
    if (c->hook_id != 0) remove_close_hook(c->loop, c->hook_id);
    c->hook_id = 0;
    if (c->connect_cb) {
      if (c->connect_failed) {
        c->finish_connect(c->close_status, c->close_detail);
      } else {
        c->finish_connect(GENIE_ERR_CONNECTION,
                          cat("cannot connect to ", c->target,
                              ": connection closed before it was established (", c->close_detail, ")"));
      }
    }
    finish_frames(c->tls_waiting, GENIE_ERR_CONNECTION);
    c->tls_waiting.clear();
    c->sink = PayloadSink();
    c->msg = std::string();
    c->release_charge();
    Handlers handlers = std::move(c->handlers);
    c->handlers = Handlers();
    if (handlers.on_close)
      guarded_log([&] { handlers.on_close(c->close_status, c->close_detail); }, "on_close");
  }
};

std::shared_ptr<Connection> Connection::create(uv_loop_t* loop, uint32_t max_message, Handlers handlers) {
  // The constructor is protected, so make_shared cannot reach it.
  std::shared_ptr<Connection> conn(new Connection(loop, max_message, std::move(handlers)));
  conn->init();
  return conn;
}

void Connection::init() {
  Impl* c = impl_.get();
  const int rc = uv_tcp_init(c->loop, &c->tcp);
  if (rc != 0) fail(GENIE_ERR_INTERNAL, "uv_tcp_init: ", uv_strerror(rc));
  c->tcp.data = c;
  c->self = shared_from_this();
  std::weak_ptr<Connection> weak = c->self;
  c->hook_id = add_close_hook(c->loop, [weak] {
    if (auto strong = weak.lock()) strong->close(GENIE_ERR_SHUTDOWN, "event loop stopped");
  });
}

Connection::Connection(uv_loop_t* loop, uint32_t max_message, Handlers handlers)
    : impl_(std::make_unique<Impl>(this, loop, max_message, std::move(handlers))) {}

Connection::~Connection() = default;

int Connection::accept_from(uv_stream_t* server) {
  Impl* c = impl_.get();
  if (closing_ || c->established || c->connect_called) return UV_EINVAL;
  int rc = uv_accept(server, c->stream());
  if (rc != 0) return rc;
  c->apply_buffer_sizes();
  return c->start_reading();
}

void Connection::connect(const std::string& host, int port,
                         std::function<void(genie_status_t, const std::string&)> cb) {
  Impl* c = impl_.get();
  if (c->connect_called || c->established || closing_) {
    // Misuse, answered at once: closing the connection for it would take
    // down a connection that may be working.
    const std::string why = closing_ ? "the connection is closed" : "connect() was already called";
    const genie_status_t st = closing_ ? GENIE_ERR_CONNECTION : GENIE_ERR_INVALID_ARGUMENT;
    if (cb)
      guarded_log([&] { cb(st, cat("cannot connect to ", host, ':', port, ": ", why)); }, "connect callback");
    return;
  }
  c->connect_called = true;
  c->connect_cb = std::move(cb);
  c->target = host.find(':') != std::string::npos && host.front() != '[' ? cat('[', host, "]:", port)
                                                                         : cat(host, ':', port);
  if (port <= 0 || port > 65535) {
    c->fail_connect(cat("cannot connect to ", c->target, ": port out of range"));
    return;
  }
  if (host.empty()) {
    c->fail_connect(cat("cannot connect to ", c->target, ": empty host name"));
    return;
  }
  std::string bare = host;
  if (bare.size() >= 2 && bare.front() == '[' && bare.back() == ']') bare = bare.substr(1, bare.size() - 2);
  c->tls_host = bare;
  sockaddr_storage ss{};
  if (uv_ip4_addr(bare.c_str(), port, reinterpret_cast<sockaddr_in*>(&ss)) == 0 ||
      uv_ip6_addr(bare.c_str(), port, reinterpret_cast<sockaddr_in6*>(&ss)) == 0) {
    c->start_connect(reinterpret_cast<const sockaddr*>(&ss));
    return;
  }
  auto r = std::make_unique<Impl::Resolve>();
  r->req.data = r.get();
  r->conn = shared_from_this();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  hints.ai_flags = AI_NUMERICSERV;
  const std::string service = std::to_string(port);
  const int rc = uv_getaddrinfo(c->loop, &r->req, Impl::on_resolved, bare.c_str(), service.c_str(), &hints);
  if (rc != 0) {
    c->fail_connect(cat("cannot connect to ", c->target, ": cannot resolve host: ", uv_strerror(rc)));
    return;
  }
  c->resolving = r.release();  // owned by the request until Impl::on_resolved
}

void Connection::set_tls(std::shared_ptr<const TlsContext> ctx) { impl_->tls_ctx = std::move(ctx); }

void Connection::set_nodelay(bool on) {
  impl_->nodelay = on;
  if (!closing_) uv_tcp_nodelay(&impl_->tcp, on ? 1 : 0);
}

void Connection::set_max_message(uint32_t bytes) { impl_->max_message = bytes; }

void Connection::set_message_budget(std::shared_ptr<MessageBudget> budget) {
  Impl* c = impl_.get();
  // Only between messages: what the buffer holds was charged to the old one.
  if (c->charged == 0) c->budget = std::move(budget);
}

void Connection::set_buffer_sizes(int bytes) {
  impl_->buffer_bytes = bytes;
  if (!closing_ && impl_->established) impl_->apply_buffer_sizes();
}

void Connection::send(uint16_t type, uint64_t request_id, uint32_t flags, std::string msg,
                      const void* payload, uint64_t payload_len, std::shared_ptr<void> keep, Done done) {
  Impl* c = impl_.get();
  auto refuse = [&](genie_status_t st) {
    if (done) guarded_log([&] { done(st); }, "send done");
  };
  if (closing_ || !c->established) {
    refuse(GENIE_ERR_CONNECTION);
    return;
  }
  if (payload_len > 0 && payload == nullptr) {
    refuse(GENIE_ERR_INVALID_ARGUMENT);
    return;
  }
  if (msg.size() > c->max_message) {
    refuse(GENIE_ERR_TOO_LARGE);
    return;
  }
  Impl::OutFrame f;
  FrameHeader h;
  h.type = type;
  h.flags = flags;
  h.request_id = request_id;
  h.payload_len = payload_len;
  f.msg = std::move(msg);
  f.payload = static_cast<const char*>(payload);
  f.payload_len = payload_len;
  f.keep = std::move(keep);
  f.done = std::move(done);
  encode_frame_header(h, f.msg.data(), f.msg.size(), f.header);
  if (c->cork_depth > 0) {
    c->corked.push_back(std::move(f));
    if (c->cork_depth == 1 && c->reply_now) c->write_corked();
    return;
  }
  std::vector<Impl::OutFrame> frames = std::move(c->spare_frames);
  frames.push_back(std::move(f));
  c->write_frames(std::move(frames), false);
  Impl::recycle(frames, c->spare_frames);
}

void Connection::cork() { ++impl_->cork_depth; }

void Connection::uncork() { impl_->uncork(); }

void Connection::close(genie_status_t status, const std::string& detail) {
  if (closing_) return;
  closing_ = true;
  Impl* c = impl_.get();
  c->close_status = status;
  c->close_detail = detail;
  if (!c->corked.empty()) {
    // What the owner sent before closing goes out as far as the kernel takes
    // it at once (e.g. the ErrorReply explaining the close); the rest is
    // cancelled with the handle.
    std::vector<Impl::OutFrame> frames = std::move(c->corked);
    c->corked.clear();
    if (c->established)
      c->write_frames(std::move(frames), true);
    else
      Impl::finish_frames(frames, GENIE_ERR_CONNECTION);
  }
  // A lookup already running cannot be cancelled; its callback then sees
  // closing_ and stops.
  if (c->resolving != nullptr) uv_cancel(reinterpret_cast<uv_req_t*>(&c->resolving->req));
  uv_close(c->handle(), Impl::on_closed);
}

std::string Connection::peer() const {
  if (!impl_->peer.empty() || closing_) return impl_->peer;
  return peer_of(&impl_->tcp);
}

std::string Connection::peer_identity() const {
  return impl_->tls ? impl_->tls->peer_fingerprint() : std::string();
}

std::vector<std::string> Connection::peer_names() const {
  return impl_->tls ? impl_->tls->peer_names() : std::vector<std::string>();
}

std::string Connection::channel_binding() const {
  return impl_->tls ? impl_->tls->channel_binding() : std::string();
}

size_t Connection::write_queue_size() const { return impl_->tcp.write_queue_size; }

}  // namespace genie::dataplane::tcp
