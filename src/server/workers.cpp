// The worker service (docs/multinode.md): a worker joining its master, a
// master registering workers, planning across them, and tensors a master
// holds on its workers.
#include <arpa/inet.h>
#include <netdb.h>
#include <unistd.h>

#include <cmath>

#include "dataplane/transport.hpp"
#include "exec/learn.hpp"
#include "server/impl.hpp"
#include "server/master.hpp"

namespace genie {

// ---------------------------------------------------------------------------
// Multi-node (docs/multinode.md)
// ---------------------------------------------------------------------------

// A worker at start (constructor thread): joins the master through an
// ordinary client session, and stays registered while it lives.
void Server::Impl::join_master() {
  std::string host = opts.advertise_host.empty() ? opts.host : opts.advertise_host;
  if (host == "0.0.0.0" || host == "::") {
    char name[256] = {};
    check(gethostname(name, sizeof name - 1) == 0, GENIE_ERR_INVALID_ARGUMENT,
          "listening on a wildcard address and no host name: give the address the master should dial");
    host = name;
  }
  Config c = client_config();
  c.master_addr = opts.join_host;
  c.master_port = opts.join_port;
  c.role = GENIE_NODE_ROLE_WORKER;
  c.timeout_ms = opts.client_timeout_ms;
  c.graph_deltas = false;
  sched::CalibrateOptions co;
  co.node_id = node_id;
  sched::DeviceProfile profile = exec.cpu_backend().calibrate(0, co);
  profile.op_overhead_s = measure_node_overhead(exec);
  if (profile.learned) {
    auto topo = std::make_shared<sched::Topology>();
    topo->devices.push_back(profile);
    std::lock_guard<std::mutex> lk(learn_mu);
    learn_topo = std::move(topo);
  }
  master_link = RemoteClient::connect(c, node_id);
  master_link->register_worker(host, bound_port, {profile});
  if (opts.cluster) opts.cluster->start_worker_heartbeat(master_link, host, bound_port);
  log(LogLevel::Info, "server ", node_id, ": joined master ", master_link->server_node_id(), " at ",
      opts.join_host, ":", opts.join_port, " as a worker reachable at ", host, ":", bound_port);
}

void Server::Impl::learn_from(const Graph& graph, const ExecResult& r) {
  if (r.status != GENIE_OK || r.trace.size() != graph.nodes().size()) return;
  std::shared_ptr<const sched::Topology> topo;
  {
    std::lock_guard<std::mutex> lk(learn_mu);
    if (!learn_topo && workers)
      if (const sched::DeviceProfile* own = workers->local_profile_if_ready(); own && own->learned) {
        auto t = std::make_shared<sched::Topology>();
        t->devices.push_back(*own);
        learn_topo = std::move(t);
      }
    topo = learn_topo;
  }
  if (!topo) return;
  // Only what ran on the CPU (its outputs in host memory), and only graphs
  // whose sizes are all known (a dynamic dimension has no cost).
  for (const TensorPtr& t : r.outputs)
    if (!t || !t->host_accessible()) return;
  for (const Value& v : graph.values())
    for (int64_t d : v.shape)
      if (d < 0) return;
  learn_from_run(sched::node_costs(graph, nullptr), r, *topo, nullptr, 0);
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  if (now - learned_saved_ns >= 10'000'000'000) {
    learned_saved_ns = now;
    genie::save_learned(*topo);
  }
}

void Server::Impl::save_learned() {
  std::shared_ptr<const sched::Topology> topo;
  {
    std::lock_guard<std::mutex> lk(learn_mu);
    topo = learn_topo;
  }
  if (topo) genie::save_learned(*topo);
}

void Server::Impl::off_loop(const std::shared_ptr<Peer>& p, uint64_t rid, std::function<void()> task) {
  std::weak_ptr<Peer> wp = p;
  const bool posted =
      tasks.post(p->session ? p->session->serial() : 0, [this, wp, rid, task = std::move(task)] {
        genie_status_t st = GENIE_OK;
        std::string detail;
        try {
          task();
          return;
        } catch (const Error& e) {
          st = e.code();
          detail = e.detail();
        } catch (const std::bad_alloc&) {
          st = GENIE_ERR_OUT_OF_MEMORY;
          detail = "out of memory";
        } catch (const std::exception& e) {
          st = GENIE_ERR_INTERNAL;
          detail = cat("internal error: ", e.what());
        }
        loop.post([this, wp, rid, st, detail] {
          if (auto peer = wp.lock(); peer && !peer->closing) send_error(*peer, rid, st, detail);
        });
      });
  check(posted, GENIE_ERR_SHUTDOWN, "the server is stopping");
}

namespace {

// The address part of a peer name "ip:port" or "[ipv6]:port".
std::string address_of(const std::string& peer) {
  std::string a;
  int port = 0;
  dataplane::split_address(peer, &a, &port);
  // An IPv4 peer of a dual-stack listener.
  if (a.rfind("::ffff:", 0) == 0 && a.find('.') != std::string::npos) a = a.substr(7);
  return a;
}

// Throws unless `host` (a name or a literal) resolves to `from`, the address
// the registration came from: a worker registers the address it connects
// from, so that WorkerRegister cannot point the master at a third party.
// `detail`: the message may say what the name resolved to (or why it did
// not), for a peer that proved it holds the token.
void check_own_address(const std::string& host, const std::string& from, bool detail) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0)
    fail(GENIE_ERR_INVALID_ARGUMENT, "worker address '", host, "' does not resolve",
         detail ? cat(": ", gai_strerror(rc)) : std::string());
  std::string found;
  bool match = false;
  for (addrinfo* a = res; a && !match; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* bytes =
        a->ai_family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
    if (!inet_ntop(a->ai_family, bytes, text, sizeof text)) continue;
    match = from == text;
    found += cat(found.empty() ? "" : ", ", text);
  }
  freeaddrinfo(res);
  if (!match)
    fail(GENIE_ERR_INVALID_ARGUMENT, "worker address '", host, "'",
         detail ? cat(" (", found, ")") : std::string(), " is not the address the registration comes from (",
         from, "): a worker registers the address it connects from (genie serve --host / --advertise-host)");
}

}  // namespace

