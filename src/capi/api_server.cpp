// C API: servers (genie_server_*), the library side of `genie serve`.
#include <memory>

#include "capi/handles.hpp"
#include "runtime/node_server.hpp"

using namespace genie;

namespace genie {
namespace {
constexpr uint32_t kServerMagic = 0x47535256;  // "GSRV"
}  // namespace
}  // namespace genie

struct genie_server {
  uint32_t magic = genie::kServerMagic;
  std::unique_ptr<genie::NodeServer> impl;
};

extern "C" {

genie_status_t genie_server_create(const genie_config_t* config, const char* host, int32_t port,
                                   genie_server_t** out) {
  return guard([&] {
    check_out(out, "out");
    check(port >= 0 && port <= 65535, GENIE_ERR_INVALID_ARGUMENT, "port ", port, " is outside 0..65535");
    Config cfg = config ? live(const_cast<genie_config_t*>(config), kConfigMagic, "config")->cfg : Config{};
    auto h = std::make_unique<genie_server>();
    h->impl = std::make_unique<NodeServer>(std::move(cfg), host ? host : "", port);
    *out = h.release();
  });
}

genie_status_t genie_server_port(const genie_server_t* server, int32_t* out) {
  return guard([&] {
    const genie_server* s = live(const_cast<genie_server_t*>(server), kServerMagic, "server");
    check_out(out, "out");
    *out = s->impl->port();
  });
}

genie_status_t genie_server_stop(genie_server_t* server) {
  return guard([&] { live(server, kServerMagic, "server")->impl->stop(); });
}

genie_status_t genie_server_wait(genie_server_t* server) {
  return guard([&] { live(server, kServerMagic, "server")->impl->wait(); });
}

void genie_server_destroy(genie_server_t* server) {
  if (server == nullptr || server->magic != kServerMagic) return;
  server->magic = kDeadMagic;
  try {
    server->impl.reset();  // stops and waits
  } catch (...) {
    // Stopping only waits and frees; nothing to report from a void function.
  }
  delete server;
}

}  // extern "C"
