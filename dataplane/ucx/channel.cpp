#include "dataplane/ucx/channel.hpp"

#include <cstdlib>
#include <cstring>

#include "dataplane/guarded.hpp"
#include "dataplane/ucx/rkey.hpp"

namespace genie::dataplane::ucx {
namespace {

// How long a loop teardown waits for a channel's forced close to complete.
constexpr auto kTeardownWait = std::chrono::milliseconds(2000);

bool fits(uint64_t offset, uint64_t length, uint64_t size) { return offset <= size && length <= size - offset; }

}  // namespace

Region::Region(std::shared_ptr<Context> ctx, void* data, MemoryDescriptor d, ucp_mem_h memh)
    : MemoryRegion(data, std::move(d)), ctx_(std::move(ctx)), memh_(memh) {}

Region::~Region() { ucp_mem_unmap(ctx_->get(), memh_); }

// One operation: a send (frame and payload), an RMA (put and its flush, or
// get), a receive, or a control message (welcome, bye). Done when every UCX
// request it issued completed and it was fully issued.
struct Endpoint::Op {
  Endpoint* ep = nullptr;
  std::string header;
  std::string msg;
  std::shared_ptr<void> keep;
  std::shared_ptr<MemoryRegion> local;
  Channel::Done done;
  Channel::RmaDone rma_done;
  std::function<void(ucs_status_t)> then;  // receives
  const char* what = "send";
  int left = 0;
  bool issued = false;
  ucs_status_t status = UCS_OK;

  ucp_request_param_t param(uint32_t flags = 0) {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    if (flags != 0) {
      p.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = flags;
    }
    p.cb.send = [](void* req, ucs_status_t st, void* user) { static_cast<Op*>(user)->completed(req, st); };
    p.user_data = this;
    return p;
  }
  ucp_request_param_t recv_param() {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.recv_am = [](void* req, ucs_status_t st, size_t, void* user) { static_cast<Op*>(user)->completed(req, st); };
    p.user_data = this;
    return p;
  }
  // Inside progress.
  void completed(void* req, ucs_status_t st) {
    ucp_request_free(req);
    if (st != UCS_OK && status == UCS_OK) status = st;
    if (--left == 0 && issued) {
      Op* self = this;
      ep->worker_->later([self] { self->ep->op_finished(self); });
    }
  }
};

Endpoint::Endpoint(std::shared_ptr<LoopWorker> worker, uint32_t max_message, std::shared_ptr<MessageBudget> budget,
                   ChannelHandlers handlers, std::string peer)
    : worker_(std::move(worker)),
      max_message_(max_message),
      budget_(std::move(budget)),
      handlers_(std::move(handlers)),
      peer_(std::move(peer)),
      rma_ok_(worker_->context().rma()) {
  // A context without RMA (Context::rma) never offers it, lanes or not.
  rma_emulated_.store(!rma_ok_, std::memory_order_release);
}

Endpoint::~Endpoint() = default;

void Endpoint::start_connect(const struct sockaddr* addr, socklen_t len, Transport::ConnectFn cb) {
  connect_cb_ = std::move(cb);
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
  p.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  p.sockaddr.addr = addr;
  p.sockaddr.addrlen = len;
  begin(p);
}

void Endpoint::start_accept(ucp_conn_request_h req) {
  ucp_ep_params_t p{};
  p.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST;
  p.conn_request = req;
  established_ = true;
  begin(p);
  if (!closing_) send_control(kAmWelcome, "welcome");
}

void Endpoint::begin(ucp_ep_params_t& p) {
  self_ = shared_from_this();
  std::weak_ptr<Endpoint> weak = self_;
  hook_ = g_host->add_close_hook(worker_->loop(), [weak] {
    auto e = weak.lock();
    if (!e || e->finished_) return;
    auto w = e->worker_;
    e->close(GENIE_ERR_SHUTDOWN, "event loop stopped");
    // The loop will not come round again: finish here.
    if (!w->drive_until([&] { return e->finished_; }, kTeardownWait))
      say(LogLevel::Warn, "ucx: channel to ", e->peer_, " did not finish closing at loop teardown");
  });
  p.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  p.err_handler.cb = &Endpoint::on_error;
  p.err_handler.arg = this;
  const ucs_status_t st = ucp_ep_create(worker_->get(), &p, &ep_);
  if (st != UCS_OK) {
    ep_ = nullptr;
    errored_ = true;
    const bool connecting = !established_;
    established_ = false;
    close(GENIE_ERR_CONNECTION, connecting ? cat("cannot connect to ", peer_, ": ", ucs_status_string(st))
                                           : cat("cannot accept ", peer_, ": ", ucs_status_string(st)));
    return;
  }
  worker_->attach(ep_, this);
}

void Endpoint::on_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* e = static_cast<Endpoint*>(arg);
  if (e->closing_ || e->finished_) return;
  e->errored_ = true;
  auto self = e->shared_from_this();
  e->worker_->later([self, status] { self->lost(status); });
}

