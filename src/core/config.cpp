#include "core/config.hpp"

#include <strings.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <type_traits>
#include <utility>

namespace genie {

namespace {

int64_t parse_int(const char* var, const char* text) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  check(errno == 0 && end != text && *end == '\0', GENIE_ERR_INVALID_ARGUMENT, var, "='", text,
        "' is not an integer");
  return v;
}

template <class Enum, size_t N>
Enum parse_enum(const char* var, const char* text, const char* const (&names)[N], const Enum (&vals)[N]) {
  std::string choices;
  for (size_t i = 0; i < N; ++i) {
    if (strcasecmp(text, names[i]) == 0) return vals[i];
    choices += (i ? "|" : "");
    choices += names[i];
  }
  fail(GENIE_ERR_INVALID_ARGUMENT, var, "='", text, "' is not one of ", choices);
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

}  // namespace

void check_node_id(const std::string& id, const char* what) {
  check(id.size() <= 255, GENIE_ERR_INVALID_ARGUMENT, what, " is longer than 255 bytes");
  for (char c : id)
    check(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-',
          GENIE_ERR_INVALID_ARGUMENT, what, " '", id, "' may hold only [A-Za-z0-9._-]");
}

void check_auth_token(const std::string& token, const char* what) {
  check(token.size() <= 4096, GENIE_ERR_INVALID_ARGUMENT, what, " is longer than 4096 bytes");
  check(token.empty() || token.size() >= kMinAuthTokenBytes, GENIE_ERR_INVALID_ARGUMENT, what, " has ",
        token.size(), " bytes: a shared secret needs at least ", kMinAuthTokenBytes,
        " (a guessable token protects nothing); e.g. 32 random bytes in hex");
}

void check_port(int64_t port, const char* what) {
  check(port >= 1 && port <= 65535, GENIE_ERR_INVALID_ARGUMENT, what, " ", port, " is outside 1..65535");
}

const SettingInfo* settings() {
  static constexpr SettingInfo table[] = {
#define GENIE_SETTING(field, type, def, env, kind, lo, hi, side, setter, ctype, help) \
  {#field, env, SettingKind::kind, lo, hi, SettingSide::side, #setter, help},
#include "core/config_settings.def"
#undef GENIE_SETTING
  };
  static_assert(std::size(table) == static_cast<size_t>(Setting::count));
  return table;
}

namespace {

template <class Enum, size_t N>
void check_enum(Enum value, const Enum (&vals)[N], const char* type, const char* what) {
  for (size_t i = 0; i < N; ++i)
    if (vals[i] == value) return;
  fail(GENIE_ERR_INVALID_ARGUMENT, what, " ", static_cast<int>(value), " is not a ", type);
}

const char* const kRoleNames[] = {"client", "server", "worker"};
const genie_node_role_t kRoles[] = {GENIE_NODE_ROLE_CLIENT, GENIE_NODE_ROLE_SERVER, GENIE_NODE_ROLE_WORKER};
const char* const kBackendNames[] = {"auto", "tcp", "rdma", "dpdk", "dpdk_gpudev", "ucx"};
const genie_backend_t kBackends[] = {GENIE_BACKEND_AUTO, GENIE_BACKEND_TCP,         GENIE_BACKEND_RDMA,
                                     GENIE_BACKEND_DPDK, GENIE_BACKEND_DPDK_GPUDEV, GENIE_BACKEND_UCX};
const char* const kLogNames[] = {"off", "error", "warn", "info", "debug", "trace"};
const LogLevel kLogLevels[] = {LogLevel::Off,  LogLevel::Error, LogLevel::Warn,
                               LogLevel::Info, LogLevel::Debug, LogLevel::Trace};

std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> out;
  for (size_t start = 0; start <= list.size();) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    out.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// A setting's value from its environment variable's text, checked.
void from_env(Setting s, const char* var, const char* text, int32_t& field) {
  const int64_t n = parse_int(var, text);
  check_setting(s, n, var);
  field = static_cast<int32_t>(n);
}
void from_env(Setting s, const char* var, const char* text, int64_t& field) {
  const int64_t n = parse_int(var, text);
  check_setting(s, n, var);
  field = n;
}
void from_env(Setting s, const char* var, const char* text, bool& field) {
  if (setting(s).kind == SettingKind::OnOff) {
    static const char* const names[] = {"on", "off", "1", "0"};
    static const bool vals[] = {true, false, true, false};
    field = parse_enum(var, text, names, vals);
  } else {
    static const char* const names[] = {"0", "1"};
    static const bool vals[] = {false, true};
    field = parse_enum(var, text, names, vals);
  }
}
void from_env(Setting s, const char* var, const char* text, std::string& field) {
  check_setting(s, std::string(text), var);
  field = text;
}
void from_env(Setting s, const char* var, const char* text, std::vector<std::string>& field) {
  field =
      setting(s).kind == SettingKind::EtcdEndpoints ? parse_etcd_endpoints(text, var) : split_commas(text);
  check_setting(s, field, var);
}
void from_env(Setting, const char* var, const char* text, genie_node_role_t& field) {
  field = parse_enum(var, text, kRoleNames, kRoles);
}
void from_env(Setting, const char* var, const char* text, genie_backend_t& field) {
  field = parse_enum(var, text, kBackendNames, kBackends);
}
void from_env(Setting, const char* var, const char* text, LogLevel& field) {
  field = parse_enum(var, text, kLogNames, kLogLevels);
}

}  // namespace

void check_setting(Setting s, int64_t value, const char* what) {
  const SettingInfo& i = setting(s);
  if (i.hi == INT64_MAX)
    check(value >= i.lo, GENIE_ERR_INVALID_ARGUMENT, what, " ", value, " is below ", i.lo, " (", i.help, ")");
  else
    check(value >= i.lo && value <= i.hi, GENIE_ERR_INVALID_ARGUMENT, what, " ", value, " is outside ", i.lo,
          "..", i.hi, " (", i.help, ")");
}

void check_setting(Setting s, const std::string& value, const char* what) {
  const SettingInfo& i = setting(s);
  switch (i.kind) {
    case SettingKind::NodeId: check_node_id(value, what); return;
    case SettingKind::AuthToken: check_auth_token(value, what); return;
    case SettingKind::Cluster:
      check(!value.empty() && value.size() <= static_cast<size_t>(i.hi), GENIE_ERR_INVALID_ARGUMENT, what,
            " '", value, "' is not ", i.lo, "..", i.hi, " bytes");
      for (char c : value)
        check(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-',
              GENIE_ERR_INVALID_ARGUMENT, what, " '", value, "' may hold only [A-Za-z0-9._-]");
      return;
    case SettingKind::Transport:
      if (!value.empty()) check_transport_name(value, what);
      return;
    default:
      check(value.size() >= static_cast<size_t>(i.lo), GENIE_ERR_INVALID_ARGUMENT, what, " is empty");
      check(i.hi == 0 || value.size() <= static_cast<size_t>(i.hi), GENIE_ERR_INVALID_ARGUMENT, what,
            " is longer than ", i.hi, " bytes");
  }
}

void check_setting(Setting s, const std::vector<std::string>& value, const char* what) {
  const SettingInfo& i = setting(s);
  if (i.kind == SettingKind::TransportList) {
    for (const std::string& t : value) check_transport_name(t, what);
    return;
  }
  check(value.size() <= static_cast<size_t>(i.hi), GENIE_ERR_INVALID_ARGUMENT, what, " names ", value.size(),
        " endpoints (at most ", i.hi, ")");
}

void check_setting(Setting, genie_node_role_t value, const char* what) {
  check_enum(value, kRoles, "genie_node_role_t", what);
}
void check_setting(Setting, genie_backend_t value, const char* what) {
  check_enum(value, kBackends, "genie_backend_t", what);
}
void check_setting(Setting, LogLevel value, const char* what) {
  check_enum(value, kLogLevels, "log level", what);
}

std::string setting_label(Setting s) {
  std::string label = setting(s).name;
  for (const char* unit : {"_ms", "_bytes"}) {
    const size_t n = std::strlen(unit);
    if (label.size() > n && label.compare(label.size() - n, n, unit) == 0) label.resize(label.size() - n);
  }
  for (char& c : label)
    if (c == '_') c = ' ';
  return label;
}

const SettingInfo* find_setting(const char* name, Setting* id) {
  if (name == nullptr) return nullptr;
  for (size_t i = 0; i < static_cast<size_t>(Setting::count); ++i)
    if (std::strcmp(settings()[i].name, name) == 0) {
      *id = static_cast<Setting>(i);
      return &settings()[i];
    }
  return nullptr;
}

namespace {

template <class T>
void assign_int(T& field, Setting s, int64_t value) {
  const std::string label = setting_label(s);
  if constexpr (std::is_same_v<T, bool>) {
    check(value == 0 || value == 1, GENIE_ERR_INVALID_ARGUMENT, label, " ", value, " is not 0 or 1");
    field = value != 0;
  } else if constexpr (std::is_integral_v<T>) {
    check_setting(s, value, label.c_str());
    field = static_cast<T>(value);
  } else {
    fail(GENIE_ERR_INVALID_ARGUMENT, "setting '", setting(s).name, "' is not an integer or boolean");
  }
}

template <class T>
void assign_text(T& field, const T& def, Setting s, const char* value) {
  if (value == nullptr || *value == '\0') {
    field = def;
    return;
  }
  T v = field;
  from_env(s, setting_label(s).c_str(), value, v);
  field = std::move(v);
}

}  // namespace

void set_setting_int(Config& c, Setting s, int64_t value) {
  switch (s) {
#define GENIE_SETTING(field, ...)  \
  case Setting::field:             \
    assign_int(c.field, s, value); \
    return;
#include "core/config_settings.def"
#undef GENIE_SETTING
    default: break;
  }
}

void set_setting_text(Config& c, Setting s, const char* value) {
  const Config defaults;
  switch (s) {
#define GENIE_SETTING(field, ...)                   \
  case Setting::field:                              \
    assign_text(c.field, defaults.field, s, value); \
    return;
#include "core/config_settings.def"
#undef GENIE_SETTING
    default: break;
  }
}

void copy_server_settings(const Config& from, Config& to) {
#define GENIE_SETTING(field, ...) \
  if (setting(Setting::field).side == SettingSide::Server) to.field = from.field;
#include "core/config_settings.def"
#undef GENIE_SETTING
}

void Config::apply_env() {
  if (!use_env) return;
#define GENIE_SETTING(field, type, def, env_var, ...)                      \
  if (const char* var = env_var) {                                         \
    if (const char* v = env(var)) from_env(Setting::field, var, v, field); \
  }
#include "core/config_settings.def"
#undef GENIE_SETTING
}

void Config::validate() const {
#define GENIE_SETTING(field, ...) check_setting(Setting::field, field, setting_label(Setting::field).c_str());
#include "core/config_settings.def"
#undef GENIE_SETTING
  if (!selected_transport.empty()) check_transport_name(selected_transport, "selected transport");
  check(heartbeat_timeout_ms >= heartbeat_interval_ms, GENIE_ERR_INVALID_ARGUMENT, "heartbeat timeout ",
        heartbeat_timeout_ms, " ms is below the heartbeat interval ", heartbeat_interval_ms,
        " ms: every node would be marked lost between two heartbeats");
  check(tls_cert.empty() == tls_key.empty(), GENIE_ERR_INVALID_ARGUMENT,
        "a TLS certificate needs its private key and the other way round (GENIE_TLS_CERT and GENIE_TLS_KEY)");
}

std::vector<std::string> parse_etcd_endpoints(const std::string& list, const char* what) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    const std::string e = list.substr(start, end - start);
    check(!e.empty() && e.size() <= 255 && e.find_first_of(" \t\r\n") == std::string::npos,
          GENIE_ERR_INVALID_ARGUMENT, what, " '", list,
          "': each endpoint is a URL of 1..255 bytes without blanks (http://host:port), comma-separated");
    out.push_back(e);
    start = end + 1;
  }
  check(out.size() <= 16, GENIE_ERR_INVALID_ARGUMENT, what, " names ", out.size(), " endpoints (at most 16)");
  return out;
}

bool is_transport_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

void check_transport_name(const std::string& name, const char* what) {
  check(is_transport_name(name), GENIE_ERR_INVALID_ARGUMENT, what, " '", name,
        "' is not a transport name (1..64 of lowercase letters, digits and '_', e.g. tcp)");
}

const char* role_str(genie_node_role_t r) {
  switch (r) {
    case GENIE_NODE_ROLE_CLIENT: return "client";
    case GENIE_NODE_ROLE_SERVER: return "server";
    case GENIE_NODE_ROLE_WORKER: return "worker";
    default: break;
  }
  return "?";
}

const char* backend_str(genie_backend_t b) {
  switch (b) {
    case GENIE_BACKEND_AUTO: return "auto";
    case GENIE_BACKEND_TCP: return "tcp";
    case GENIE_BACKEND_RDMA: return "rdma";
    case GENIE_BACKEND_DPDK: return "dpdk";
    case GENIE_BACKEND_DPDK_GPUDEV: return "dpdk_gpudev";
    case GENIE_BACKEND_UCX: return "ucx";
    default: break;
  }
  return "?";
}

}  // namespace genie
