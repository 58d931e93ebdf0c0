// Tensor reads through a window per connection. A read's reply goes from
// tensor memory to the socket without a copy, and the connection holds the
// tensor until the kernel has taken the bytes. So that a client which stops
// reading cannot make the server hold memory without bound (allocate, read,
// free, again and again: each read queued behind the stalled one would keep
// its freed tensor), only the reads within a window of payload bytes are
// handed to the connection; the others wait in order, holding neither their
// tensor nor any buffer, and are counted as queued replies (reply_room), so
// that the reply caps bound how many can wait. A read always fits when
// nothing else is in flight, so one read of any size streams at link speed,
// and small reads from several threads go out together.
#include "server/impl.hpp"

namespace genie {

namespace {

// Payload bytes of reads handed to one connection and not yet taken by the
// kernel. Two socket buffers' worth: enough to keep the socket full while
// the next read starts, small against the server's memory.
constexpr uint64_t kReadWindow = uint64_t{16} << 20;
// What a waiting read counts against the queued reply bytes (the Ok header
// it will become).
constexpr uint64_t kWaitingReadBytes = wire::kHeaderSize;

}  // namespace

void Server::Impl::read_or_wait(Peer& p, uint64_t rid, uint64_t tensor_id, const TensorPtr& t,
                                uint64_t offset, uint64_t nbytes, const dataplane::SemanticTag& tag) {
  const bool fits = p.read_bytes_in_flight == 0 || p.read_bytes_in_flight + nbytes <= kReadWindow;
  if (p.reads_waiting.empty() && fits) {
    start_read(p, rid, t, offset, nbytes, tag);
    return;
  }
  if (!reply_room(p, kWaitingReadBytes)) return;
  ++p.pending_writes;
  p.pending_bytes += kWaitingReadBytes;
  queued_reply_bytes += kWaitingReadBytes;
  p.reads_waiting.push_back(Peer::WaitingRead{rid, tensor_id, offset, nbytes, t, tag});
}

void Server::Impl::start_read(Peer& p, uint64_t rid, const TensorPtr& t, uint64_t offset, uint64_t nbytes,
                              const dataplane::SemanticTag& tag) {
  // Device memory goes through a host copy, made only now that the read is
  // in the window, so that waiting reads hold no copies. This also runs from
  // pump_reads (a send's completion), where nothing may throw.
  TensorPtr src = t;
  uint64_t at = offset;
  if (!t->host_accessible()) {
    try {
      src = host_bytes(*t, offset, nbytes);
      at = 0;
    } catch (const Error& e) {
      send_error(p, rid, e.code(), e.detail());
      return;
    } catch (const std::bad_alloc&) {
      send_error(p, rid, GENIE_ERR_OUT_OF_MEMORY,
                 cat("no host memory to stage a ", nbytes, "-byte device read"));
      return;
    }
  }
  p.read_bytes_in_flight += nbytes;
  count_tagged("read", tag, nbytes);
  // A tensor of the session, held until the reply is sent: freed meanwhile,
  // it stays charged to the session (Session::erase).
  std::weak_ptr<Session> reader;
  if (src == t && p.session) {
    p.session->read_begins(t);
    reader = p.session;
  }
  send(
      p, MsgType::Ok, rid, wire::Ok(), src->bytes() + at, nbytes, src,
      [this, nbytes, reader, held = src.get()](Peer& peer) {
        peer.read_bytes_in_flight -= nbytes;
        if (auto s = reader.lock()) s->read_ends(held);
        pump_reads(peer);
      },
      tag);
}

void Server::Impl::pump_reads(Peer& p) {
  // A read whose bytes the kernel takes at once finishes inside send():
  // the outer call goes on with the queue instead of recursing.
  if (p.pumping_reads) return;
  p.pumping_reads = true;
  while (!p.reads_waiting.empty()) {
    const Peer::WaitingRead& w = p.reads_waiting.front();
    if (p.read_bytes_in_flight != 0 && p.read_bytes_in_flight + w.nbytes > kReadWindow) break;
    const Peer::WaitingRead r = w;
    p.reads_waiting.pop_front();
    --p.pending_writes;
    p.pending_bytes -= kWaitingReadBytes;
    queued_reply_bytes -= kWaitingReadBytes;
    if (p.conn->closed()) continue;  // dropped with the connection
    if (TensorPtr t = r.tensor.lock())
      start_read(p, r.rid, t, r.offset, r.nbytes, r.tag);
    else
      send_error(p, r.rid, GENIE_ERR_NOT_FOUND,
                 cat("tensor ", r.tensor_id, " was freed before its read could be sent"));
  }
  p.pumping_reads = false;
}

}  // namespace genie
