// The client's link to its server: connecting both connections, the
// handshake and authentication, reconnecting after a loss, closing.
#include "control/auth.hpp"
#include "control/client/impl.hpp"
#include "dataplane/select.hpp"

namespace genie {

void RemoteClient::Impl::set_state(State s, genie_status_t st, std::string detail) {
  {
    std::lock_guard<std::mutex> lk(mu);
    state = s;
    if (s == State::Ready) ++link_epoch;
    if (s == State::Failed) {
      fail_status = st;
      fail_detail = std::move(detail);
    }
  }
  cv.notify_all();
}

void RemoteClient::Impl::refuse_on_loop_thread(const char* what) const {
  check(!loop->on_loop_thread(), GENIE_ERR_UNSUPPORTED, what,
        " cannot wait for the server on the context's loop thread (from a completion callback): "
        "call it from another thread");
}

void RemoteClient::Impl::wait_ready() {
  std::unique_lock<std::mutex> lk(mu);
  if (state != State::Ready)  // the common case reads no clock
    cv.wait_until(lk, Clock::now() + timeout,
                  [&] { return state != State::Reconnecting && state != State::Connecting; });
  switch (state) {
    case State::Ready: return;
    case State::Closed: fail(GENIE_ERR_SHUTDOWN, "the connection to ", addr, " has been closed (shut down)");
    case State::Failed: fail(GENIE_ERR_CONNECTION, fail_detail);
    default:
      fail(GENIE_ERR_CONNECTION, "not connected to ", addr, ": reconnecting did not succeed within ",
           timeout.count(), " ms");
  }
}

Connection::Handlers RemoteClient::Impl::handlers(uint64_t g, Link link) {
  Connection::Handlers h;
  h.on_frame = [this, g, link](const wire::FrameHeader& fh, std::string&& msg) -> PayloadSink {
    if (g != gen) return {};
    try {
      return on_frame(link, fh, std::move(msg));
    } catch (const Error& e) {
      frame_failed(e.code(), e.detail());
    } catch (const std::exception& e) {
      frame_failed(GENIE_ERR_INTERNAL, e.what());
    }
    return {};
  };
  h.on_close = [this, g, link](genie_status_t st, const std::string& detail) {
    if (g != gen) return;
    on_link_closed(link, st, detail);
  };
  return h;
}

void RemoteClient::Impl::frame_failed(genie_status_t st, const std::string& detail) {
  log(LogLevel::Warn, "client: ", addr, ": ", detail);
  if (hs != Handshake::Done)
    attempt_failed(st, cat("handshake with ", addr, " failed: ", detail));
  else
    connection_lost(cat("protocol error: ", detail));
}

void RemoteClient::Impl::init_timers() {
  uv_timer_init(loop->loop(), &retry_timer);
  uv_timer_init(loop->loop(), &deadline_timer);
  uv_timer_init(loop->loop(), &free_timer);
  uv_timer_init(loop->loop(), &live_timer);
  retry_timer.data = this;
  deadline_timer.data = this;
  free_timer.data = this;
  live_timer.data = this;
  const uint64_t every = std::max<uint64_t>(10, static_cast<uint64_t>(timeout.count()) / 8);
  uv_timer_start(
      &live_timer, [](uv_timer_t* t) { static_cast<Impl*>(t->data)->check_liveness(); }, every, every);
  uv_unref(reinterpret_cast<uv_handle_t*>(&live_timer));
}

bool RemoteClient::Impl::requests_waiting() const {
  // Completions the direct link owes: silence there is the server's too.
  if (direct.owed_count.load(std::memory_order_relaxed) > 0) return true;
  for (const auto& [id, call] : pending)
    if (id != ping_id) return true;
  return false;
}

void RemoteClient::Impl::check_liveness() {
  if (state != State::Ready || hs != Handshake::Done || !requests_waiting()) return;
  const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last_heard);
  // A quarter past the timeout: a synchronous call reports its own TIMEOUT
  // first; what has no deadline of its own (a graph's completion) fails
  // here.
  if (silent >= timeout + timeout / 4) {
    connection_lost(cat("the server sent nothing for ", silent.count(), " ms while requests waited (stopped, ",
                        "hung or cut off; the timeout is ", timeout.count(), " ms)"));
    return;
  }
  if (silent < timeout / 2 || ping_id != 0) return;
  // A request the server answers from its event loop whatever it is
  // running: a long graph keeps the session alive, a stopped server does not.
  auto call = std::make_shared<Call>(MsgType::ServerInfoRequest, Link::Control);
  const uint64_t id = next_id.fetch_add(1);
  call->on_reply = [this, id](genie_status_t, std::string&&) {
    if (ping_id == id) ping_id = 0;
  };
  ping_id = id;
  start(call, id, wire::encode_msg(wire::ServerInfoRequest()), nullptr, 0);
}

