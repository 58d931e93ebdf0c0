// C API: servers (genie_server_*), the library side of `genie serve`.
#include <memory>

#include "capi/handles.hpp"
#include "cluster/master.hpp"
#include "control/server.hpp"
#include "core/log.hpp"

using namespace genie;

namespace genie {
namespace {
constexpr uint32_t kServerMagic = 0x47535256;  // "GSRV"
}  // namespace
}  // namespace genie

struct genie_server {
  uint32_t magic = genie::kServerMagic;
  std::unique_ptr<genie::ClusterMaster> master;  // outlives impl: its hooks run on impl's loop
  std::unique_ptr<genie::Server> impl;
};

extern "C" {

genie_status_t genie_server_create(const genie_config_t* config, const char* host, int32_t port,
                                   genie_server_t** out) {
  return guard([&] {
    check_out(out, "out");
    check(port >= 0 && port <= 65535, GENIE_ERR_INVALID_ARGUMENT, "port ", port, " is outside 0..65535");
    Config cfg = config ? live(const_cast<genie_config_t*>(config), kConfigMagic, "config")->cfg : Config{};
    // The master to join is the one set on the config: GENIE_MASTER_ADDR
    // points clients at a server and must not turn servers into workers.
    const std::string join_host = cfg.master_addr;
    const int32_t join_port = cfg.master_port;
    cfg.apply_env();
    cfg.validate();
    set_log_level(cfg.log_level);
    ServerOptions opts;
    opts.host = host && *host ? host : "127.0.0.1";
    opts.port = port;
    opts.auth_token = cfg.auth_token;
    opts.session_grace_ms = cfg.session_grace_ms;
    opts.max_message_bytes = static_cast<uint32_t>(cfg.max_message_bytes);
    opts.num_threads = cfg.num_threads;
    opts.node_id = cfg.node_id;
    // A master address makes this server a worker of that master.
    opts.join_host = join_host;
    opts.join_port = join_port;
    opts.client_timeout_ms = cfg.timeout_ms;
    auto h = std::make_unique<genie_server>();
    h->master = std::make_unique<ClusterMaster>(cfg);
    h->master->install(opts);
    h->impl = std::make_unique<Server>(std::move(opts));
    h->master->set_node_id(h->impl->node_id());
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
