// `genie discover` and `genie top`: the cluster seen from the command line,
// through genie_discover and genie_cluster_state (docs/cluster.md).
#include <cjson/cJSON.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <string>
#include <thread>

#include "cli.hpp"

namespace genie_cli {

void print_discover_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: genie discover [HOST:PORT] [--json] [--no-dpdk]\n"
               "       genie discover --etcd URL[,URL...] [--cluster NAME] [--json]\n"
               "\n"
               "Shows which data-plane backends work on this host and, with HOST:PORT, between\n"
               "this host and the Genie server there: TCP reachability and round-trip time\n"
               "(five probes), RDMA devices (port state, link layer), DPDK (EAL initialised in\n"
               "a child process, ports found), DPDK gpudev devices, local GPUs (NVML), and the\n"
               "backend genie_init would select (GENIE_BACKEND) with the reason.\n"
               "With --etcd it lists instead the live members of the cluster registered in that\n"
               "etcd (genie_cluster_members; docs/cluster.md, 'A cluster on etcd'): id, role,\n"
               "address, health and devices of each.\n"
               "\n"
               "  --json            print the JSON of genie_discover (or genie_cluster_members)\n"
               "  --no-dpdk         skip the DPDK EAL probe (about half a second)\n"
               "  --etcd URL[,URL]  etcd client URLs of a cluster on etcd\n"
               "  --cluster NAME    the cluster's namespace in etcd (default 'default')\n"
               "\n"
               "Exit status 0 when every probe ran (an unreachable host is reported, and\n"
               "exits 1).\n");
}

void print_top_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: genie top [HOST:PORT | --etcd URL[,URL...] [--cluster NAME]] [--once]\n"
               "                 [--interval-ms N]\n"
               "\n"
               "A terminal dashboard of the cluster: nodes (role, status, health, last\n"
               "heartbeat), their GPUs (utilisation, memory, temperature), the selected\n"
               "backend and the master's traffic, refreshed every interval until SIGINT.\n"
               "With HOST:PORT (or GENIE_MASTER_ADDR/GENIE_MASTER_PORT) it joins that master\n"
               "as a client node and shows the master's view; without, this node alone.\n"
               "With --etcd (or GENIE_ETCD_ENDPOINTS) it enters the cluster registered in\n"
               "that etcd through one of its servers (docs/cluster.md, 'A cluster on etcd')\n"
               "and shows its view: every server registered there.\n"
               "\n"
               "Rates (graphs/s, bytes/s by transport) are over the last interval, from the\n"
               "server's counters (the same as its Prometheus metrics).\n"
               "\n"
               "  --etcd URL[,URL]  etcd client URLs of a cluster on etcd\n"
               "  --cluster NAME    the cluster's namespace in etcd (default 'default')\n"
               "  --once            print one frame (no screen control) and exit: for scripts;\n"
               "                    its rates are over one interval, sampled before it\n"
               "  --interval-ms N   refresh, heartbeat and GPU poll interval (default 1000)\n");
}

namespace {

struct JsonDeleter {
  void operator()(cJSON* j) const { cJSON_Delete(j); }
};
using Json = std::unique_ptr<cJSON, JsonDeleter>;

Json parse(const char* text) {
  Json j(cJSON_Parse(text));
  if (!j) failure("Genie returned JSON that does not parse");
  return j;
}

const cJSON* get(const cJSON* o, const char* k) { return cJSON_GetObjectItemCaseSensitive(o, k); }
std::string str(const cJSON* o, const char* k) {
  const cJSON* v = get(o, k);
  return cJSON_IsString(v) ? v->valuestring : "";
}
double num(const cJSON* o, const char* k) {
  const cJSON* v = get(o, k);
  return cJSON_IsNumber(v) ? v->valuedouble : 0;
}
bool boolean(const cJSON* o, const char* k) { return cJSON_IsTrue(get(o, k)); }

// "host:port" or "[v6]:port".
void split_host_port(const std::string& s, std::string& host, int& port) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size())
    usage_error("'" + s + "' is not HOST:PORT");
  host = s.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  port = static_cast<int>(parse_long("port", s.c_str() + colon + 1, 1, 65535));
}

