// C API: settings by name (docs/configuration.md), the client's on
// genie_config_t and the server's own on genie_server_config_t, and a
// server created from both.
#include <memory>
#include <string>

#include "capi/handles.hpp"

using namespace genie;

namespace {

// Setting `name`, which must be read by `side` (a client config takes
// Client and Both settings, a server config Server ones).
Setting named(const char* name, bool server) {
  check(name != nullptr, GENIE_ERR_INVALID_ARGUMENT, "setting name is NULL");
  Setting id{};
  const SettingInfo* info = find_setting(name, &id);
  check(info != nullptr, GENIE_ERR_INVALID_ARGUMENT, "no setting is named '", name,
        "' (docs/configuration.md lists them)");
  if (server)
    check(info->side == SettingSide::Server, GENIE_ERR_INVALID_ARGUMENT, "'", name,
          "' is not a setting of a server alone: set it on a genie_config_t");
  else
    check(info->side != SettingSide::Server, GENIE_ERR_INVALID_ARGUMENT, "'", name,
          "' is a server's setting: set it on a genie_server_config_t");
  return id;
}

}  // namespace

extern "C" {

genie_status_t genie_config_set_int(genie_config_t* config, const char* name, int64_t value) {
  return guard([&] {
    Config& c = live<ConfigObj>(config)->cfg;
    set_setting_int(c, named(name, false), value);
  });
}

genie_status_t genie_config_set_string(genie_config_t* config, const char* name, const char* value) {
  return guard([&] {
    Config& c = live<ConfigObj>(config)->cfg;
    set_setting_text(c, named(name, false), value);
  });
}

genie_status_t genie_server_config_create(genie_server_config_t** out) {
  return guard([&] {
    check_out(out, "out");
    *out = publish(std::make_unique<ServerConfigObj>());
  });
}

void genie_server_config_destroy(genie_server_config_t* config) { retire<ServerConfigObj>(config); }

genie_status_t genie_server_config_set_int(genie_server_config_t* config, const char* name, int64_t value) {
  return guard([&] {
    Config& c = live<ServerConfigObj>(config)->cfg;
    set_setting_int(c, named(name, true), value);
  });
}

genie_status_t genie_server_config_set_string(genie_server_config_t* config, const char* name,
                                              const char* value) {
  return guard([&] {
    Config& c = live<ServerConfigObj>(config)->cfg;
    set_setting_text(c, named(name, true), value);
  });
}

genie_status_t genie_server_create_with(const genie_config_t* config, const genie_server_config_t* server,
                                        const char* host, int32_t port, genie_server_t** out) {
  genie_config_t* merged = nullptr;
  const genie_status_t st = guard([&] {
    auto obj = std::make_unique<ConfigObj>();
    if (config != nullptr) obj->cfg = live<ConfigObj>(config)->cfg;
    copy_server_settings(server != nullptr ? live<ServerConfigObj>(server)->cfg : Config{}, obj->cfg);
    merged = publish(std::move(obj));
  });
  if (st != GENIE_OK) return st;
  const genie_status_t created = genie_server_create(merged, host, port, out);
  genie_config_destroy(merged);
  return created;
}

}  // extern "C"
