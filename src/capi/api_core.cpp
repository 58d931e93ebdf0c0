// C API: versions, status, memory, dtypes, configuration, context lifetime.
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "capi/handles.hpp"
#include "core/dtype.hpp"
#include "core/metrics.hpp"
#include "core/trace.hpp"

using namespace genie;

namespace genie {

namespace {
thread_local std::string t_last_error;
}  // namespace

void set_last_error(const std::string& detail) { t_last_error = detail; }

namespace {

// What a C setter's argument becomes in its field, checked against the
// setting (config_settings.def) before anything changes. A string NULL or ""
// sets the default.
template <class T, class C>
void set_checked(Setting s, T& field, C value) {
  check_setting(s, value, setting_label(s).c_str());
  field = value;
}
void set_checked(Setting s, bool& field, int value) {
  (void)s;
  field = value != 0;
}
void set_checked(Setting s, LogLevel& field, genie_log_level_t value) {
  check(value >= GENIE_LOG_OFF && value <= GENIE_LOG_TRACE, GENIE_ERR_INVALID_ARGUMENT,
        setting_label(s).c_str(), " ", static_cast<int>(value), " is not a genie_log_level_t");
  field = static_cast<LogLevel>(value);
}
void set_checked(Setting s, std::string& field, const char* value, const std::string& def) {
  const std::string v = value && *value ? value : def;
  check_setting(s, v, setting_label(s).c_str());
  field = v;
}
void set_checked(Setting s, std::vector<std::string>& field, const char* value,
                 const std::vector<std::string>&) {
  std::vector<std::string> v =
      value && *value ? parse_etcd_endpoints(value, setting_label(s).c_str()) : std::vector<std::string>{};
  check_setting(s, v, setting_label(s).c_str());
  field = std::move(v);
}

}  // namespace

}  // namespace genie

