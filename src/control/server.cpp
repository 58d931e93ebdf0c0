// `genie serve`: the server side of remote mode. docs/protocol.md describes
// the conversation; this file is its implementation.
//
// Threads: everything but stop(), wait() and stats() runs on the loop thread.
// Graph completions arrive on executor workers and are posted to the loop.
#include "control/server.hpp"

#include <netdb.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <future>
#include <mutex>
#include <random>
#include <unordered_map>

#include "control/client.hpp"
#include "control/connection.hpp"
#include "control/graph_cache.hpp"
#include "graph/delta.hpp"
#include "control/loop_thread.hpp"
#include "control/orchestrator.hpp"
#include "control/task_thread.hpp"
#include "control/session.hpp"
#include "control/uv_timer.hpp"
#include "control/wire.hpp"
#include "control/wire_codec.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "exec/executor.hpp"
#include "exec/overhead.hpp"
#include "genie.pb.h"
#include "graph/binding.hpp"
#include "graph/graph.hpp"
#include "sched/plan.hpp"

namespace genie {

namespace {

using wire::MsgType;

constexpr size_t kTokenBytes = 32;
constexpr size_t kNonceBytes = 32;
// At stop, how long replies still queued to a client that does not read may
// delay the end of the server.
constexpr uint64_t kStopFlushMs = 5000;
// Replies queued to one connection and not yet taken by the kernel: a client
// that keeps sending requests without reading the replies is cut off here
// instead of growing the server's memory without bound. Bulk bytes are not
// copied into the queue, so this counts frames, not bytes.
constexpr int kMaxQueuedReplies = 65536;

using wire::parse_msg;

std::string random_bytes(size_t n) {
  std::string s(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(s.data()), static_cast<int>(n)) != 1)
    fail(GENIE_ERR_INTERNAL, "RAND_bytes failed: no entropy for a nonce or session token");
  return s;
}

std::string hmac_sha256(const std::string& key, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len) == nullptr)
    fail(GENIE_ERR_INTERNAL, "HMAC-SHA256 failed");
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string generate_node_id() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::string h;
  for (char* p = host; *p; ++p)
    if (std::isalnum(static_cast<unsigned char>(*p)) || *p == '-' || *p == '.' || *p == '_') h += *p;
  if (h.empty()) h = "host";
  std::random_device rd;
  char suffix[48];
  std::snprintf(suffix, sizeof suffix, "-serve-%d-%04x", static_cast<int>(getpid()), rd() & 0xffffu);
  return h.substr(0, 200) + suffix;
}

// Total physical memory: tensors beyond it would only get the server killed
// by the kernel when their zero-fill touches the pages.
uint64_t physical_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return kMaxTensorBytes;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
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

bool is_client_request(MsgType t) {
  switch (t) {
    case MsgType::TensorAlloc:
    case MsgType::TensorWrite:
    case MsgType::TensorRead:
    case MsgType::TensorFree:
    case MsgType::GraphSubmit:
    case MsgType::GraphSubmitDelta:
    case MsgType::ServerInfoRequest:
    case MsgType::Heartbeat:
    case MsgType::WorkerRegister:
    case MsgType::PlanExplain:
    case MsgType::Goodbye: return true;
    default: return false;
  }
}

}  // namespace

// One accepted TCP connection: in its handshake, a session's control
// connection, or one of its data connections.
struct Peer : std::enable_shared_from_this<Peer> {
  enum class State { Fresh, AwaitAuth, Control, Data };
  State state = State::Fresh;
  std::shared_ptr<Connection> conn;
  std::string name;  // "ip:port", for logs
  std::shared_ptr<Session> session;
  std::string nonce;       // the challenge sent (AwaitAuth)
  wire::Hello hello;       // kept from Hello until the AuthResponse
  uint64_t hello_rid = 0;  // echoed by Welcome: the Hello's or AuthResponse's request id
  std::unique_ptr<Timer> handshake_timer;
  int pending_writes = 0;  // frames handed to the connection, not yet written
  // Once set, further frames are ignored and the connection closes as soon as
  // its queued replies are written (so an ErrorReply reaches the client).
  bool closing = false;
  genie_status_t close_status = GENIE_OK;
  std::string close_detail;
};

struct Server::Impl {
  explicit Impl(ServerOptions o);
  ~Impl();

  // --- loop thread ---------------------------------------------------------
  void listen(std::promise<void>& bound);
  void on_accept();
  void on_close(const std::shared_ptr<Peer>& p, genie_status_t status, const std::string& detail);
  PayloadSink on_frame(const std::shared_ptr<Peer>& p, const wire::FrameHeader& h, std::string&& msg);

  void handshake(const std::shared_ptr<Peer>& p, const wire::FrameHeader& h, const std::string& msg);
  void admit(const std::shared_ptr<Peer>& p);
  PayloadSink request(const std::shared_ptr<Peer>& p, const wire::FrameHeader& h, const std::string& msg);
  void tensor_alloc(Peer& p, uint64_t rid, const wire::TensorAlloc& m);
  PayloadSink tensor_write(const std::shared_ptr<Peer>& p, const wire::FrameHeader& h,
                           const wire::TensorWrite& m);
  void tensor_read(Peer& p, uint64_t rid, const wire::TensorRead& m);
  using Bindings = google::protobuf::RepeatedPtrField<wire::Binding>;
  void graph_submit(const std::shared_ptr<Peer>& p, uint64_t rid, const std::string& json,
                    const Bindings& bindings);
  // The JSON text a GraphSubmitDelta stands for; throws Error(NOT_FOUND)
  // with *unknown_base set when the base is not held (or does not rebuild).
  std::shared_ptr<const std::string> rebuild(const wire::GraphSubmitDelta& m, bool* unknown_base);
  void graph_done(const std::weak_ptr<Peer>& wp, const std::weak_ptr<Session>& ws, uint64_t rid,
                  const std::shared_ptr<const Graph>& graph, ExecResult& r);
  // What graph_done and multinode_done share: `store(output, session)`
  // puts one output in the session and returns its tensor id.
  template <class Result, class Store>
  void report_done(const std::weak_ptr<Peer>& wp, const std::weak_ptr<Session>& ws, uint64_t rid, const Graph& graph,
                   Result& r, Store store);
  wire::ServerInfo server_info() const;

