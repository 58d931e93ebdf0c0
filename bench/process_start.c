/* What a process pays for starting Genie: genie_init in embedded mode and
 * in remote mode (a client of a `genie serve` server in another process),
 * beside the same program that does not call it (it still loads libgenie
 * and what libgenie links), all in one run.
 *
 * Each sample is a fresh process (this program, re-executed): it starts
 * Genie, notes the wall time of genie_init (and, in the "a product" case,
 * of its first 64x64 matrix product, submitted and waited for: the BLAS is
 * loaded by the first one), its resident and private dirty
 * memory and its thread count, stays idle for 300 ms (as a program does
 * between starting and its first call: what a library does in the
 * background then is its cost too), shuts Genie down and reports the CPU
 * time its whole life took (user + system). The bare program does the same
 * without Genie: the floor.
 *
 *   bench_process_start [--iters N] [--json FILE] [--compare LIBDIR]
 *
 * --compare LIBDIR runs every Genie sample a second time with the libgenie
 * found in LIBDIR (LD_LIBRARY_PATH), alternating with this build's, so two
 * builds are measured in the same run. The server is always this build's.
 *
 * Figures are medians over the samples. */
#define _GNU_SOURCE
#include <errno.h>
#include <genie.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "server_process.h"

enum { kModes = 4, kFields = 6, kIdleUs = 300000 };
static const char *const kModeNames[kModes] = {"bare", "embedded", "embedded, a product", "remote"};

typedef struct sample {
  double init_ms, product_ms, cpu_ms, rss_mb, dirty_mb, threads;
} sample_t;

/* One 64x64 matrix product, submitted and waited for: ms. */
static double first_product(genie_context_t *ctx) {
  static float ones[64 * 64];
  const int64_t shape[2] = {64, 64};
  const char *names[2] = {"a", "b"}, *out[1] = {"c"};
  genie_tensor_t *t[2];
  genie_graph_t *g = NULL;
  genie_future_t *f = NULL;
  double t0;
  int i;
  for (i = 0; i < 64 * 64; ++i) ones[i] = 1.f;
  for (i = 0; i < 2; ++i) {
    bu_check(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, shape, 2, NULL, &t[i]), "genie_tensor_alloc");
    bu_check(genie_tensor_write(t[i], 0, ones, sizeof ones), "genie_tensor_write");
  }
  bu_check(genie_graph_create("product", &g), "genie_graph_create");
  for (i = 0; i < 2; ++i)
    bu_check(genie_graph_add_input(g, names[i], GENIE_DTYPE_F32, shape, 2), "add_input");
  bu_check(genie_graph_add_node(g, "matmul", "m", names, 2, out, 1), "genie_graph_add_node");
  bu_check(genie_graph_mark_output(g, "c"), "genie_graph_mark_output");
  t0 = bu_now_s();
  bu_check(genie_graph_submit(ctx, g, names, t, 2, &f), "genie_graph_submit");
  bu_check(genie_future_wait(f, -1), "genie_future_wait");
  t0 = (bu_now_s() - t0) * 1e3;
  genie_future_destroy(f);
  genie_graph_destroy(g);
  for (i = 0; i < 2; ++i) genie_tensor_destroy(t[i]);
  return t0;
}

/* kB fields of /proc/self/smaps_rollup and the thread count. */
static double proc_field(const char *file, const char *key) {
  FILE *f = fopen(file, "r");
  char line[256];
  double v = -1;
  size_t n = strlen(key);
  if (!f) return -1;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, key, n) && line[n] == ':') {
      v = strtod(line + n + 1, NULL);
      break;
    }
  fclose(f);
  return v;
}

/* The child: one sample, printed as one line on stdout. */
static int child(const char *mode) {
  genie_context_t *ctx = NULL;
  const double t0 = bu_now_s();
  struct rusage ru;
  double init_ms = 0, product_ms = 0;
  sample_t s;
  if (strcmp(mode, "bare") != 0) {
    bu_check(genie_init(NULL, &ctx), "genie_init");
    init_ms = (bu_now_s() - t0) * 1e3;
    if (!strcmp(mode, "embedded, a product")) product_ms = first_product(ctx);
  }
  s.rss_mb = proc_field("/proc/self/smaps_rollup", "Rss") / 1024;
  s.dirty_mb = proc_field("/proc/self/smaps_rollup", "Private_Dirty") / 1024;
  s.threads = proc_field("/proc/self/status", "Threads");
  usleep(kIdleUs);
  if (ctx) genie_shutdown(ctx);
  getrusage(RUSAGE_SELF, &ru);
  s.cpu_ms =
      (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
  printf("%.3f %.3f %.3f %.3f %.3f %.0f\n", init_ms, product_ms, s.cpu_ms, s.rss_mb, s.dirty_mb, s.threads);
  return 0;
}

/* Runs one sample in a fresh process: this program in `mode`, with
 * LD_LIBRARY_PATH=libdir where libdir is set. */
static sample_t run_child(const char *self, const char *mode, int port, const char *libdir) {
  int out[2];
  pid_t pid;
  char buf[256] = {0};
  ssize_t got = 0, r;
  int status = 0;
  sample_t s;
  if (pipe(out) != 0) {
    perror("pipe");
    exit(1);
  }
  pid = fork();
  if (pid < 0) {
    perror("fork");
    exit(1);
  }
  if (pid == 0) {
    char port_s[16];
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    snprintf(port_s, sizeof port_s, "%d", port);
    if (!strcmp(mode, "remote")) {
      setenv("GENIE_MASTER_ADDR", "127.0.0.1", 1);
      setenv("GENIE_MASTER_PORT", port_s, 1);
    } else {
      unsetenv("GENIE_MASTER_ADDR");
      unsetenv("GENIE_MASTER_PORT");
    }
    if (libdir) setenv("LD_LIBRARY_PATH", libdir, 1);
    execl(self, self, "--child", mode, (char *)NULL);
    _exit(127);
  }
  close(out[1]);
  while (got < (ssize_t)sizeof buf - 1 && (r = read(out[0], buf + got, sizeof buf - 1 - got)) > 0) got += r;
  close(out[0]);
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
      sscanf(buf, "%lf %lf %lf %lf %lf %lf", &s.init_ms, &s.product_ms, &s.cpu_ms, &s.rss_mb, &s.dirty_mb,
             &s.threads) != 6) {
    fprintf(stderr, "process_start: the %s sample failed (status %d): %s\n", mode, status, buf);
    exit(1);
  }
  return s;
}