void Server::Impl::worker_register(const std::shared_ptr<Peer>& p, uint64_t rid,
                                   const wire::WorkerRegister& m) {
  try {
    check(!stopping, GENIE_ERR_SHUTDOWN, "the server is stopping");
    check(p->session->client_role == GENIE_NODE_ROLE_WORKER, GENIE_ERR_AUTH,
          "WorkerRegister from a session opened with role ", p->session->client_role,
          ": only a worker's session (Hello with the worker role) registers a worker");
    check(workers != nullptr, GENIE_ERR_UNSUPPORTED, "this server takes no workers (multi-node is off)");
    check(m.node_id() == p->session->client_node(), GENIE_ERR_INVALID_ARGUMENT,
          "a worker registers itself: node id '", m.node_id(), "' is not this session's");
    check(m.port() >= 1 && m.port() <= 65535 && !m.host().empty() && m.host().size() <= 255,
          GENIE_ERR_INVALID_ARGUMENT, "worker address '", m.host(), ":", m.port(),
          "' is not a host and port");
    std::vector<sched::DeviceProfile> devices;
    for (const wire::DeviceInfo& d : m.devices()) {
      sched::DeviceProfile prof;
      prof.device = d.device();
      prof.peak_flops = d.peak_flops();
      prof.mem_bw_bytes_per_s = d.mem_bw_bytes_per_s();
      prof.mem_capacity_bytes = d.mem_capacity_bytes();
      prof.mem_budget_bytes = d.mem_budget_bytes();
      prof.op_overhead_s = d.op_overhead_s();
      prof.vector_flops = std::isfinite(d.vector_flops()) && d.vector_flops() > 0 ? d.vector_flops() : 0;
      check(prof.device == "cpu:0" && prof.peak_flops > 0 && prof.mem_bw_bytes_per_s > 0,
            GENIE_ERR_INVALID_ARGUMENT, "worker device '", prof.device,
            "' needs positive rates (and only cpu:0 is served by workers now)");
      devices.push_back(prof);
    }
    const void* by = p->session.get();
    std::weak_ptr<Peer> wp = p;
    off_loop(p, rid,
             [this, wp, rid, m, devices = std::move(devices), by, from = address_of(p->name)]() mutable {
               const bool authenticated = !opts.auth_token.empty();
               check_own_address(m.host(), from, authenticated);
               try {
                 workers->join(m.node_id(), m.host(), static_cast<int>(m.port()), std::move(devices), by);
               } catch (const Error& e) {
                 // What the master found when it dialed the address (a
                 // refusal, another service's first bytes, a timeout) goes
                 // to its log; a peer that has not proved it holds the
                 // token learns only that the dial failed, so the master is
                 // no scanner for it.
                 const genie_status_t st = e.code();
                 const bool dial = st == GENIE_ERR_CONNECTION || st == GENIE_ERR_PROTOCOL ||
                                   st == GENIE_ERR_TIMEOUT || st == GENIE_ERR_VERSION_MISMATCH ||
                                   st == GENIE_ERR_IO;
                 if (!dial) throw;
                 refusal_log.write(LogLevel::Warn, cat("server: worker registration of '", m.node_id(),
                                                       "' from ", from, " failed: ", e.detail()));
                 if (authenticated) throw;
                 fail(GENIE_ERR_CONNECTION, "the master could not open a session with worker '", m.node_id(),
                      "' at ", m.host(), ":", m.port(),
                      " (its log says why): a worker must answer at the address it registers");
               }
               if (opts.cluster) {
                 std::vector<std::string> names;
                 for (const wire::DeviceInfo& d : m.devices()) names.push_back(d.device());
                 opts.cluster->worker_joined(m.node_id(), m.host(), static_cast<int>(m.port()), names);
               }
               loop.post([this, wp, rid, node = m.node_id()] {
                 auto peer = wp.lock();
                 if (!peer || peer->closing) return;
                 // Only this session heartbeats for the node from now on.
                 if (peer->session && peer->session->control == peer.get())
                   worker_nodes[node] = peer->session.get();
                 send(*peer, MsgType::Ok, rid, wire::Ok());
               });
             });
  } catch (const Error& e) {
    send_error(*p, rid, e.code(), e.detail());
  }
}

