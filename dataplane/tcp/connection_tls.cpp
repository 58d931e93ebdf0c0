// The TLS filter: ciphertext read is decrypted before it lands, frames are
// encrypted before they are written (tls.hpp, connection_impl.hpp).
#include "dataplane/tcp/connection_impl.hpp"

namespace genie::dataplane::tcp {

// `n` bytes of ciphertext in `staging`: the plaintext they complete lands
// like bytes read without TLS.
void Connection::Impl::tls_read(size_t n) {
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
void Connection::Impl::tls_write(std::vector<OutFrame> frames, bool closing) {
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

bool Connection::Impl::write_raw(std::string bytes, bool closing) {
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

}  // namespace genie::dataplane::tcp
