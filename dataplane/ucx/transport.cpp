// The UCX transport ("ucx"), a plugin: channels, registered memory and
// remote memory access over UCX (ucp), which drives InfiniBand and RoCE
// through libibverbs where they exist and TCP or shared memory elsewhere
// (UCX_TLS / UCX_NET_DEVICES choose; see docs/ucx.md). Listeners are UCX
// sockaddr listeners (ucp_listener_create), so addresses are "host:port" as
// for TCP; channels are dataplane/ucx/channel.hpp; every loop gets one
// worker (dataplane/ucx/worker.hpp).
#include <netdb.h>
#include <sys/socket.h>

#include <cstring>
#include <limits>

#include "dataplane/resolve.hpp"
#include "dataplane/ucx/blocking.hpp"
#include "dataplane/ucx/channel.hpp"
#include "dataplane/ucx/worker.hpp"

namespace genie::dataplane::ucx {
namespace {

struct Resolved {
  sockaddr_storage addr{};
  socklen_t len = 0;
};

Resolved resolve(const std::string& address, bool passive) {
  std::string why;
  const AddrInfo res = resolve_address(address, passive, &why);
  if (!res) fail(GENIE_ERR_INVALID_ARGUMENT, "ucx address '", address, "' does not resolve: ", why);
  // UCX 1.13 accepts an IPv6 sockaddr connection but then fails to wire
  // its TCP lanes over it (and crashes tearing the worker down after): refuse
  // IPv6 up front rather than hand a peer a channel that cannot work.
  if (res->ai_family != AF_INET) {
    fail(GENIE_ERR_UNSUPPORTED, "ucx address '", address,
         "' is not IPv4: this UCX version's sockaddr wire-up works over IPv4 only");
  }
  Resolved r;
  std::memcpy(&r.addr, res->ai_addr, res->ai_addrlen);
  r.len = res->ai_addrlen;
  return r;
}

class UcxListener final : public Listener, public std::enable_shared_from_this<UcxListener> {
 public:
  UcxListener(std::shared_ptr<LoopWorker> worker, ChannelOptions options, Transport::ConnectionFn on_connection)
      : worker_(std::move(worker)), options_(options), on_connection_(std::move(on_connection)) {}

  void start(const std::string& address) {
    const Resolved r = resolve(address, true);
    ucp_listener_params_t p{};
    p.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    p.sockaddr.addr = reinterpret_cast<const sockaddr*>(&r.addr);
    p.sockaddr.addrlen = r.len;
    p.conn_handler.cb = [](ucp_conn_request_h req, void* arg) {
      auto* l = static_cast<UcxListener*>(arg);
      auto self = l->shared_from_this();
      l->worker_->later([self, req] { self->take(req); });
    };
    p.conn_handler.arg = this;
    const ucs_status_t st = ucp_listener_create(worker_->get(), &p, &listener_);
    if (st != UCS_OK) fail(GENIE_ERR_IO, "cannot listen on ucx address ", address, ": ", ucs_status_string(st));
    ucp_listener_attr_t a{};
    a.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    if (ucp_listener_query(listener_, &a) == UCS_OK)
      address_ = format_sockaddr(reinterpret_cast<const sockaddr*>(&a.sockaddr));
    self_ = shared_from_this();
    std::weak_ptr<UcxListener> weak = self_;
    hook_ = g_host->add_close_hook(worker_->loop(), [weak] {
      if (auto l = weak.lock()) l->close();
    });
  }

  std::string address() const override { return listener_ != nullptr ? address_ : std::string(); }

  std::shared_ptr<Channel> accept(ChannelHandlers handlers) override {
    if (current_ == nullptr) fail(GENIE_ERR_INVALID_ARGUMENT, "Listener::accept outside on_connection, or twice");
    ucp_conn_request_h req = std::exchange(current_, nullptr);
    std::string peer = cat(address_, " peer");
    ucp_conn_request_attr_t a{};
    a.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
    if (ucp_conn_request_query(req, &a) == UCS_OK)
      peer = format_sockaddr(reinterpret_cast<const sockaddr*>(&a.client_address));
    auto ep = std::make_shared<Endpoint>(worker_, options_.max_message, options_.budget, std::move(handlers),
                                         std::move(peer));
    ep->start_accept(req);
    return ep;
  }