void print_probe(const char* name, const cJSON* p) {
  if (!p || cJSON_IsNull(p)) return;
  std::printf("  %-12s %s: %s\n", name, boolean(p, "available") ? "available" : "not available",
              str(p, "reason").c_str());
}

}  // namespace

namespace {

// `genie discover --etcd`: the members genie_cluster_members lists.
int list_members(const std::string& etcd, const std::string& cluster, bool json) {
  genie_config_t* raw = nullptr;
  check(genie_config_create(&raw), "genie_config_create");
  const ConfigPtr config(raw);
  check(genie_config_set_etcd_endpoints(config.get(), etcd.c_str()), "--etcd");
  if (!cluster.empty()) check(genie_config_set_cluster(config.get(), cluster.c_str()), "--cluster");
  char* out = nullptr;
  check(genie_cluster_members(config.get(), &out), "genie_cluster_members");
  const Json j = parse(out);
  if (json) std::printf("%s\n", out);
  genie_free(out);
  if (json) return kExitOk;
  const cJSON* members = get(j.get(), "members");
  std::printf("%d member(s) in %s, revision %.0f\n", cJSON_GetArraySize(members),
              str(j.get(), "store").c_str(), num(j.get(), "revision"));
  std::printf("  %-20s %-8s %-22s %-10s %s\n", "ID", "ROLE", "ADDRESS", "HEALTH", "DEVICES");
  const cJSON* m;
  cJSON_ArrayForEach(m, members) {
    if (cJSON_IsString(get(m, "error"))) {
      std::printf("  %-20s (unreadable: %s)\n", str(m, "id").c_str(), str(m, "error").c_str());
      continue;
    }
    std::string devices;
    const cJSON* d;
    cJSON_ArrayForEach(d, get(m, "devices")) {
      if (!cJSON_IsString(d)) continue;
      if (!devices.empty()) devices += ',';
      devices += d->valuestring;
    }
    const int gpus = cJSON_GetArraySize(get(m, "gpus"));
    if (gpus > 0) {
      if (!devices.empty()) devices += ' ';
      devices += std::to_string(gpus) + " GPU(s)";
    }
    std::printf("  %-20s %-8s %-22s %-10s %s\n", str(m, "id").c_str(), str(m, "role").c_str(),
                str(m, "listen").c_str(), str(m, "health").c_str(), devices.c_str());
  }
  return kExitOk;
}

}  // namespace

