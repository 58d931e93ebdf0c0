// Context configuration: defaults, builder values, GENIE_* environment.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/log.hpp"
#include "genie.h"

namespace genie {

// How a setting's value is parsed and checked (config_settings.def, "kind").
enum class SettingKind {
  Int, Bool, OnOff, Text, NodeId, AuthToken, Cluster, Transport, TransportList, EtcdEndpoints, Role, Backend,
  LogLevel
};
// Who reads a setting: a client context, a server, or both.
enum class SettingSide { Client, Server, Both };

// One entry of config_settings.def, for checks, messages and the reference.
struct SettingInfo {
  const char* name;     // the Config field
  const char* env;      // GENIE_* variable, or nullptr
  SettingKind kind;
  int64_t lo, hi;       // bounds (Int), byte lengths (Text and names), or counts (lists)
  SettingSide side;
  const char* setter;   // the C setter, or "none"
  const char* help;
};

// Each setting's index in settings(): Setting::master_port, ...
enum class Setting : size_t {
#define GENIE_SETTING(field, ...) field,
#include "core/config_settings.def"
#undef GENIE_SETTING
  count
};

// Every setting, in the order of config_settings.def.
const SettingInfo* settings();
inline const SettingInfo& setting(Setting s) { return settings()[static_cast<size_t>(s)]; }

struct Config {
  static constexpr int64_t kDefaultMaxGraphBytes = int64_t{32} << 20;
  static constexpr int64_t kDefaultMaxGraphNodes = 65536;
  static constexpr int64_t kDefaultSessionMaxTensors = 65536;
  static constexpr int64_t kDefaultSessionMaxGraphs = 256;

  // The settings (config_settings.def: meaning, bounds, environment).
#define GENIE_SETTING(field, type, def, ...) type field = def;
#include "core/config_settings.def"
#undef GENIE_SETTING

  // Remote mode, set at init from discovery, not by the user: the selected
  // backend's transport. When it cannot be had, data connections fall back
  // to TCP (`transport`, demanded by the user, fails instead). Both empty: TCP.
  std::string selected_transport;
  // Remote mode, set at init, not by the user: how long the client tries to
  // reconnect after losing its server (0: timeout_ms). A context that
  // entered a cluster on etcd sets it to its server's lease TTL: a server
  // that does not answer within it has lost its key by then
  // (docs/cluster.md, "Failover").
  int64_t reconnect_window_ms = 0;

  // Applies GENIE_* environment variables when use_env is set. Throws
  // Error(INVALID_ARGUMENT) naming the variable and the value on a bad value.
  void apply_env();
  // Full validation of every field (setters validate too; this catches
  // values that came from the environment).
  void validate() const;
};

// Checks `value` against setting `s` (config_settings.def); throws
// Error(INVALID_ARGUMENT) with a message naming `what` (the field or the
// environment variable).
void check_setting(Setting s, int64_t value, const char* what);
inline void check_setting(Setting s, int32_t value, const char* what) { check_setting(s, int64_t{value}, what); }
void check_setting(Setting s, const std::string& value, const char* what);
void check_setting(Setting s, const std::vector<std::string>& value, const char* what);
inline void check_setting(Setting, bool, const char*) {}
void check_setting(Setting s, genie_node_role_t value, const char* what);
void check_setting(Setting s, genie_backend_t value, const char* what);
void check_setting(Setting s, LogLevel value, const char* what);
// Setting `name` (its field name), or nullptr when there is none.
const SettingInfo* find_setting(const char* name, Setting* id);
// Sets setting `s` of `c` from an integer (integer and boolean settings:
// anything else is INVALID_ARGUMENT) or from text as its environment
// variable would give it (NULL or "": its default), checked first; on a bad
// value `c` is unchanged.
void set_setting_int(Config& c, Setting s, int64_t value);
void set_setting_text(Config& c, Setting s, const char* value);
// Copies the settings of side Server from `from` into `to`.
void copy_server_settings(const Config& from, Config& to);

// The setting's name in messages: its field without a unit suffix, in words
// ("stage timeout" for stage_timeout_ms).
std::string setting_label(Setting s);

// Validators used beyond the configuration; each throws
// Error(INVALID_ARGUMENT) with a message naming `what`.
void check_node_id(const std::string& id, const char* what);
void check_port(int64_t port, const char* what);
// An auth token: empty (none) or kMinAuthTokenBytes..4096 bytes.
constexpr size_t kMinAuthTokenBytes = 16;
void check_auth_token(const std::string& token, const char* what);
// etcd endpoints, comma-separated, parsed and checked (at most 16, each
// 1..255 bytes without blanks).
std::vector<std::string> parse_etcd_endpoints(const std::string& list, const char* what);
bool is_transport_name(const std::string& name);  // [a-z0-9_]{1,64}
void check_transport_name(const std::string& name, const char* what);

const char* role_str(genie_node_role_t r);
const char* backend_str(genie_backend_t b);

}  // namespace genie