extern "C" {

uint32_t genie_version(void) { return GENIE_VERSION; }
#define GENIE_STR2(x) #x
#define GENIE_STR(x) GENIE_STR2(x)
const char* genie_version_string(void) {
  return GENIE_STR(GENIE_VERSION_MAJOR) "." GENIE_STR(GENIE_VERSION_MINOR) "." GENIE_STR(GENIE_VERSION_PATCH);
}
#undef GENIE_STR
#undef GENIE_STR2
uint32_t genie_abi_version(void) { return GENIE_ABI_VERSION; }
int genie_metrics_supported(void) { return metrics::supported() ? 1 : 0; }

genie_status_t genie_trace_start(const char* path) {
  return guard([&] {
    check(path != nullptr, GENIE_ERR_INVALID_ARGUMENT, "trace path is NULL");
    trace::start(path);
  });
}

genie_status_t genie_trace_stop(void) {
  return guard([] { trace::stop(); });
}

const char* genie_status_str(genie_status_t s) {
  switch (s) {
    case GENIE_OK: return "GENIE_OK";
    case GENIE_IN_PROGRESS: return "GENIE_IN_PROGRESS";
    case GENIE_ERR_INVALID_ARGUMENT: return "GENIE_ERR_INVALID_ARGUMENT";
    case GENIE_ERR_INVALID_HANDLE: return "GENIE_ERR_INVALID_HANDLE";
    case GENIE_ERR_OUT_OF_MEMORY: return "GENIE_ERR_OUT_OF_MEMORY";
    case GENIE_ERR_DTYPE_MISMATCH: return "GENIE_ERR_DTYPE_MISMATCH";
    case GENIE_ERR_SHAPE_MISMATCH: return "GENIE_ERR_SHAPE_MISMATCH";
    case GENIE_ERR_SIZE_MISMATCH: return "GENIE_ERR_SIZE_MISMATCH";
    case GENIE_ERR_UNKNOWN_OP: return "GENIE_ERR_UNKNOWN_OP";
    case GENIE_ERR_INVALID_ATTRIBUTE: return "GENIE_ERR_INVALID_ATTRIBUTE";
    case GENIE_ERR_INVALID_GRAPH: return "GENIE_ERR_INVALID_GRAPH";
    case GENIE_ERR_PARSE: return "GENIE_ERR_PARSE";
    case GENIE_ERR_TOO_LARGE: return "GENIE_ERR_TOO_LARGE";
    case GENIE_ERR_NOT_FOUND: return "GENIE_ERR_NOT_FOUND";
    case GENIE_ERR_UNSUPPORTED: return "GENIE_ERR_UNSUPPORTED";
    case GENIE_ERR_TIMEOUT: return "GENIE_ERR_TIMEOUT";
    case GENIE_ERR_CONNECTION: return "GENIE_ERR_CONNECTION";
    case GENIE_ERR_AUTH: return "GENIE_ERR_AUTH";
    case GENIE_ERR_PROTOCOL: return "GENIE_ERR_PROTOCOL";
    case GENIE_ERR_VERSION_MISMATCH: return "GENIE_ERR_VERSION_MISMATCH";
    case GENIE_ERR_SHUTDOWN: return "GENIE_ERR_SHUTDOWN";
    case GENIE_ERR_IO: return "GENIE_ERR_IO";
    case GENIE_ERR_CANCELLED: return "GENIE_ERR_CANCELLED";
    case GENIE_ERR_INTERNAL: return "GENIE_ERR_INTERNAL";
    default: return "unknown status";
  }
}

const char* genie_last_error(void) { return t_last_error.c_str(); }

void genie_free(void* ptr) { std::free(ptr); }

size_t genie_dtype_size(genie_dtype_t dtype) {
  return dtype_valid(dtype) ? genie::dtype_size(static_cast<DType>(dtype)) : 0;
}

const char* genie_dtype_name(genie_dtype_t dtype) {
  return dtype_valid(dtype) ? genie::dtype_name(static_cast<DType>(dtype)) : "invalid";
}

// --- configuration ---------------------------------------------------------

genie_status_t genie_config_create(genie_config_t** out) {
  return guard([&] {
    check_out(out, "out");
    *out = publish(std::make_unique<ConfigObj>());
  });
}

void genie_config_destroy(genie_config_t* config) { retire<ConfigObj>(config); }

// The C setters of config_settings.def, one per line of ctype INT32, INT64,
// BOOL, TEXT, ROLE, BACKEND or LOG_LEVEL; CUSTOM ones are written below.
#define GENIE_SETTER_BODY(fn, ctype_t, field, ...)             \
  genie_status_t fn(genie_config_t* config, ctype_t value) {   \
    return guard([&] {                                         \
      Config& c = live<ConfigObj>(config)->cfg;                \
      set_checked(Setting::field, c.field, value __VA_ARGS__); \
    });                                                        \
  }
#define GENIE_SETTER_INT32(fn, field) GENIE_SETTER_BODY(fn, int32_t, field)
#define GENIE_SETTER_INT64(fn, field) GENIE_SETTER_BODY(fn, int64_t, field)
#define GENIE_SETTER_BOOL(fn, field) GENIE_SETTER_BODY(fn, int, field)
#define GENIE_SETTER_TEXT(fn, field) GENIE_SETTER_BODY(fn, const char*, field, , Config{}.field)
#define GENIE_SETTER_ROLE(fn, field) GENIE_SETTER_BODY(fn, genie_node_role_t, field)
#define GENIE_SETTER_BACKEND(fn, field) GENIE_SETTER_BODY(fn, genie_backend_t, field)
#define GENIE_SETTER_LOG_LEVEL(fn, field) GENIE_SETTER_BODY(fn, genie_log_level_t, field)
#define GENIE_SETTER_CUSTOM(fn, field)
#define GENIE_SETTER_NONE(fn, field)
#define GENIE_SETTING(field, type, def, env, kind, lo, hi, side, setter, ctype, help) \
  GENIE_SETTER_##ctype(setter, field)
#include "core/config_settings.def"
#undef GENIE_SETTING
#undef GENIE_SETTER_BODY
#undef GENIE_SETTER_INT32
#undef GENIE_SETTER_INT64
#undef GENIE_SETTER_BOOL
#undef GENIE_SETTER_TEXT
#undef GENIE_SETTER_ROLE
#undef GENIE_SETTER_BACKEND
#undef GENIE_SETTER_LOG_LEVEL
#undef GENIE_SETTER_CUSTOM
#undef GENIE_SETTER_NONE

genie_status_t genie_config_set_tls_cert(genie_config_t* config, const char* cert_file,
                                         const char* key_file) {
  return guard([&] {
    Config& c = live<ConfigObj>(config)->cfg;
    const std::string cert = cert_file ? cert_file : "", key = key_file ? key_file : "";
    check(cert.empty() == key.empty(), GENIE_ERR_INVALID_ARGUMENT,
          "a TLS certificate needs its private key and the other way round");
    c.tls_cert = cert;
    c.tls_key = key;
  });
}

genie_status_t genie_config_set_session_quota(genie_config_t* config, int64_t max_bytes, int64_t max_tensors,
                                              int64_t max_graphs) {
  return guard([&] {
    Config& c = live<ConfigObj>(config)->cfg;
    check_setting(Setting::session_max_bytes, max_bytes, "session byte quota");
    check_setting(Setting::session_max_tensors, max_tensors, "session tensor quota");
    check_setting(Setting::session_max_graphs, max_graphs, "session graph quota");
    c.session_max_bytes = max_bytes;
    c.session_max_tensors = max_tensors ? max_tensors : Config::kDefaultSessionMaxTensors;
    c.session_max_graphs = max_graphs ? max_graphs : Config::kDefaultSessionMaxGraphs;
  });
}

// --- context ---------------------------------------------------------------

genie_status_t genie_init_abi(uint32_t abi_version, const genie_config_t* config, genie_context_t** out) {
  return guard([&] {
    check_out(out, "out");
    check(abi_version == GENIE_ABI_VERSION, GENIE_ERR_VERSION_MISMATCH,
          "the program was compiled against ABI ", abi_version, " of genie.h but the library provides ABI ",
          GENIE_ABI_VERSION);
    const auto t0 = std::chrono::steady_clock::now();
    Config cfg = config ? live<ConfigObj>(config)->cfg : Config{};
    cfg.apply_env();
    cfg.validate();
    set_log_level(cfg.log_level);
    if (cfg.use_env) trace::start_from_env();
    const double config_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    auto h = std::make_unique<ContextObj>();
    h->impl = std::make_shared<Context>(cfg, config_ms);
    *out = publish(std::move(h));
  });
}

void genie_shutdown(genie_context_t* ctx) {
  ContextObj* h = find<ContextObj>(ctx);
  // Only the first of concurrent calls goes on; genie_is_initialized says 0
  // from here on.
  if (h == nullptr || h->closing.exchange(true)) return;
  try {
    // The handle stays live meanwhile, so completion callbacks that run
    // while shutdown waits for their graphs get SHUTDOWN from the context,
    // not INVALID_HANDLE.
    h->impl->shutdown();
  } catch (...) {
    // shutdown only waits and frees; nothing to report to a void function.
  }
  retire<ContextObj>(ctx);
}

int genie_is_initialized(const genie_context_t* ctx) {
  const ContextObj* h = find<ContextObj>(ctx);
  return h != nullptr && !h->closing.load() ? 1 : 0;
}

int genie_context_is_embedded(const genie_context_t* ctx) {
  if (!genie_is_initialized(ctx)) return -1;
  return find<ContextObj>(ctx)->impl->embedded() ? 1 : 0;
}

genie_status_t genie_context_is_connected(const genie_context_t* ctx, int* out) {
  return guard([&] {
    const Context& c = *live<ContextObj>(ctx)->impl;
    check_out(out, "out");
    *out = c.connected() ? 1 : 0;
  });
}

const char* genie_context_node_id(const genie_context_t* ctx) {
  if (!genie_is_initialized(ctx)) return nullptr;
  return find<ContextObj>(ctx)->impl->node_id().c_str();
}

genie_status_t genie_context_server_info(genie_context_t* ctx, char** out_json) {
  return guard([&] {
    Context& c = *live<ContextObj>(ctx)->impl;
    check_out(out_json, "out_json");
    const std::string json = c.server_info_json();
    char* copy = static_cast<char*>(std::malloc(json.size() + 1));
    check(copy != nullptr, GENIE_ERR_OUT_OF_MEMORY, "out of memory");
    std::memcpy(copy, json.c_str(), json.size() + 1);
    *out_json = copy;
  });
}

genie_status_t genie_context_lost_tensors(const genie_context_t* ctx, char** out_json) {
  return guard([&] {
    const Context& c = *live<ContextObj>(ctx)->impl;
    check_out(out_json, "out_json");
    const std::string json = c.lost_tensors_json();
    char* copy = static_cast<char*>(std::malloc(json.size() + 1));
    check(copy != nullptr, GENIE_ERR_OUT_OF_MEMORY, "out of memory");
    std::memcpy(copy, json.c_str(), json.size() + 1);
    *out_json = copy;
  });
}

}  // extern "C"