void RemoteClient::Impl::arm_deadline() {
  uv_timer_start(
      &deadline_timer,
      [](uv_timer_t* t) {
        auto* self = static_cast<Impl*>(t->data);
        if (self->state == State::Connecting)
          self->give_up(GENIE_ERR_TIMEOUT,
                        cat("no answer from ", self->addr, " within ", self->timeout.count(), " ms"));
        else if (self->state == State::Reconnecting)
          self->give_up(GENIE_ERR_CONNECTION,
                        cat("connection to ", self->addr, " lost and not re-established within ",
                            self->reconnect_window.count(), " ms"));
      },
      static_cast<uint64_t>((state == State::Reconnecting ? reconnect_window : timeout).count()), 0);
}

void RemoteClient::Impl::teardown() {
  ++gen;
  hs = Handshake::Idle;
  auto c = std::move(ctrl), d = std::move(data);
  if (d) d->close(GENIE_OK, "client teardown");
  if (c) c->close(GENIE_OK, "client teardown");
}

void RemoteClient::Impl::begin_attempt() {
  const uint64_t g = ++gen;
  hs = Handshake::Hello;
  dataplane::ChannelOptions o;
  o.max_message = max_message;
  o.nodelay = true;  // requests and replies are small: never wait for Nagle
  o.tls = tls;
  try {
    ctrl = Connection::connect(*dataplane::find_transport("tcp"), loop->loop(), addr, o, handlers(g, Link::Control),
                               [this, g](genie_status_t st, const std::string& detail) {
                                 if (g != gen) return;
                                 if (st != GENIE_OK)
                                   return attempt_failed(GENIE_ERR_CONNECTION, detail);  // names the address
                                 wire::Hello h;
                                 h.set_protocol_version(wire::kProtocolVersion);
                                 h.set_abi_version(GENIE_ABI_VERSION);
                                 h.set_node_id(node_id);
                                 h.set_role(static_cast<int32_t>(cfg.role));
                                 if (resuming) h.set_resume_session(session_id);
                                 ctrl->send(MsgType::Hello, next_id.fetch_add(1), 0, wire::encode_msg(h));
                               });
  } catch (const Error& e) {
    attempt_failed(e.code(), e.detail(), false);
  }
}

RemoteClient::Impl::DataEndpoint RemoteClient::Impl::choose_data_endpoint(const wire::Welcome& w) const {
  std::vector<DataTransport> offered;
  for (const wire::DataEndpoint& e : w.data_endpoints()) offered.push_back({e.transport(), e.address()});
  DataTransport t = choose_data_transport(cfg.transport, cfg.selected_transport, tls != nullptr, offered, addr);
  return {std::move(t.transport), std::move(t.address)};
}

void RemoteClient::Impl::open_data_link() {
  const uint64_t g = gen;
  hs = Handshake::DataHello;
  dataplane::ChannelOptions o;
  o.max_message = max_message;
  // Before the SYN, so that the window scale can use the whole buffer.
  o.buffer_bytes = kDataSocketBuffer;
  // Requests on the data link are small frames too (a TensorRead, the tail
  // of a write): one sent while another is unacknowledged must not wait for
  // the server's delayed ACK, as it would with several reads in flight.
  o.nodelay = true;
  if (data_endpoint.transport == "tcp") o.tls = tls;
  try {
    data = Connection::connect(*dataplane::find_transport(data_endpoint.transport), loop->loop(),
                               data_endpoint.address, o, handlers(g, Link::Data),
                               [this, g](genie_status_t st, const std::string& detail) {
                                 if (g != gen) return;
                                 if (st != GENIE_OK)
                                   return attempt_failed(GENIE_ERR_CONNECTION, cat("data connection: ", detail));
                                 data_rma_emulated = data->channel()->rma_emulated();
                                 wire::DataHello h;
                                 h.set_session_id(session_id);
                                 data->send(MsgType::DataHello, next_id.fetch_add(1), 0, wire::encode_msg(h));
                               });
  } catch (const Error& e) {
    attempt_failed(e.code(), cat("data connection over ", data_endpoint.transport, ": ", e.detail()), false);
  }
}

