/* Moves tensors through the C API and checks every byte, for the data
 * plane's multi-process tests and benchmarks (tests/scripts/dpdk_*_test.sh,
 * bench/dpdk_bench.sh). It connects with the GENIE_* environment and runs:
 *
 *   roundtrip SIZE...   for each size: allocate a remote tensor, write a
 *                       pattern, read it back, compare; prints
 *                       "roundtrip SIZE ok" (exit 1 on a difference)
 *   throughput MIB N    writes and reads one MIB-MiB remote tensor N times;
 *                       prints "throughput write W read R MB/s overall T"
 *                       (W and R medians of the calls; T the bytes moved
 *                       over the calls' total time, stalls included, after
 *                       the first write and read where N > 1: they open
 *                       the data connection and touch the tensor's memory)
 *
 * Exit status: 0 on success, 1 on differing bytes, 3 when a Genie call fails
 * (its status name and detail on stderr), 2 on bad usage. */
#include <genie.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int failed(const char *what, genie_status_t st) {
  fprintf(stderr, "tensor_tool: %s: %s: %s\n", what, genie_status_str(st), genie_last_error());
  printf("%s\n", genie_status_str(st));
  return 3;
}

static void fill(unsigned char *p, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  size_t i;
  for (i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = (unsigned char)x;
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int roundtrip(genie_context_t *ctx, size_t n, uint64_t seed) {
  const int64_t shape[1] = {(int64_t)n};
  unsigned char *out = malloc(n), *in = malloc(n);
  genie_tensor_t *t = NULL;
  genie_status_t st;
  int rc = 0;
  if (!out || !in) return 3;
  fill(out, n, seed);
  memset(in, 0, n);
  st = genie_tensor_alloc(ctx, GENIE_DTYPE_BOOL, shape, 1, "remote:0", &t);
  if (st != GENIE_OK) return failed("genie_tensor_alloc", st);
  st = genie_tensor_write(t, 0, out, n);
  if (st != GENIE_OK) rc = failed("genie_tensor_write", st);
  if (rc == 0) {
    st = genie_tensor_read(t, 0, in, n);
    if (st != GENIE_OK) rc = failed("genie_tensor_read", st);
  }
  if (rc == 0 && memcmp(in, out, n) != 0) {
    size_t i = 0;
    while (in[i] == out[i]) ++i;
    fprintf(stderr, "tensor_tool: %zu-byte tensor differs at byte %zu\n", n, i);
    rc = 1;
  }
  if (rc == 0) printf("roundtrip %zu ok\n", n);
  genie_tensor_destroy(t);
  free(out);
  free(in);
  return rc;
}

static int throughput(genie_context_t *ctx, size_t mib, int reps) {
  const size_t n = mib << 20;
  const int64_t shape[1] = {(int64_t)n};
  unsigned char *buf = malloc(n);
  double *w = calloc((size_t)reps, sizeof *w), *r = calloc((size_t)reps, sizeof *r);
  genie_tensor_t *t = NULL;
  genie_status_t st;
  int i;
  if (!buf || !w || !r || reps < 1) return 3;
  fill(buf, n, 1);
  st = genie_tensor_alloc(ctx, GENIE_DTYPE_BOOL, shape, 1, "remote:0", &t);
  if (st != GENIE_OK) return failed("genie_tensor_alloc", st);
  double total = 0;
  for (i = 0; i < reps; ++i) {
    double t0 = now_s(), dt;
    st = genie_tensor_write(t, 0, buf, n);
    if (st != GENIE_OK) return failed("genie_tensor_write", st);
    dt = now_s() - t0;
    w[i] = (double)n / dt / 1e6;
    if (i > 0 || reps == 1) total += dt;
    t0 = now_s();
    st = genie_tensor_read(t, 0, buf, n);
    if (st != GENIE_OK) return failed("genie_tensor_read", st);
    dt = now_s() - t0;
    r[i] = (double)n / dt / 1e6;
    if (i > 0 || reps == 1) total += dt;
  }
  qsort(w, (size_t)reps, sizeof *w, cmp_double);
  qsort(r, (size_t)reps, sizeof *r, cmp_double);
  printf("throughput write %.1f read %.1f MB/s overall %.1f\n", w[reps / 2], r[reps / 2],
         2.0 * (double)n * (reps > 1 ? reps - 1 : 1) / total / 1e6);
  genie_tensor_destroy(t);
  free(buf);
  free(w);
  free(r);
  return 0;
}

int main(int argc, char **argv) {
  genie_context_t *ctx = NULL;
  genie_status_t st;
  int rc = 0, i;
  if (argc < 3 || (strcmp(argv[1], "roundtrip") && strcmp(argv[1], "throughput")) ||
      (!strcmp(argv[1], "throughput") && argc != 4)) {
    fprintf(stderr, "usage: tensor_tool roundtrip SIZE... | throughput MIB N\n");
    return 2;
  }
  st = genie_init(NULL, &ctx);
  if (st != GENIE_OK) return failed("genie_init", st);
  if (!strcmp(argv[1], "roundtrip")) {
    for (i = 2; i < argc && rc == 0; ++i) rc = roundtrip(ctx, (size_t)strtoull(argv[i], NULL, 10), (uint64_t)i);
  } else {
    rc = throughput(ctx, (size_t)strtoull(argv[2], NULL, 10), atoi(argv[3]));
  }
  genie_shutdown(ctx);
  return rc;
}