  // --- multi-node (docs/multinode.md) --------------------------------------
  void join_master();  // a worker, at start: not on the loop thread
  void worker_register(const std::shared_ptr<Peer>& p, uint64_t rid, const wire::WorkerRegister& m);
  void plan_explain(const std::shared_ptr<Peer>& p, uint64_t rid, const wire::PlanExplain& m);
  void forward_alloc(const std::shared_ptr<Peer>& p, uint64_t rid, const std::string& node,
                     const std::string& device, DType dtype, Shape shape);
  PayloadSink forward_write(const std::shared_ptr<Peer>& p, const wire::FrameHeader& h, const RemoteTensorPtr& t,
                            uint64_t offset);
  void forward_read(const std::shared_ptr<Peer>& p, uint64_t rid, const RemoteTensorPtr& t, uint64_t offset,
                    uint64_t nbytes);
  // Bindings resolved: each graph input's tensor (here or on a worker), the
  // validated graph and the bound shapes of its inputs.
  struct Resolved {
    GraphCache::Entry entry;
    std::vector<Held> inputs;  // per graph input, declaration order
    std::unordered_map<ValueId, Shape> shapes;
  };
  void multinode_done(const std::weak_ptr<Peer>& wp, const std::weak_ptr<Session>& ws, uint64_t rid,
                      const std::shared_ptr<const Graph>& graph, MultiResult& r);
  // Runs `task` on the task thread; its errors become an ErrorReply to rid.
  void off_loop(const std::shared_ptr<Peer>& p, uint64_t rid, std::function<void()> task);
  void worker_session_gone(const Session& s);

  void send(Peer& p, MsgType type, uint64_t rid, const google::protobuf::Message& msg,
            const void* payload = nullptr, uint64_t payload_len = 0, std::shared_ptr<void> keep = nullptr);
  void send_error(Peer& p, uint64_t rid, genie_status_t status, const std::string& detail);
  // Replies ErrorReply (when `reply`) and closes the connection once it is
  // written; `status` is what the log line and on_close report.
  void refuse(Peer& p, uint64_t rid, genie_status_t status, const std::string& detail, bool reply = true);
  void close_when_flushed(Peer& p, genie_status_t status, const std::string& detail);
  wire::Welcome welcome(const Session& s, bool resumed) const;

  void end_session(const std::shared_ptr<Session>& s, const char* why);
  void control_lost(const std::shared_ptr<Session>& s);

  void begin_stop();
  void maybe_finish_stop();
  void force_close_all();
  void publish_sessions() { counters.sessions.store(static_cast<uint32_t>(sessions.size())); }

  ServerOptions opts;
  std::string node_id;
  const std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  const uint64_t memory_limit = physical_memory();
  ServerCounters counters;
  int bound_port = 0;

  Executor exec;
  // Members the loop touches are declared before the loop, so they outlive
  // its thread (members are destroyed in reverse order).
  uv_tcp_t listener{};
  bool listening = false;
  std::unordered_map<Peer*, std::shared_ptr<Peer>> peers;
  std::unordered_map<std::string, std::shared_ptr<Session>> sessions;  // by token
  GraphCache graphs;
  delta::BaseTable bases;  // graph texts deltas may name, by SHA-256
  uint64_t next_session_serial = 1;
  int graphs_in_flight = 0;
  bool stopping = false;     // loop: stop() has begun
  bool closing_all = false;  // loop: graphs are done, connections are closing
  std::unique_ptr<Timer> stop_timer;

  // Multi-node: this server as a master (its workers), and its blocking
  // client calls, made on the task thread; as a worker, its session on the
  // master.
  std::unique_ptr<Orchestrator> workers;  // null: no multi-node (WorkerRegister refused)
  TaskThread tasks;
  std::shared_ptr<RemoteClient> master_link;

  std::atomic<bool> stop_requested{false};
  std::mutex done_mu;
  std::condition_variable done_cv;
  bool drained = false;  // guarded by done_mu
  std::mutex join_mu;

  LoopThread loop;
};

// ---------------------------------------------------------------------------
// Setup and accepting
// ---------------------------------------------------------------------------

Server::Impl::Impl(ServerOptions o)
    : opts(std::move(o)),
      node_id(opts.node_id.empty() ? generate_node_id() : opts.node_id),
      exec(opts.num_threads) {
  {
    Config c;
    c.auth_token = opts.auth_token;
    c.timeout_ms = opts.client_timeout_ms;
    if (opts.orchestrator) workers = opts.orchestrator(node_id, c, exec, {opts.node_alive, opts.measure_rtt});
  }
  check(opts.port >= 0 && opts.port <= 65535, GENIE_ERR_INVALID_ARGUMENT, "port ", opts.port,
        " is outside 0..65535");
  check(opts.max_message_bytes >= 4096, GENIE_ERR_INVALID_ARGUMENT, "max message ", opts.max_message_bytes,
        " bytes is below 4096");
  check(opts.handshake_timeout_ms > 0, GENIE_ERR_INVALID_ARGUMENT, "handshake timeout ",
        opts.handshake_timeout_ms, " ms must be positive");
  check(opts.session_grace_ms >= 0, GENIE_ERR_INVALID_ARGUMENT, "session grace ", opts.session_grace_ms,
        " ms must not be negative");
  if (opts.host.empty()) opts.host = "127.0.0.1";
  std::promise<void> bound;
  std::future<void> result = bound.get_future();
  loop.post([this, &bound] { listen(bound); });
  result.get();  // rethrows the bind error; ~LoopThread then stops the loop
  if (opts.on_start) loop.post([this] { opts.on_start(loop); });
  log(LogLevel::Info, "server ", node_id, ": listening on ", opts.host, ":", bound_port,
      opts.auth_token.empty() ? " (no authentication)" : " (authentication required)");
  if (!opts.join_host.empty()) join_master();
}

Server::Impl::~Impl() = default;

void Server::Impl::listen(std::promise<void>& bound) {
  try {
    const std::string where = cat(opts.host, ":", opts.port);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* res = nullptr;
    const int gai = getaddrinfo(opts.host.c_str(), std::to_string(opts.port).c_str(), &hints, &res);
    if (gai != 0) fail(GENIE_ERR_IO, "cannot listen on ", where, ": ", gai_strerror(gai));
    std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(res, freeaddrinfo);

    uv_tcp_init(loop.loop(), &listener);
    listener.data = this;
    listening = true;  // from here on the handle must be closed
    int rc = uv_tcp_bind(&listener, res->ai_addr, 0);
    if (rc == 0)
      rc = uv_listen(reinterpret_cast<uv_stream_t*>(&listener), 128, [](uv_stream_t* s, int status) {
        auto* self = static_cast<Impl*>(s->data);
        if (status < 0) {
          log(LogLevel::Warn, "server: accept failed: ", uv_strerror(status));
          return;
        }
        try {  // nothing may unwind through libuv
          self->on_accept();
        } catch (const std::exception& e) {
          log(LogLevel::Error, "server: cannot take a new connection: ", e.what());
        }
      });
    if (rc != 0) {
      uv_close(reinterpret_cast<uv_handle_t*>(&listener), nullptr);
      listening = false;
      fail(GENIE_ERR_IO, "cannot listen on ", where, ": ", uv_strerror(rc));
    }
    sockaddr_storage addr{};
    int len = sizeof addr;
    uv_tcp_getsockname(&listener, reinterpret_cast<sockaddr*>(&addr), &len);
    bound_port = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                            : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    bound.set_value();
  } catch (...) {
    bound.set_exception(std::current_exception());
  }
}

