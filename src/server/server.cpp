// Server setup, accepting connections, stopping, and the public Server.
#include <arpa/inet.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "control/auth.hpp"
#include "control/tls.hpp"
#include "core/host.hpp"
#include "core/node_id.hpp"
#include "server/impl.hpp"
#include "server/master.hpp"

namespace genie {

namespace {

// At stop, how long replies still queued to a client that does not read may
// delay the end of the server.
constexpr uint64_t kStopFlushMs = 5000;

// A token an attacker could guess is refused at start: at least 16 bytes
// (check_auth_token) and about 64 bits by the statistics of its bytes and of
// the steps between them ("aaaa...", "abcd...", "0123..." score nothing).
// A heuristic: it catches the careless, and random tokens pass it.
void check_token_entropy(const std::string& token) {
  if (token.empty()) return;
  const auto bits = [](const std::vector<uint8_t>& v) {
    if (v.empty()) return 0.0;
    size_t count[256] = {};
    for (uint8_t b : v) ++count[b];
    double h = 0;
    for (size_t c : count)
      if (c)
        h -= static_cast<double>(c) / static_cast<double>(v.size()) *
             std::log2(static_cast<double>(c) / static_cast<double>(v.size()));
    return h;
  };
  std::vector<uint8_t> bytes(token.begin(), token.end()), steps;
  for (size_t i = 1; i < bytes.size(); ++i) steps.push_back(static_cast<uint8_t>(bytes[i] - bytes[i - 1]));
  const double estimate = std::min(bits(bytes), bits(steps)) * static_cast<double>(bytes.size());
  check(estimate >= 64, GENIE_ERR_INVALID_ARGUMENT, "the auth token looks guessable (about ",
        static_cast<int>(estimate),
        " bits of entropy by its characters, 64 needed): make one with "
        "`openssl rand -hex 32` (or `head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'`)");
}

// The kind of refusal, for the one log line (genie_status_str belongs to the
// C API layer above this one).
const char* refusal_kind(genie_status_t s) {
  switch (s) {
    case GENIE_ERR_PROTOCOL: return "protocol error";
    case GENIE_ERR_VERSION_MISMATCH: return "version mismatch";
    case GENIE_ERR_AUTH: return "authentication failed";
    case GENIE_ERR_TIMEOUT: return "handshake timeout";
    case GENIE_ERR_NOT_FOUND: return "not found";
    case GENIE_ERR_SIZE_MISMATCH: return "size mismatch";
    case GENIE_ERR_OUT_OF_MEMORY: return "out of memory";
    default: return "error";
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Setup and accepting
// ---------------------------------------------------------------------------

Server::Impl::Impl(ServerOptions o)
    : opts(std::move(o)),
      node_id(opts.node_id.empty() ? generate_node_id("serve") : opts.node_id),
      instance(random_bytes(16)),
      gate(opts.memory_budget, opts.quota, counters.tensor_bytes, cat("server ", node_id)),
      exec(opts.num_threads) {
  find_devices();
  {
    const Config c = client_config();
    if (opts.multinode)
      workers = std::make_unique<MultiNode>(node_id, c, exec, opts.cluster, instance, opts.stage_timeout_ms,
                                            static_cast<size_t>(std::max<int64_t>(opts.session_max_stages, 1)));
  }
  check(opts.port >= 0 && opts.port <= 65535, GENIE_ERR_INVALID_ARGUMENT, "port ", opts.port,
        " is outside 0..65535");
  check(opts.max_message_bytes >= 4096, GENIE_ERR_INVALID_ARGUMENT, "max message ", opts.max_message_bytes,
        " bytes is below 4096");
  check(opts.handshake_timeout_ms > 0, GENIE_ERR_INVALID_ARGUMENT, "handshake timeout ",
        opts.handshake_timeout_ms, " ms must be positive");
  check(opts.session_grace_ms >= 0, GENIE_ERR_INVALID_ARGUMENT, "session grace ", opts.session_grace_ms,
        " ms must not be negative");
  check(opts.session_idle_ms >= 0, GENIE_ERR_INVALID_ARGUMENT, "session idle timeout ", opts.session_idle_ms,
        " ms must not be negative");
  check(opts.max_connections >= 0 && opts.max_connections_per_source >= 0 && opts.max_sessions >= 0,
        GENIE_ERR_INVALID_ARGUMENT, "connection and session limits must not be negative");
  check(opts.handshake_max_message >= 4096, GENIE_ERR_INVALID_ARGUMENT, "handshake message limit ",
        opts.handshake_max_message, " bytes is below 4096");
  opts.handshake_max_message = std::min(opts.handshake_max_message, opts.max_message_bytes);
  if (opts.max_incomplete_bytes == 0)
    opts.max_incomplete_bytes = std::max<uint64_t>(uint64_t{256} << 20, opts.max_message_bytes);
  message_budget = std::make_shared<dataplane::MessageBudget>(opts.max_incomplete_bytes);
  graphs.set_limits(
      opts.max_graph_bytes, opts.max_graph_nodes,
      "genie serve --max-graph-bytes, --max-graph-nodes; GENIE_MAX_GRAPH_BYTES, GENIE_MAX_GRAPH_NODES");
  if (opts.max_queued_reply_bytes_total == 0)
    opts.max_queued_reply_bytes_total = std::max<uint64_t>(uint64_t{256} << 20, opts.max_queued_reply_bytes);
  // Connections past the file-descriptor limit would fail in accept() with
  // no answer to the peer: the limit leaves room for the server's own files.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY && files.rlim_cur > 32) {
    const auto room = static_cast<int>(std::min<rlim_t>(files.rlim_cur - files.rlim_cur / 4, 1 << 30));
    if (opts.max_connections == 0 || opts.max_connections > room) {
      log(LogLevel::Info, "server: at most ", room, " connections (", files.rlim_cur,
          " open files allowed: ulimit -n)");
      opts.max_connections = room;
    }
  }
  admission = Admission(opts.max_connections, opts.max_connections_per_source);
  check(opts.max_handshakes >= 0, GENIE_ERR_INVALID_ARGUMENT, "max handshakes must not be negative");
  if (opts.max_handshakes == 0)
    opts.max_handshakes = opts.max_connections > 0 ? std::clamp(opts.max_connections / 4, 1, 256) : 256;
  if (opts.host.empty()) opts.host = "127.0.0.1";
  check_auth_token(opts.auth_token, "auth token");
  check_token_entropy(opts.auth_token);
  tls = server_tls(opts.tls_cert, opts.tls_key, opts.tls_ca);
  check_exposure();
  std::promise<void> bound;
  std::future<void> result = bound.get_future();
  loop.post([this, &bound] { listen(bound); });
  result.get();  // rethrows the bind error; ~LoopThread then stops the loop
  if (opts.cluster) loop.post([this] { opts.cluster->start(loop); });
  log(LogLevel::Info, "server ", node_id, ": listening on ", opts.host, ":", bound_port,
      opts.auth_token.empty() && !(tls && tls->requires_client_cert()) ? " (no authentication)"
                                                                       : " (authentication required)",
      tls ? (tls->requires_client_cert() ? " over TLS 1.3 with client certificates" : " over TLS 1.3") : "",
      "; memory budget ", gate.budget(), " bytes, per session ", gate.quota().max_bytes, " bytes, ",
      gate.quota().max_tensors, " tensors, ", gate.quota().max_graphs, " graphs in flight");
  if (!opts.join_host.empty()) join_master();
}

Server::Impl::~Impl() = default;

// Authenticated: a token, or client certificates (TLS with a CA). Beyond
// loopback, a server without either is refused unless allowed explicitly,
// and one that authenticates but does not encrypt (or the other way round)
// says so loudly (docs/security.md, "What is authenticated").
void Server::Impl::check_exposure() const {
  if (is_loopback(opts.host)) return;
  const bool mtls = tls && tls->requires_client_cert();
  const bool authenticated = !opts.auth_token.empty() || mtls;
  if (!authenticated) {
    check(opts.allow_insecure, GENIE_ERR_INVALID_ARGUMENT, "refusing to listen on ", opts.host,
          " without authentication: anyone who reaches it could run graphs and read every tensor",
          tls ? " (TLS without a client CA encrypts but admits anyone)" : "",
          ". Set an auth token (genie serve --auth-token-file, GENIE_AUTH_TOKEN) or require client "
          "certificates (--tls-ca), listen on 127.0.0.1, or allow it explicitly on a trusted network "
          "(genie serve --insecure, GENIE_ALLOW_INSECURE=1)");
    log(LogLevel::Warn, "server: INSECURE: listening on ", opts.host,
        " without authentication (allowed explicitly): anyone who reaches this port can use the server",
        tls ? "" : ", and everything crosses the network in the clear");
    return;
  }
  if (!tls)
    log(LogLevel::Warn, "server: WARNING: listening on ", opts.host,
        " with an auth token but without TLS: the token itself never crosses the network, but tensors, "
        "graphs and session secrets do, in the clear, readable and alterable by anyone on the path. Give "
        "the server a certificate (genie serve --tls-cert, --tls-key)");
}

Config Server::Impl::client_config() const {
  Config c;
  c.auth_token = opts.auth_token;
  c.timeout_ms = opts.client_timeout_ms;
  c.transport = opts.link_transport;
  // TLS out needs a CA to check the peer with; the server's certificate
  // is its client certificate.
  if (!opts.tls_ca.empty()) {
    c.tls_ca = opts.tls_ca;
    c.tls_cert = opts.tls_cert;
    c.tls_key = opts.tls_key;
  }
  return c;
}

void Server::Impl::listen(std::promise<void>& bound) {
  try {
    // Control and TCP data connections share the server's port; every other
    // data transport listens on a port of its own.
    dataplane::ChannelOptions co;
    co.max_message = opts.max_message_bytes;
    co.nodelay = true;  // requests and replies are small: never wait for Nagle
    co.tls = tls;
    co.budget = message_budget;
    auto tcp = dataplane::find_transport("tcp");
    auto l = tcp->listen(loop.loop(), cat(opts.host, ":", opts.port), co,
                         [this](dataplane::Listener& l) { on_accept(l, "tcp"); });
    listeners.push_back({"tcp", "", l});
    std::string bound_host;
    dataplane::split_address(l->address(), &bound_host, &bound_port);
    for (const std::string& name : opts.data_transports) {
      if (name == "tcp" || std::any_of(listeners.begin(), listeners.end(),
                                       [&](const Listening& x) { return x.transport == name; }))
        continue;
      if (tls) {
        log(LogLevel::Warn, "server ", node_id, ": not offering data transport '", name,
            "': it does not encrypt, and this server speaks only TLS");
        continue;
      }
      // A transport that cannot be had leaves the server on TCP, which
      // clients fall back to unless they demand the other one.
      dataplane::TransportLookup t = dataplane::lookup_transport(name);
      if (!t.transport) {
        log(LogLevel::Warn, "server ", node_id, ": not offering data transport '", name, "': ", t.reason);
        continue;
      }
      try {
        auto dl = t.transport->listen(loop.loop(), cat(opts.host, ":0"), co,
                                      [this, name](dataplane::Listener& l) { on_accept(l, name); });
        listeners.push_back({name, dl->address(), dl});
      } catch (const Error& e) {
        log(LogLevel::Warn, "server ", node_id, ": not offering data transport '", name, "': ", e.detail());
      }
    }
    {
      std::lock_guard<std::mutex> lk(data_mu);
      for (const Listening& x : listeners) data_transports_offered.push_back(x.transport);
    }
    // Idle sessions are looked for a few times per idle period (at least
    // every 10 s, to flush the refusal log's summary).
    const uint64_t every =
        opts.session_idle_ms > 0 ? std::clamp<uint64_t>(opts.session_idle_ms / 4, 50, 10000) : 10000;
    housekeeping_timer = std::make_unique<Timer>(loop.loop());
    housekeeping_timer->start(
        every, [this] { housekeeping(); }, every);
    // Closed before the loop's teardown walk, also when the constructor
    // fails after this point (joining a master) and wait() never runs.
    loop.add_close_hook([this] { housekeeping_timer.reset(); });
    bound.set_value();
  } catch (...) {
    for (auto& x : listeners) x.listener->close();
    listeners.clear();
    bound.set_exception(std::current_exception());
  }
}

void Server::Impl::on_accept(dataplane::Listener& listener, const std::string& transport) {
  auto p = std::make_shared<Peer>();
  std::weak_ptr<Peer> wp = p;
  Connection::Handlers handlers;
  handlers.on_frame = [this, wp](const wire::FrameHeader& h, std::string&& msg) -> PayloadSink {
    auto peer = wp.lock();
    if (!peer) return {};
    return on_frame(peer, h, std::move(msg));
  };
  handlers.on_close = [this, wp](genie_status_t status, const std::string& detail) {
    if (auto peer = wp.lock()) on_close(peer, status, detail);
  };
  p->conn = Connection::accept(listener, transport, std::move(handlers));
  p->name = p->conn->peer();
  p->source = source_of(p->name);
  peers.emplace(p.get(), p);
  if (p->conn->closed()) return;  // the accept failed: on_close reports it and forgets the peer
  if (stopping) {
    p->conn->close(GENIE_ERR_SHUTDOWN, "the server is stopping");
    return;
  }
  // Until it has authenticated, a peer may send small messages only.
  p->conn->set_max_message(opts.handshake_max_message);
  genie_status_t why = GENIE_OK;
  const std::string refusal = admission.admit(p->source, &why);
  if (!refusal.empty()) {
    refuse(*p, 0, why, refusal);
    return;
  }
  p->admitted = true;
  p->handshaking = true;
  p->serial = next_peer_serial++;
  if (++handshaking > static_cast<size_t>(opts.max_handshakes)) make_handshake_room(*p);
  p->handshake_timer = std::make_unique<Timer>(loop.loop());
  const auto timeout = static_cast<uint64_t>(opts.handshake_timeout_ms);
  p->handshake_timer->start(timeout, [wp, timeout] {
    auto peer = wp.lock();
    if (peer && !peer->closing &&
        (peer->state == Peer::State::Fresh || peer->state == Peer::State::AwaitAuth))
      peer->conn->close(GENIE_ERR_TIMEOUT, cat("no complete handshake within ", timeout, " ms"));
  });
  log(LogLevel::Debug, "server: ", transport, " connection from ", p->name);
}

void Server::Impl::on_close(const std::shared_ptr<Peer>& p, genie_status_t status, const std::string& what) {
  std::string detail = what;
  if (p->closing) {
    // Why this side decided to close tells more than how the close went
    // (the client may well hang up first once it has read the ErrorReply).
    status = p->close_status;
    detail = p->close_detail;
  }
  const bool refused =
      status != GENIE_OK && status != GENIE_ERR_SHUTDOWN && (status != GENIE_ERR_CONNECTION || !p->admitted);
  if (p->admitted) admission.release(p->source, !p->vouched);
  p->admitted = false;
  end_handshake(*p);
  if (refused) {
    counters.connections_refused.fetch_add(1, std::memory_order_relaxed);
    if (status == GENIE_ERR_AUTH) metrics::add(metrics::Id::AuthFailures);
    refusal_log.write(LogLevel::Warn, cat("server: closed connection from ", p->name.empty() ? "?" : p->name,
                                          ": ", refusal_kind(status), ": ", detail));
  } else {
    log(LogLevel::Debug, "server: connection from ", p->name, " closed: ", detail);
  }
  p->handshake_timer.reset();
  drop_waiting_reads(*p);
  if (auto s = p->session) {
    if (p->state == Peer::State::Control && s->control == p.get()) {
      s->control = nullptr;
      control_lost(s);
    } else if (p->state == Peer::State::Data) {
      std::erase(s->data, p.get());
    }
    p->session.reset();
  }
  peers.erase(p.get());
  maybe_finish_stop();
}

void Server::Impl::end_handshake(Peer& p) {
  if (!p.handshaking) return;
  p.handshaking = false;
  --handshaking;
}

void Server::Impl::make_handshake_room(const Peer& arriving) {
  // The source with the most connections in their handshake gives up its
  // oldest: many addresses holding slots idle lose them first, and one
  // client's single handshake survives any number of others.
  std::unordered_map<std::string, size_t> per_source;
  for (const auto& [raw, q] : peers)
    if (q->handshaking && q.get() != &arriving) ++per_source[q->source];
  Peer* victim = nullptr;
  size_t most = 0;
  for (const auto& [raw, q] : peers) {
    if (!q->handshaking || q.get() == &arriving) continue;
    const size_t n = per_source[q->source];
    if (n > most || (n == most && victim && q->serial < victim->serial)) {
      most = n;
      victim = q.get();
    }
  }
  if (!victim) return;
  end_handshake(*victim);
  // Its slot is free now, not once its close has run.
  if (victim->admitted) admission.release(victim->source, !victim->vouched);
  victim->admitted = false;
  victim->conn->close(GENIE_ERR_CONNECTION,
                      cat("closed in its handshake to make room: ", opts.max_handshakes,
                          " connections were in their handshakes, the limit for all addresses together "
                          "(its address had the most)"));
}

void Server::Impl::authenticated(Peer& p) {
  end_handshake(p);
  p.conn->set_max_message(opts.max_message_bytes);
  if (p.session) p.session->last_active_ms = uv_now(loop.loop());
  admission.auth_succeeded(p.source);
}

void Server::Impl::auth_failed(Peer& p) {
  const int64_t ms = admission.auth_failed(p.source);
  if (ms > 0)
    refusal_log.write(LogLevel::Warn, cat("server: repeated failed authentications from ", p.source,
                                          ": refusing its connections for ", ms, " ms"));
}

void Server::Impl::housekeeping() {
  refusal_log.flush();
  for (auto& [token, s] : sessions) s->settle();
  if (opts.session_idle_ms <= 0) return;
  const uint64_t now = uv_now(loop.loop());
  const auto idle = static_cast<uint64_t>(opts.session_idle_ms);
  std::vector<std::shared_ptr<Session>> expired;
  // A peer server's session (a master's on its worker, a server's for
  // direct transfers) carries no heartbeats and may hold placed weights for
  // hours between uses: it ends with its connection (and grace) only.
  for (auto& [token, s] : sessions)
    if (s->client_role != GENIE_NODE_ROLE_SERVER && now - s->last_active_ms >= idle) expired.push_back(s);
  for (auto& s : expired) end_session(s, cat("idle for ", now - s->last_active_ms, " ms").c_str());
}

// ---------------------------------------------------------------------------
// Stopping
// ---------------------------------------------------------------------------

void Server::Impl::begin_stop() {
  if (stopping) return;
  stopping = true;
  log(LogLevel::Info, "server ", node_id, ": stopping (", graphs_in_flight, " graphs in flight)");
  // Graphs waiting for workers give up now: stopping takes a bounded time
  // whatever the workers (or a client posing as one) do.
  if (workers) workers->cancel();
  for (auto& x : listeners) x.listener->close();
  listeners.clear();
  std::vector<std::shared_ptr<Peer>> all;
  for (auto& [raw, p] : peers) all.push_back(p);
  for (auto& p : all)
    if (p->state == Peer::State::Fresh || p->state == Peer::State::AwaitAuth)
      p->conn->close(GENIE_ERR_SHUTDOWN, "the server is stopping");
  maybe_finish_stop();
}

void Server::Impl::maybe_finish_stop() {
  if (!stopping || graphs_in_flight > 0) return;
  if (!closing_all) {
    closing_all = true;
    std::vector<std::shared_ptr<Session>> all_sessions;
    for (auto& [token, s] : sessions) all_sessions.push_back(s);
    for (auto& s : all_sessions) end_session(s, "server stopping");
    std::vector<std::shared_ptr<Peer>> all;
    for (auto& [raw, p] : peers) all.push_back(p);
    for (auto& p : all) close_when_flushed(*p, GENIE_OK, "the server is stopping");
    stop_timer = std::make_unique<Timer>(loop.loop());
    stop_timer->start(kStopFlushMs, [this] { force_close_all(); });
  }
  if (!peers.empty()) return;
  stop_timer.reset();
  {
    std::lock_guard<std::mutex> lk(done_mu);
    drained = true;
  }
  done_cv.notify_all();
}

void Server::Impl::force_close_all() {
  std::vector<std::shared_ptr<Peer>> all;
  for (auto& [raw, p] : peers) all.push_back(p);
  for (auto& p : all)
    p->conn->close(GENIE_ERR_SHUTDOWN, "the server stopped before this client read its replies");
}

// ---------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------

Server::Server(ServerOptions opts) : impl_(std::make_unique<Impl>(std::move(opts))) {}

Server::~Server() {
  stop();
  wait();
}

int Server::port() const { return impl_->bound_port; }
const std::string& Server::node_id() const { return impl_->node_id; }

void Server::stop() {
  if (impl_->stop_requested.exchange(true)) return;
  Impl* impl = impl_.get();
  // A worker leaves its master first (Goodbye), so the master drops it
  // before this server closes the master's session here.
  if (impl->master_link) impl->master_link->close();
  impl->loop.post([impl] { impl->begin_stop(); });
}

void Server::wait() {
  Impl* impl = impl_.get();
  {
    std::unique_lock<std::mutex> lk(impl->done_mu);
    impl->done_cv.wait(lk, [impl] { return impl->drained; });
  }
  std::lock_guard<std::mutex> lk(impl->join_mu);
  // Blocking calls to workers and to the master end before the loop they
  // post to.
  impl->tasks.stop();
  impl->parses.stop();
  if (impl->workers) impl->workers->close_all();
  impl->save_learned();  // what this server's runs taught its CPU's learner
  for (auto& [addr, link] : impl->peer_links) link->close();
  if (impl->master_link) impl->master_link->close();
  // Every connection and session is gone; what remains on the loop is
  // closed by LoopThread::stop (its uv_walk).
  impl->loop.stop([impl] {
    if (impl->opts.cluster) impl->opts.cluster->stop();
    impl->stop_timer.reset();
    impl->housekeeping_timer.reset();
    impl->peers.clear();
    impl->sessions.clear();
  });
}

ServerStats Server::stats() const { return impl_->server_info(); }
MultiNode* Server::multinode() const { return impl_->workers.get(); }

bool Server::run_in_loop(const std::function<void()>& fn) {
  std::promise<void> ran;
  std::future<void> done = ran.get_future();
  if (!impl_->loop.post([&fn, &ran] {
        try {
          fn();
          ran.set_value();
        } catch (...) {
          ran.set_exception(std::current_exception());
        }
      }))
    return false;
  done.get();  // fn's exception, if it threw
  return true;
}

void Server::adopt(dataplane::Listener& listener, const std::string& transport) {
  impl_->on_accept(listener, transport);
}

}  // namespace genie