void Endpoint::lost(ucs_status_t st) {
  if (closing_) return;
  close(GENIE_ERR_CONNECTION, established_ ? cat("connection to ", peer_, " lost: ", ucs_status_string(st))
                                           : cat("cannot connect to ", peer_, ": ", ucs_status_string(st)));
}

void Endpoint::track(Op* op, ucs_status_ptr_t req) {
  if (UCS_PTR_IS_ERR(req)) {
    if (op->status == UCS_OK) op->status = UCS_PTR_STATUS(req);
  } else if (req != nullptr) {
    ++op->left;
  }
}

void Endpoint::issued(Op* op) {
  op->issued = true;
  if (op->left == 0) {
    auto self = shared_from_this();
    worker_->later([self, op] { self->op_finished(op); });
  }
}

void Endpoint::op_finished(Op* op) {
  std::unique_ptr<Op> o(op);
  --ops_open_;
  const ucs_status_t st = o->status;
  if (o->then) run_logged([&] { o->then(st); }, "receive");
  if (o->done) run_logged([&] { o->done(st == UCS_OK ? GENIE_OK : GENIE_ERR_CONNECTION); }, "send done");
  if (o->rma_done) {
    const std::string detail = st == UCS_OK ? std::string() : cat("ucx ", o->what, " failed: ", ucs_status_string(st));
    run_logged([&] { o->rma_done(st == UCS_OK ? GENIE_OK : GENIE_ERR_CONNECTION, detail); }, "rma done");
  }
  o.reset();
  if (closing_) maybe_finish();
}

void Endpoint::send(uint16_t type, uint64_t request_id, uint32_t flags, std::string msg, const void* payload,
                    uint64_t payload_len, std::shared_ptr<void> keep, Done done) {
  auto refuse = [&](genie_status_t st) {
    if (done) run_logged([&] { done(st); }, "send done");
  };
  if (closing_ || !established_) return refuse(GENIE_ERR_CONNECTION);
  if (payload_len > 0 && payload == nullptr) return refuse(GENIE_ERR_INVALID_ARGUMENT);
  if (msg.size() > max_message_) return refuse(GENIE_ERR_TOO_LARGE);
  Op* o = new Op;
  o->ep = this;
  o->done = std::move(done);
  o->keep = std::move(keep);
  o->msg = std::move(msg);
  ++ops_open_;
  FrameHeader h;
  h.type = type;
  h.flags = flags;
  h.request_id = request_id;
  h.payload_len = payload_len;
  o->header.resize(kFrameHeaderSize);
  encode_frame_header(h, o->msg.data(), o->msg.size(), reinterpret_cast<uint8_t*>(o->header.data()));
  count_bytes(true, kFrameHeaderSize + o->msg.size() + payload_len);
  ucp_request_param_t p = o->param(UCP_AM_SEND_FLAG_REPLY);
  track(o, ucp_am_send_nbx(ep_, kAmFrame, o->header.data(), o->header.size(), o->msg.data(), o->msg.size(), &p));
  if (payload_len > 0) {
    ucp_request_param_t pp =
        o->param(UCP_AM_SEND_FLAG_REPLY | (payload_len >= kRndvBytes ? UCP_AM_SEND_FLAG_RNDV : 0));
    track(o, ucp_am_send_nbx(ep_, kAmPayload, nullptr, 0, payload, payload_len, &pp));
  }
  issued(o);
}

