// Connecting and accepting, and the owner's settings (connection_impl.hpp
// says where the rest of Connection lives).
#include "dataplane/tcp/connection_impl.hpp"

namespace genie::dataplane::tcp {

std::string format_address(const sockaddr_storage& ss) {
  char ip[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) {
    const auto* sin = reinterpret_cast<const sockaddr_in*>(&ss);
    if (uv_ip4_name(sin, ip, sizeof ip) != 0) return {};
    return cat(ip, ':', ntohs(sin->sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    if (uv_ip6_name(sin6, ip, sizeof ip) != 0) return {};
    return cat('[', ip, "]:", ntohs(sin6->sin6_port));
  }
  return {};
}

// Connected: a peer on this host gets a smaller pipe (socket_buffers.hpp).
void Connection::Impl::apply_buffer_sizes() {
  if (buffer_bytes <= 0) return;
  uv_os_fd_t fd;
  if (uv_fileno(handle(), &fd) != 0) return;
  const int bytes = set_socket_buffers(fd, buffer_bytes, true);
  if (bytes != buffer_bytes)
    log(LogLevel::Debug, "connection: ", peer, " is on this host: ", bytes, "-byte buffers");
}

void Connection::Impl::finish_connect(genie_status_t status, const std::string& detail) {
  auto cb = std::move(connect_cb);
  connect_cb = nullptr;
  if (cb) guarded_log([&] { cb(status, detail); }, "connect callback");
}

// A failed connect closes the connection; the close callback answers
// connect's cb (so it never runs inside connect()), then on_close.
void Connection::Impl::fail_connect(const std::string& detail) {
  if (owner->closing_) return;
  connect_failed = true;
  owner->close(GENIE_ERR_CONNECTION, detail);
}

int Connection::Impl::start_reading() {
  established = true;
  if (peer.empty()) peer = peer_of(&tcp);
  apply_buffer_sizes();
  if (tls_ctx) tls = std::make_unique<TlsSession>(tls_ctx, tls_host);
  return uv_read_start(stream(), on_alloc, on_read);
}

void Connection::Impl::start_connect(const sockaddr* addr) {
  // Our own socket, so that buffer sizes are set before the SYN (the
  // window scale is fixed by the handshake).
  const int fd = ::socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    fail_connect(
        cat("cannot connect to ", target, ": socket: ", uv_strerror(uv_translate_sys_error(errno))));
    return;
  }
  if (buffer_bytes > 0) set_socket_buffers(fd, buffer_bytes, false);
  int rc = uv_tcp_open(&tcp, fd);
  if (rc != 0) {
    ::close(fd);
    fail_connect(cat("cannot connect to ", target, ": ", uv_strerror(rc)));
    return;
  }
  if (nodelay) uv_tcp_nodelay(&tcp, 1);
  rc = uv_tcp_connect(&connect_req, &tcp, addr, on_connected);
  if (rc != 0) fail_connect(cat("cannot connect to ", target, ": ", uv_strerror(rc)));
}

void Connection::Impl::on_resolved(uv_getaddrinfo_t* req, int status, addrinfo* res) {
  std::unique_ptr<Resolve> r(static_cast<Resolve*>(req->data));
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> ai(res, uv_freeaddrinfo);
  Impl* c = r->conn->impl_.get();
  c->resolving = nullptr;
  if (r->conn->closing_) return;  // the close callback answers connect's cb
  if (status != 0) {
    c->fail_connect(cat("cannot connect to ", c->target, ": cannot resolve host: ", uv_strerror(status)));
    return;
  }
  const addrinfo* pick = nullptr;
  for (const addrinfo* a = res; a != nullptr && pick == nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) pick = a;
  }
  for (const addrinfo* a = res; a != nullptr && pick == nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET6) pick = a;
  }
  if (pick == nullptr) {
    c->fail_connect(cat("cannot connect to ", c->target, ": no IPv4 or IPv6 address"));
    return;
  }
  c->start_connect(pick->ai_addr);
}

void Connection::Impl::on_connected(uv_connect_t* req, int status) {
  auto* c = static_cast<Impl*>(req->handle->data);
  if (c->owner->closing_) return;  // the close callback answers connect's cb
  if (status != 0) {
    c->fail_connect(cat("cannot connect to ", c->target, ": ", uv_strerror(status)));
    return;
  }
  const int rc = c->start_reading();
  if (rc != 0) {
    c->fail_connect(cat("cannot read from ", c->target, ": ", uv_strerror(rc)));
    return;
  }
  if (c->tls) {
    // Connected once the TLS handshake has finished (tls_read).
    c->tls->start();
    c->write_raw(c->tls->take_output(), false);
    return;
  }
  c->finish_connect(GENIE_OK, std::string());
}

std::shared_ptr<Connection> Connection::create(uv_loop_t* loop, uint32_t max_message, Handlers handlers) {
  // The constructor is protected, so make_shared cannot reach it.
  std::shared_ptr<Connection> conn(new Connection(loop, max_message, std::move(handlers)));
  conn->init();
  return conn;
}

