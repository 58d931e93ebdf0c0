// `genie serve`: run a Genie server until SIGINT or SIGTERM.
#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "cli.hpp"

namespace genie_cli {

void print_serve_usage(std::FILE* out) {
  std::fprintf(
      out,
      "usage: genie serve [--host H] [--port P] [--auth-token-file F] [--threads N]\n"
      "                   [--grace-ms MS] [--node-id ID] [--join HOST:PORT] [--insecure]\n"
      "                   [--tls-cert FILE --tls-key FILE [--tls-ca FILE]]\n"
      "                   [--op-library F]...\n"
      "                   [--session-idle-ms MS] [--handshake-timeout-ms MS]\n"
      "                   [--max-connections N] [--max-connections-per-source N]\n"
      "                   [--max-sessions N] [--max-graph-bytes BYTES] [--max-graph-nodes N]\n"
      "                   [--stage-timeout-ms MS]\n"
      "                   [--memory-budget BYTES] [--session-max-bytes BYTES]\n"
      "                   [--session-max-tensors N] [--session-max-graphs N]\n"
      "                   [--metrics-port P] [--metrics-addr H]\n"
      "                   [--etcd URL[,URL...] [--cluster NAME] [--etcd-lease-ttl-ms MS]]\n"
      "\n"
      "Serves remote Genie clients (GENIE_MASTER_ADDR/GENIE_MASTER_PORT) until\n"
      "SIGINT or SIGTERM, then lets graphs in flight finish, closes every\n"
      "connection and exits 0. Once listening it prints one line on stdout:\n"
      "  genie serve listening on HOST:PORT\n"
      "\n"
      "  --host H               address to listen on (default 127.0.0.1; 0.0.0.0 or\n"
      "                         :: serve every interface: any address but loopback\n"
      "                         needs an auth token or --tls-ca, or --insecure)\n"
      "  --port P               TCP port, 0 picks a free one (default 5555)\n"
      "  --auth-token-file F    admit only clients holding the secret in file F (one\n"
      "                         trailing newline is ignored); HMAC-SHA256\n"
      "                         challenge-response, the secret never crosses the network\n"
      "  --threads N            worker threads executing graphs (0 = all cores)\n"
      "  --grace-ms MS          how long a disconnected client's tensors are kept for\n"
      "                         it to reconnect (default 30000)\n"
      "  --node-id ID           this server's node id: its devices are ID/cpu:0 for\n"
      "                         the master's clients (default: generated)\n"
      "  --join HOST:PORT       join the master at HOST:PORT as a worker (before the\n"
      "                         listening line is printed); the master dials this\n"
      "                         server back at --host (docs/multinode.md)\n"
      "  --insecure             allow listening beyond loopback without an auth\n"
      "                         token or client certificates (a trusted network only;\n"
      "                         logged as a warning)\n"
      "  --tls-cert FILE        speak only TLS 1.3, with this PEM certificate (chain);\n"
      "                         plaintext clients are refused (docs/security.md)\n"
      "  --tls-key FILE         the PEM private key of --tls-cert\n"
      "  --tls-ca FILE          require client certificates chained to this PEM CA\n"
      "                         (mutual TLS); also checks the master's certificate\n"
      "  --op-library F         load the custom ops of op library F (a shared object\n"
      "                         exporting genie_op_library_init; docs/custom-ops.md)\n"
      "                         before serving; repeatable\n"
      "  --session-idle-ms MS   end a session that sends nothing for MS ms, freeing\n"
      "                         its tensors (default 600000; 0: never)\n"
      "  --handshake-timeout-ms MS  close a connection not through its handshake\n"
      "                         within MS ms (default 10000)\n"
      "  --max-connections N    connections at once (default 1024; 0: no limit)\n"
      "  --max-connections-per-source N  from one address (default 128; 0: no limit)\n"
      "  --max-sessions N       sessions at once (default 1024; 0: no limit)\n"
      "  --max-graph-bytes BYTES  the largest graph JSON a submission may carry\n"
      "                         (default 33554432; 0: no limit); larger ones are\n"
      "                         refused (TOO_LARGE) before they are parsed\n"
      "  --max-graph-nodes N    the most nodes of a graph (default 65536; 0: no limit)\n"
      "  --stage-timeout-ms MS  a master fails a graph whose stage a worker has not\n"
      "                         finished within MS ms (TIMEOUT naming the worker;\n"
      "                         default 600000)\n"
      "  --memory-budget BYTES  what tensors and graphs in flight may hold in all\n"
      "                         (default 0: 80%% of the available memory, within the\n"
      "                         memory cgroup's limit, at start)\n"
      "  --session-max-bytes BYTES  what one session may hold (0: the budget)\n"
      "  --session-max-tensors N    tensors one session may hold (0: 65536)\n"
      "  --session-max-graphs N     graphs one session may have in flight (0: 256)\n"
      "  --metrics-port P       serve Prometheus metrics at http://H:P/metrics (0 picks a\n"
      "                         free port; default: none); then prints the line\n"
      "                         'genie serve metrics on port P' after the listening\n"
      "                         line (docs/observability.md)\n"
      "  --metrics-addr H       address of the metrics endpoint (default 127.0.0.1;\n"
      "                         beyond loopback as for --host)\n"
      "  --etcd URL[,URL...]    register in the etcd v3 cluster at these client URLs\n"
      "                         under /genie/CLUSTER/nodes/NODE-ID with a lease, and\n"
      "                         follow the servers registered there (docs/cluster.md,\n"
      "                         'A cluster on etcd'); a live server holding the same\n"
      "                         node id makes this one exit with an error\n"
      "  --cluster NAME         the cluster's namespace in etcd (default 'default')\n"
      "  --etcd-lease-ttl-ms MS the lease's TTL (default 10000; renewed at a third):\n"
      "                         a server killed leaves the cluster this long after\n"
      "\n"
      "GENIE_* environment variables override these values as for any Genie\n"
      "program: GENIE_AUTH_TOKEN, GENIE_ALLOW_INSECURE, GENIE_TLS_CERT, GENIE_TLS_KEY, GENIE_TLS_CA,\n"
      "GENIE_NUM_THREADS, GENIE_SESSION_GRACE, GENIE_SESSION_IDLE, GENIE_HANDSHAKE_TIMEOUT,\n"
      "GENIE_MAX_CONNECTIONS, GENIE_MAX_CONNECTIONS_PER_SOURCE, GENIE_MAX_SESSIONS,\n"
      "GENIE_MAX_GRAPH_BYTES, GENIE_MAX_GRAPH_NODES, GENIE_STAGE_TIMEOUT,\n"
      "GENIE_MEMORY_BUDGET, GENIE_SESSION_MAX_BYTES, GENIE_SESSION_MAX_TENSORS,\n"
      "GENIE_SESSION_MAX_GRAPHS, GENIE_MAX_MESSAGE, GENIE_NODE_ID, GENIE_METRICS_PORT,\n"
      "GENIE_METRICS_ADDR, GENIE_ETCD_ENDPOINTS, GENIE_CLUSTER, GENIE_ETCD_LEASE_TTL,\n"
      "GENIE_LOG_LEVEL\n"
      "(info logs sessions).\n");
}

namespace {

struct ServeOptions {
  std::string host = "127.0.0.1";
  long port = 5555;
  std::string token_file;
  long threads = -1;   // -1: not given
  long grace_ms = -1;  // -1: not given
  std::string node_id;
  std::string join_host;
  long join_port = 0;
  bool insecure = false;
  std::string tls_cert, tls_key, tls_ca;
  bool help = false;
  std::vector<std::string> op_libraries;
  // Server bounds; -1: not given.
  long session_idle_ms = -1;
  long handshake_timeout_ms = -1;
  long max_connections = -1;
  long max_connections_per_source = -1;
  long max_sessions = -1;
  long max_graph_bytes = -1;
  long max_graph_nodes = -1;
  long stage_timeout_ms = -1;
  long memory_budget = -1;    // -1: not given
  long quota[3] = {0, 0, 0};  // session bytes, tensors, graphs; 0: default
  bool quota_given = false;
  long metrics_port = -1;  // -1: not given
  std::string metrics_addr;
  std::string etcd, cluster;
  long etcd_lease_ttl_ms = -1;  // -1: not given
};

ServeOptions parse_args(int argc, char** argv) {
  ServeOptions o;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      o.help = true;
      return o;
    }
    if (a == "--insecure") {
      o.insecure = true;
      continue;
    }
    const std::pair<const char*, long*> bounds[] = {
        {"--session-idle-ms", &o.session_idle_ms},
        {"--handshake-timeout-ms", &o.handshake_timeout_ms},
        {"--max-connections", &o.max_connections},
        {"--max-connections-per-source", &o.max_connections_per_source},
        {"--max-sessions", &o.max_sessions},
        {"--max-graph-bytes", &o.max_graph_bytes},
        {"--max-graph-nodes", &o.max_graph_nodes},
        {"--stage-timeout-ms", &o.stage_timeout_ms}};
    long* bound = nullptr;
    for (const auto& [flag, field] : bounds)
      if (a == flag) bound = field;
    if (a != "--host" && a != "--port" && a != "--auth-token-file" && a != "--threads" && a != "--grace-ms" &&
        a != "--node-id" && a != "--join" && a != "--tls-cert" && a != "--tls-key" && a != "--tls-ca" &&
        a != "--op-library" && bound == nullptr && a != "--memory-budget" && a != "--session-max-bytes" &&
        a != "--session-max-tensors" && a != "--session-max-graphs" && a != "--metrics-port" &&
        a != "--metrics-addr" && a != "--etcd" && a != "--cluster" && a != "--etcd-lease-ttl-ms")
      usage_error("unknown argument '" + a + "' (try 'genie help serve')");
    if (i + 1 >= argc) usage_error(a + " needs a value");
    const char* v = argv[++i];
    if (bound != nullptr) {
      // The setters check the ranges, naming the flag.
      *bound = parse_long(a, v, 0, 1L << 40);
    } else if (a == "--host") {
      if (!*v) usage_error("--host needs an address");
      o.host = v;
    } else if (a == "--port") {
      o.port = parse_long(a, v, 0, 65535);
    } else if (a == "--metrics-port") {
      o.metrics_port = parse_long(a, v, 0, 65535);
    } else if (a == "--metrics-addr") {
      if (!*v) usage_error("--metrics-addr needs an address");
      o.metrics_addr = v;
    } else if (a == "--etcd") {
      if (!*v) usage_error("--etcd needs etcd client URLs");
      o.etcd = v;
    } else if (a == "--cluster") {
      o.cluster = v;
    } else if (a == "--etcd-lease-ttl-ms") {
      o.etcd_lease_ttl_ms = parse_long(a, v, 0, 1L << 40);
    } else if (a == "--auth-token-file") {
      o.token_file = v;
    } else if (a == "--threads") {
      o.threads = parse_long(a, v, 0, 1024);
    } else if (a == "--tls-cert") {
      o.tls_cert = v;
    } else if (a == "--tls-key") {
      o.tls_key = v;
    } else if (a == "--tls-ca") {
      o.tls_ca = v;
    } else if (a == "--op-library") {
      if (!*v) usage_error("--op-library needs a path");
      o.op_libraries.push_back(v);
    } else if (a == "--memory-budget") {
      o.memory_budget = parse_long(a, v, 0, 1L << 62);
    } else if (a == "--session-max-bytes" || a == "--session-max-tensors" || a == "--session-max-graphs") {
      const int k = a == "--session-max-bytes" ? 0 : a == "--session-max-tensors" ? 1 : 2;
      o.quota[k] = parse_long(a, v, 0, 1L << 62);
      o.quota_given = true;
    } else if (a == "--node-id") {
      o.node_id = v;
    } else if (a == "--join") {
      const std::string hp = v;
      const size_t colon = hp.rfind(':');
      if (colon == std::string::npos || colon == 0 || colon + 1 == hp.size())
        usage_error("--join needs HOST:PORT, got '" + hp + "'");
      o.join_host = hp.substr(0, colon);
      if (o.join_host.size() > 2 && o.join_host.front() == '[' && o.join_host.back() == ']')
        o.join_host = o.join_host.substr(1, o.join_host.size() - 2);
      o.join_port = parse_long(a, hp.c_str() + colon + 1, 1, 65535);
    } else {
      o.grace_ms = parse_long(a, v, 0, 1L << 40);
    }
  }
  if (o.tls_cert.empty() != o.tls_key.empty()) usage_error("--tls-cert and --tls-key go together");
  if (!o.tls_ca.empty() && o.tls_cert.empty()) usage_error("--tls-ca needs --tls-cert and --tls-key");
  return o;
}