ucs_status_t Endpoint::arrive(unsigned id, const void* header, size_t header_len, void* data, size_t length,
                              const ucp_am_recv_param_t* param) {
  if (closing_) return UCS_OK;  // dropped (a rendezvous completes the sender's send)
  Incoming in;
  in.id = id;
  in.header.assign(static_cast<const char*>(header), header_len);
  in.length = length;
  ucs_status_t keep = UCS_OK;
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) {
    in.desc = data;
    keep = UCS_INPROGRESS;
  } else {
    // Eager bytes held until the message is handled (while a rendezvous
    // receive runs, any number may queue): charged to the budget.
    if (budget_ && length > 0) {
      if (!budget_->take(length)) {
        // Dropped; pump() closes the channel (not from inside UCX's progress).
        if (over_budget_.empty())
          over_budget_ = cat("messages still arriving already hold ", budget_->used(), " bytes (limit ",
                             budget_->limit(), "): a ", length, "-byte message from ", peer_, " was refused");
        auto self = shared_from_this();
        worker_->later([self] { self->pump(); });
        return UCS_OK;
      }
      in.charged = length;
    }
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA) != 0 && id == kAmPayload) {
      in.desc = data;  // UCX's buffer, copied into the sink later
      in.persistent = true;
      keep = UCS_INPROGRESS;
    } else if (length > 0) {
      in.data.assign(static_cast<const char*>(data), length);
    }
  }
  inbox_.push_back(std::move(in));
  auto self = shared_from_this();
  worker_->later([self] { self->pump(); });
  return keep;
}

void Endpoint::release(Incoming& in) {
  if (in.desc != nullptr) ucp_am_data_release(worker_->get(), in.desc);
  in.desc = nullptr;
  if (in.charged > 0) budget_->give(in.charged);
  in.charged = 0;
}

void Endpoint::charge(uint64_t n, const char* what) {
  if (!budget_ || n == 0) return;
  if (!budget_->take(n))
    fail(GENIE_ERR_TOO_LARGE, "messages still arriving already hold ", budget_->used(), " bytes (limit ",
         budget_->limit(), "): ", what, " of ", n, " bytes from ", peer_, " was refused");
}

void Endpoint::pump() {
  if (!over_budget_.empty() && !closing_) return close(GENIE_ERR_TOO_LARGE, over_budget_);
  while (!closing_ && !receiving_ && !inbox_.empty()) {
    Incoming in = std::move(inbox_.front());
    inbox_.pop_front();
    genie_status_t st = GENIE_OK;
    std::string detail;
    if (!guarded([&] { handle(in); }, &st, &detail, "ucx receive")) {
      release(in);
      close(st, detail);
    }
    release(in);  // handled: its bytes were handed over (or are UCX's to receive)
  }
}

void Endpoint::learn_lanes(bool log) {
  lanes_known_ = true;
  const std::vector<Lane> lanes = endpoint_lanes(ep_);
  // Unreadable lanes: keep RMA (the transport's capability) as it was.
  // A context without RMA (Context::rma) never offers it.
  const bool emulated = !rma_ok_ || (!lanes.empty() && !has_rma_lane(lanes) && !rma_always());
  rma_emulated_.store(emulated, std::memory_order_release);
  // Which transports UCX chose (shared memory between local peers).
  if (log)
    say(LogLevel::Debug, "ucx: channel to ", peer_, " lanes: ", describe_lanes(lanes),
        emulated ? "; no RMA lane: bulk bytes go as rendezvous payloads" : "");
}