void Server::Impl::on_accept() {
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
  p->conn = Connection::create(loop.loop(), opts.max_message_bytes, std::move(handlers));
  const int rc = p->conn->accept_from(reinterpret_cast<uv_stream_t*>(&listener));
  if (rc != 0) {
    log(LogLevel::Warn, "server: accept failed: ", uv_strerror(rc));
    p->conn->close(GENIE_ERR_CONNECTION, "accept failed");
    return;
  }
  p->name = p->conn->peer();
  p->conn->set_nodelay(true);
  peers.emplace(p.get(), p);
  if (stopping) {
    p->conn->close(GENIE_ERR_SHUTDOWN, "the server is stopping");
    return;
  }
  p->handshake_timer = std::make_unique<Timer>(loop.loop());
  const auto timeout = static_cast<uint64_t>(opts.handshake_timeout_ms);
  p->handshake_timer->start(timeout, [wp, timeout] {
    auto peer = wp.lock();
    if (peer && !peer->closing &&
        (peer->state == Peer::State::Fresh || peer->state == Peer::State::AwaitAuth))
      peer->conn->close(GENIE_ERR_TIMEOUT, cat("no complete handshake within ", timeout, " ms"));
  });
  log(LogLevel::Debug, "server: connection from ", p->name);
}

void Server::Impl::on_close(const std::shared_ptr<Peer>& p, genie_status_t status, const std::string& what) {
  std::string detail = what;
  if (p->closing) {
    // Why this side decided to close tells more than how the close went
    // (the client may well hang up first once it has read the ErrorReply).
    status = p->close_status;
    detail = p->close_detail;
  }
  const bool refused = status != GENIE_OK && status != GENIE_ERR_CONNECTION && status != GENIE_ERR_SHUTDOWN;
  if (refused) {
    counters.connections_refused.fetch_add(1, std::memory_order_relaxed);
    log(LogLevel::Warn, "server: closed connection from ", p->name.empty() ? "?" : p->name, ": ",
        refusal_kind(status), ": ", detail);
  } else {
    log(LogLevel::Debug, "server: connection from ", p->name, " closed: ", detail);
  }
  p->handshake_timer.reset();
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

// ---------------------------------------------------------------------------
// Frames
// ---------------------------------------------------------------------------

PayloadSink Server::Impl::on_frame(const std::shared_ptr<Peer>& p, const wire::FrameHeader& h,
                                   std::string&& msg) {
  if (p->closing) return {};  // a payload is refused; the connection is closing anyway
  try {
    if (h.payload_len > 0 && h.type != MsgType::TensorWrite) {
      p->conn->close(GENIE_ERR_PROTOCOL,
                     cat(wire::type_name(h.type), " carries ", h.payload_len, " payload bytes"));
      return {};
    }
    if (p->state == Peer::State::Fresh || p->state == Peer::State::AwaitAuth) {
      if (h.payload_len > 0) {
        p->conn->close(GENIE_ERR_PROTOCOL, cat(wire::type_name(h.type), " before the handshake"));
        return {};
      }
      handshake(p, h, msg);
      return {};
    }
    return request(p, h, msg);
  } catch (const Error& e) {
    // Only handshake failures and protocol violations get here: request
    // errors are answered inside request().
    if (h.payload_len > 0) {
      p->conn->close(e.code(), e.detail());
      return {};
    }
    refuse(*p, h.request_id, e.code(), e.detail());
  } catch (const std::bad_alloc&) {
    refuse(*p, h.request_id, GENIE_ERR_OUT_OF_MEMORY, "out of memory", h.payload_len == 0);
  } catch (const std::exception& e) {
    refuse(*p, h.request_id, GENIE_ERR_INTERNAL, cat("internal error: ", e.what()), h.payload_len == 0);
  }
  return {};
}

void Server::Impl::handshake(const std::shared_ptr<Peer>& p, const wire::FrameHeader& h,
                             const std::string& msg) {
  if (p->state == Peer::State::Fresh && h.type == MsgType::Probe) {
    // Sessionless: who this server is and what it can do, for discovery
    // and backend selection. The connection stays in its handshake (and
    // its timeout), so any number of probes can measure the round trip.
    parse_msg<wire::Probe>(msg, h.type);
    check(opts.on_probe != nullptr, GENIE_ERR_UNSUPPORTED, "this server does not answer cluster probes");
    wire::ProbeReply r;
    opts.on_probe(r);
    send(*p, MsgType::ProbeReply, h.request_id, r);
    return;
  }
  if (p->state == Peer::State::AwaitAuth) {
    check(h.type == MsgType::AuthResponse, GENIE_ERR_PROTOCOL, "expected AuthResponse, got ",
          wire::type_name(h.type));
    const auto m = parse_msg<wire::AuthResponse>(msg, h.type);
    const std::string want = hmac_sha256(opts.auth_token, p->nonce + p->hello.node_id());
    const bool ok =
        m.mac().size() == want.size() && CRYPTO_memcmp(m.mac().data(), want.data(), want.size()) == 0;
    check(ok, GENIE_ERR_AUTH, "the AuthResponse of node '", p->hello.node_id(),
          "' does not prove it holds this server's token (check GENIE_AUTH_TOKEN on both sides)");
    p->hello_rid = h.request_id;  // Welcome now answers the AuthResponse
    admit(p);
    return;
  }

  if (h.type == MsgType::DataHello) {
    const auto m = parse_msg<wire::DataHello>(msg, h.type);
    auto it = sessions.find(m.session_token());
    check(it != sessions.end() && it->second->control != nullptr, GENIE_ERR_NOT_FOUND,
          "no connected session with this token (it ended, or its grace period expired)");
    p->state = Peer::State::Data;
    p->session = it->second;
    p->session->data.push_back(p.get());
    p->handshake_timer.reset();
    p->conn->set_buffer_sizes(4 << 20);
    send(*p, MsgType::Welcome, h.request_id, welcome(*p->session, false));
    log(LogLevel::Debug, "server: session ", p->session->serial(), ": data connection from ", p->name);
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
  check(hello.resume_token().empty() || hello.resume_token().size() == kTokenBytes, GENIE_ERR_PROTOCOL,
        "resume token of ", hello.resume_token().size(), " bytes (a session token has ", kTokenBytes, ")");
  if (opts.auth_token.empty()) {
    admit(p);
    return;
  }
  p->nonce = random_bytes(kNonceBytes);
  p->state = Peer::State::AwaitAuth;
  wire::Challenge c;
  c.set_nonce(p->nonce);
  send(*p, MsgType::Challenge, h.request_id, c);
}

// The control handshake succeeded: resume the session named by the Hello's
// token if it still exists, else start a new one.
void Server::Impl::admit(const std::shared_ptr<Peer>& p) {
  std::shared_ptr<Session> s;
  bool resumed = false;
  if (!p->hello.resume_token().empty()) {
    auto it = sessions.find(p->hello.resume_token());
    if (it != sessions.end()) {
      s = it->second;
      resumed = true;
    }
  }
  if (resumed) {
    s->grace.reset();
    // The client came back before this side noticed the old connection die
    // (a half-open TCP connection): the token proves it is the same client.
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
    s = std::make_shared<Session>(next_session_serial++, random_bytes(kTokenBytes), p->hello.node_id(),
                                  counters);
    sessions.emplace(s->token(), s);
    publish_sessions();
    log(LogLevel::Info, "server: session ", s->serial(), " opened by ", p->hello.node_id(), " from ", p->name,
        p->hello.resume_token().empty() ? "" : " (its old session had expired)");
  }
  s->control = p.get();
  p->session = s;
  p->state = Peer::State::Control;
  p->handshake_timer.reset();
  p->hello.Clear();
  p->nonce.clear();
  send(*p, MsgType::Welcome, p->hello_rid, welcome(*s, resumed));
}

wire::Welcome Server::Impl::welcome(const Session& s, bool resumed) const {
  wire::Welcome w;
  w.set_session_token(s.token());
  w.set_server_node_id(node_id);
  w.set_protocol_version(wire::kProtocolVersion);
  w.set_abi_version(GENIE_ABI_VERSION);
  w.add_devices("cpu:0");
  w.set_resumed(resumed);
  return w;
}

PayloadSink Server::Impl::request(const std::shared_ptr<Peer>& p, const wire::FrameHeader& h,
                                  const std::string& msg) {
  const uint64_t rid = h.request_id;
  const bool control = p->state == Peer::State::Control;
  check(is_client_request(h.type), GENIE_ERR_PROTOCOL, "unexpected ", wire::type_name(h.type),
        " from a client");
  // Parsing errors are protocol violations (the caller closes the connection);
  // everything after parsing is an answerable request error.
  switch (h.type) {
    case MsgType::TensorAlloc: {
      const auto m = parse_msg<wire::TensorAlloc>(msg, h.type);
      try {
        tensor_alloc(*p, rid, m);
      } catch (const Error& e) {
        send_error(*p, rid, e.code(), e.detail());
      } catch (const std::bad_alloc&) {
        send_error(*p, rid, GENIE_ERR_OUT_OF_MEMORY, "out of memory allocating the tensor");
      }
      return {};
    }
    case MsgType::TensorWrite: return tensor_write(p, h, parse_msg<wire::TensorWrite>(msg, h.type));
    case MsgType::TensorRead: {
      const auto m = parse_msg<wire::TensorRead>(msg, h.type);
      try {
        tensor_read(*p, rid, m);
      } catch (const Error& e) {
        send_error(*p, rid, e.code(), e.detail());
      }
      return {};
    }
    case MsgType::TensorFree: {
      const auto m = parse_msg<wire::TensorFree>(msg, h.type);
      p->session->erase(m.tensor_id());
      return {};
    }
    case MsgType::GraphSubmit: {
      check(control, GENIE_ERR_PROTOCOL, "GraphSubmit on a data connection (send it on the control one)");
      const auto m = parse_msg<wire::GraphSubmit>(msg, h.type);
      counters.graph_submits_full.fetch_add(1, std::memory_order_relaxed);
      counters.graph_submit_bytes.fetch_add(wire::kHeaderSize + msg.size(), std::memory_order_relaxed);
      try {
        if (m.keep_as_base()) {
          auto text = std::make_shared<const std::string>(m.graph_json());
          graph_submit(p, rid, *text, m.bindings());
          const std::string d = delta::digest(*text);
          bases.put(d, std::move(text));  // only graphs that loaded
        } else {
          graph_submit(p, rid, m.graph_json(), m.bindings());
        }
      } catch (const Error& e) {
        send_error(*p, rid, e.code(), e.detail());
      } catch (const std::bad_alloc&) {
        send_error(*p, rid, GENIE_ERR_OUT_OF_MEMORY, "out of memory loading the graph");
      }
      return {};
    }
    case MsgType::GraphSubmitDelta: {
      check(control, GENIE_ERR_PROTOCOL, "GraphSubmitDelta on a data connection (send it on the control one)");
      const auto m = parse_msg<wire::GraphSubmitDelta>(msg, h.type);
      counters.graph_submits_delta.fetch_add(1, std::memory_order_relaxed);
      counters.graph_submit_bytes.fetch_add(wire::kHeaderSize + msg.size(), std::memory_order_relaxed);
      bool unknown_base = false;
      try {
        const std::shared_ptr<const std::string> text = rebuild(m, &unknown_base);
        graph_submit(p, rid, *text, m.bindings());
      } catch (const Error& e) {
        if (unknown_base) {
          counters.graph_delta_unknown_base.fetch_add(1, std::memory_order_relaxed);
          wire::ErrorReply r;
          r.set_status(e.code());
          r.set_detail(e.detail());
          r.set_reason(wire::REASON_UNKNOWN_BASE);
          send(*p, MsgType::ErrorReply, rid, r);
        } else {
          send_error(*p, rid, e.code(), e.detail());
        }
      } catch (const std::bad_alloc&) {
        send_error(*p, rid, GENIE_ERR_OUT_OF_MEMORY, "out of memory loading the graph");
      }
      return {};
    }
    case MsgType::WorkerRegister: {
      check(control, GENIE_ERR_PROTOCOL, "WorkerRegister on a data connection (send it on the control one)");
      const auto m = parse_msg<wire::WorkerRegister>(msg, h.type);
      worker_register(p, rid, m);
      return {};
    }
    case MsgType::PlanExplain: {
      check(control, GENIE_ERR_PROTOCOL, "PlanExplain on a data connection (send it on the control one)");
      const auto m = parse_msg<wire::PlanExplain>(msg, h.type);
      try {
        plan_explain(p, rid, m);
      } catch (const Error& e) {
        send_error(*p, rid, e.code(), e.detail());
      }
      return {};
    }
    case MsgType::ServerInfoRequest:
      parse_msg<wire::ServerInfoRequest>(msg, h.type);
      send(*p, MsgType::ServerInfo, rid, server_info());
      return {};
    case MsgType::Heartbeat: {
      check(control, GENIE_ERR_PROTOCOL, "Heartbeat on a data connection (send it on the control one)");
      const auto m = parse_msg<wire::Heartbeat>(msg, h.type);
      try {
        check(opts.on_heartbeat != nullptr, GENIE_ERR_UNSUPPORTED, "this server does not track cluster nodes");
        wire::HeartbeatReply r;
        opts.on_heartbeat(p->name, p->session->client_node(), m, r);
        send(*p, MsgType::HeartbeatReply, rid, r);
      } catch (const Error& e) {
        send_error(*p, rid, e.code(), e.detail());
      }
      return {};
    }
    case MsgType::Goodbye:
      parse_msg<wire::Goodbye>(msg, h.type);
      if (control)
        end_session(p->session, "said goodbye");
      else
        close_when_flushed(*p, GENIE_OK, "goodbye");
      return {};
    default: break;
  }
  fail(GENIE_ERR_PROTOCOL, "unexpected ", wire::type_name(h.type));
}

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
  check(dev.empty() || dev == "cpu" || dev == "cpu:0", GENIE_ERR_UNSUPPORTED, "device '", m.device(),
        "' is not served by ", node_id, ": it serves cpu:0");
  const size_t bytes = byte_size(shape, dtype_size(dtype));  // TOO_LARGE on overflow
  const uint64_t held = counters.tensor_bytes.load(std::memory_order_relaxed);
  check(bytes <= memory_limit && held <= memory_limit - bytes, GENIE_ERR_OUT_OF_MEMORY, "a tensor of ", bytes,
        " bytes ", shape_str(shape), " does not fit: this server holds ", held, " tensor bytes of ",
        memory_limit, " bytes of memory");
  const uint64_t id = p.session->add(std::make_shared<TensorData>(dtype, std::move(shape)));
  wire::TensorAllocReply r;
  r.set_tensor_id(id);
  send(p, MsgType::TensorAllocReply, rid, r);
}

PayloadSink Server::Impl::tensor_write(const std::shared_ptr<Peer>& p, const wire::FrameHeader& h,
                                       const wire::TensorWrite& m) {
  const uint64_t rid = h.request_id;
  const uint64_t n = h.payload_len;
  if (RemoteTensorPtr wt = p->session->find_remote(m.tensor_id())) return forward_write(p, h, wt, m.offset());
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
  sink.dst = t->bytes() + m.offset();
  sink.keep = t;
  std::weak_ptr<Peer> wp = p;
  sink.done = [this, wp, rid] {
    if (auto peer = wp.lock(); peer && !peer->closing) send(*peer, MsgType::Ok, rid, wire::Ok());
  };
  return sink;
}

void Server::Impl::tensor_read(Peer& p, uint64_t rid, const wire::TensorRead& m) {
  if (RemoteTensorPtr wt = p.session->find_remote(m.tensor_id())) {
    check(m.offset() <= wt->nbytes && m.nbytes() <= wt->nbytes - m.offset(), GENIE_ERR_SIZE_MISMATCH, "reading ",
          m.nbytes(), " bytes at offset ", m.offset(), " overruns tensor ", m.tensor_id(), " of ", wt->nbytes,
          " bytes");
    forward_read(p.shared_from_this(), rid, wt, m.offset(), m.nbytes());
    return;
  }
  TensorPtr t = p.session->get(m.tensor_id());
  check(m.offset() <= t->nbytes() && m.nbytes() <= t->nbytes() - m.offset(), GENIE_ERR_SIZE_MISMATCH,
        "reading ", m.nbytes(), " bytes at offset ", m.offset(), " overruns tensor ", m.tensor_id(), " of ",
        t->nbytes(), " bytes");
  const std::byte* src = t->bytes() + m.offset();
  send(p, MsgType::Ok, rid, wire::Ok(), src, m.nbytes(), t);
}

std::shared_ptr<const std::string> Server::Impl::rebuild(const wire::GraphSubmitDelta& m, bool* unknown_base) {
  std::shared_ptr<const std::string> base = bases.find(m.base_hash());
  if (!base) {
    *unknown_base = true;
    fail(GENIE_ERR_NOT_FOUND, "unknown base graph ", delta::short_hex(m.base_hash()),
         ": this server does not hold it (send the full graph)");
  }
  if (m.patches_size() == 0) {
    if (m.graph_hash() == m.base_hash()) return base;
    *unknown_base = true;
    fail(GENIE_ERR_NOT_FOUND, "graph delta without patches names graph ", delta::short_hex(m.graph_hash()),
         " but base ", delta::short_hex(m.base_hash()), " (send the full graph)");
  }
  std::vector<delta::Patch> patches;
  patches.reserve(m.patches_size());
  for (const wire::LeafPatch& lp : m.patches()) patches.push_back({lp.leaf(), lp.json()});
  auto text = std::make_shared<const std::string>(delta::apply(*base, patches));
  const std::string d = delta::digest(*text);
  if (d != m.graph_hash()) {
    *unknown_base = true;
    fail(GENIE_ERR_NOT_FOUND, "graph delta on base ", delta::short_hex(m.base_hash()), " rebuilt graph ",
         delta::short_hex(d), ", not ", delta::short_hex(m.graph_hash()), " (send the full graph)");
  }
  bases.put(d, text);
  return text;
}

void Server::Impl::graph_submit(const std::shared_ptr<Peer>& p, uint64_t rid, const std::string& json,
                                const Bindings& bindings) {
  check(!stopping, GENIE_ERR_SHUTDOWN, "the server is stopping");
  std::vector<std::string> names;
  std::vector<TensorDesc> descs;
  std::vector<TensorPtr> tensors;
  names.reserve(bindings.size());
  descs.reserve(bindings.size());
  tensors.reserve(bindings.size());
  std::vector<RemoteTensorPtr> remote;  // per binding: set when the tensor is on a worker
  for (const wire::Binding& b : bindings) {
    names.push_back(b.name());
    if (RemoteTensorPtr wt = p->session->find_remote(b.tensor_id())) {
      descs.push_back({wt->dtype, wt->shape});
      tensors.push_back(nullptr);
      remote.resize(bindings.size());
      remote[tensors.size() - 1] = std::move(wt);
      continue;
    }
    TensorPtr t = p->session->get(b.tensor_id());
    descs.push_back({t->dtype(), t->shape()});
    tensors.push_back(std::move(t));
  }
  const GraphCache::Entry e = graphs.get(json, names, descs);
  if (!remote.empty() || (workers && workers->has_workers())) {
    // Planned across this server and its workers, on the task thread.
    auto r = std::make_shared<Resolved>();
    r->entry = e;
    for (size_t k = 0; k < e.order.size(); ++k) {
      const size_t i = e.order[k];
      r->inputs.push_back(i < remote.size() && remote[i] ? Held{nullptr, remote[i]} : Held{tensors[i], nullptr});
      r->shapes[e.graph->inputs()[k]] = descs[i].shape;
    }
    std::weak_ptr<Peer> wp = p;
    std::weak_ptr<Session> ws = p->session;
    ++graphs_in_flight;  // multinode_done counts it out
    if (!tasks.post([this, r, wp, ws, rid] {
          auto result = std::make_shared<MultiResult>(workers->run(r->entry.graph, r->inputs, r->shapes));
          loop.post([this, wp, ws, rid, graph = r->entry.graph, result] {
            multinode_done(wp, ws, rid, graph, *result);
          });
        })) {
      --graphs_in_flight;
      fail(GENIE_ERR_SHUTDOWN, "the server is stopping");
    }
    return;
  }
  std::vector<TensorPtr> inputs;
  inputs.reserve(e.order.size());
  for (size_t i : e.order) inputs.push_back(tensors[i]);

  std::weak_ptr<Peer> wp = p;
  std::weak_ptr<Session> ws = p->session;
  if (Executor::is_tiny(*e.graph, inputs)) {
    // Microseconds of work: handing it to a worker and its completion back
    // to this loop would cost more than running it here.
    ExecResult r = exec.run_inline(e.graph, std::move(inputs));
    ++graphs_in_flight;  // graph_done counts it out
    graph_done(wp, ws, rid, e.graph, r);
    return;
  }
  ++graphs_in_flight;  // before run(): the completion may be posted at once
  try {
    exec.run(e.graph, std::move(inputs), [this, wp, ws, rid, graph = e.graph](ExecResult&& r) {
      auto result = std::make_shared<ExecResult>(std::move(r));
      // Cannot fail: stop() keeps the loop running until every graph is done.
      loop.post([this, wp, ws, rid, graph, result] { graph_done(wp, ws, rid, graph, *result); });
    });
  } catch (...) {
    --graphs_in_flight;
    throw;
  }
}

// Stores the outputs in the session and reports them, if the connection that
// submitted the graph is still there; otherwise nobody can learn the outputs'
// ids, so they are dropped at once rather than held until the session ends.
// A graph output held here (TensorPtr) or here or on a worker (Held).
static DType dtype_of(const TensorPtr& t) { return t->dtype(); }
static DType dtype_of(const Held& t) { return t.dtype(); }
static const Shape& shape_of(const TensorPtr& t) { return t->shape(); }
static const Shape& shape_of(const Held& t) { return t.shape(); }
static std::string device_of(const TensorPtr&) { return "cpu:0"; }
static std::string device_of(const Held& t) { return t.local ? "cpu:0" : t.remote->device; }

template <class Result, class Store>
void Server::Impl::report_done(const std::weak_ptr<Peer>& wp, const std::weak_ptr<Session>& ws, uint64_t rid,
                               const Graph& graph, Result& r, Store store) {
  --graphs_in_flight;
  counters.graphs_executed.fetch_add(1, std::memory_order_relaxed);
  auto p = wp.lock();
  auto s = ws.lock();
  if (p && s && !p->closing && p->state == Peer::State::Control && p->session == s && s->control == p.get()) {
    try {
      wire::GraphDone d;
      d.set_status(r.status);
      d.set_detail(r.detail);
      d.set_exec_ns(r.exec_ns);
      if (r.status == GENIE_OK) {
        for (size_t i = 0; i < r.outputs.size() && i < graph.outputs().size(); ++i) {
          const auto& t = r.outputs[i];
          wire::OutputTensor* o = d.add_outputs();
          o->set_name(graph.value(graph.outputs()[i]).name);
          o->set_dtype(static_cast<int32_t>(dtype_of(t)));
          for (int64_t dim : shape_of(t)) o->add_shape(dim);
          o->set_device(device_of(t));
          o->set_tensor_id(store(t, *s));
        }
      }
      send(*p, MsgType::GraphDone, rid, d);
    } catch (const std::exception& e) {
      log(LogLevel::Error, "server: session ", s->serial(), ": cannot report graph completion: ", e.what());
    }
  } else {
    log(LogLevel::Debug, "server: graph of request ", rid, " finished after its connection was lost");
  }
  maybe_finish_stop();
}

void Server::Impl::graph_done(const std::weak_ptr<Peer>& wp, const std::weak_ptr<Session>& ws, uint64_t rid,
                              const std::shared_ptr<const Graph>& graph, ExecResult& r) {
  report_done(wp, ws, rid, *graph, r, [](const TensorPtr& t, Session& s) { return s.add(t); });
}

wire::ServerInfo Server::Impl::server_info() const {
  wire::ServerInfo i;
  i.set_node_id(node_id);
  i.set_sessions(counters.sessions.load());
  i.set_tensors(counters.tensors.load());
  i.set_tensor_bytes(counters.tensor_bytes.load());
  i.set_uptime_ms(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started)
          .count()));
  i.set_graphs_executed(counters.graphs_executed.load());
  i.set_connections_refused(counters.connections_refused.load());
  i.set_graph_submits_full(counters.graph_submits_full.load());
  i.set_graph_submits_delta(counters.graph_submits_delta.load());
  i.set_graph_submit_bytes(counters.graph_submit_bytes.load());
  i.set_graph_delta_unknown_base(counters.graph_delta_unknown_base.load());
  const Orchestrator::Stats c = workers ? workers->stats() : Orchestrator::Stats{};
  i.set_workers(c.workers);
  i.set_multinode_graphs(c.multinode_graphs);
  i.set_server_transfer_bytes(c.transfer_bytes);
  for (const auto& [role, bytes] : c.transfer_bytes_by_role) (*i.mutable_server_transfer_bytes_by_role())[role] = bytes;
  i.set_plan_cache_hits(c.plan_hits);
  i.set_plan_cache_misses(c.plan_misses);
  i.set_last_plan_predicted_ns(c.last_predicted_ns);
  i.set_last_plan_measured_ns(c.last_measured_ns);
  return i;
}

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
  Config c;
  c.master_addr = opts.join_host;
  c.master_port = opts.join_port;
  c.auth_token = opts.auth_token;
  c.role = GENIE_ROLE_WORKER;
  c.timeout_ms = opts.client_timeout_ms;
  c.graph_deltas = false;
  sched::CalibrateOptions co;
  co.node_id = node_id;
  sched::DeviceProfile profile = sched::calibrate_local_cpu(co);
  profile.op_overhead_s = measure_node_overhead(exec);
  master_link = RemoteClient::connect(c, node_id);
  master_link->register_worker(host, bound_port, {profile});
  if (opts.on_joined) opts.on_joined(master_link, host, bound_port);
  log(LogLevel::Info, "server ", node_id, ": joined master ", master_link->server_node_id(), " at ",
      opts.join_host, ":", opts.join_port, " as a worker reachable at ", host, ":", bound_port);
}

