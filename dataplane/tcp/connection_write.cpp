// The write queue: frames sent while corked leave together, written with
// one system call when the kernel takes them (connection_impl.hpp).
#include "dataplane/tcp/connection_impl.hpp"

namespace genie::dataplane::tcp {

// Iovecs for `frames`; they point into the frames, which must not move
// afterwards. Payloads go in kMaxChunk pieces.
std::vector<uv_buf_t> Connection::Impl::bufs_of(std::vector<OutFrame>& frames, std::vector<uv_buf_t> bufs) {
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

void Connection::Impl::finish_frames(std::vector<OutFrame>& frames, genie_status_t status) {
  for (OutFrame& f : frames)
    if (f.done) guarded_log([&] { f.done(status); }, "send done");
}

void Connection::Impl::count_sent(const std::vector<OutFrame>& frames) {
  uint64_t bytes = 0;
  for (const OutFrame& f : frames) bytes += f.size();
  static metrics::Counter& sent = transport_bytes("tcp", true);
  sent.add(static_cast<double>(bytes));
}

// `frames` keeps its buffer (for recycle) unless TLS takes them.
void Connection::Impl::write_frames(std::vector<OutFrame>&& frames, bool closing) {
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

void Connection::Impl::uncork() {
  if (--cork_depth > 0) return;
  write_corked();
}

void Connection::Impl::write_corked() {
  if (corked.empty() || owner->closing_) return;
  std::vector<OutFrame> frames = std::move(spare_frames);
  frames.swap(corked);  // corked keeps a buffer for the next frames
  write_frames(std::move(frames), false);
  recycle(frames, spare_frames);
}

void Connection::Impl::on_write(uv_write_t* req, int status) {
  std::unique_ptr<WriteReq> w(static_cast<WriteReq*>(req->data));
  auto* c = static_cast<Impl*>(req->handle->data);
  finish_frames(w->frames, status == 0 ? GENIE_OK : GENIE_ERR_CONNECTION);
  // ECANCELED: the handle is closing and already knows why.
  if (status != 0 && status != UV_ECANCELED) {
    c->owner->close(GENIE_ERR_CONNECTION, cat("write to ", c->peer, " failed: ", uv_strerror(status)));
  }
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

size_t Connection::write_queue_size() const { return impl_->tcp.write_queue_size; }

}  // namespace genie::dataplane::tcp