void Endpoint::handle(Incoming& in) {
  // The accepting side's endpoint is wired once the peer's first message
  // arrived over it.
  if (!lanes_known_ && established_ && ep_ != nullptr && in.id != kAmWelcome) learn_lanes(false);
  switch (in.id) {
    case kAmWelcome:
      release(in);
      if (!established_) {
        established_ = true;
        learn_lanes(true);
        if (auto cb = std::exchange(connect_cb_, nullptr)) run_logged([&] { cb(GENIE_OK, {}); }, "connect callback");
      }
      return;
    case kAmBye:
      release(in);
      peer_closed_ = true;
      close(GENIE_ERR_CONNECTION, cat("connection to ", peer_, " closed by the peer"));
      return;
    case kAmFrame: {
      count_bytes(false, in.header.size() + in.length);
      if (want_payload_) fail(GENIE_ERR_PROTOCOL, "a frame arrived before the payload of the previous one");
      if (in.header.size() != kFrameHeaderSize)
        fail(GENIE_ERR_PROTOCOL, "a frame header of ", in.header.size(), " bytes (expected ", kFrameHeaderSize, ")");
      const auto* hb = reinterpret_cast<const uint8_t*>(in.header.data());
      const FrameHeader h = decode_frame_header(hb, max_message_, handlers_.types);
      if (in.length != h.msg_len)
        fail(GENIE_ERR_PROTOCOL, "a frame carries ", in.length, " bytes of message, its header says ", h.msg_len);
      if (in.desc == nullptr) {
        release(in);  // the charge: the message is handed over now
        return deliver_frame(h, in.header, std::move(in.data));
      }
      // A large message by rendezvous: into a buffer of its own, charged
      // to the budget until it is handed over (or the receive fails).
      charge(in.length, "a rendezvous message");
      std::shared_ptr<void> held(nullptr, [b = budget_, n = in.length](void*) {
        if (b) b->give(n);
      });
      auto buf = std::make_shared<std::string>(in.length, '\0');
      return receive(in, buf->data(), "a message", [this, h, header = in.header, buf, held]() mutable {
        held.reset();  // handed over now
        deliver_frame(h, header, std::move(*buf));
      });
    }
    case kAmPayload:
      count_bytes(false, in.length);
      return take_payload(in);
    default:
      fail(GENIE_ERR_PROTOCOL, "unknown active message ", in.id);
  }
}

void Endpoint::deliver_frame(const FrameHeader& h, const std::string& header, std::string&& msg) {
  verify_frame_crc(reinterpret_cast<const uint8_t*>(header.data()), msg.data(), msg.size(), handlers_.types);
  PayloadSink s;
  if (handlers_.on_frame) s = handlers_.on_frame(h, std::move(msg));
  if (closing_ || h.payload_len == 0) return;
  if (s.dst == nullptr)
    fail(GENIE_ERR_PROTOCOL, "the ", h.payload_len, "-byte payload of a ", frame_type_label(handlers_.types, h.type),
         " frame (request ", h.request_id, ") was refused");
  sink_ = std::move(s);
  want_payload_ = true;
  payload_len_ = h.payload_len;
}

void Endpoint::take_payload(Incoming& in) {
  if (!want_payload_) fail(GENIE_ERR_PROTOCOL, "a payload arrived without a frame");
  if (in.length != payload_len_)
    fail(GENIE_ERR_PROTOCOL, "a payload of ", in.length, " bytes where its frame announced ", payload_len_);
  auto finish = [this] {
    want_payload_ = false;
    PayloadSink s = std::move(sink_);
    sink_ = PayloadSink();
    if (s.done) s.done();
  };
  if (in.desc == nullptr || in.persistent) {
    std::memcpy(sink_.dst, in.desc != nullptr ? in.desc : in.data.data(), in.length);
    release(in);
    return finish();
  }
  // Rendezvous: UCX writes straight into the sink.
  receive(in, sink_.dst, "a payload", finish);
}

