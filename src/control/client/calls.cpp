// The client's calls: requests in flight on the loop thread, their replies
// and completions, graph resubmission, and batched tensor frees.
#include "control/client/impl.hpp"
#include "core/spin.hpp"

namespace genie {

void RemoteClient::Impl::transact(const std::shared_ptr<Call>& call, std::string msg, const void* payload,
                                  uint64_t payload_len) {
  refuse_on_loop_thread(what_of(call->type));
  // The connection would refuse it without a reply; say why now.
  check(msg.size() <= max_message, GENIE_ERR_TOO_LARGE, what_of(call->type), ": the encoded message of ",
        msg.size(), " bytes exceeds the maximum message size of ", max_message, " bytes (GENIE_MAX_MESSAGE)");
  wait_ready();
  {
    std::lock_guard<std::mutex> lk(mu);
    outstanding.insert(call);
  }
  struct Unregister {
    Impl* self;
    const std::shared_ptr<Call>& call;
    ~Unregister() {
      std::lock_guard<std::mutex> lk(self->mu);
      self->outstanding.erase(call);
    }
  } unregister{this, call};

  const uint64_t id = next_id.fetch_add(1);
  if (!loop->post([this, call, id, msg = std::move(msg), payload, payload_len]() mutable {
        start(call, id, std::move(msg), payload, payload_len);
      }))
    fail(GENIE_ERR_SHUTDOWN, "the connection to ", addr, " has been closed (shut down)");

  // Replies to small requests come within tens of microseconds: polling
  // first spares the loop thread a wake-up of this one (core/spin.hpp).
  spin_until(
      [&] {
        std::lock_guard<std::mutex> lk(call->mu);
        return call->finished();
      },
      kReplySpin);
  std::unique_lock<std::mutex> lk(call->mu);
  if (!call->cv.wait_for(lk, timeout, [&] { return call->finished(); })) {
    lk.unlock();
    // If the loop is already stopping, close() settles the call instead.
    loop->post([this, call, id] { cancel(call, id); });
    lk.lock();
    call->cv.wait(lk, [&] { return call->finished(); });
  }
  if (call->status != GENIE_OK) throw Error(call->status, call->detail);
}

bool RemoteClient::Impl::submit(const std::shared_ptr<Call>& call, std::string msg) {
  refuse_on_loop_thread(what_of(call->type));
  check(msg.size() <= max_message, GENIE_ERR_TOO_LARGE, what_of(call->type), ": the encoded message of ",
        msg.size(), " bytes exceeds the maximum message size of ", max_message, " bytes (GENIE_MAX_MESSAGE)");
  // The direct link checks that the session is ready itself; otherwise
  // wait until it is, and take the loop.
  if (direct_submit(call, msg)) return true;
  wait_ready();
  const uint64_t id = next_id.fetch_add(1);
  // A posted task always runs (LoopThread::stop runs the queue first), so
  // the completion cannot be lost once post() succeeded.
  if (!loop->post(
          [this, call, id, msg = std::move(msg)]() mutable { start(call, id, std::move(msg), nullptr, 0); }))
    fail(GENIE_ERR_SHUTDOWN, "the connection to ", addr, " has been closed (shut down)");
  return false;
}

void RemoteClient::Impl::start(const std::shared_ptr<Call>& call, uint64_t id, std::string msg,
                               const void* payload, uint64_t payload_len) {
  if (state == State::Reconnecting) {
    // Posted before the loss was seen: nothing of it reached the server.
    parked.push_back({id, call, std::move(msg), payload, payload_len});
    return;
  }
  if (state != State::Ready) {
    end_call(*call, state == State::Closed ? GENIE_ERR_SHUTDOWN : GENIE_ERR_CONNECTION,
             cat("connection to ", addr, " lost before the ", what_of(call->type), " was sent"));
    return;
  }
  // A request after a quiet spell: the server's silence counts from now.
  if (!requests_waiting()) last_heard = Clock::now();
  const std::shared_ptr<Connection> conn = call->link == Link::Data ? data : ctrl;
  const bool control = call->link == Link::Control;
  if (control) {
    // Tensors freed before this call: freed first, in the same write.
    conn->cork();
    flush_frees();
  }
  pending.emplace(id, call);
  std::function<void(genie_status_t)> sent;
  if (payload_len > 0) {
    call->set_in_use();
    sent = [call](genie_status_t) { call->release(); };
  }
  conn->send_tagged(call->tag, call->send_type, id, 0, std::move(msg), payload, payload_len, nullptr,
                    std::move(sent));
  if (control) conn->uncork();
}

void RemoteClient::Impl::send_parked() {
  auto calls = std::move(parked);
  parked.clear();
  for (auto& p : calls) start(p.call, p.id, std::move(p.msg), p.payload, p.payload_len);
}

void RemoteClient::Impl::cancel(const std::shared_ptr<Call>& call, uint64_t id) {
  {
    std::lock_guard<std::mutex> lk(call->mu);
    if (call->replied) return;  // raced with the reply: the caller takes it
  }
  pending.erase(id);
  std::erase_if(parked, [id](const Parked& p) { return p.id == id; });
  call->settle(GENIE_ERR_TIMEOUT,
               cat(what_of(call->type), ": no reply from ", addr, " within ", timeout.count(), " ms"));
  if (call->in_use()) {
    // The connection still reads or writes the caller's buffer: only
    // closing it makes the buffer the caller's again.
    connection_lost(cat("a ", what_of(call->type), " timed out with bytes in transit"));
    call->release();
  }
}

void RemoteClient::Impl::fail_all(genie_status_t st, const std::string& detail) {
  auto calls = std::move(pending);
  pending.clear();
  for (auto& [id, call] : calls) {
    end_call(*call, st, detail);
    call->release();
  }
  auto unsent = std::move(parked);
  parked.clear();
  for (auto& p : unsent) end_call(*p.call, st, detail);
}

void RemoteClient::Impl::end_call(Call& call, genie_status_t st, std::string detail) {
  if (call.on_reply) {
    run_reply(call, st, std::move(detail));
    return;
  }
  if (!call.submission()) {
    call.settle(st, std::move(detail));
    return;
  }
  RemoteResult r;
  r.status = st;
  r.detail = std::move(detail);
  run_done(call, std::move(r));
}

void RemoteClient::Impl::run_reply(Call& call, genie_status_t st, std::string&& msg) {
  auto fn = std::move(call.on_reply);
  call.on_reply = nullptr;
  if (!fn) return;
  try {
    fn(st, std::move(msg));
  } catch (const std::exception& e) {
    log(LogLevel::Error, "client: reply handler threw: ", e.what());
  } catch (...) {
    log(LogLevel::Error, "client: reply handler threw");
  }
}

void RemoteClient::Impl::run_done(Call& call, RemoteResult&& r) {
  auto done = std::move(call.done);
  call.done = nullptr;
  if (!done) return;
  try {
    done(std::move(r));
  } catch (const std::exception& e) {
    log(LogLevel::Error, "client: graph completion handler threw: ", e.what());
  } catch (...) {
    log(LogLevel::Error, "client: graph completion handler threw");
  }
}

bool RemoteClient::Impl::is_error(const wire::FrameHeader& fh) {
  return (fh.flags & wire::kFlagError) != 0 || fh.type == MsgType::ErrorReply;
}

bool RemoteClient::Impl::unknown_base(const std::string& msg) {
  wire::ErrorReply e;
  return e.ParseFromString(msg) && e.reason() == wire::REASON_UNKNOWN_BASE;
}

std::string RemoteClient::Impl::full_submission(Call& call, std::string* out) {
  delta_fallbacks.fetch_add(1, std::memory_order_relaxed);
  // The full graph goes with keep_as_base, so the server holds it again;
  // the base the delta named, if another text, it does not.
  if (*call.base_digest != *call.graph_digest) encoder.forget(*call.base_digest);
  wire::GraphSubmit m;
  m.set_graph_json(*call.full_json);
  for (const auto& [name, tid] : call.bindings) {
    wire::Binding* b = m.add_bindings();
    b->set_name(name);
    b->set_tensor_id(tid);
  }
  m.set_keep_as_base(true);
  m.set_trace(call.trace);
  *out = wire::encode_msg(m);
  *out += call.inline_extra;
  graph_bytes_sent.fetch_add(wire::kHeaderSize + out->size(), std::memory_order_relaxed);
  call.send_type = MsgType::GraphSubmit;
  call.full_json.reset();
  call.bindings.clear();
  if (out->size() > max_message)
    return cat("graph submit: the encoded message of ", out->size(),
               " bytes exceeds the maximum message size of ", max_message, " bytes");
  return {};
}

void RemoteClient::Impl::resend_full(const std::shared_ptr<Call>& call) {
  std::string full;
  if (std::string why = full_submission(*call, &full); !why.empty()) {
    run_done(*call, RemoteResult{GENIE_ERR_TOO_LARGE, std::move(why), {}, 0});
    return;
  }
  start(call, next_id.fetch_add(1), std::move(full), nullptr, 0);
}

std::pair<genie_status_t, std::string> RemoteClient::Impl::parse_error(const std::string& msg) {
  const auto e = wire::parse_msg<wire::ErrorReply>(msg, MsgType::ErrorReply);
  return {peer_status(e.status()), e.detail()};
}

PayloadSink RemoteClient::Impl::discard(uint64_t len) {
  std::shared_ptr<char[]> buf = std::make_unique_for_overwrite<char[]>(len);
  PayloadSink s;
  s.dst = buf.get();
  s.keep = buf;
  return s;
}

PayloadSink RemoteClient::Impl::on_frame(Link link, const wire::FrameHeader& fh, std::string&& msg) {
  last_heard = Clock::now();
  if (hs != Handshake::Done) {
    handshake_frame(link, fh, msg);
    return {};
  }
  auto it = pending.find(fh.request_id);
  if (it == pending.end()) {
    // The caller gave up (timeout) before the reply came.
    if (fh.type == MsgType::GraphDone) free_stray_outputs(msg);
    return fh.payload_len ? discard(fh.payload_len) : PayloadSink{};
  }
  std::shared_ptr<Call> call = it->second;
  if (is_error(fh)) {
    pending.erase(it);
    if (call->send_type == MsgType::GraphSubmitDelta && fh.payload_len == 0 && unknown_base(msg)) {
      resend_full(call);
      return {};
    }
    auto [st, detail] = parse_error(msg);
    end_call(*call, st, std::move(detail));
    return fh.payload_len ? discard(fh.payload_len) : PayloadSink{};
  }
  const auto protocol = [&](const std::string& why) -> PayloadSink {
    pending.erase(fh.request_id);
    end_call(*call, GENIE_ERR_PROTOCOL, cat(what_of(call->type), ": ", why));
    connection_lost(cat("protocol error: ", why));
    return {};
  };
  switch (call->type) {
    case MsgType::TensorRead:
    case MsgType::TensorFetch: {
      if (fh.type != MsgType::Ok) return protocol(cat("reply is ", wire::type_name(fh.type), ", not Ok"));
      if (fh.payload_len != call->nbytes)
        return protocol(cat("reply carries ", fh.payload_len, " bytes, ", call->nbytes, " were asked for"));
      if (fh.payload_len == 0) {
        pending.erase(it);
        call->settle(GENIE_OK, {});
        return {};
      }
      call->set_in_use();
      PayloadSink s;
      s.dst = call->dst;
      s.done = [this, call, id = fh.request_id] {
        pending.erase(id);
        call->settle_released(GENIE_OK);
      };
      return s;
    }
    case MsgType::GraphSubmit: {
      if (fh.payload_len) return protocol("unexpected payload");
      // Servers before the acceptance was dropped send one ahead of the
      // GraphDone; it carries nothing this client needs.
      if (fh.type == MsgType::SubmitAccepted) return {};
      if (fh.type != MsgType::GraphDone) return protocol(cat("unexpected ", wire::type_name(fh.type)));
      pending.erase(it);
      run_done(*call, parse_done(msg));
      return {};
    }
    default: {
      const MsgType want = call->type == MsgType::TensorAlloc         ? MsgType::TensorAllocReply
                           : call->type == MsgType::TensorExport      ? MsgType::TensorExportReply
                           : call->type == MsgType::ServerInfoRequest ? MsgType::ServerInfo
                           : call->type == MsgType::Heartbeat         ? MsgType::HeartbeatReply
                           : call->type == MsgType::PlanExplain       ? MsgType::PlanExplainReply
                           : call->type == MsgType::ClockProbe        ? MsgType::ClockProbeReply
                                                                      : MsgType::Ok;
      if (fh.type != want || fh.payload_len)
        return protocol(cat("reply is ", wire::type_name(fh.type), ", expected ", wire::type_name(want)));
      pending.erase(it);
      if (call->on_reply) {
        run_reply(*call, GENIE_OK, std::move(msg));
        return {};
      }
      call->settle(GENIE_OK, {}, fh.type, std::move(msg));
      return {};
    }
  }
}

// The canonical name of a device a server reported (parse_device; throws
// what it throws). A graph's outputs mostly live on the device its last
// graph used, so each thread keeps the last name it parsed.
static const std::string& canonical_device(const std::string& reported) {
  thread_local bool known = false;
  thread_local std::string last, canonical;
  if (!known || reported != last) {
    known = false;  // until both are set (either may throw)
    canonical = parse_device(reported.c_str()).str();
    last = reported;
    known = true;
  }
  return canonical;
}

RemoteResult RemoteClient::Impl::parse_done(const std::string& msg) {
  RemoteResult r;
  completion_bytes.fetch_add(wire::kHeaderSize + msg.size(), std::memory_order_relaxed);
  wire::ReusedMsg<wire::GraphDone> done(msg.size());
  wire::GraphDone& d = *done;
  if (!d.ParseFromString(msg)) {
    r.status = GENIE_ERR_PROTOCOL;
    r.detail = "undecodable GraphDone";
    return r;
  }
  r.status = d.status() == GENIE_OK ? GENIE_OK : peer_status(d.status());
  r.detail = d.detail();
  r.exec_ns = d.exec_ns();
  r.spans.reserve(static_cast<size_t>(d.spans_size()));
  for (wire::TraceSpan& w : *d.mutable_spans()) {
    RemoteSpan s;
    s.event.name = std::move(*w.mutable_name());
    s.event.cat = std::move(*w.mutable_cat());
    s.event.tid = w.track();
    for (wire::TraceArg& a : *w.mutable_args()) {
      if (a.value_case() == wire::TraceArg::kNumber)
        s.event.num_args.emplace_back(std::move(*a.mutable_key()), a.number());
      else
        s.event.args.emplace_back(std::move(*a.mutable_key()), std::move(*a.mutable_text()));
    }
    s.row = std::move(*w.mutable_track_name());
    s.start_ns = w.start_ns();
    s.dur_ns = w.dur_ns();
    r.spans.push_back(std::move(s));
  }
  r.spans_dropped = d.spans_dropped();
  for (auto& o : *d.mutable_outputs()) {
    RemoteOutput out;
    out.name = o.name();
    out.tensor_id = o.tensor_id();
    out.dtype = static_cast<DType>(o.dtype());
    out.shape.assign(o.shape().begin(), o.shape().end());
    if (!o.device().empty()) out.device = o.device();
    bool ok = dtype_valid(o.dtype()) && out.shape.size() <= GENIE_MAX_DIMS;
    try {
      if (ok) {
        const size_t bytes = byte_size(out.shape, dtype_size(out.dtype));
        // Bytes that are not the whole tensor are refused, not trusted.
        if (o.has_data()) ok = o.data().size() == bytes;
      }
      if (ok) out.device = canonical_device(out.device);
    } catch (const Error&) {
      ok = false;
    }
    if (ok && o.has_data()) {
      inline_output_bytes.fetch_add(o.data().size(), std::memory_order_relaxed);
      out.has_data = true;
      out.data = std::move(*o.mutable_data());
    }
    if (!ok && r.status == GENIE_OK) {
      r.status = GENIE_ERR_PROTOCOL;
      r.detail = cat("GraphDone output '", o.name(), "' has an invalid dtype, shape or device");
    }
    r.outputs.push_back(std::move(out));
  }
  if (r.status != GENIE_OK) {
    // Whatever a failed completion names is nobody's.
    for (const RemoteOutput& o : r.outputs) send_free(o.tensor_id);
    r.outputs.clear();
  }
  return r;
}

void RemoteClient::Impl::free_stray_outputs(const std::string& msg) {
  wire::GraphDone d;
  if (!d.ParseFromString(msg)) return;
  for (const auto& o : d.outputs()) send_free(o.tensor_id());
}

void RemoteClient::Impl::send_free(uint64_t id) {
  // A completion read off the direct link runs on the reading thread.
  if (!loop->on_loop_thread()) return queue_free(id);
  if (state != State::Ready && state != State::Reconnecting) return;
  {
    std::lock_guard<std::mutex> lk(mu);
    frees.push_back(id);
  }
  flush_frees();
}

void RemoteClient::Impl::queue_free(uint64_t id) noexcept {
  try {
    bool arm;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (state == State::Closed || state == State::Failed) return;
      frees.push_back(id);
      // Only the first free since the last flush wakes the loop; the next
      // request usually takes them all before the timer fires.
      arm = !free_flush_due;
      free_flush_due = true;
    }
    if (arm) loop->post([this] { arm_free_timer(); });
  } catch (...) {
    // Fire and forget: at worst the server frees it with the session.
  }
}

void RemoteClient::Impl::flush_frees() {
  if (state != State::Ready || !ctrl) return;
  std::vector<uint64_t> ids;
  {
    std::lock_guard<std::mutex> lk(mu);
    ids.swap(frees);
  }
  ctrl->cork();  // one write for them all
  for (uint64_t id : ids) {
    wire::TensorFree f;
    f.set_tensor_id(id);
    ctrl->send(MsgType::TensorFree, next_id.fetch_add(1), 0, wire::encode_msg(f));
  }
  ctrl->uncork();
}

void RemoteClient::Impl::arm_free_timer() {
  uv_timer_start(
      &free_timer,
      [](uv_timer_t* t) {
        auto* self = static_cast<Impl*>(t->data);
        {
          std::lock_guard<std::mutex> lk(self->mu);
          self->free_flush_due = false;
        }
        self->flush_frees();
      },
      kFreeFlushMs, 0);
}

}  // namespace genie