void Server::Impl::worker_session_gone(const Session& s) {
  std::erase_if(worker_nodes, [&](const auto& e) { return e.second == &s; });
  std::shared_ptr<RemoteClient> c = workers ? workers->leave(&s) : nullptr;
  if (c && opts.cluster) opts.cluster->worker_left(s.client_node());
  // Closing says goodbye and may wait: not on this thread.
  if (c) tasks.post(s.serial(), [c] { c->close(); });
}

void Server::Impl::plan_explain(const std::shared_ptr<Peer>& p, uint64_t rid, const wire::PlanExplain& m) {
  check(workers != nullptr, GENIE_ERR_UNSUPPORTED, "this server does not plan graphs (multi-node is off)");
  std::vector<std::string> names;
  std::vector<TensorDesc> descs;
  std::vector<Held> held;
  for (const wire::Binding& b : m.bindings()) {
    names.push_back(b.name());
    if (RemoteTensorPtr wt = p->session->find_remote(b.tensor_id())) {
      descs.push_back({wt->dtype, wt->shape});
      held.push_back({nullptr, std::move(wt)});
    } else {
      TensorPtr t = p->session->get(b.tensor_id());
      descs.push_back({t->dtype(), t->shape()});
      held.push_back({std::move(t), nullptr});
    }
  }
  // Parsed on the task pool like the plan itself, so that the loop never
  // waits for a large graph; refused past the limits first, and charged as
  // a submission's parse is.
  graphs.check_limits(m.graph_json());
  auto charge = gate.charge(p->session, m.graph_json().size() * kParseBytesPerByte, [&] {
    return cat("parsing a graph of ", m.graph_json().size(), " bytes of JSON");
  });
  auto json = std::make_shared<const std::string>(m.graph_json());
  std::weak_ptr<Peer> wp = p;
  off_loop(p, rid,
           [this, wp, rid, json, names = std::move(names), descs = std::move(descs), held = std::move(held),
            charge] {
             auto r = std::make_shared<Resolved>();
             if (names.empty()) {
               // Nothing bound: every input planned as not yet resident anywhere
               // (its declared shape must be static).
               std::unique_ptr<Graph> g = graph_from_json(json->data(), json->size());
               g->validate();
               r->inputs.resize(g->inputs().size());
               auto e = std::make_shared<GraphCache::Entry>();
               e->graph = std::move(g);
               r->entry = std::move(e);
             } else {
               r->entry = graphs.load(*json, names, descs);
             }
             charge->release();
             for (size_t k = 0; k < r->entry->order.size(); ++k) {
               const size_t i = r->entry->order[k];
               r->inputs.push_back(held[i]);
               r->shapes[r->entry->graph->inputs()[k]] = descs[i].shape;
             }
             wire::PlanExplainReply reply;
             reply.set_json(workers->explain(*r->entry->graph, r->inputs, r->shapes));
             loop.post([this, wp, rid, reply] {
               if (auto peer = wp.lock(); peer && !peer->closing)
                 send(*peer, MsgType::PlanExplainReply, rid, reply);
             });
           });
}