  void close() override {
    if (listener_ == nullptr) return;
    ucp_listener_destroy(listener_);
    listener_ = nullptr;
    g_host->remove_close_hook(worker_->loop(), hook_);
    // Requests that arrived but were not taken yet are refused by take().
    auto self = std::move(self_);
    worker_->later([self] {});
  }

 private:
  void take(ucp_conn_request_h req) {
    if (listener_ == nullptr) return;  // destroyed: UCX refused it already
    current_ = req;
    run_logged([&] { on_connection_(*this); }, "on_connection");
    if (current_ != nullptr) {
      current_ = nullptr;
      ucp_listener_reject(listener_, req);
    }
  }

  std::shared_ptr<LoopWorker> worker_;
  ChannelOptions options_;
  Transport::ConnectionFn on_connection_;
  ucp_listener_h listener_ = nullptr;
  std::string address_;
  std::shared_ptr<UcxListener> self_;  // until closed
  uint64_t hook_ = 0;
  ucp_conn_request_h current_ = nullptr;  // inside on_connection, before accept()
};

class UcxTransport final : public Transport {
 public:
  UcxTransport() : ctx_(std::make_shared<Context>()) {
    caps_.name = kName;
    caps_.reliable = true;
    caps_.ordered = true;
    caps_.zero_copy = true;  // rendezvous payloads land in the sink; RMA moves registered memory
    caps_.gpu_memory = false;
    caps_.rma = ctx_->rma();  // never emulated by UCX (Context::rma)
    caps_.max_message = std::numeric_limits<uint32_t>::max();
  }

  const Capabilities& capabilities() const override { return caps_; }

  std::shared_ptr<MemoryRegion> register_memory(void* data, uint64_t length, MemoryKind kind,
                                                int32_t device) override {
    MemoryDescriptor d = describe_host_memory(kName, "registers host memory only", data, length, kind, device);
    ucp_mem_map_params_t p{};
    p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    p.address = data;
    p.length = length;
    ucp_mem_h memh = nullptr;
    ucs_status_t st = ucp_mem_map(ctx_->get(), &p, &memh);
    if (st != UCS_OK)
      fail(GENIE_ERR_IO, "ucx: cannot register ", length, " bytes at ", data, ": ", ucs_status_string(st));
    void* buf = nullptr;
    size_t size = 0;
    st = ucp_rkey_pack(ctx_->get(), memh, &buf, &size);
    if (st != UCS_OK) {
      ucp_mem_unmap(ctx_->get(), memh);
      fail(GENIE_ERR_IO, "ucx: cannot pack the remote key: ", ucs_status_string(st));
    }
    d.key.assign(static_cast<const char*>(buf), size);
    ucp_rkey_buffer_release(buf);
    return std::make_shared<Region>(ctx_, data, std::move(d), memh);
  }

  std::shared_ptr<Listener> listen(uv_loop_t* loop, const std::string& address, const ChannelOptions& options,
                                   ConnectionFn on_connection) override {
    auto l = std::make_shared<UcxListener>(LoopWorker::for_loop(ctx_, loop), options, std::move(on_connection));
    l->start(address);
    return l;
  }

  std::shared_ptr<Channel> connect(uv_loop_t* loop, const std::string& address, const ChannelOptions& options,
                                   ChannelHandlers handlers, ConnectFn on_connected) override {
    const Resolved r = resolve(address, false);
    const std::string target = format_sockaddr(reinterpret_cast<const sockaddr*>(&r.addr));
    auto ep = std::make_shared<Endpoint>(LoopWorker::for_loop(ctx_, loop), options.max_message, options.budget,
                                         std::move(handlers),
                                         target);
    ep->start_connect(reinterpret_cast<const sockaddr*>(&r.addr), r.len, std::move(on_connected));
    return ep;
  }

  std::unique_ptr<BlockingChannel> connect_blocking(const std::string& address, const ChannelOptions& options,
                                                    Deadline deadline) override {
    const Resolved r = resolve(address, false);
    return ucx::connect_blocking(ctx_, reinterpret_cast<const sockaddr*>(&r.addr), r.len,
                                 format_sockaddr(reinterpret_cast<const sockaddr*>(&r.addr)),
                                 options.max_message, deadline);
  }

 private:
  std::shared_ptr<Context> ctx_;
  Capabilities caps_;
};

Transport* create(const TransportHost* host) {
  g_host = host;
  return new UcxTransport();
}

}  // namespace
}  // namespace genie::dataplane::ucx

GENIE_TRANSPORT_PLUGIN("ucx", genie::dataplane::ucx::create)
