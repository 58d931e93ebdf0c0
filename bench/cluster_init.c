/*
 * bench_cluster_init — the cost of the cluster layer, each figure beside its
 * comparison measured in the same run:
 *   1. genie_init to ready in remote mode over TCP loopback (every init
 *      phase: discovery probe, backend selection, session handshake on two
 *      connections, first heartbeat answered) vs a raw TCP connect to the
 *      same server; interleaved pairs (goal: init <= 50 ms);
 *   2. discovery alone (genie_discover of that server: RDMA probe, NVML,
 *      TCP reachability with five probe round trips; DPDK EAL probe off) vs
 *      the same raw TCP connect (goal <= 20 ms); the EAL probe (forked
 *      child) is timed once on its own;
 *   3. CPU cost of monitoring at the default intervals: process CPU time
 *      (getrusage) over a window with an idle remote context (heartbeats,
 *      GPU polls, health checks, and the master's side, all in this
 *      process) vs a window without it, interleaved (goal <= 0.1 % of one
 *      core).
 * The server runs in this process on 127.0.0.1. Options: --quick, --iters N
 * (pairs for 1 and 2), --window-s S (each window of 3; default 20, quick 0.3),
 * --json FILE.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_util.h"

static double raw_connect_ms(int32_t port) {
  struct sockaddr_in a;
  const double t0 = bu_now_s();
  int s = socket(AF_INET, SOCK_STREAM, 0);
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
    perror("bench: connect");
    exit(1);
  }
  {
    const double t = (bu_now_s() - t0) * 1e3;
    close(s);
    return t;
  }
}

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
         (double)ru.ru_stime.tv_usec * 1e-6;
}

/* One sleep (not a polling loop), so the idle baseline is the process's own. */
static void sleep_s(double s) {
  const double end = bu_now_s() + s;
  double left;
  while ((left = end - bu_now_s()) > 0) {
    struct timespec ts;
    ts.tv_sec = (time_t)left;
    ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
    nanosleep(&ts, NULL);
  }
}

typedef struct pair_result {
  bu_stats_t a, b, ratio;
} pair_result_t;

static void print_pair(const char *what, const char *a_name, const char *b_name, pair_result_t r, int n) {
  printf("%s (%d interleaved pairs)\n", what, n);
  printf("  %-34s p50 %8.3f ms  p99 %8.3f ms\n", a_name, r.a.median, r.a.p99);
  printf("  %-34s p50 %8.3f ms  p99 %8.3f ms\n", b_name, r.b.median, r.b.p99);
  printf("  median ratio %.1fx\n", r.ratio.median);
}

