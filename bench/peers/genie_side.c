/*
 * transfer_peers_genie — Genie's side of bench/transfer_peers.py: a client
 * of one `genie serve` that the script started, moving bytes with
 * genie_tensor_write / genie_tensor_read of one resident tensor on
 * "remote:0" and timing them here, in C, so that a small transfer's latency
 * carries no interpreter.
 *
 * The server and the data transport come from the environment, as for any
 * Genie client: GENIE_MASTER_ADDR, GENIE_MASTER_PORT, and for UCX
 * GENIE_BACKEND=ucx with GENIE_TRANSPORT=ucx (which fails the connection
 * instead of falling back to TCP, docs/ucx.md).
 *
 * Commands, one a line on stdin; one reply line each on stdout:
 *   alloc N          a tensor of N bytes (N a multiple of 4)   -> "ok"
 *   w N REPS SECS    REPS writes of N bytes from offset 0, stopping early
 *                    once SECS seconds have passed (at least one)
 *                                                     -> "<calls> <seconds>"
 *   r N REPS SECS    the same with reads
 *   lw N CALLS       CALLS writes, each timed   -> "<us> <us> ..." (per call)
 *   lr N CALLS       the same with reads
 *   v N SEED         writes N bytes of a pattern, reads them back into a
 *                    cleared buffer and compares -> "ok" or "mismatch ..."
 *   q                exits
 * A failed Genie call prints "error <call>: <status>: <detail>" on stdout
 * and exits 1; a malformed command exits 2.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

static void check(genie_status_t st, const char *what) {
  if (st == GENIE_OK) return;
  printf("error %s: %s: %s\n", what, genie_status_str(st), genie_last_error());
  fflush(stdout);
  exit(1);
}

/* Bytes that differ with their position and the seed (a byte that lands
 * at the wrong offset, or is not moved at all, reads back differently). */
static void fill(unsigned char *p, size_t n, uint64_t seed) {
  size_t i;
  for (i = 0; i < n; ++i) p[i] = (unsigned char)(((uint64_t)i * 0x9E3779B1u + seed * 0x85EBCA6Bu) >> 11);
}

int main(void) {
  genie_config_t *cfg = NULL;
  genie_context_t *ctx = NULL;
  genie_tensor_t *t = NULL;
  unsigned char *buf = NULL, *want = NULL;
  size_t cap = 0;
  char line[256], op[8];

  check(genie_config_create(&cfg), "genie_config_create");
  check(genie_config_set_timeout_ms(cfg, 120000), "genie_config_set_timeout_ms");
  check(genie_init(cfg, &ctx), "genie_init");
  genie_config_destroy(cfg);
  setvbuf(stdout, NULL, _IOLBF, 0);

  while (fgets(line, sizeof line, stdin)) {
    unsigned long long n = 0, a = 0;
    double secs = 0;
    int k = sscanf(line, "%7s %llu %llu %lf", op, &n, &a, &secs);
    if (k < 1) continue;
    if (!strcmp(op, "q")) break;
    if (k < 2 || (t == NULL && strcmp(op, "alloc")) || (t && n > cap)) {
      fprintf(stderr, "transfer_peers_genie: bad command: %s", line);
      return 2;
    }
    if (!strcmp(op, "alloc")) {
      const int64_t shape[1] = {(int64_t)(n / 4)};
      if (n == 0 || n % 4 || t) {
        fprintf(stderr, "transfer_peers_genie: alloc needs one size, a multiple of 4\n");
        return 2;
      }
      cap = (size_t)n;
      buf = bu_malloc(cap);
      memset(buf, 1, cap); /* touched now, not during a timed call */
      check(genie_tensor_alloc(ctx, GENIE_DTYPE_I32, shape, 1, "remote:0", &t), "genie_tensor_alloc");
      printf("ok\n");
    } else if ((!strcmp(op, "w") || !strcmp(op, "r")) && k == 4 && a >= 1) {
      const int write = op[0] == 'w';
      const double t0 = bu_now_s();
      unsigned long long calls = 0;
      double t1 = t0;
      while (calls < a) {
        if (write)
          check(genie_tensor_write(t, 0, buf, (size_t)n), "genie_tensor_write");
        else
          check(genie_tensor_read(t, 0, buf, (size_t)n), "genie_tensor_read");
        ++calls;
        t1 = bu_now_s();
        if (t1 - t0 >= secs) break;
      }
      printf("%llu %.9f\n", calls, t1 - t0);
    } else if ((!strcmp(op, "lw") || !strcmp(op, "lr")) && k >= 3 && a >= 1) {
      const int write = op[1] == 'w';
      unsigned long long i;
      for (i = 0; i < a; ++i) {
        const double t0 = bu_now_s();
        if (write)
          check(genie_tensor_write(t, 0, buf, (size_t)n), "genie_tensor_write");
        else
          check(genie_tensor_read(t, 0, buf, (size_t)n), "genie_tensor_read");
        printf(i ? " %.3f" : "%.3f", (bu_now_s() - t0) * 1e6);
      }
      printf("\n");
    } else if (!strcmp(op, "v") && k >= 3) {
      size_t i;
      free(want);
      want = bu_malloc((size_t)n);
      fill(want, (size_t)n, a);
      check(genie_tensor_write(t, 0, want, (size_t)n), "genie_tensor_write");
      memset(buf, 0, (size_t)n);
      check(genie_tensor_read(t, 0, buf, (size_t)n), "genie_tensor_read");
      for (i = 0; i < n && buf[i] == want[i]; ++i) {
      }
      if (i == n)
        printf("ok\n");
      else
        printf("mismatch at byte %zu of %llu: read %u, wrote %u\n", i, n, buf[i], want[i]);
    } else {
      fprintf(stderr, "transfer_peers_genie: bad command: %s", line);
      return 2;
    }
  }
  genie_tensor_destroy(t);
  genie_shutdown(ctx);
  free(buf);
  free(want);
  return 0;
}
