#include "dataplane/tcp/transport.hpp"

#include <netdb.h>

#include <limits>
#include <memory>

#include "core/error.hpp"
#include "core/log.hpp"
#include "dataplane/loop_hooks.hpp"
#include "dataplane/resolve.hpp"
#include "dataplane/tcp/connection.hpp"

namespace genie::dataplane::tcp {
namespace {

// Nothing to register with the kernel: the descriptor only lets a peer name
// the range in a request.
class HostRegion final : public MemoryRegion {
 public:
  HostRegion(void* data, MemoryDescriptor d) : MemoryRegion(data, std::move(d)) {}
};

void apply_options(Connection& c, const ChannelOptions& o) {
  if (o.nodelay) c.set_nodelay(true);
  if (o.buffer_bytes > 0) c.set_buffer_sizes(o.buffer_bytes);
  if (o.budget) c.set_message_budget(o.budget);
}

class TcpListener final : public Listener, public std::enable_shared_from_this<TcpListener> {
 public:
  TcpListener(uv_loop_t* loop, ChannelOptions options, Transport::ConnectionFn on_connection)
      : loop_(loop), options_(options), on_connection_(std::move(on_connection)) {}

  // Binds and listens; throws (after closing the handle) on failure. The
  // host may be a name (resolved here, blocking: listening is rare) or a
  // wildcard address.
  void start(const std::string& address) {
    std::string why;
    const AddrInfo res = resolve_address(address, true, &why);
    if (!res) fail(GENIE_ERR_IO, "cannot listen on ", address, ": ", why);
    int rc = uv_tcp_init(loop_, &server_);
    if (rc != 0) fail(GENIE_ERR_INTERNAL, "uv_tcp_init: ", uv_strerror(rc));
    server_.data = this;
    self_ = shared_from_this();
    std::weak_ptr<TcpListener> weak = self_;
    hook_ = add_close_hook(loop_, [weak] {
      if (auto l = weak.lock()) l->close();
    });
    rc = uv_tcp_bind(&server_, res->ai_addr, 0);
    if (rc == 0) rc = uv_listen(reinterpret_cast<uv_stream_t*>(&server_), 128, on_listen);
    if (rc != 0) {
      close();
      fail(GENIE_ERR_IO, "cannot listen on ", address, ": ", uv_strerror(rc));
    }
  }

  std::string address() const override {
    sockaddr_storage ss{};
    int len = sizeof ss;
    if (closing_ || uv_tcp_getsockname(&server_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
    return format_address(ss);
  }

  std::shared_ptr<Channel> accept(ChannelHandlers handlers) override {
    if (!pending_) fail(GENIE_ERR_INVALID_ARGUMENT, "Listener::accept outside on_connection, or twice");
    pending_ = false;
    auto conn = Connection::create(loop_, options_.max_message, std::move(handlers));
    if (options_.tls) conn->set_tls(options_.tls);
    const int rc = conn->accept_from(reinterpret_cast<uv_stream_t*>(&server_));
    if (rc != 0) {
      conn->close(GENIE_ERR_CONNECTION, cat("cannot accept a connection: ", uv_strerror(rc)));
      return conn;
    }
    apply_options(*conn, options_);
    return conn;
  }

  void close() override {
    if (closing_ || !self_) return;
    closing_ = true;
    remove_close_hook(loop_, hook_);
    uv_close(reinterpret_cast<uv_handle_t*>(&server_), [](uv_handle_t* h) {
      // Drops the listener's own reference; it may die here.
      std::shared_ptr<TcpListener> self = std::move(static_cast<TcpListener*>(h->data)->self_);
    });
  }

 private:
  static void on_listen(uv_stream_t* s, int status) {
    auto* l = static_cast<TcpListener*>(s->data);
    if (l->closing_) return;
    if (status != 0) {
      log(LogLevel::Warn, "tcp listener ", l->address(), ": ", uv_strerror(status));
      return;
    }
    l->pending_ = true;
    try {
      if (l->on_connection_) l->on_connection_(*l);
    } catch (const std::exception& e) {
      log(LogLevel::Error, "tcp listener: on_connection threw: ", e.what());
    }
    if (l->pending_) {
      // Not taken: libuv stops accepting until this one is, so take it and
      // close it.
      l->pending_ = false;
      auto conn = Connection::create(l->loop_, l->options_.max_message, {});
      conn->accept_from(s);
      conn->close(GENIE_ERR_CONNECTION, "not accepted");
    }
  }

  uv_loop_t* loop_;
  ChannelOptions options_;
  Transport::ConnectionFn on_connection_;
  uv_tcp_t server_{};
  std::shared_ptr<TcpListener> self_;  // until the handle has closed
  uint64_t hook_ = 0;
  bool closing_ = false;
  bool pending_ = false;  // inside on_connection, before accept()
};

class TcpTransport final : public Transport {
 public:
  TcpTransport() {
    caps_.name = "tcp";
    caps_.reliable = true;
    caps_.ordered = true;
    caps_.zero_copy = false;  // the kernel's socket buffers sit between the two tensors
    caps_.gpu_memory = false;
    caps_.rma = false;
    caps_.max_message = std::numeric_limits<uint32_t>::max();  // the header's msg_len
  }

  const Capabilities& capabilities() const override { return caps_; }

  std::shared_ptr<MemoryRegion> register_memory(void* data, uint64_t length, MemoryKind kind,
                                                int32_t device) override {
    return std::make_shared<HostRegion>(
        data, describe_host_memory(caps_.name, "moves bytes through sockets from host memory only", data,
                                   length, kind, device));
  }

  std::shared_ptr<Listener> listen(uv_loop_t* loop, const std::string& address, const ChannelOptions& options,
                                   ConnectionFn on_connection) override {
    auto l = std::make_shared<TcpListener>(loop, options, std::move(on_connection));
    l->start(address);
    return l;
  }

  std::shared_ptr<Channel> connect(uv_loop_t* loop, const std::string& address, const ChannelOptions& options,
                                   ChannelHandlers handlers, ConnectFn on_connected) override {
    std::string host;
    int port = 0;
    split_address(address, &host, &port);
    auto conn = Connection::create(loop, options.max_message, std::move(handlers));
    apply_options(*conn, options);
    if (options.tls) conn->set_tls(options.tls);
    conn->connect(host, port, std::move(on_connected));
    return conn;
  }

 private:
  Capabilities caps_;
};

}  // namespace

std::shared_ptr<Transport> make_transport() { return std::make_shared<TcpTransport>(); }

}  // namespace genie::dataplane::tcp