int main(int argc, char **argv) {
  bu_options_t o;
  double window = -1;
  int i, n, nargs = 0;
  char *args[16];
  genie_server_t *server = NULL;
  genie_config_t *scfg = NULL, *ccfg = NULL, *dcfg = NULL;
  int32_t port = 0;
  double *a, *b, *r, eal_ms = -1;
  pair_result_t init_r, disc_r;
  FILE *json;
  for (i = 0; i < argc && nargs < 15; ++i) {
    if (!strcmp(argv[i], "--window-s") && i + 1 < argc) {
      window = atof(argv[++i]);
      if (window <= 0) {
        fprintf(stderr, "%s: --window-s needs a positive number\n", argv[0]);
        return 2;
      }
    } else {
      args[nargs++] = argv[i];
    }
  }
  args[nargs] = NULL;
  o = bu_parse_args(nargs, args, " (pairs; default 30, --quick 3); --window-s S: monitoring window");
  n = o.iters ? o.iters : (o.quick ? 3 : 30);
  if (window < 0) window = o.quick ? 0.3 : 20;

  bu_check(genie_config_create(&scfg), "genie_config_create");
  bu_check(genie_config_set_use_env(scfg, 0), "genie_config_set_use_env");
  bu_check(genie_server_create(scfg, "127.0.0.1", 0, &server), "genie_server_create");
  bu_check(genie_server_port(server, &port), "genie_server_port");
  bu_check(genie_config_create(&ccfg), "genie_config_create");
  bu_check(genie_config_set_use_env(ccfg, 0), "genie_config_set_use_env");
  bu_check(genie_config_set_master_addr(ccfg, "127.0.0.1"), "set_master_addr");
  bu_check(genie_config_set_master_port(ccfg, port), "set_master_port");
  bu_check(genie_config_create(&dcfg), "genie_config_create");
  bu_check(genie_config_set_use_env(dcfg, 0), "genie_config_set_use_env");
  bu_check(genie_config_set_dpdk_probe(dcfg, 0), "set_dpdk_probe");

  a = bu_malloc(sizeof(double) * (size_t)n);
  b = bu_malloc(sizeof(double) * (size_t)n);
  r = bu_malloc(sizeof(double) * (size_t)n);

  /* 1. genie_init to ready vs raw connect (one warm-up pair first). */
  for (i = -1; i < n; ++i) {
    genie_context_t *ctx = NULL;
    const double t0 = bu_now_s();
    double ta, tb;
    bu_check(genie_init(ccfg, &ctx), "genie_init");
    ta = (bu_now_s() - t0) * 1e3;
    genie_shutdown(ctx);
    tb = raw_connect_ms(port);
    if (i < 0) continue;
    a[i] = ta;
    b[i] = tb;
    r[i] = ta / tb;
  }
  init_r.a = bu_stats(a, (size_t)n);
  init_r.b = bu_stats(b, (size_t)n);
  init_r.ratio = bu_stats(r, (size_t)n);

  /* 2. discovery alone vs raw connect. */
  for (i = -1; i < n; ++i) {
    char *out = NULL;
    const double t0 = bu_now_s();
    double ta, tb;
    bu_check(genie_discover(dcfg, "127.0.0.1", port, &out), "genie_discover");
    ta = (bu_now_s() - t0) * 1e3;
    if (!strstr(out, "\"reachable\":true")) {
      fprintf(stderr, "bench: discovery did not reach the server: %s\n", out);
      return 1;
    }
    genie_free(out);
    tb = raw_connect_ms(port);
    if (i < 0) continue;
    a[i] = ta;
    b[i] = tb;
    r[i] = ta / tb;
  }
  disc_r.a = bu_stats(a, (size_t)n);
  disc_r.b = bu_stats(b, (size_t)n);
  disc_r.ratio = bu_stats(r, (size_t)n);
  if (!o.quick) {
    genie_config_t *full = NULL;
    char *out = NULL;
    double t0;
    bu_check(genie_config_create(&full), "genie_config_create");
    bu_check(genie_config_set_use_env(full, 0), "genie_config_set_use_env");
    t0 = bu_now_s();
    bu_check(genie_discover(full, NULL, 0, &out), "genie_discover (DPDK)");
    eal_ms = (bu_now_s() - t0) * 1e3;
    genie_free(out);
    genie_config_destroy(full);
  }

  print_pair("genie_init to ready, remote mode over TCP loopback", "genie_init (all phases)", "raw TCP connect", init_r, n);
  print_pair("discovery alone (genie_discover of the server, DPDK EAL probe off)", "genie_discover", "raw TCP connect",
             disc_r, n);
  if (eal_ms >= 0) printf("  genie_discover with the DPDK EAL probe (forked child), once: %.1f ms\n", eal_ms);

  /* 3. CPU cost of monitoring at the default intervals. */
  {
    const int pairs = o.quick ? 1 : 3;
    const double settle = o.quick ? 0.05 : 0.5;
    double with_cpu = 0, without_cpu = 0, with_s = 0, without_s = 0;
    int p;
    for (p = 0; p < pairs; ++p) {
      genie_context_t *ctx = NULL;
      double c0, t0;
      bu_check(genie_init(ccfg, &ctx), "genie_init");
      sleep_s(settle); /* the tails of init (threads starting) are not monitoring */
      c0 = cpu_s();
      t0 = bu_now_s();
      sleep_s(window);
      with_cpu += cpu_s() - c0;
      with_s += bu_now_s() - t0;
      genie_shutdown(ctx);
      sleep_s(settle);
      c0 = cpu_s();
      t0 = bu_now_s();
      sleep_s(window);
      without_cpu += cpu_s() - c0;
      without_s += bu_now_s() - t0;
    }
    printf("CPU cost of monitoring at default intervals (heartbeat 10 s, GPU poll 5 s, health 30 s), %d x %.1f s windows\n",
           pairs, window);
    printf("  with an idle remote context      %.4f %% of one core (%.2f ms CPU)\n", 100.0 * with_cpu / with_s,
           with_cpu * 1e3);
    printf("  without (same process, idle)     %.4f %% of one core (%.2f ms CPU)\n", 100.0 * without_cpu / without_s,
           without_cpu * 1e3);
    printf("  monitoring costs                 %.4f %% of one core\n",
           100.0 * (with_cpu / with_s - without_cpu / without_s));
    json = bu_json_open(o.json_path);
    if (json) {
      fprintf(json,
              "{\"bench\":\"cluster_init\",\"pairs\":%d,"
              "\"init_p50_ms\":%.4f,\"init_p99_ms\":%.4f,\"connect_p50_ms\":%.4f,\"init_ratio\":%.2f,"
              "\"discover_p50_ms\":%.4f,\"discover_p99_ms\":%.4f,\"discover_ratio\":%.2f,\"eal_probe_ms\":%.1f,"
              "\"monitor_cpu_pct\":%.5f,\"idle_cpu_pct\":%.5f,\"window_s\":%.2f}\n",
              n, init_r.a.median, init_r.a.p99, init_r.b.median, init_r.ratio.median, disc_r.a.median, disc_r.a.p99,
              disc_r.ratio.median, eal_ms, 100.0 * with_cpu / with_s, 100.0 * without_cpu / without_s, window);
    }
    bu_json_close(json, o.json_path);
  }
  free(a);
  free(b);
  free(r);
  genie_config_destroy(ccfg);
  genie_config_destroy(dcfg);
  genie_config_destroy(scfg);
  genie_server_destroy(server);
  return 0;
}