std::string read_token(const std::string& path) {
  std::string token = read_file(path, "auth token file");
  if (!token.empty() && token.back() == '\n') token.pop_back();
  if (!token.empty() && token.back() == '\r') token.pop_back();
  if (token.empty()) failure("auth token file " + path + " is empty");
  return token;
}

struct ServerDeleter {
  void operator()(genie_server_t* s) const { genie_server_destroy(s); }
};

}  // namespace

int serve_command(int argc, char** argv) {
  const ServeOptions opt = parse_args(argc, argv);
  if (opt.help) {
    print_serve_usage(stdout);
    return kExitOk;
  }
  genie_config_t* raw_config = nullptr;
  check(genie_config_create(&raw_config), "genie_config_create");
  const ConfigPtr config(raw_config);
  if (!opt.token_file.empty())
    check(genie_config_set_auth_token(config.get(), read_token(opt.token_file).c_str()), "--auth-token-file");
  if (opt.insecure) check(genie_config_set_allow_insecure(config.get(), 1), "--insecure");
  if (!opt.tls_cert.empty())
    check(genie_config_set_tls_cert(config.get(), opt.tls_cert.c_str(), opt.tls_key.c_str()), "--tls-cert");
  if (!opt.tls_ca.empty()) check(genie_config_set_tls_ca(config.get(), opt.tls_ca.c_str()), "--tls-ca");
  if (opt.threads >= 0)
    check(genie_config_set_num_threads(config.get(), static_cast<int32_t>(opt.threads)), "--threads");
  if (opt.grace_ms >= 0) check(genie_config_set_session_grace_ms(config.get(), opt.grace_ms), "--grace-ms");
  if (opt.memory_budget >= 0)
    check(genie_config_set_memory_budget(config.get(), opt.memory_budget), "--memory-budget");
  if (opt.quota_given)
    check(genie_config_set_session_quota(config.get(), opt.quota[0], opt.quota[1], opt.quota[2]),
          "--session-max-*");
  if (!opt.node_id.empty()) check(genie_config_set_node_id(config.get(), opt.node_id.c_str()), "--node-id");
  if (opt.metrics_port >= 0)
    check(genie_config_set_metrics_port(config.get(), static_cast<int32_t>(opt.metrics_port)),
          "--metrics-port");
  if (!opt.metrics_addr.empty())
    check(genie_config_set_metrics_addr(config.get(), opt.metrics_addr.c_str()), "--metrics-addr");
  if (opt.session_idle_ms >= 0)
    check(genie_config_set_session_idle_ms(config.get(), opt.session_idle_ms), "--session-idle-ms");
  if (opt.handshake_timeout_ms >= 0)
    check(genie_config_set_handshake_timeout_ms(config.get(), opt.handshake_timeout_ms),
          "--handshake-timeout-ms");
  if (opt.max_connections >= 0)
    check(genie_config_set_max_connections(config.get(),
                                           static_cast<int32_t>(std::min(opt.max_connections, 1L << 30))),
          "--max-connections");
  if (opt.max_connections_per_source >= 0)
    check(genie_config_set_max_connections_per_source(
              config.get(), static_cast<int32_t>(std::min(opt.max_connections_per_source, 1L << 30))),
          "--max-connections-per-source");
  if (opt.max_sessions >= 0)
    check(genie_config_set_max_sessions(config.get(),
                                        static_cast<int32_t>(std::min(opt.max_sessions, 1L << 30))),
          "--max-sessions");
  if (!opt.etcd.empty()) check(genie_config_set_etcd_endpoints(config.get(), opt.etcd.c_str()), "--etcd");
  if (!opt.cluster.empty()) check(genie_config_set_cluster(config.get(), opt.cluster.c_str()), "--cluster");
  if (opt.etcd_lease_ttl_ms >= 0)
    check(genie_config_set_etcd_lease_ttl_ms(config.get(), opt.etcd_lease_ttl_ms), "--etcd-lease-ttl-ms");
  if (opt.max_graph_bytes >= 0)
    check(genie_config_set_max_graph_bytes(config.get(), opt.max_graph_bytes), "--max-graph-bytes");
  if (opt.max_graph_nodes >= 0)
    check(genie_config_set_max_graph_nodes(config.get(), opt.max_graph_nodes), "--max-graph-nodes");
  if (opt.stage_timeout_ms >= 0)
    check(genie_config_set_stage_timeout_ms(config.get(), opt.stage_timeout_ms), "--stage-timeout-ms");
  if (!opt.join_host.empty())
    check(genie_config_set_master_addr(config.get(), opt.join_host.c_str()) ||
              genie_config_set_master_port(config.get(), static_cast<int32_t>(opt.join_port)),
          "--join");

  // Before the server exists, so that no client ever sees it without its ops.
  for (const std::string& lib : opt.op_libraries) check(genie_op_library_load(lib.c_str()), "--op-library");

  // Signals are taken synchronously by sigwait below: blocked here, before
  // the server starts its threads, so that every thread inherits the mask
  // and none of them is interrupted by them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  genie_server_t* raw_server = nullptr;
  check(genie_server_create(config.get(), opt.host.c_str(), static_cast<int32_t>(opt.port), &raw_server),
        "genie serve");
  const std::unique_ptr<genie_server_t, ServerDeleter> server(raw_server);
  int32_t port = 0;
  check(genie_server_port(server.get(), &port), "genie_server_port");
  const bool v6 = opt.host.find(':') != std::string::npos;
  std::printf("genie serve listening on %s%s%s:%d\n", v6 ? "[" : "", opt.host.c_str(), v6 ? "]" : "",
              static_cast<int>(port));
  int32_t metrics_port = -1;
  check(genie_server_metrics_port(server.get(), &metrics_port), "genie_server_metrics_port");
  if (metrics_port >= 0) std::printf("genie serve metrics on port %d\n", static_cast<int>(metrics_port));
  std::fflush(stdout);

  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  std::fprintf(stderr, "genie serve: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  check(genie_server_stop(server.get()), "genie_server_stop");
  check(genie_server_wait(server.get()), "genie_server_wait");
  return kExitOk;
}

}  // namespace genie_cli