void RemoteClient::Impl::attempt_failed(genie_status_t st, const std::string& detail, bool retryable) {
  teardown();
  if (state == State::Connecting) return give_up(st, detail);
  if (state != State::Reconnecting) return;
  retryable =
      retryable && (st == GENIE_ERR_CONNECTION || st == GENIE_ERR_TIMEOUT || st == GENIE_ERR_PROTOCOL);
  retry_ms = retry_ms == 0 ? kFirstRetryMs : std::min(retry_ms * 2, kMaxRetryMs);
  if (!retryable || Clock::now() + std::chrono::milliseconds(retry_ms) >= reconnect_deadline)
    return give_up(GENIE_ERR_CONNECTION,
                   cat("connection to ", addr, " lost and not re-established: ", detail));
  log(LogLevel::Debug, "client: reconnect to ", addr, " failed (", detail, "); retrying in ", retry_ms,
      " ms");
  uv_timer_start(
      &retry_timer,
      [](uv_timer_t* t) {
        auto* self = static_cast<Impl*>(t->data);
        if (self->state == State::Reconnecting) self->begin_attempt();
      },
      static_cast<uint64_t>(retry_ms), 0);
}

void RemoteClient::Impl::give_up(genie_status_t st, const std::string& detail) {
  teardown();
  uv_timer_stop(&retry_timer);
  uv_timer_stop(&deadline_timer);
  {
    std::lock_guard<std::mutex> lk(mu);
    frees.clear();
  }
  fail_all(GENIE_ERR_CONNECTION, detail);
  if (state == State::Reconnecting) log(LogLevel::Warn, "client: ", detail);
  set_state(State::Failed, st, detail);
}

void RemoteClient::Impl::connection_lost(const std::string& why) {
  if (state != State::Ready) return;
  teardown();
  const std::string detail = cat("connection to ", addr, " lost: ", why);
  log(LogLevel::Warn, "client: ", detail, "; reconnecting");
  set_state(State::Reconnecting);
  fail_all(GENIE_ERR_CONNECTION, detail);
  direct_lost(why);
  resuming = true;
  retry_ms = 0;
  reconnect_deadline = Clock::now() + reconnect_window;
  arm_deadline();
  begin_attempt();
}

void RemoteClient::Impl::on_link_closed(Link link, genie_status_t st, const std::string& detail) {
  const char* which = link == Link::Control ? "control connection" : "data connection";
  if (hs != Handshake::Done) {
    attempt_failed(st == GENIE_ERR_VERSION_MISMATCH ? st : GENIE_ERR_CONNECTION,
                   cat(which, " closed during the handshake: ", detail));
    return;
  }
  connection_lost(cat(which, ": ", detail));
}

void RemoteClient::Impl::handshake_frame(Link link, const wire::FrameHeader& fh, const std::string& msg) {
  if (fh.payload_len != 0)
    return attempt_failed(GENIE_ERR_PROTOCOL,
                          cat("unexpected payload on ", wire::type_name(fh.type), " during the handshake"));
  if (is_error(fh)) {
    auto [st, detail] = parse_error(msg);
    if (resuming && (st == GENIE_ERR_NOT_FOUND || st == GENIE_ERR_AUTH))
      return attempt_failed(st, cat("server ", addr, " did not resume the session: ", detail), false);
    return attempt_failed(st, cat("server ", addr, " refused the connection: ", detail), false);
  }
  if (link == Link::Control && hs == Handshake::Hello) {
    if (fh.type == MsgType::Challenge) {
      const auto c = wire::parse_msg<wire::Challenge>(msg, fh.type);
      if (c.token() && cfg.auth_token.empty())
        return attempt_failed(GENIE_ERR_AUTH,
                              cat("server ", addr,
                                  " requires authentication: set the shared token "
                                  "(genie_config_set_auth_token or GENIE_AUTH_TOKEN)"),
                              false);
      wire::AuthResponse r;
      // Bound to this TLS connection: an answer relayed onto another one fails.
      const std::string binding = ctrl->channel_binding();
      if (c.token()) r.set_mac(token_proof(cfg.auth_token, c.nonce(), node_id, binding));
      if (resuming) r.set_session_mac(resume_proof(token, c.nonce(), session_id, node_id, binding));
      ctrl->send(MsgType::AuthResponse, next_id.fetch_add(1), 0, wire::encode_msg(r));
      return;
    }
    if (fh.type == MsgType::Welcome) {
      const auto w = wire::parse_msg<wire::Welcome>(msg, fh.type);
      if (w.protocol_version() != wire::kProtocolVersion)
        return attempt_failed(GENIE_ERR_VERSION_MISMATCH,
                              cat("server ", addr, " speaks protocol version ", w.protocol_version(),
                                  ", this client ", wire::kProtocolVersion),
                              false);
      if (resuming && (!w.resumed() || w.session_id() != session_id || w.session_token() != token)) {
        // The server no longer has our session: its tensor ids would name
        // nothing (or another session's tensors). End the new session.
        auto c = ctrl;
        c->send(MsgType::Goodbye, next_id.fetch_add(1), 0, wire::encode_msg(wire::Goodbye()), nullptr, 0,
                nullptr, [c](genie_status_t) { c->close(GENIE_OK, "session not resumed"); });
        ctrl = nullptr;
        return attempt_failed(GENIE_ERR_CONNECTION,
                              cat("server ", addr,
                                  " no longer holds this session (its grace period "
                                  "ended): its tensors are gone; create a new context"),
                              false);
      }
      DataEndpoint chosen = choose_data_endpoint(w);
      {
        std::lock_guard<std::mutex> lk(mu);
        data_endpoint = std::move(chosen);
        data_submit = w.data_submit();
        submit_frees = w.submit_frees();
        trace_spans = w.trace_spans();
        inline_tensors = w.inline_tensors();
      }
      if (!resuming) {
        token = w.session_token();
        session_id = w.session_id();
        server_node = w.server_node_id();
        server_instance = w.server_instance();
        devices.assign(w.devices().begin(), w.devices().end());
      }
      return open_data_link();
    }
  } else if (link == Link::Data && hs == Handshake::DataHello && fh.type == MsgType::Challenge) {
    // Joining the session: the proof of its secret, bound to this nonce and
    // transport (the secret itself is never sent).
    const auto c = wire::parse_msg<wire::Challenge>(msg, fh.type);
    wire::AuthResponse r;
    r.set_session_mac(data_proof(token, c.nonce(), session_id, data_endpoint.transport, data->channel_binding()));
    data->send(MsgType::AuthResponse, next_id.fetch_add(1), 0, wire::encode_msg(r));
    return;
  } else if (link == Link::Data && hs == Handshake::DataHello && fh.type == MsgType::Welcome) {
    hs = Handshake::Done;
    uv_timer_stop(&deadline_timer);
    uv_timer_stop(&retry_timer);
    if (resuming) log(LogLevel::Info, "client: session with ", addr, " resumed");
    set_state(State::Ready);
    flush_frees();  // those freed while reconnecting
    send_parked();
    return;
  }
  attempt_failed(GENIE_ERR_PROTOCOL, cat("unexpected ", wire::type_name(fh.type), " during the handshake"));
}