int discover_command(int argc, char** argv) {
  std::string target, etcd, cluster;
  bool json = false, no_dpdk = false;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      print_discover_usage(stdout);
      return kExitOk;
    }
    if (a == "--json")
      json = true;
    else if (a == "--no-dpdk")
      no_dpdk = true;
    else if (a == "--etcd" || a == "--cluster") {
      if (i + 1 >= argc || !*argv[i + 1]) usage_error(a + " needs a value");
      (a == "--etcd" ? etcd : cluster) = argv[++i];
    } else if (!a.empty() && a[0] == '-')
      usage_error("unknown option '" + a + "' (try 'genie help discover')");
    else if (target.empty())
      target = a;
    else
      usage_error("discover takes one HOST:PORT");
  }
  if (!etcd.empty() && !target.empty()) usage_error("discover takes HOST:PORT or --etcd, not both");
  if (!cluster.empty() && etcd.empty()) usage_error("--cluster goes with --etcd");
  if (!etcd.empty()) return list_members(etcd, cluster, json);
  std::string host;
  int port = 0;
  if (!target.empty()) split_host_port(target, host, port);
  genie_config_t* raw = nullptr;
  check(genie_config_create(&raw), "genie_config_create");
  const ConfigPtr config(raw);
  if (no_dpdk) check(genie_config_set_dpdk_probe(config.get(), 0), "--no-dpdk");
  char* out = nullptr;
  check(genie_discover(config.get(), host.empty() ? nullptr : host.c_str(), port, &out), "genie_discover");
  const Json j = parse(out);
  if (json) std::printf("%s\n", out);
  genie_free(out);
  const cJSON* tcp = get(j.get(), "tcp");
  const bool unreachable = cJSON_IsObject(tcp) && !boolean(tcp, "reachable");
  if (json) return unreachable ? kExitFailure : kExitOk;

  std::printf("genie discover (%.1f ms)\n", num(j.get(), "duration_ms"));
  if (cJSON_IsObject(tcp)) {
    if (boolean(tcp, "reachable")) {
      const cJSON* rtt = get(tcp, "rtt_us");
      std::printf("  %-12s %s:%d reachable: Genie server %s; rtt p50 %.0f us (min %.0f, max %.0f, %d probes); "
                  "connect %.0f us\n",
                  "tcp", host.c_str(), port, str(tcp, "server_node_id").c_str(), num(rtt, "p50"), num(rtt, "min"),
                  num(rtt, "max"), static_cast<int>(num(rtt, "rounds")), num(tcp, "connect_us"));
    } else {
      std::printf("  %-12s %s:%d not reachable: %s\n", "tcp", host.c_str(), port, str(tcp, "reason").c_str());
    }
  }
  print_probe("rdma", get(j.get(), "rdma"));
  const cJSON* devs = get(get(j.get(), "rdma"), "devices");
  const cJSON* d;
  cJSON_ArrayForEach(d, devs) {
    const cJSON* p;
    cJSON_ArrayForEach(p, get(d, "ports")) {
      std::printf("  %-12s   %s port %d: %s, %s\n", "", str(d, "name").c_str(), static_cast<int>(num(p, "port")),
                  str(p, "state").c_str(), str(p, "link_layer").c_str());
    }
  }
  print_probe("ucx", get(j.get(), "ucx"));
  print_probe("dpdk", get(j.get(), "dpdk"));
  std::printf("  %-12s   transport plugin: %s\n", "", str(get(j.get(), "dpdk"), "transport_plugin").c_str());
  print_probe("dpdk_gpudev", get(j.get(), "dpdk_gpudev"));
  print_probe("gpus", get(j.get(), "gpus"));
  const cJSON* backends = get(j.get(), "backends");
  const cJSON* server = get(backends, "server");
  std::printf("backends (this node%s):\n", server ? " | server" : "");
  const cJSON* b;
  int i = 0;
  cJSON_ArrayForEach(b, get(backends, "local")) {
    std::string line = boolean(b, "available") ? "usable" : "not usable";
    if (boolean(b, "probe_ok") && !boolean(b, "transport_built")) line += " (transport not built)";
    if (server) {
      const cJSON* sb = cJSON_GetArrayItem(server, i);
      line += std::string(" | ") + (sb && boolean(sb, "available") ? "usable" : "not usable");
    }
    // Why (not): the probe's own words.
    if (cJSON_IsString(get(b, "probe"))) line += ": " + str(b, "probe");
    std::printf("  %-12s %s\n", str(b, "backend").c_str(), line.c_str());
    ++i;
  }
  const cJSON* sel = get(j.get(), "selection");
  if (cJSON_IsString(get(sel, "selected")))
    std::printf("selection: %s (%s requested): %s\n", str(sel, "selected").c_str(), str(sel, "requested").c_str(),
                str(sel, "reason").c_str());
  else
    std::printf("selection: %s requested: %s\n", str(sel, "requested").c_str(), str(sel, "error").c_str());
  return unreachable ? kExitFailure : kExitOk;
}

