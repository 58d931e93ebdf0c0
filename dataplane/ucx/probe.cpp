#include "dataplane/ucx/probe.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "dataplane/child_probe.hpp"
#include "core/error.hpp"

namespace genie {
namespace {

// The prefix of ucp_params_t that ucp_init_version reads for
// field_mask = UCP_PARAM_FIELD_FEATURES (ucp.h; no UCX headers needed).
struct UcpParamsPrefix {
  uint64_t field_mask;
  uint64_t features;
  char rest[256];  // room for fields the library never reads here
};
constexpr uint64_t kParamFeatures = 1u << 0;
constexpr uint64_t kFeatureRma = 1u << 1, kFeatureAm = 1u << 6;

[[noreturn]] void ucx_child(int out_fd) {
  FILE* out = fdopen(out_fd, "w");
  const int devnull = open("/dev/null", O_RDWR);
  if (devnull >= 0) dup2(devnull, STDERR_FILENO);  // UCX warns on stderr
  void* lib = dlopen("libucp.so.0", RTLD_NOW | RTLD_LOCAL);
  using ReadFn = int (*)(const char*, const char*, void**);
  using InitFn = int (*)(unsigned, unsigned, const void*, const void*, void**);
  using PrintFn = void (*)(void*, FILE*);
  using VoidFn = void (*)(void*);
  auto read = lib ? reinterpret_cast<ReadFn>(dlsym(lib, "ucp_config_read")) : nullptr;
  auto init = lib ? reinterpret_cast<InitFn>(dlsym(lib, "ucp_init_version")) : nullptr;
  auto print = lib ? reinterpret_cast<PrintFn>(dlsym(lib, "ucp_context_print_info")) : nullptr;
  auto release = lib ? reinterpret_cast<VoidFn>(dlsym(lib, "ucp_config_release")) : nullptr;
  if (!out) _exit(1);
  if (!read || !init || !print || !release) {
    std::fprintf(out, "!libucp.so.0 not loaded (UCX is not installed)\n");
  } else {
    void* config = nullptr;
    void* ctx = nullptr;
    UcpParamsPrefix p{};
    p.field_mask = kParamFeatures;
    p.features = kFeatureAm | kFeatureRma;
    int st = read(nullptr, nullptr, &config);
    if (st == 0) {
      st = init(1, 0, &p, config, &ctx);
      release(config);
    }
    if (st != 0 || ctx == nullptr)
      std::fprintf(out, "!ucp_init failed (status %d)\n", st);
    else
      print(ctx, out);
  }
  std::fclose(out);
  _exit(0);
}

bool is_rdma(const std::string& tl) {
  for (const char* p : {"rc", "ud", "dc"})
    if (tl.rfind(p, 0) == 0) return true;
  return false;
}

}  // namespace

UcxProbe ucx_not_probed(const std::string& why) {
  UcxProbe p;
  p.reason = why;
  return p;
}

void parse_ucx_info(const std::string& text, UcxProbe& p) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] == '!') {
      p.reason = line.substr(1);
      return;
    }
    if (line.find("resource") == std::string::npos) continue;
    const size_t dash = line.find("-- ");
    if (dash == std::string::npos) continue;
    std::string r = line.substr(dash + 3);
    while (!r.empty() && (r.back() == ' ' || r.back() == '\r')) r.pop_back();
    if (r.empty()) continue;
    p.resources.push_back(r);
    if (is_rdma(r.substr(0, r.find('/')))) p.rdma.push_back(r);
  }
  p.ok = !p.resources.empty();
  std::string list;
  for (const std::string& r : p.resources) list += (list.empty() ? "" : ", ") + r;
  p.reason = p.ok ? cat("UCX transports: ", list) : "UCX started but found no transport";
}

UcxProbe probe_ucx(int64_t timeout_ms) {
  UcxProbe p;
  p.probed = true;
  const ChildReport c = run_child_probe(timeout_ms, [](int fd) { ucx_child(fd); });
  if (!c.error.empty()) {
    p.reason = c.error;
    return p;
  }
  if (!c.finished) {
    p.reason = cat("the UCX probe did not finish within ", timeout_ms, " ms");
    return p;
  }
  if (c.bytes.empty()) {
    p.reason = "the UCX probe process died before reporting";
    return p;
  }
  parse_ucx_info(c.bytes, p);
  return p;
}