void Server::Impl::off_loop(const std::shared_ptr<Peer>& p, uint64_t rid, std::function<void()> task) {
  std::weak_ptr<Peer> wp = p;
  const bool posted = tasks.post([this, wp, rid, task = std::move(task)] {
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

void Server::Impl::worker_register(const std::shared_ptr<Peer>& p, uint64_t rid, const wire::WorkerRegister& m) {
  try {
    check(!stopping, GENIE_ERR_SHUTDOWN, "the server is stopping");
    check(workers != nullptr, GENIE_ERR_UNSUPPORTED, "this server takes no workers (multi-node is off)");
    check(m.node_id() == p->session->client_node(), GENIE_ERR_INVALID_ARGUMENT, "a worker registers itself: node id '",
          m.node_id(), "' is not this session's");
    check(m.port() >= 1 && m.port() <= 65535 && !m.host().empty() && m.host().size() <= 255,
          GENIE_ERR_INVALID_ARGUMENT, "worker address '", m.host(), ":", m.port(), "' is not a host and port");
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
      check(prof.device == "cpu:0" && prof.peak_flops > 0 && prof.mem_bw_bytes_per_s > 0, GENIE_ERR_INVALID_ARGUMENT,
            "worker device '", prof.device, "' needs positive rates (and only cpu:0 is served by workers now)");
      devices.push_back(prof);
    }
    const void* by = p->session.get();
    std::weak_ptr<Peer> wp = p;
    off_loop(p, rid, [this, wp, rid, m, devices = std::move(devices), by]() mutable {
      workers->join(m.node_id(), m.host(), static_cast<int>(m.port()), std::move(devices), by);
      if (opts.on_worker) opts.on_worker(m.node_id(), m.host(), static_cast<int>(m.port()), true);
      loop.post([this, wp, rid] {
        if (auto peer = wp.lock(); peer && !peer->closing) send(*peer, MsgType::Ok, rid, wire::Ok());
      });
    });
  } catch (const Error& e) {
    send_error(*p, rid, e.code(), e.detail());
  }
}

void Server::Impl::worker_session_gone(const Session& s) {
  std::shared_ptr<RemoteClient> c = workers ? workers->leave(&s) : nullptr;
  if (c && opts.on_worker) opts.on_worker(s.client_node(), "", 0, false);
  // Closing says goodbye and may wait: not on this thread.
  if (c) tasks.post([c] { c->close(); });
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
  auto r = std::make_shared<Resolved>();
  if (m.bindings_size() == 0) {
    // Nothing bound: every input planned as not yet resident anywhere (its
    // declared shape must be static).
    std::unique_ptr<Graph> g = graph_from_json(m.graph_json().data(), m.graph_json().size());
    g->validate();
    r->inputs.resize(g->inputs().size());
    r->entry.graph = std::move(g);
  } else {
    r->entry = graphs.get(m.graph_json(), names, descs);
  }
  for (size_t k = 0; k < r->entry.order.size(); ++k) {
    const size_t i = r->entry.order[k];
    r->inputs.push_back(held[i]);
    r->shapes[r->entry.graph->inputs()[k]] = descs[i].shape;
  }
  std::weak_ptr<Peer> wp = p;
  off_loop(p, rid, [this, wp, rid, r] {
    wire::PlanExplainReply reply;
    reply.set_json(workers->explain(*r->entry.graph, r->inputs, r->shapes));
    loop.post([this, wp, rid, reply] {
      if (auto peer = wp.lock(); peer && !peer->closing) send(*peer, MsgType::PlanExplainReply, rid, reply);
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
                                        const RemoteTensorPtr& t, uint64_t offset) {
  const uint64_t rid = h.request_id;
  const uint64_t n = h.payload_len;
  if (offset > t->nbytes || n > t->nbytes - offset) {
    const std::string detail = cat("writing ", n, " bytes at offset ", offset, " overruns a tensor of ", t->nbytes,
                                   " bytes");
    send_error(*p, rid, GENIE_ERR_SIZE_MISMATCH, detail);
    if (n > 0) {
      p->closing = true;
      p->close_status = GENIE_ERR_SIZE_MISMATCH;
      p->close_detail = detail + " (payload refused, connection closed)";
    }
    return {};
  }
  // The bytes land here first, then go to the worker from the task thread.
  std::shared_ptr<std::byte[]> buf(new std::byte[n > 0 ? n : 1]);
  auto ship = [this, wp = std::weak_ptr<Peer>(p), rid, t, offset, n, buf] {
    auto peer = wp.lock();
    if (!peer || peer->closing) return;
    try {
      off_loop(peer, rid, [this, wp, rid, t, offset, n, buf] {
        t->client->tensor_write(t->id, offset, buf.get(), n);
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
                                uint64_t offset, uint64_t nbytes) {
  std::weak_ptr<Peer> wp = p;
  off_loop(p, rid, [this, wp, rid, t, offset, nbytes] {
    std::shared_ptr<std::byte[]> buf(new std::byte[nbytes > 0 ? nbytes : 1]);
    t->client->tensor_read(t->id, offset, buf.get(), nbytes);
    loop.post([this, wp, rid, buf, nbytes] {
      if (auto peer = wp.lock(); peer && !peer->closing)
        send(*peer, MsgType::Ok, rid, wire::Ok(), buf.get(), nbytes, buf);
    });
  });
}

void Server::Impl::multinode_done(const std::weak_ptr<Peer>& wp, const std::weak_ptr<Session>& ws, uint64_t rid,
                                  const std::shared_ptr<const Graph>& graph, MultiResult& r) {
  report_done(wp, ws, rid, *graph, r,
              [](const Held& t, Session& s) { return t.local ? s.add(t.local) : s.add_remote(t.remote); });
}

// ---------------------------------------------------------------------------
// Sending and closing
// ---------------------------------------------------------------------------

void Server::Impl::send(Peer& p, MsgType type, uint64_t rid, const google::protobuf::Message& msg,
                        const void* payload, uint64_t payload_len, std::shared_ptr<void> keep) {
  if (p.conn->closed()) return;
  if (p.pending_writes >= kMaxQueuedReplies) {
    p.conn->close(GENIE_ERR_PROTOCOL,
                  cat(p.pending_writes, " replies queued: the client does not read them"));
    return;
  }
  const uint32_t flags = type == MsgType::ErrorReply ? wire::kFlagError : 0;
  ++p.pending_writes;
  std::weak_ptr<Peer> wp = p.weak_from_this();
  p.conn->send(type, rid, flags, wire::encode_msg(msg), payload, payload_len, std::move(keep),
               [this, wp](genie_status_t) {
                 auto peer = wp.lock();
                 if (!peer) return;
                 --peer->pending_writes;
                 if (peer->closing && peer->pending_writes == 0 && !peer->conn->closed())
                   peer->conn->close(GENIE_OK, peer->close_detail);
               });
}

void Server::Impl::send_error(Peer& p, uint64_t rid, genie_status_t status, const std::string& detail) {
  wire::ErrorReply e;
  e.set_status(status);
  e.set_detail(detail);
  send(p, MsgType::ErrorReply, rid, e);
}

void Server::Impl::refuse(Peer& p, uint64_t rid, genie_status_t status, const std::string& detail,
                          bool reply) {
  if (reply) send_error(p, rid, status, detail);
  close_when_flushed(p, status, detail);
}

void Server::Impl::close_when_flushed(Peer& p, genie_status_t status, const std::string& detail) {
  const auto keep = p.shared_from_this();  // on_close may drop the table's reference
  if (!p.closing) {
    p.closing = true;
    p.close_status = status;
    p.close_detail = detail;
  }
  if (p.pending_writes == 0 && !p.conn->closed()) p.conn->close(GENIE_OK, p.close_detail);
}

// ---------------------------------------------------------------------------
// Sessions
// ---------------------------------------------------------------------------

void Server::Impl::end_session(const std::shared_ptr<Session>& s, const char* why) {
  auto it = sessions.find(s->token());
  if (it == sessions.end() || it->second != s) return;
  log(LogLevel::Info, "server: session ", s->serial(), " of ", s->client_node(), " ended (", why,
      "), freeing ", s->num_tensors(), " tensors");
  worker_session_gone(*s);
  s->grace.reset();
  s->clear();
  sessions.erase(it);
  publish_sessions();
  std::vector<std::shared_ptr<Peer>> conns;
  if (s->control) conns.push_back(s->control->shared_from_this());
  for (Peer* d : s->data) conns.push_back(d->shared_from_this());
  s->control = nullptr;
  s->data.clear();
  for (auto& c : conns) close_when_flushed(*c, GENIE_OK, cat("session ended: ", why));
}

void Server::Impl::control_lost(const std::shared_ptr<Session>& s) {
  if (!sessions.count(s->token())) return;
  worker_session_gone(*s);  // a worker lives as long as its connection
  // Data connections serve the control connection's client: a reconnecting
  // client opens new ones.
  std::vector<std::shared_ptr<Peer>> data;
  for (Peer* d : s->data) data.push_back(d->shared_from_this());
  for (auto& d : data) close_when_flushed(*d, GENIE_OK, "control connection lost");
  if (stopping || opts.session_grace_ms == 0) {
    end_session(s, stopping ? "server stopping" : "connection lost, no grace period");
    return;
  }
  log(LogLevel::Info, "server: session ", s->serial(), " lost its connection; its ", s->num_tensors(),
      " tensors are kept for ", opts.session_grace_ms, " ms");
  s->grace = std::make_unique<Timer>(loop.loop());
  std::weak_ptr<Session> ws = s;
  s->grace->start(static_cast<uint64_t>(opts.session_grace_ms), [this, ws] {
    if (auto session = ws.lock()) end_session(session, "grace period expired");
  });
}

// ---------------------------------------------------------------------------
// Stopping
// ---------------------------------------------------------------------------

void Server::Impl::begin_stop() {
  if (stopping) return;
  stopping = true;
  log(LogLevel::Info, "server ", node_id, ": stopping (", graphs_in_flight, " graphs in flight)");
  if (listening) {
    uv_close(reinterpret_cast<uv_handle_t*>(&listener), nullptr);
    listening = false;
  }
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
  if (impl->workers) impl->workers->close_all();
  if (impl->master_link) impl->master_link->close();
  // Every connection and session is gone; what remains on the loop is
  // closed by LoopThread::stop (its uv_walk).
  impl->loop.stop([impl] {
    if (impl->opts.on_stop) impl->opts.on_stop();
    impl->stop_timer.reset();
    impl->peers.clear();
    impl->sessions.clear();
  });
}

ServerStats Server::stats() const {
  const ServerCounters& c = impl_->counters;
  ServerStats s;
  s.sessions = c.sessions.load();
  s.tensors = c.tensors.load();
  s.tensor_bytes = c.tensor_bytes.load();
  s.graphs_executed = c.graphs_executed.load();
  s.connections_refused = c.connections_refused.load();
  s.graph_submits_full = c.graph_submits_full.load();
  s.graph_submits_delta = c.graph_submits_delta.load();
  s.graph_submit_bytes = c.graph_submit_bytes.load();
  s.graph_delta_unknown_base = c.graph_delta_unknown_base.load();
  const Orchestrator::Stats m = impl_->workers ? impl_->workers->stats() : Orchestrator::Stats{};
  s.workers = m.workers;
  s.multinode_graphs = m.multinode_graphs;
  s.server_transfer_bytes = m.transfer_bytes;
  s.server_transfer_bytes_by_role = m.transfer_bytes_by_role;
  return s;
}

}  // namespace genie