void RemoteClient::Impl::close() {
  if (!loop) return;  // connect() failed before the loop existed
  std::call_once(close_once, [this] {
    direct.shutdown();  // a call blocked on the direct link ends now
    if (loop->on_loop_thread()) {
      // The last reference went away inside a completion handler: the loop
      // cannot join itself, so another thread finishes the job.
      loop->post([this] { begin_close(); });
      std::thread([self = shared_from_this()] {
        self->loop->stop([s = self.get()] { s->final_teardown(); });
        self->direct_close();
      }).detach();
      return;
    }
    if (loop->post([this] { begin_close(); })) {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait_for(lk, std::min(timeout, std::chrono::milliseconds(kMaxGoodbyeWaitMs)),
                  [&] { return goodbye_done; });
    }
    loop->stop([this] { final_teardown(); });
    direct_close();  // its call, if any, has ended (shut down above)
    // Calls whose tasks the stopping loop dropped: nothing touches their
    // buffers any more.
    std::unordered_set<std::shared_ptr<Call>> left;
    {
      std::lock_guard<std::mutex> lk(mu);
      left = outstanding;
    }
    for (const auto& c : left) {
      c->settle(GENIE_ERR_SHUTDOWN, cat("the connection to ", addr, " has been closed (shut down)"));
      c->release();
    }
  });
}

void RemoteClient::Impl::begin_close() {
  const bool was_ready = state == State::Ready;
  uv_timer_stop(&retry_timer);
  uv_timer_stop(&deadline_timer);
  {
    std::lock_guard<std::mutex> lk(mu);
    state = State::Closed;
  }
  cv.notify_all();
  // Data first: that releases the buffers of reads and writes in flight.
  if (auto d = std::move(data)) d->close(GENIE_OK, "client closed");
  fail_all(GENIE_ERR_SHUTDOWN, "the context was shut down");
  auto c = std::move(ctrl);
  ++gen;
  const auto finished = [this] {
    {
      std::lock_guard<std::mutex> lk(mu);
      goodbye_done = true;
    }
    cv.notify_all();
  };
  if (was_ready && c && !c->closed()) {
    // The server frees the session (and its tensors) at once on Goodbye.
    c->send(MsgType::Goodbye, next_id.fetch_add(1), 0, wire::encode_msg(wire::Goodbye()), nullptr, 0, nullptr,
            [c, finished](genie_status_t) {
              c->close(GENIE_OK, "goodbye");
              finished();
            });
  } else {
    if (c) c->close(GENIE_OK, "client closed");
    finished();
  }
}

void RemoteClient::Impl::final_teardown() {
  {
    std::lock_guard<std::mutex> lk(mu);
    state = State::Closed;
  }
  cv.notify_all();
  teardown();
  fail_all(GENIE_ERR_SHUTDOWN, "the context was shut down");
}

}  // namespace genie