typedef struct series {
  double *v[kFields];
} series_t;

static double median(double *v, int n) { return bu_stats(v, (size_t)n).median; }

int main(int argc, char **argv) {
  const char *compare = NULL;
  char **rest;
  int nrest = 0, i, m, b, n, nbuilds;
  bu_options_t o;
  bsp_server_t server;
  series_t runs[2][kModes];
  FILE *json;
  static const char *const fields[kFields] = {"init_ms", "first_product_ms", "cpu_ms",
                                              "rss_mb",  "private_dirty_mb", "threads"};
  if (argc == 3 && !strcmp(argv[1], "--child")) return child(argv[2]);
  rest = bu_malloc(sizeof(char *) * (size_t)(argc + 1));
  rest[nrest++] = argv[0];
  for (i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--compare") && i + 1 < argc)
      compare = argv[++i];
    else
      rest[nrest++] = argv[i];
  }
  rest[nrest] = NULL;
  o = bu_parse_args(nrest, rest,
                    " (samples per case; default 10, --quick 2)\n  --compare DIR  also run each Genie sample "
                    "with DIR's libgenie");
  n = o.iters ? o.iters : (o.quick ? 2 : 10);
  nbuilds = compare ? 2 : 1;
  server = bsp_start(1); /* before any thread */
  for (b = 0; b < 2; ++b)
    for (m = 0; m < kModes; ++m)
      for (i = 0; i < kFields; ++i) runs[b][m].v[i] = bu_malloc(sizeof(double) * (size_t)n);
  for (i = 0; i < n; ++i)
    for (m = 0; m < kModes; ++m)
      for (b = 0; b < nbuilds; ++b) {
        /* Which build goes first alternates. */
        const int which = (i % 2 == 0) ? b : nbuilds - 1 - b;
        sample_t s;
        s = run_child(argv[0], kModeNames[m], server.port, which == 1 ? compare : NULL);
        runs[which][m].v[0][i] = s.init_ms;
        runs[which][m].v[1][i] = s.product_ms;
        runs[which][m].v[2][i] = s.cpu_ms;
        runs[which][m].v[3][i] = s.rss_mb;
        runs[which][m].v[4][i] = s.dirty_mb;
        runs[which][m].v[5][i] = s.threads;
      }
  bsp_stop(&server);

  printf(
      "a process starting Genie and idle for %d ms, %d samples per case (medians); the bare program\n"
      "is the same without genie_init. cpu = user + system over the whole process.\n\n",
      kIdleUs / 1000, n);
  printf("%-34s %8s %11s %8s %8s %11s %8s\n", "", "init ms", "product ms", "cpu ms", "rss MB", "private MB",
         "threads");
  json = bu_json_open(o.json_path);
  if (json) fprintf(json, "{\"bench\":\"process_start\",\"samples\":%d,\"cases\":[", n);
  for (b = 0; b < nbuilds; ++b)
    for (m = 0; m < kModes; ++m) {
      char label[64];
      double med[kFields];
      snprintf(label, sizeof label, "%s%s", kModeNames[m],
               b == 1 ? " (--compare)" : (compare ? " (this build)" : ""));
      for (i = 0; i < kFields; ++i) med[i] = median(runs[b][m].v[i], n);
      printf("%-34s %8.1f %11.2f %8.1f %8.1f %11.1f %8.0f\n", label, med[0], med[1], med[2], med[3], med[4],
             med[5]);
      if (json) {
        fprintf(json, "%s{\"case\":", (b == 0 && m == 0) ? "" : ",");
        bu_json_str(json, label);
        for (i = 0; i < kFields; ++i) fprintf(json, ",\"%s\":%.4f", fields[i], med[i]);
        fprintf(json, "}");
      }
    }
  if (json) {
    fprintf(json, "]}\n");
    fclose(json);
  }
  for (b = 0; b < 2; ++b)
    for (m = 0; m < kModes; ++m)
      for (i = 0; i < kFields; ++i) free(runs[b][m].v[i]);
  free(rest);
  return 0;
}