void Connection::init() {
  Impl* c = impl_.get();
  const int rc = uv_tcp_init(c->loop, &c->tcp);
  if (rc != 0) fail(GENIE_ERR_INTERNAL, "uv_tcp_init: ", uv_strerror(rc));
  c->tcp.data = c;
  c->self = shared_from_this();
  std::weak_ptr<Connection> weak = c->self;
  c->hook_id = add_close_hook(c->loop, [weak] {
    if (auto strong = weak.lock()) strong->close(GENIE_ERR_SHUTDOWN, "event loop stopped");
  });
}

Connection::Connection(uv_loop_t* loop, uint32_t max_message, Handlers handlers)
    : impl_(std::make_unique<Impl>(this, loop, max_message, std::move(handlers))) {}

Connection::~Connection() = default;

int Connection::accept_from(uv_stream_t* server) {
  Impl* c = impl_.get();
  if (closing_ || c->established || c->connect_called) return UV_EINVAL;
  int rc = uv_accept(server, c->stream());
  if (rc != 0) return rc;
  c->apply_buffer_sizes();
  return c->start_reading();
}

void Connection::connect(const std::string& host, int port,
                         std::function<void(genie_status_t, const std::string&)> cb) {
  Impl* c = impl_.get();
  if (c->connect_called || c->established || closing_) {
    // Misuse, answered at once: closing the connection for it would take
    // down a connection that may be working.
    const std::string why = closing_ ? "the connection is closed" : "connect() was already called";
    const genie_status_t st = closing_ ? GENIE_ERR_CONNECTION : GENIE_ERR_INVALID_ARGUMENT;
    if (cb)
      guarded_log([&] { cb(st, cat("cannot connect to ", host, ':', port, ": ", why)); }, "connect callback");
    return;
  }
  c->connect_called = true;
  c->connect_cb = std::move(cb);
  c->target = host.find(':') != std::string::npos && host.front() != '[' ? cat('[', host, "]:", port)
                                                                         : cat(host, ':', port);
  if (port <= 0 || port > 65535) {
    c->fail_connect(cat("cannot connect to ", c->target, ": port out of range"));
    return;
  }
  if (host.empty()) {
    c->fail_connect(cat("cannot connect to ", c->target, ": empty host name"));
    return;
  }
  std::string bare = host;
  if (bare.size() >= 2 && bare.front() == '[' && bare.back() == ']') bare = bare.substr(1, bare.size() - 2);
  c->tls_host = bare;
  sockaddr_storage ss{};
  if (uv_ip4_addr(bare.c_str(), port, reinterpret_cast<sockaddr_in*>(&ss)) == 0 ||
      uv_ip6_addr(bare.c_str(), port, reinterpret_cast<sockaddr_in6*>(&ss)) == 0) {
    c->start_connect(reinterpret_cast<const sockaddr*>(&ss));
    return;
  }
  auto r = std::make_unique<Impl::Resolve>();
  r->req.data = r.get();
  r->conn = shared_from_this();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  hints.ai_flags = AI_NUMERICSERV;
  const std::string service = std::to_string(port);
  const int rc = uv_getaddrinfo(c->loop, &r->req, Impl::on_resolved, bare.c_str(), service.c_str(), &hints);
  if (rc != 0) {
    c->fail_connect(cat("cannot connect to ", c->target, ": cannot resolve host: ", uv_strerror(rc)));
    return;
  }
  c->resolving = r.release();  // owned by the request until Impl::on_resolved
}

void Connection::set_tls(std::shared_ptr<const TlsContext> ctx) { impl_->tls_ctx = std::move(ctx); }

void Connection::set_nodelay(bool on) {
  impl_->nodelay = on;
  if (!closing_) uv_tcp_nodelay(&impl_->tcp, on ? 1 : 0);
}

void Connection::set_max_message(uint32_t bytes) { impl_->max_message = bytes; }

void Connection::set_message_budget(std::shared_ptr<MessageBudget> budget) {
  Impl* c = impl_.get();
  // Only between messages: what the buffer holds was charged to the old one.
  if (c->charged == 0) c->budget = std::move(budget);
}

void Connection::set_buffer_sizes(int bytes) {
  impl_->buffer_bytes = bytes;
  if (!closing_ && impl_->established) impl_->apply_buffer_sizes();
}

std::string Connection::peer() const {
  if (!impl_->peer.empty() || closing_) return impl_->peer;
  return peer_of(&impl_->tcp);
}

std::string Connection::peer_identity() const {
  return impl_->tls ? impl_->tls->peer_fingerprint() : std::string();
}

std::vector<std::string> Connection::peer_names() const {
  return impl_->tls ? impl_->tls->peer_names() : std::vector<std::string>();
}

std::string Connection::channel_binding() const {
  return impl_->tls ? impl_->tls->channel_binding() : std::string();
}

}  // namespace genie::dataplane::tcp
