// Handshake and authentication: Hello, the HMAC challenge, admitting a
// session (new or resumed) and data connections joining it by proving the
// session's secret.
#include "control/auth.hpp"
#include "server/impl.hpp"
#include "server/master.hpp"

namespace genie {

namespace {

constexpr size_t kTokenBytes = 32;
constexpr size_t kNonceBytes = 32;

}  // namespace

void Server::Impl::handshake(const std::shared_ptr<Peer>& p, const wire::FrameHeader& h,
                             const std::string& msg) {
  if (p->state == Peer::State::Fresh && h.type == MsgType::Probe) {
    // Sessionless: who this server is and what it can do, for discovery
    // and backend selection. The connection stays in its handshake (and
    // its timeout), so any number of probes can measure the round trip.
    parse_msg<wire::Probe>(msg, h.type);
    check(opts.cluster != nullptr, GENIE_ERR_UNSUPPORTED, "this server does not answer cluster probes");
    wire::ProbeReply r;
    opts.cluster->answer_probe(r);
    // Before authentication, only what starting a handshake takes (protocol
    // and ABI versions, data backends): a server that authenticates does
    // not tell strangers its node id, which by default carries its host
    // name and process id (the Welcome tells those who authenticate).
    if (!opts.auth_token.empty() || (tls != nullptr && tls->requires_client_cert())) r.clear_node_id();
    send(*p, MsgType::ProbeReply, h.request_id, r);
    return;
  }
  if (p->state == Peer::State::AwaitAuth) {
    check(h.type == MsgType::AuthResponse, GENIE_ERR_PROTOCOL, "expected AuthResponse, got ",
          wire::type_name(h.type));
    const auto m = parse_msg<wire::AuthResponse>(msg, h.type);
    if (p->data_session != 0) return admit_data(p, h.request_id, m);
    if (!opts.auth_token.empty()) {
      const bool ok = mac_equal(
          m.mac(), token_proof(opts.auth_token, p->nonce, p->hello.node_id(), p->conn->channel_binding()));
      if (!ok) auth_failed(*p);
      check(ok, GENIE_ERR_AUTH, "the AuthResponse of node '", p->hello.node_id(),
            "' does not prove it holds this server's token (check GENIE_AUTH_TOKEN on both sides)");
    }
    p->session_mac = m.session_mac();  // checked by admit() if the session still exists
    p->hello_rid = h.request_id;       // Welcome now answers the AuthResponse
    admit(p);
    return;
  }

  if (h.type == MsgType::DataHello) {
    // Joining a session takes a proof of its secret bound to a fresh nonce:
    // the secret never crosses the network, and an answer seen on one
    // connection is worth nothing on the next.
    const auto m = parse_msg<wire::DataHello>(msg, h.type);
    check(m.session_token().empty(), GENIE_ERR_PROTOCOL,
          "a DataHello that presents a session token: data connections answer a challenge instead "
          "(protocol 3), and the session's secret never crosses the network");
    const std::shared_ptr<Session> s = session_by_id(m.session_id());
    check(s != nullptr && s->control != nullptr, GENIE_ERR_NOT_FOUND, "no connected session ", m.session_id(),
          " (it ended, or its grace period expired)");
    p->data_session = m.session_id();
    p->nonce = random_bytes(kNonceBytes);
    p->state = Peer::State::AwaitAuth;
    wire::Challenge c;
    c.set_nonce(p->nonce);
    send(*p, MsgType::Challenge, h.request_id, c);
    return;
  }

  check(h.type == MsgType::Hello, GENIE_ERR_PROTOCOL, "expected Hello or DataHello first, got ",
        wire::type_name(h.type));
  p->hello = parse_msg<wire::Hello>(msg, h.type);
  p->hello_rid = h.request_id;
  const wire::Hello& hello = p->hello;
  if (hello.protocol_version() != wire::kProtocolVersion || hello.abi_version() != GENIE_ABI_VERSION)
    fail(GENIE_ERR_VERSION_MISMATCH, "client speaks protocol ", hello.protocol_version(), " with ABI ",
         hello.abi_version(), " but this server speaks protocol ", wire::kProtocolVersion, " with ABI ",
         GENIE_ABI_VERSION);
  // The id is logged and enters the HMAC: only the characters a node id may
  // have (and the refusal does not echo it).
  bool id_ok = hello.node_id().size() <= 255;
  for (char ch : hello.node_id())
    id_ok = id_ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-');
  check(id_ok, GENIE_ERR_PROTOCOL, "the client node id (", hello.node_id().size(),
        " bytes) is not 0..255 bytes of [A-Za-z0-9._-]");
  check(hello.resume_token().empty(), GENIE_ERR_PROTOCOL,
        "a Hello that presents a session token: resuming a session answers a challenge instead (protocol 3)");
  if (tls != nullptr && tls->requires_client_cert()) check_certificate_names(*p);
  if (opts.auth_token.empty() && hello.resume_session() == 0) {
    admit(p);
    return;
  }
  p->nonce = random_bytes(kNonceBytes);
  p->state = Peer::State::AwaitAuth;
  wire::Challenge c;
  c.set_nonce(p->nonce);
  c.set_token(!opts.auth_token.empty());
  send(*p, MsgType::Challenge, h.request_id, c);
}

// Under mutual TLS a node id belongs to the certificates that name it: the
// Hello's node id must be the client certificate's common name or one of
// its subjectAltName URIs "genie:<node-id>". So a node cannot claim another
// node's id (a worker's, to take over its registration or heartbeats, or a
// client's, to resume its session) with a certificate of its own, even
// where every node holds the shared token.
void Server::Impl::check_certificate_names(Peer& p) {
  const std::string& id = p.hello.node_id();
  const std::vector<std::string> names = p.conn->peer_names();
  for (const std::string& n : names)
    if (n == "CN:" + id || n == "URI:genie:" + id) return;
  std::string listed;
  for (const std::string& n : names) listed += (listed.empty() ? "" : ", ") + n.substr(0, 80);
  const std::string detail =
      cat("node id '", id, "' is not named by the client certificate (", listed.empty() ? "no names" : listed,
          "): under mutual TLS a node's id must be its certificate's common name or a subjectAltName URI "
          "genie:<node-id>");
  refusal_log.write(LogLevel::Warn, cat("server: refused ", p.name, ": ", detail));
  auth_failed(p);
  fail(GENIE_ERR_AUTH, detail);
}

// A data connection answered its challenge: it joins the session if the
// answer proves the session's secret for this nonce and transport, and it
// presented the same client certificate as the session's owner.
void Server::Impl::admit_data(const std::shared_ptr<Peer>& p, uint64_t rid, const wire::AuthResponse& m) {
  const std::shared_ptr<Session> s = session_by_id(p->data_session);
  check(s != nullptr && s->control != nullptr, GENIE_ERR_NOT_FOUND, "no connected session ", p->data_session,
        " (it ended, or its grace period expired)");
  const bool proved = mac_equal(
      m.session_mac(),
      data_proof(s->token(), p->nonce, s->serial(), p->conn->transport(), p->conn->channel_binding()));
  if (!proved) auth_failed(*p);
  check(proved, GENIE_ERR_AUTH, "the data connection does not prove it holds the secret of session ",
        s->serial());
  check(p->conn->peer_identity() == s->client_cert, GENIE_ERR_AUTH, "the data connection for session ",
        s->serial(), " presented another client certificate than the session's owner");
  check(s->data.size() < kMaxDataConnections, GENIE_ERR_CONNECTION, "session ", s->serial(), " has ",
        s->data.size(), " data connections, the limit per session");
  p->nonce.clear();
  p->state = Peer::State::Data;
  p->session = s;
  s->data.push_back(p.get());
  // Its session answers for it now, not its source: a client's data
  // connections do not take the slots its address has for sessions
  // (docs/security.md, "Defaults and settings").
  if (p->admitted && !p->vouched) admission.vouch(p->source);
  p->vouched = true;
  p->handshake_timer.reset();
  p->conn->set_buffer_sizes(4 << 20);
  authenticated(*p);
  {
    std::lock_guard<std::mutex> lk(data_mu);
    ++data_connections[p->conn->transport()];
  }
  send(*p, MsgType::Welcome, rid, welcome(*s, false, false));
  log(LogLevel::Debug, "server: session ", s->serial(), ": ", p->conn->transport(), " data connection from ",
      p->name);
}

std::shared_ptr<Session> Server::Impl::session_by_id(uint64_t id) const {
  if (id == 0) return nullptr;
  for (const auto& [token, s] : sessions)
    if (s->serial() == id) return s;
  return nullptr;
}

// The control handshake succeeded: resume the session named by the Hello's
// token if it still exists, else start a new one.
void Server::Impl::admit(const std::shared_ptr<Peer>& p) {
  std::shared_ptr<Session> s;
  bool resumed = false;
  if (const uint64_t id = p->hello.resume_session(); id != 0) {
    if (std::shared_ptr<Session> old = session_by_id(id)) {
      check(
          mac_equal(p->session_mac,
                    resume_proof(old->token(), p->nonce, id, p->hello.node_id(), p->conn->channel_binding())),
          GENIE_ERR_AUTH, "the Hello resuming session ", id, " does not prove it holds the session's secret");
      // The secret alone is not enough: only the identity that opened the
      // session (its node id, proven with the token if there is one, and
      // its client certificate) may take it over.
      check(old->client_node() == p->hello.node_id() && old->client_cert == p->conn->peer_identity(),
            GENIE_ERR_AUTH, "session ", id,
            " was opened by another identity (node id or client certificate): only its owner may resume it");
      s = std::move(old);
      resumed = true;
    }
  }
  if (resumed) {
    s->grace.reset();
    // The client came back before this side noticed the old connection die
    // (a half-open TCP connection): the proof says it is the same client.
    if (Peer* old = s->control) {
      s->control = nullptr;
      close_when_flushed(*old->shared_from_this(), GENIE_OK, "the session was resumed on a new connection");
    }
    std::vector<std::shared_ptr<Peer>> stale;
    for (Peer* d : s->data) stale.push_back(d->shared_from_this());
    for (auto& d : stale) close_when_flushed(*d, GENIE_OK, "the session was resumed");
    log(LogLevel::Info, "server: session ", s->serial(), " resumed by ", p->hello.node_id(), " from ",
        p->name, " with ", s->num_tensors(), " tensors");
  } else {
    check(opts.max_sessions == 0 || sessions.size() < static_cast<size_t>(opts.max_sessions),
          GENIE_ERR_CONNECTION, "the server has ", sessions.size(),
          " sessions, its limit (genie serve --max-sessions)");
    s = std::make_shared<Session>(next_session_serial++, random_bytes(kTokenBytes), p->hello.node_id(),
                                  counters);
    s->client_role = p->hello.role();
    s->client_cert = p->conn->peer_identity();
    sessions.emplace(s->token(), s);
    publish_sessions();
    log(LogLevel::Info, "server: session ", s->serial(), " opened by ", p->hello.node_id(), " from ", p->name,
        p->hello.resume_session() == 0 ? "" : " (its old session had expired)");
  }
  s->control = p.get();
  p->session = s;
  p->state = Peer::State::Control;
  p->handshake_timer.reset();
  p->hello.Clear();
  p->nonce.clear();
  p->session_mac.clear();
  authenticated(*p);
  send(*p, MsgType::Welcome, p->hello_rid, welcome(*s, resumed, true));
}

wire::Welcome Server::Impl::welcome(const Session& s, bool resumed, bool control) const {
  wire::Welcome w;
  if (control) w.set_session_token(s.token());
  w.set_session_id(s.serial());
  w.set_server_node_id(node_id);
  w.set_server_instance(instance);
  w.set_protocol_version(wire::kProtocolVersion);
  w.set_abi_version(GENIE_ABI_VERSION);
  w.add_devices("cpu:0");
  for (const ServedDevice& d : devices) w.add_devices(d.name);
  w.set_resumed(resumed);
  w.set_data_submit(true);
  w.set_submit_frees(true);
  w.set_trace_spans(true);
  w.set_inline_tensors(true);
  for (const Listening& l : listeners) {
    wire::DataEndpoint* e = w.add_data_endpoints();
    e->set_transport(l.transport);
    e->set_address(l.address);
  }
  return w;
}

}  // namespace genie