namespace {

std::string bytes_str(double b) {
  char buf[32];
  if (b >= 1024.0 * 1024 * 1024)
    std::snprintf(buf, sizeof buf, "%.1f GiB", b / (1024.0 * 1024 * 1024));
  else
    std::snprintf(buf, sizeof buf, "%.0f MiB", b / (1024.0 * 1024));
  return buf;
}

// The server counters that rates are taken of, and when they were read.
struct Sample {
  bool valid = false;
  std::chrono::steady_clock::time_point at;
  double graphs = 0;
  std::map<std::string, double> transport_bytes;  // "tcp sent" ...
};

Sample sample_of(const cJSON* info) {
  Sample s;
  s.valid = true;
  s.at = std::chrono::steady_clock::now();
  s.graphs = num(info, "graphs_executed");
  const cJSON* t;
  cJSON_ArrayForEach(t, get(info, "transport_bytes")) {
    if (cJSON_IsNumber(t) && t->string) s.transport_bytes[t->string] = t->valuedouble;
  }
  return s;
}

std::string rate_str(double bytes_per_s) {
  char buf[32];
  if (bytes_per_s >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2f GB/s", bytes_per_s / 1e9);
  else if (bytes_per_s >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2f MB/s", bytes_per_s / 1e6);
  else if (bytes_per_s >= 1e3)
    std::snprintf(buf, sizeof buf, "%.1f kB/s", bytes_per_s / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.0f B/s", bytes_per_s);
  return buf;
}

// "rates graphs 12.0/s  tcp sent 1.20 MB/s ...": from `prev` to `now`.
void print_rates(const Sample& prev, const Sample& now) {
  const double dt = std::chrono::duration<double>(now.at - prev.at).count();
  if (!prev.valid || dt <= 0) {
    std::printf("rates -\n");
    return;
  }
  std::printf("rates graphs %.1f/s", std::max(0.0, now.graphs - prev.graphs) / dt);
  for (const auto& [key, bytes] : now.transport_bytes) {
    const auto it = prev.transport_bytes.find(key);
    const double before = it == prev.transport_bytes.end() ? 0 : it->second;
    std::printf("  %s %s", key.c_str(), rate_str(std::max(0.0, bytes - before) / dt).c_str());
  }
  std::printf("\n");
}

// The master's server counters, where this context has a master.
Sample read_sample(genie_context_t* ctx) {
  char* info = nullptr;
  if (genie_context_server_info(ctx, &info) != GENIE_OK) return {};
  const Json s = parse(info);
  genie_free(info);
  return sample_of(s.get());
}

void print_frame(genie_context_t* ctx, bool clear, Sample& prev) {
  char* out = nullptr;
  check(genie_cluster_state(ctx, &out), "genie_cluster_state");
  const Json j = parse(out);
  genie_free(out);
  const double now_ms = static_cast<double>(std::time(nullptr)) * 1000.0;
  if (clear) std::printf("\033[H\033[2J");
  const cJSON* node = get(j.get(), "node");
  const cJSON* master = get(j.get(), "master");
  const cJSON* backend = get(j.get(), "backend");
  const cJSON* health = get(j.get(), "health");
  std::printf("genie top  node %s  mode %s", str(node, "id").c_str(), str(j.get(), "mode").c_str());
  if (cJSON_IsObject(master))
    std::printf("  master %s (%s, %s, rtt %.0f us)", str(master, "address").c_str(), str(master, "node_id").c_str(),
                str(master, "status").c_str(), num(master, "rtt_us"));
  std::printf("\nbackend %s: %s\n", str(backend, "selected").c_str(), str(backend, "reason").c_str());
  std::printf("health %s", str(health, "level").c_str());
  const cJSON* r;
  cJSON_ArrayForEach(r, get(health, "reasons")) std::printf("; %s", r->valuestring);
  std::printf("\n");
  char* info = nullptr;
  if (cJSON_IsObject(master) && genie_context_server_info(ctx, &info) == GENIE_OK) {
    const Json s = parse(info);
    genie_free(info);
    std::printf("traffic sessions %.0f  tensors %.0f (%s)  graphs executed %.0f  refused %.0f  uptime %.0f s\n",
                num(s.get(), "sessions"), num(s.get(), "tensors"), bytes_str(num(s.get(), "tensor_bytes")).c_str(),
                num(s.get(), "graphs_executed"), num(s.get(), "connections_refused"),
                num(s.get(), "uptime_ms") / 1000.0);
    const Sample now = sample_of(s.get());
    print_rates(prev, now);
    prev = now;
  }
  std::printf("\n%-36s %-7s %-6s %-10s %-9s %-8s %s\n", "NODE", "ROLE", "STATUS", "HEALTH", "LAST HB", "BACKEND",
              "HOST");
  const cJSON* n;
  cJSON_ArrayForEach(n, get(j.get(), "nodes")) {
    const double hb = num(n, "last_heartbeat_ms");
    char ago[24] = "-";
    if (hb > 0) std::snprintf(ago, sizeof ago, "%.1f s", (now_ms - hb) / 1000.0 < 0 ? 0 : (now_ms - hb) / 1000.0);
    std::printf("%-36s %-7s %-6s %-10s %-9s %-8s %s\n", str(n, "id").c_str(), str(n, "role").c_str(),
                str(n, "status").c_str(), str(n, "health").c_str(), ago, str(n, "backend").c_str(),
                str(n, "host").c_str());
    if (!str(n, "listen").empty()) {  // a worker of the master: where it serves, what it offers
      std::string devs;
      const cJSON* d;
      cJSON_ArrayForEach(d, get(n, "devices")) {
        if (cJSON_IsString(d)) devs += (devs.empty() ? "" : ", ") + std::string(d->valuestring);
      }
      std::printf("    serves %s  devices %s\n", str(n, "listen").c_str(), devs.empty() ? "-" : devs.c_str());
    }
    const cJSON* g;
    int gpus = 0;
    cJSON_ArrayForEach(g, get(n, "gpus")) {
      ++gpus;
      std::printf("    gpu %d %-24s util %3.0f%%  mem %s / %s  %3.0f C%s%s\n", static_cast<int>(num(g, "index")),
                  str(g, "name").c_str(), num(g, "utilization"), bytes_str(num(g, "memory_used")).c_str(),
                  bytes_str(num(g, "memory_total")).c_str(), num(g, "temperature_c"),
                  boolean(g, "available") ? "" : "  BUSY", boolean(g, "overheated") ? "  HOT" : "");
    }
    if (gpus == 0) std::printf("    no GPU%s%s\n", str(n, "gpu_reason").empty() ? "" : ": ", str(n, "gpu_reason").c_str());
  }
  std::fflush(stdout);
}

}  // namespace

int top_command(int argc, char** argv) {
  std::string target, etcd, cluster;
  bool once = false;
  long interval = 1000;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      print_top_usage(stdout);
      return kExitOk;
    }
    if (a == "--once") {
      once = true;
    } else if (a == "--etcd" || a == "--cluster") {
      if (i + 1 >= argc || !*argv[i + 1]) usage_error(a + " needs a value");
      (a == "--etcd" ? etcd : cluster) = argv[++i];
    } else if (a == "--interval-ms") {
      if (i + 1 >= argc) usage_error("--interval-ms needs a value");
      interval = parse_long(a, argv[++i], 10, 86400000);
    } else if (!a.empty() && a[0] == '-') {
      usage_error("unknown option '" + a + "' (try 'genie help top')");
    } else if (target.empty()) {
      target = a;
    } else {
      usage_error("top takes one HOST:PORT");
    }
  }
  genie_config_t* raw = nullptr;
  check(genie_config_create(&raw), "genie_config_create");
  const ConfigPtr config(raw);
  if (!target.empty()) {
    std::string host;
    int port = 0;
    split_host_port(target, host, port);
    check(genie_config_set_master_addr(config.get(), host.c_str()), "HOST");
    check(genie_config_set_master_port(config.get(), port), "PORT");
  }
  if (!target.empty() && !etcd.empty()) usage_error("top takes HOST:PORT or --etcd, not both");
  if (!etcd.empty()) check(genie_config_set_etcd_endpoints(config.get(), etcd.c_str()), "--etcd");
  if (!cluster.empty()) check(genie_config_set_cluster(config.get(), cluster.c_str()), "--cluster");
  check(genie_config_set_heartbeat_interval_ms(config.get(), interval), "--interval-ms");
  check(genie_config_set_heartbeat_timeout_ms(config.get(), interval * 5 < 86400000 ? interval * 5 : 86400000),
        "--interval-ms");
  check(genie_config_set_gpu_poll_interval_ms(config.get(), interval), "--interval-ms");
  check(genie_config_set_health_interval_ms(config.get(), interval), "--interval-ms");

  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  if (!once) pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  genie_context_t* raw_ctx = nullptr;
  check(genie_init(config.get(), &raw_ctx), "genie_init");
  const ContextPtr ctx(raw_ctx);
  Sample prev;
  if (once) {
    // Rates need a first sample an interval before the frame.
    prev = read_sample(ctx.get());
    if (prev.valid) std::this_thread::sleep_for(std::chrono::milliseconds(interval));
    print_frame(ctx.get(), false, prev);
    return kExitOk;
  }
  for (;;) {
    print_frame(ctx.get(), true, prev);
    timespec ts{interval / 1000, (interval % 1000) * 1000000L};
    const int sig = sigtimedwait(&stop_signals, nullptr, &ts);
    if (sig == SIGINT || sig == SIGTERM) break;
  }
  return kExitOk;
}

}  // namespace genie_cli
