/*
 * bench_util.h — timing, statistics, argument and JSON helpers shared by
 * the benchmarks (header-only C99). The method they serve: interleaved A/B
 * pairs after a warm-up, the median of per-pair ratios, distributions
 * rather than single numbers; never a pass/fail on a time.
 */
#ifndef GENIE_BENCH_UTIL_H
#define GENIE_BENCH_UTIL_H

#include <errno.h>
#include <genie.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double bu_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int bu_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Distribution of n samples. Quantiles are nearest-rank (p99 of fewer
 * than 100 samples is the maximum). */
typedef struct bu_stats {
  double median, p99, min, max;
} bu_stats_t;

static inline double bu_nearest_rank(const double *sorted, size_t n, double q) {
  size_t rank = (size_t)(q * (double)n + 0.999999);
  if (rank < 1) rank = 1;
  if (rank > n) rank = n;
  return sorted[rank - 1];
}

/* Sorts `x` in place and returns its distribution (n >= 1). */
static inline bu_stats_t bu_stats(double *x, size_t n) {
  bu_stats_t s;
  qsort(x, n, sizeof(double), bu_cmp_double);
  s.median = n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
  s.p99 = bu_nearest_rank(x, n, 0.99);
  s.min = x[0];
  s.max = x[n - 1];
  return s;
}

/* Exits with a message naming the failed Genie call. */
static inline void bu_check(genie_status_t st, const char *what) {
  if (st == GENIE_OK) return;
  fprintf(stderr, "bench: %s failed: %s: %s\n", what, genie_status_str(st), genie_last_error());
  exit(1);
}

static inline void *bu_malloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "bench: out of memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

/* Common options: --quick (tiny sizes, for the test suite), --iters N
 * (measured iterations: A/B pairs where there is a comparison), --json
 * FILE. Exits with usage on anything else. */
typedef struct bu_options {
  int quick;
  int iters;
  const char *json_path;
} bu_options_t;

static inline bu_options_t bu_parse_args(int argc, char **argv, const char *usage_extra) {
  bu_options_t o;
  int i;
  o.quick = 0;
  o.iters = 0;
  o.json_path = NULL;
  for (i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (!strcmp(a, "--quick")) {
      o.quick = 1;
    } else if (!strcmp(a, "--json") && i + 1 < argc) {
      o.json_path = argv[++i];
    } else if (!strcmp(a, "--iters") && i + 1 < argc) {
      char *end = NULL;
      long v;
      errno = 0;
      v = strtol(argv[++i], &end, 10);
      if (errno || *end || end == argv[i] || v < 1 || v > 100000) {
        fprintf(stderr, "%s: --iters needs an integer in 1..100000, got '%s'\n", argv[0], argv[i]);
        exit(2);
      }
      o.iters = (int)v;
    } else {
      int help = !strcmp(a, "-h") || !strcmp(a, "--help");
      FILE *f = help ? stdout : stderr;
      if (!help) fprintf(stderr, "%s: unknown or incomplete argument '%s'\n", argv[0], a);
      fprintf(f,
              "usage: %s [--quick] [--iters N] [--json FILE]\n"
              "  --quick      tiny sizes and iterations (a smoke run; figures mean nothing)\n"
              "  --iters N    measured iterations after the warm-up%s\n"
              "  --json FILE  also write the results as JSON\n",
              argv[0], usage_extra);
      exit(help ? 0 : 2);
    }
  }
  return o;
}

/* Opens the JSON output (NULL path: no JSON); exits on failure. */
static inline FILE *bu_json_open(const char *path) {
  FILE *f;
  if (!path) return NULL;
  f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "bench: cannot write %s: %s\n", path, strerror(errno));
    exit(1);
  }
  return f;
}

/* Writes `s` as a JSON string literal. */
static inline void bu_json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; ++s) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

static inline void bu_json_close(FILE *f, const char *path) {
  if (!f) return;
  if (fclose(f) != 0) {
    fprintf(stderr, "bench: error writing %s: %s\n", path, strerror(errno));
    exit(1);
  }
}

/* GENIE_BENCH_SERVER=host:port, the server a benchmark runs against (e.g.
 * across emulated links, bench/links/run.sh): 1 when set (host and *port
 * filled), 0 when not; exits with 2 when it is not host:port. */
static inline int bu_bench_server(char *host, size_t host_size, int32_t *port) {
  const char *env = getenv("GENIE_BENCH_SERVER"), *colon;
  if (!env || !*env) return 0;
  colon = strrchr(env, ':');
  if (!colon || colon == env || (size_t)(colon - env) >= host_size) {
    fprintf(stderr, "bench: GENIE_BENCH_SERVER='%s' is not host:port\n", env);
    exit(2);
  }
  memcpy(host, env, (size_t)(colon - env));
  host[colon - env] = '\0';
  *port = (int32_t)atoi(colon + 1);
  return 1;
}

/* A context that ignores the environment: embedded when host is NULL, else
 * a client of host:port with semantics on or off (blind mode) and the
 * token in GENIE_AUTH_TOKEN, if any. */
static inline genie_context_t *bu_context(const char *host, int32_t port, int semantics) {
  genie_config_t *cfg = NULL;
  genie_context_t *ctx = NULL;
  bu_check(genie_config_create(&cfg), "genie_config_create");
  bu_check(genie_config_set_use_env(cfg, 0), "genie_config_set_use_env");
  if (host) {
    bu_check(genie_config_set_master_addr(cfg, host), "genie_config_set_master_addr");
    bu_check(genie_config_set_master_port(cfg, port), "genie_config_set_master_port");
    bu_check(genie_config_set_semantics(cfg, semantics), "genie_config_set_semantics");
    if (getenv("GENIE_AUTH_TOKEN"))
      bu_check(genie_config_set_auth_token(cfg, getenv("GENIE_AUTH_TOKEN")), "genie_config_set_auth_token");
  }
  bu_check(genie_init(cfg, &ctx), "genie_init");
  genie_config_destroy(cfg);
  return ctx;
}

/* A number of the "client" object of genie_context_server_info (this
 * context's own traffic counters; remote mode). */
static inline double bu_client_counter(genie_context_t *ctx, const char *key) {
  char *json = NULL, pat[96];
  const char *p;
  double v = -1;
  bu_check(genie_context_server_info(ctx, &json), "genie_context_server_info");
  snprintf(pat, sizeof pat, "\"%s\":", key);
  p = strstr(json, "\"client\":");
  if (p && (p = strstr(p, pat)) != NULL) v = strtod(p + strlen(pat), NULL);
  genie_free(json);
  return v;
}

#endif /* GENIE_BENCH_UTIL_H */