void Endpoint::receive(Incoming& in, void* dst, const char* what, std::function<void()> then) {
  Op* o = new Op;
  o->ep = this;
  o->what = "receive";
  auto self = shared_from_this();
  o->then = [self, what, then = std::move(then)](ucs_status_t st) {
    self->receiving_ = false;
    if (self->closing_) return;
    if (st != UCS_OK)
      return self->close(GENIE_ERR_CONNECTION,
                         cat("receiving ", what, " from ", self->peer_, " failed: ", ucs_status_string(st)));
    genie_status_t gs = GENIE_OK;
    std::string detail;
    if (!guarded(then, &gs, &detail, "ucx receive")) return self->close(gs, detail);
    self->pump();
  };
  ++ops_open_;
  receiving_ = true;
  ucp_request_param_t p = o->recv_param();
  void* desc = std::exchange(in.desc, nullptr);
  track(o, ucp_am_recv_data_nbx(worker_->get(), desc, dst, in.length, &p));
  issued(o);
}

void Endpoint::send_control(unsigned id, const char* what) {
  Op* o = new Op;
  o->ep = this;
  o->what = what;
  ++ops_open_;
  ucp_request_param_t p = o->param(UCP_AM_SEND_FLAG_REPLY);
  track(o, ucp_am_send_nbx(ep_, id, nullptr, 0, nullptr, 0, &p));
  issued(o);
}

void Endpoint::close(genie_status_t status, const std::string& detail) {
  if (closing_) return;
  closing_ = true;
  close_status_ = status;
  close_detail_ = detail;
  for (Incoming& in : inbox_) release(in);
  inbox_.clear();
  if (ep_ != nullptr) {
    worker_->detach(ep_);
    const bool orderly = established_ && !peer_closed_ && !errored_ && status != GENIE_ERR_SHUTDOWN;
    if (orderly) send_control(kAmBye, "bye");
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = orderly ? 0 : UCP_EP_CLOSE_FLAG_FORCE;
    p.cb.send = [](void* req, ucs_status_t, void* user) {
      ucp_request_free(req);
      auto* e = static_cast<Endpoint*>(user);
      e->close_done_ = true;
      auto self = e->shared_from_this();
      e->worker_->later([self] { self->maybe_finish(); });
    };
    p.user_data = this;
    const ucs_status_ptr_t r = ucp_ep_close_nbx(ep_, &p);
    ep_ = nullptr;
    close_done_ = r == nullptr || UCS_PTR_IS_ERR(r);
  } else {
    close_done_ = true;
  }
  auto self = shared_from_this();
  worker_->later([self] { self->maybe_finish(); });  // on_close never inside close()
}

void Endpoint::maybe_finish() {
  if (finished_ || !closing_ || !close_done_ || ops_open_ > 0 || receiving_) return;
  finished_ = true;
  for (auto& kv : rkeys_) ucp_rkey_destroy(kv.second);
  rkeys_.clear();
  g_host->remove_close_hook(worker_->loop(), hook_);
  sink_ = PayloadSink();  // an unfinished payload's keep goes, its done never runs
  if (auto cb = std::exchange(connect_cb_, nullptr)) {
    const std::string why = close_detail_.rfind("cannot connect", 0) == 0
                                ? close_detail_
                                : cat("cannot connect to ", peer_, ": closed before it was established (",
                                      close_detail_, ")");
    run_logged([&] { cb(GENIE_ERR_CONNECTION, why); }, "connect callback");
  }
  ChannelHandlers h = std::move(handlers_);
  handlers_ = ChannelHandlers();
  if (h.on_close) run_logged([&] { h.on_close(close_status_, close_detail_); }, "on_close");
  // Both may go with the caller's last reference.
  std::shared_ptr<Endpoint> self = std::move(self_);
  std::shared_ptr<LoopWorker> w = std::move(worker_);
  w->later([self, w] {});
}

void Endpoint::put(const std::shared_ptr<MemoryRegion>& local, uint64_t local_offset, const MemoryDescriptor& remote,
                   uint64_t remote_offset, uint64_t length, RmaDone done) {
  rma(true, local, local_offset, remote, remote_offset, length, std::move(done));
}

