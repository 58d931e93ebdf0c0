// The transfer service: tensors moved between two servers directly, with
// no relay through the server that asked for the move (docs/multinode.md,
// "Direct transfers").
#include "control/auth.hpp"
#include "control/wire_tag.hpp"
#include "server/impl.hpp"

namespace genie {

namespace {

constexpr size_t kTicketBytes = 32;
// A ticket is fetched right after it is handed out (the master asks the
// destination at once); the lifetime only bounds how long a ticket nobody
// fetched keeps its slot.
constexpr auto kTicketLifetime = std::chrono::seconds(60);
// Tickets outstanding at once, across all sessions: what one session can
// make the server hold is bounded by it.
constexpr size_t kMaxTickets = 4096;

}  // namespace

void Server::Impl::tensor_export(Peer& p, uint64_t rid, const wire::TensorExport& m) {
  check(p.session->find_remote(m.tensor_id()) == nullptr, GENIE_ERR_UNSUPPORTED, "tensor ", m.tensor_id(),
        " lives on a worker of this server: export it from that worker");
  p.session->get(m.tensor_id());  // NOT_FOUND for a tensor of no session of this peer
  const auto now = std::chrono::steady_clock::now();
  if (exports.size() >= kMaxTickets)
    std::erase_if(exports, [&](const auto& e) { return e.second.expires <= now; });
  check(exports.size() < kMaxTickets, GENIE_ERR_OUT_OF_MEMORY, "this server holds ", exports.size(),
        " unfetched export tickets already (at most ", kMaxTickets, "); fetch or let them expire first");
  std::string ticket = random_bytes(kTicketBytes);
  exports[ticket] = Export{p.session, m.tensor_id(), now + kTicketLifetime};
  wire::TensorExportReply r;
  r.set_ticket(std::move(ticket));
  send(p, MsgType::TensorExportReply, rid, r);
}

void Server::Impl::tensor_fetch(Peer& p, uint64_t rid, const wire::TensorFetch& m) {
  // The tag the request names, else the one its frame came with: counted
  // under "read" and put on the reply as for a TensorRead.
  dataplane::SemanticTag tag = wire::tag_of(m);
  if (tag == dataplane::SemanticTag()) tag = p.conn->received_tag();
  auto it = exports.find(m.ticket());
  check(it != exports.end(), GENIE_ERR_NOT_FOUND,
        "no export ticket like this one: never handed out, already fetched or expired");
  const Export e = it->second;
  exports.erase(it);  // one fetch per ticket, whatever its outcome
  check(e.expires > std::chrono::steady_clock::now(), GENIE_ERR_NOT_FOUND, "the export ticket expired");
  std::shared_ptr<Session> owner = e.session.lock();
  TensorPtr t = owner ? owner->find(e.tensor_id) : nullptr;
  check(t != nullptr, GENIE_ERR_NOT_FOUND, "the exported tensor ", e.tensor_id,
        " was freed (or its session ended) before the fetch");
  check(m.nbytes() == t->nbytes(), GENIE_ERR_SIZE_MISMATCH, "fetching ", m.nbytes(),
        " bytes of exported tensor ", e.tensor_id, " of ", t->nbytes(), " bytes");
  counters.peer_export_bytes.fetch_add(t->nbytes(), std::memory_order_relaxed);
  // Through the read window, as a TensorRead (read_window.cpp).
  read_or_wait(p, rid, e.tensor_id, t, 0, t->nbytes(), tag);
}

void Server::Impl::tensor_import(const std::shared_ptr<Peer>& p, uint64_t rid, const wire::TensorImport& m) {
  check(p->session->client_role == GENIE_NODE_ROLE_SERVER, GENIE_ERR_UNSUPPORTED,
        "TensorImport makes this server connect to another server: only a server's session may send it "
        "(this session's Hello named role ",
        p->session->client_role, ")");
  check(m.port() >= 1 && m.port() <= 65535 && !m.host().empty() && m.host().size() <= 255,
        GENIE_ERR_INVALID_ARGUMENT, "import source '", m.host(), ":", m.port(), "' is not a host and port");
  check(m.ticket().size() == kTicketBytes, GENIE_ERR_INVALID_ARGUMENT, "an export ticket has ", kTicketBytes,
        " bytes, not ", m.ticket().size());
  TensorPtr t = p->session->get(m.tensor_id());
  const dataplane::SemanticTag tag = wire::tag_of(m);
  std::weak_ptr<Peer> wp = p;
  off_loop(p, rid, [this, wp, rid, t, m, tag] {
    const std::string source = m.source_node().empty() ? cat(m.host(), ":", m.port()) : m.source_node();
    try {
      peer_link(m.host(), m.port())->tensor_fetch(m.ticket(), t->bytes(), t->nbytes(), tag);
    } catch (const Error& e) {
      fail(e.code(), "importing tensor ", m.tensor_id(), " from ", source, ": ", e.detail());
    }
    counters.peer_fetch_bytes.fetch_add(t->nbytes(), std::memory_order_relaxed);
    count_tagged("import", tag, t->nbytes());
    loop.post([this, wp, rid] {
      if (auto peer = wp.lock(); peer && !peer->closing) send(*peer, MsgType::Ok, rid, wire::Ok());
    });
  });
}

std::shared_ptr<RemoteClient> Server::Impl::peer_link(const std::string& host, int port) {
  const std::string key = cat(host, ":", port);
  {
    std::lock_guard<std::mutex> lk(peer_mu);
    auto it = peer_links.find(key);
    if (it != peer_links.end() && !it->second->failed()) return it->second;
  }
  Config c = client_config();
  c.master_addr = host;
  c.master_port = port;
  c.role = GENIE_NODE_ROLE_SERVER;
  c.timeout_ms = opts.client_timeout_ms;
  c.graph_deltas = false;
  std::shared_ptr<RemoteClient> link = RemoteClient::connect(c, node_id);
  std::shared_ptr<RemoteClient> old;
  {
    std::lock_guard<std::mutex> lk(peer_mu);
    auto& slot = peer_links[key];
    old = std::move(slot);
    slot = link;
  }
  if (old) old->close();
  return link;
}

}  // namespace genie
