// The tensor service: allocating, writing and reading a session's tensors.
#include "server/impl.hpp"
#include "server/rma.hpp"

namespace genie {

// ---------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------

void Server::Impl::tensor_alloc(Peer& p, uint64_t rid, const wire::TensorAlloc& m) {
  check(dtype_valid(m.dtype()), GENIE_ERR_INVALID_ARGUMENT, "dtype ", m.dtype(), " is not a genie_dtype_t");
  check(m.shape_size() <= GENIE_MAX_DIMS, GENIE_ERR_INVALID_ARGUMENT, "shape has ", m.shape_size(),
        " dimensions (at most ", GENIE_MAX_DIMS, ")");
  Shape shape(m.shape().begin(), m.shape().end());
  for (size_t i = 0; i < shape.size(); ++i)
    check(shape[i] >= 0, GENIE_ERR_INVALID_ARGUMENT, "dimension ", i, " is ", shape[i], " (must be >= 0)");
  std::string dev = m.device();
  const DType dtype = static_cast<DType>(m.dtype());
  if (const size_t slash = dev.find('/'); slash != std::string::npos) {
    // "node/device": a device of this server or of one of its workers.
    const std::string node = dev.substr(0, slash);
    dev = dev.substr(slash + 1);
    if (node != node_id) {
      byte_size(shape, dtype_size(dtype));  // TOO_LARGE here, not on the worker
      forward_alloc(p.shared_from_this(), rid, node, dev, dtype, std::move(shape));
      return;
    }
  }
  const ServedDevice* on = served_device(dev);
  const size_t bytes = byte_size(shape, dtype_size(dtype));  // TOO_LARGE on overflow
  const auto what = [&] {
    return cat("tensor ", dtype_name(dtype), shape_str(shape), " of ", bytes, " bytes");
  };
  // Freed tensors still held by reads in flight count until those end
  // (Session::erase): before refusing, let go of those that have.
  p.session->settle();
  try {
    gate.admit(*p.session, bytes, 1, false, what);
  } catch (const Error& e) {
    if (e.code() != GENIE_ERR_OUT_OF_MEMORY) throw;
    for (auto& [token, s] : sessions) s->settle();
    gate.admit(*p.session, bytes, 1, false, what);
  }
  TensorPtr t;
  if (on == nullptr) {
    t = std::make_shared<TensorData>(dtype, std::move(shape));
  } else {
    // Zeroed as host tensors are: a client may read before it writes.
    t = on->ref.backend->make_tensor(on->ref.index, dtype, shape);
    on->ref.backend->fill_zero(t->buffer(), t->nbytes(), nullptr);
  }
  const TensorPtr held = t;
  const uint64_t id = p.session->add(std::move(t));
  wire::TensorAllocReply r;
  r.set_tensor_id(id);
  if (m.local_grant()) grant_local(p.conn->peer(), *held, &r);
  send(p, MsgType::TensorAllocReply, rid, r);
}

PayloadSink Server::Impl::tensor_write(const std::shared_ptr<Peer>& p, const wire::FrameHeader& h,
                                       const wire::TensorWrite& m) {
  const uint64_t rid = h.request_id;
  const uint64_t n = h.payload_len;
  const dataplane::SemanticTag tag = p->conn->received_tag();  // passed on to a worker
  if (RemoteTensorPtr wt = p->session->find_remote(m.tensor_id()))
    return forward_write(p, h, wt, m.offset(), tag);
  TensorPtr t = p->session->find(m.tensor_id());
  genie_status_t status = GENIE_OK;
  std::string detail;
  if (!t) {
    status = GENIE_ERR_NOT_FOUND;
    detail = cat("no tensor ", m.tensor_id(), " in this session");
  } else if (m.offset() > t->nbytes() || n > t->nbytes() - m.offset()) {
    status = GENIE_ERR_SIZE_MISMATCH;
    detail = cat("writing ", n, " bytes at offset ", m.offset(), " overruns tensor ", m.tensor_id(), " of ",
                 t->nbytes(), " bytes");
  }
  if (status != GENIE_OK) {
    if (n == 0) {
      send_error(*p, rid, status, detail);
      return {};
    }
    // The payload is never read into memory: the client gets the error and
    // the connection closes (the bytes still in flight go with it).
    send_error(*p, rid, status, detail);
    p->closing = true;
    p->close_status = status;
    p->close_detail = detail + " (payload refused, connection closed)";
    return {};
  }
  if (n == 0) {
    send(*p, MsgType::Ok, rid, wire::Ok());
    return {};
  }
  PayloadSink sink;
  std::weak_ptr<Peer> wp = p;
  if (!t->host_accessible()) {
    // Device memory: the payload lands in host memory, then moves.
    auto staging = std::make_shared<TensorData>(DType::Bool, Shape{static_cast<int64_t>(n)},
                                                TensorData::Uninitialized{});
    sink.dst = staging->bytes();
    sink.keep = staging;
    sink.done = [this, wp, rid, t, staging, offset = m.offset(), n, tag] {
      auto peer = wp.lock();
      count_tagged("write", tag, n);
      try {
        device_ref(*t).backend->copy_from_host(staging->bytes(), t->buffer(), offset, n, nullptr);
      } catch (const Error& e) {
        if (peer && !peer->closing) send_error(*peer, rid, e.code(), e.detail());
        return;
      }
      if (peer && !peer->closing) send(*peer, MsgType::Ok, rid, wire::Ok());
    };
    return sink;
  }
  sink.dst = t->bytes() + m.offset();
  sink.keep = t;
  sink.done = [this, wp, rid, tag, n] {
    count_tagged("write", tag, n);
    if (auto peer = wp.lock(); peer && !peer->closing) send(*peer, MsgType::Ok, rid, wire::Ok());
  };
  return sink;
}

void Server::Impl::tensor_read(Peer& p, uint64_t rid, const wire::TensorRead& m) {
  const dataplane::SemanticTag tag = p.conn->received_tag();  // the reply carries it too
  if (RemoteTensorPtr wt = p.session->find_remote(m.tensor_id())) {
    check(m.offset() <= wt->nbytes && m.nbytes() <= wt->nbytes - m.offset(), GENIE_ERR_SIZE_MISMATCH,
          "reading ", m.nbytes(), " bytes at offset ", m.offset(), " overruns tensor ", m.tensor_id(), " of ",
          wt->nbytes, " bytes");
    forward_read(p.shared_from_this(), rid, wt, m.offset(), m.nbytes(), tag);
    return;
  }
  TensorPtr t = p.session->get(m.tensor_id());
  check(m.offset() <= t->nbytes() && m.nbytes() <= t->nbytes() - m.offset(), GENIE_ERR_SIZE_MISMATCH,
        "reading ", m.nbytes(), " bytes at offset ", m.offset(), " overruns tensor ", m.tensor_id(), " of ",
        t->nbytes(), " bytes");
  read_or_wait(p, rid, m.tensor_id(), t, m.offset(), m.nbytes(), tag);
}

}  // namespace genie