UcxProbe probe_ucx_if_used(const Config& cfg, bool rdma_device) {
  const bool offered = std::find(cfg.serve_transports.begin(), cfg.serve_transports.end(), "ucx") !=
                       cfg.serve_transports.end();
  const bool used = offered || cfg.backend == GENIE_BACKEND_UCX || cfg.backend == GENIE_BACKEND_RDMA ||
                    (cfg.backend == GENIE_BACKEND_AUTO && rdma_device);
  if (!used)
    return ucx_not_probed(
        "UCX not probed at start (the backend asked for does not use it; `genie discover` runs it)");
  return probe_ucx(std::min<int64_t>(cfg.timeout_ms, 10000));
}

// ---------------------------------------------------------------------------
// RDMA devices (ibverbs)
// ---------------------------------------------------------------------------

namespace {

const char* port_state_str(int s) {
  switch (s) {
    case IBV_PORT_NOP: return "NOP";
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
    default: return "UNKNOWN";
  }
}

const char* link_layer_str(int l) {
  switch (l) {
    case IBV_LINK_LAYER_INFINIBAND: return "InfiniBand";
    case IBV_LINK_LAYER_ETHERNET: return "Ethernet";
    default: return "unspecified";
  }
}

}  // namespace

RdmaProbe probe_rdma() {
  RdmaProbe p;
  // Stays loaded for the life of the process: providers it loads keep
  // state that unloading would leave dangling.
  static void* lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    p.reason = "libibverbs.so.1 not loaded (rdma-core is not installed)";
    return p;
  }
  ibv_device** (*get_list)(int*);
  void (*free_list)(ibv_device**);
  const char* (*dev_name)(ibv_device*);
  ibv_context* (*open_dev)(ibv_device*);
  int (*close_dev)(ibv_context*);
  int (*query_dev)(ibv_context*, ibv_device_attr*);
  int (*query_port)(ibv_context*, uint8_t, ibv_port_attr*);
  if (!probe_symbol(lib, "ibv_get_device_list", get_list) || !probe_symbol(lib, "ibv_free_device_list", free_list) ||
      !probe_symbol(lib, "ibv_get_device_name", dev_name) || !probe_symbol(lib, "ibv_open_device", open_dev) ||
      !probe_symbol(lib, "ibv_close_device", close_dev) || !probe_symbol(lib, "ibv_query_device", query_dev) ||
      !probe_symbol(lib, "ibv_query_port", query_port)) {
    p.reason = "libibverbs.so.1 lacks the verbs this probe uses";
    return p;
  }
  int n = 0;
  ibv_device** list = get_list(&n);
  if (!list) {
    const int err = errno;
    p.reason = err == ENOSYS
                   ? "no RDMA support in this kernel (ibv_get_device_list: Function not implemented)"
                   : cat("ibv_get_device_list failed: ", std::strerror(err));
    return p;
  }
  for (int i = 0; i < n; ++i) {
    RdmaDevice d;
    d.name = dev_name(list[i]) ? dev_name(list[i]) : "?";
    ibv_context* ctx = open_dev(list[i]);
    if (ctx) {
      ibv_device_attr attr{};
      if (query_dev(ctx, &attr) == 0) {
        for (uint8_t port = 1; port <= attr.phys_port_cnt; ++port) {
          ibv_port_attr pa{};
          if (query_port(ctx, port, &pa) != 0) continue;
          d.ports.push_back({port, port_state_str(pa.state), link_layer_str(pa.link_layer)});
          if (pa.state == IBV_PORT_ACTIVE) p.available = true;
        }
      }
      close_dev(ctx);
    }
    p.devices.push_back(std::move(d));
  }
  free_list(list);
  if (n == 0)
    p.reason = "no RDMA device (ibv_get_device_list found none)";
  else if (!p.available)
    p.reason = cat(n, " RDMA device(s), no ACTIVE port");
  else
    p.reason = cat(n, " RDMA device(s) with an ACTIVE port");
  return p;
}

}  // namespace genie
