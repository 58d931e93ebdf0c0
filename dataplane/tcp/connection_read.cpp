// Framed reads: frames arrive through a read buffer, many per system call,
// or straight into their place when large (connection_impl.hpp).
#include "dataplane/tcp/connection_impl.hpp"

namespace genie::dataplane::tcp {

// Gives the message buffer's charge back (the buffer was handed over or
// dropped).
void Connection::Impl::release_charge() {
  if (budget && charged > 0) budget->give(charged);
  charged = 0;
}

void Connection::Impl::on_alloc(uv_handle_t* h, size_t, uv_buf_t* buf) {
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
void Connection::Impl::land(const char* p, size_t n) {
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

void Connection::Impl::on_read(uv_stream_t* s, ssize_t nread, const uv_buf_t*) {
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
  static metrics::Counter& received = transport_bytes("tcp", false);
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

std::string Connection::Impl::eof_detail() const {
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
void Connection::Impl::consume(size_t n) {
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

void Connection::Impl::message_arrived() {
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

void Connection::Impl::payload_arrived() {
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

}  // namespace genie::dataplane::tcp
