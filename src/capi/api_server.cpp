// C API: servers (genie_server_*), the library side of `genie serve`.
#include <memory>

#include "capi/handles.hpp"
#include "core/trace.hpp"
#include "server/node_server.hpp"

using namespace genie;

namespace {

struct ServerObj {
  using Handle = genie_server_t;
  static constexpr HandleKind kKind = HandleKind::Server;
  static constexpr const char* kName = "server";
  std::unique_ptr<NodeServer> impl;
};

}  // namespace

extern "C" {

genie_status_t genie_server_create(const genie_config_t* config, const char* host, int32_t port,
                                   genie_server_t** out) {
  return guard([&] {
    check_out(out, "out");
    check(port >= 0 && port <= 65535, GENIE_ERR_INVALID_ARGUMENT, "port ", port, " is outside 0..65535");
    Config cfg = config ? live<ConfigObj>(config)->cfg : Config{};
    if (cfg.use_env) trace::start_from_env();
    auto h = std::make_unique<ServerObj>();
    h->impl = std::make_unique<NodeServer>(std::move(cfg), host ? host : "", port);
    *out = publish(std::move(h));
  });
}

genie_status_t genie_server_port(const genie_server_t* server, int32_t* out) {
  return guard([&] {
    const ServerObj* s = live<ServerObj>(server);
    check_out(out, "out");
    *out = s->impl->port();
  });
}

genie_status_t genie_server_metrics_port(const genie_server_t* server, int32_t* out) {
  return guard([&] {
    const ServerObj* s = live<ServerObj>(server);
    check_out(out, "out");
    *out = s->impl->metrics_port();
  });
}

genie_status_t genie_server_stop(genie_server_t* server) {
  return guard([&] { live<ServerObj>(server)->impl->stop(); });
}

genie_status_t genie_server_wait(genie_server_t* server) {
  return guard([&] { live<ServerObj>(server)->impl->wait(); });
}

void genie_server_destroy(genie_server_t* server) {
  const std::unique_ptr<ServerObj> s = retire<ServerObj>(server);
  if (!s) return;
  try {
    s->impl.reset();  // stops and waits
  } catch (...) {
    // Stopping only waits and frees; nothing to report from a void function.
  }
}

}  // extern "C"