void Endpoint::get(const std::shared_ptr<MemoryRegion>& local, uint64_t local_offset, const MemoryDescriptor& remote,
                   uint64_t remote_offset, uint64_t length, RmaDone done) {
  rma(false, local, local_offset, remote, remote_offset, length, std::move(done));
}

void Endpoint::rma(bool put, const std::shared_ptr<MemoryRegion>& local, uint64_t local_offset,
                   const MemoryDescriptor& remote, uint64_t remote_offset, uint64_t length, RmaDone done) {
  const char* op = put ? "put" : "get";
  auto refuse = [&](genie_status_t st, const std::string& why) {
    if (done) run_logged([&] { done(st, why); }, "rma done");
  };
  if (closing_ || !established_)
    return refuse(GENIE_ERR_CONNECTION,
                  cat("ucx ", op, ": the channel is ", closing_ ? "closed" : "not connected"));
  if (!rma_ok_)
    return refuse(GENIE_ERR_UNSUPPORTED, cat("ucx ", op, ": this UCX would emulate RMA in software, which lets "
                                             "every peer reach the process's memory (docs/ucx.md)"));
  if (dynamic_cast<const Region*>(local.get()) == nullptr || remote.transport != kName)
    return refuse(GENIE_ERR_INVALID_ARGUMENT,
                  cat("ucx ", op, ": both regions must be registered with the ucx transport (remote is '",
                      remote.transport, "')"));
  if (remote.key.empty())
    return refuse(GENIE_ERR_INVALID_ARGUMENT, cat("ucx ", op, ": the remote descriptor carries no key"));
  if (!fits(local_offset, length, local->size()) || !fits(remote_offset, length, remote.length))
    return refuse(GENIE_ERR_INVALID_ARGUMENT,
                  cat("ucx ", op, ": ", length, " bytes at local offset ", local_offset, " / remote offset ",
                      remote_offset, " fall outside the regions (", local->size(), " and ", remote.length,
                      " bytes)"));
  ucp_rkey_h rkey = nullptr;
  auto it = rkeys_.find(remote.key);
  if (it != rkeys_.end()) {
    rkey = it->second;
  } else {
    // UCX unpacks without a length: the layout is walked within the key first.
    if (const std::string why = check_packed_key(remote.key); !why.empty())
      return refuse(GENIE_ERR_INVALID_ARGUMENT, cat("ucx ", op, ": the remote key is malformed: ", why));
    const ucs_status_t st = ucp_ep_rkey_unpack(ep_, remote.key.data(), &rkey);
    if (st != UCS_OK)
      return refuse(GENIE_ERR_INVALID_ARGUMENT,
                    cat("ucx ", op, ": the remote key does not unpack: ", ucs_status_string(st)));
    // A key that maps the peer's memory into this process (a shared-memory
    // segment) makes UCX copy at the address the peer names, unchecked
    // against the segment: a forged range would reach this process's own
    // memory. Registrations of this transport never make such keys.
    void* direct = nullptr;
    if (ucp_rkey_ptr(rkey, remote.address, &direct) == UCS_OK) {
      ucp_rkey_destroy(rkey);
      return refuse(GENIE_ERR_INVALID_ARGUMENT,
                    cat("ucx ", op, ": the remote key maps the peer's memory into this process (a shared-memory "
                        "segment), whose bounds cannot be checked: refused"));
    }
    rkeys_[remote.key] = rkey;
  }
  Op* o = new Op;
  o->ep = this;
  o->what = op;
  o->local = local;
  o->rma_done = std::move(done);
  ++ops_open_;
  if (length > 0) {
    count_bytes(put, length);
    void* mine = static_cast<char*>(local->data()) + local_offset;
    const uint64_t theirs = remote.address + remote_offset;
    ucp_request_param_t p = o->param();
    track(o, put ? ucp_put_nbx(ep_, mine, length, theirs, rkey, &p) : ucp_get_nbx(ep_, mine, length, theirs, rkey, &p));
    // A put is complete locally first; the flush says it reached the peer.
    if (put) track(o, ucp_ep_flush_nbx(ep_, &p));
  }
  issued(o);
}

}  // namespace genie::dataplane::ucx