void Server::Impl::forward_alloc(const std::shared_ptr<Peer>& p, uint64_t rid, const std::string& node,
                                 const std::string& device, DType dtype, Shape shape) {
  check(workers != nullptr, GENIE_ERR_UNSUPPORTED, "device '", node, "/", device,
        "': this server has no workers (multi-node is off)");
  std::shared_ptr<RemoteClient> c;
  try {
    c = workers->client_of(node);
  } catch (const Error& e) {
    fail(e.code(), "device '", node, "/", device, "': ", e.detail());
  }
  std::weak_ptr<Peer> wp = p;
  std::weak_ptr<Session> ws = p->session;
  off_loop(p, rid, [this, wp, ws, rid, c, node, device, dtype, shape] {
    const uint64_t id = c->tensor_alloc(dtype, shape, device);
    auto wt = std::make_shared<RemoteTensor>(c, node, id, dtype, shape, cat(node, "/", device));
    loop.post([this, wp, ws, rid, wt] {
      auto peer = wp.lock();
      auto s = ws.lock();
      if (!peer || !s || peer->closing || peer->session != s) return;  // wt frees itself
      wire::TensorAllocReply r;
      r.set_tensor_id(s->add_remote(wt));
      send(*peer, MsgType::TensorAllocReply, rid, r);
    });
  });
}

PayloadSink Server::Impl::forward_write(const std::shared_ptr<Peer>& p, const wire::FrameHeader& h,
                                        const RemoteTensorPtr& t, uint64_t offset,
                                        const dataplane::SemanticTag& tag) {
  const uint64_t rid = h.request_id;
  const uint64_t n = h.payload_len;
  if (offset > t->nbytes || n > t->nbytes - offset) {
    const std::string detail =
        cat("writing ", n, " bytes at offset ", offset, " overruns a tensor of ", t->nbytes, " bytes");
    send_error(*p, rid, GENIE_ERR_SIZE_MISMATCH, detail);
    if (n > 0) {
      p->closing = true;
      p->close_status = GENIE_ERR_SIZE_MISMATCH;
      p->close_detail = detail + " (payload refused, connection closed)";
    }
    return {};
  }
  // The bytes land here first, then go to the worker from the task pool:
  // charged to the session and the budget until they have.
  std::shared_ptr<MemoryGate::Reservation> staged;
  try {
    staged = gate.charge(p->session, n, [&] { return cat("staging ", n, " bytes written to ", t->device); });
  } catch (const Error& e) {
    send_error(*p, rid, e.code(), e.detail());
    if (n > 0) {
      p->closing = true;
      p->close_status = e.code();
      p->close_detail = e.detail() + " (payload refused, connection closed)";
    }
    return {};
  }
  std::shared_ptr<std::byte[]> buf(new std::byte[n > 0 ? n : 1]);
  // The client's tag goes on to the worker with the bytes.
  auto ship = [this, wp = std::weak_ptr<Peer>(p), rid, t, offset, n, buf, tag, staged] {
    auto peer = wp.lock();
    if (!peer || peer->closing) return;
    count_tagged("write", tag, n);
    try {
      off_loop(peer, rid, [this, wp, rid, t, offset, n, buf, tag, staged] {
        t->client->tensor_write(t->id, offset, buf.get(), n, tag);
        loop.post([this, wp, rid] {
          if (auto pe = wp.lock(); pe && !pe->closing) send(*pe, MsgType::Ok, rid, wire::Ok());
        });
      });
    } catch (const Error& e) {
      send_error(*peer, rid, e.code(), e.detail());
    }
  };
  if (n == 0) {
    ship();
    return {};
  }
  PayloadSink sink;
  sink.dst = buf.get();
  sink.keep = buf;
  sink.done = std::move(ship);
  return sink;
}

void Server::Impl::forward_read(const std::shared_ptr<Peer>& p, uint64_t rid, const RemoteTensorPtr& t,
                                uint64_t offset, uint64_t nbytes, const dataplane::SemanticTag& tag) {
  std::weak_ptr<Peer> wp = p;
  std::weak_ptr<Session> ws = p->session;
  off_loop(p, rid, [this, wp, ws, rid, t, offset, nbytes, tag] {
    const std::shared_ptr<Session> s = ws.lock();
    check(s != nullptr, GENIE_ERR_SHUTDOWN, "the session ended");
    // Staged here until the client has taken them: charged until then.
    auto staged =
        gate.charge(s, nbytes, [&] { return cat("staging ", nbytes, " bytes read from ", t->device); });
    std::shared_ptr<std::byte[]> buf(new std::byte[nbytes > 0 ? nbytes : 1]);
    t->client->tensor_read(t->id, offset, buf.get(), nbytes, tag);
    loop.post([this, wp, rid, buf, nbytes, tag, staged] {
      if (auto peer = wp.lock(); peer && !peer->closing) {
        count_tagged("read", tag, nbytes);
        auto keep = std::make_shared<
            std::pair<std::shared_ptr<std::byte[]>, std::shared_ptr<MemoryGate::Reservation>>>(buf, staged);
        send(*peer, MsgType::Ok, rid, wire::Ok(), buf.get(), nbytes, keep, nullptr, tag);
      }
    });
  });
}

}  // namespace genie
