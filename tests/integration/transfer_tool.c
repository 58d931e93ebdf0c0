/* A client that moves tensor bytes to a server and back (tests/scripts/
 * ucx_test.sh). It connects with the GENIE_* environment (master address,
 * port, GENIE_TRANSPORT naming the data transport) and, for each size given,
 * allocates a remote tensor of that many bytes, writes a pattern, rewrites a
 * slice in the middle, reads everything back and compares: prints
 * "roundtrip N ok" per size.
 *
 * Exit status: 0 when every size came back intact, 1 on a mismatch, 3 when a
 * Genie call fails (its status name and detail on stderr), 2 on bad usage. */
#include <genie.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failed(const char *what, genie_status_t st) {
  fprintf(stderr, "transfer_tool: %s: %s: %s\n", what, genie_status_str(st), genie_last_error());
  return 3;
}

static void fill(unsigned char *p, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = (unsigned char)x;
  }
}

static int roundtrip(genie_context_t *ctx, size_t n) {
  const int64_t shape[1] = {(int64_t)n};
  genie_tensor_t *t = NULL;
  unsigned char *want = malloc(n), *got = malloc(n);
  int rc = 0;
  genie_status_t st;
  if (!want || !got) {
    rc = 3;
    goto done;
  }
  fill(want, n, n);
  st = genie_tensor_alloc(ctx, GENIE_DTYPE_BOOL, shape, 1, "remote:0", &t);
  if (st != GENIE_OK) {
    rc = failed("genie_tensor_alloc", st);
    goto done;
  }
  st = genie_tensor_write(t, 0, want, n);
  if (st != GENIE_OK) {
    rc = failed("genie_tensor_write", st);
    goto done;
  }
  if (n >= 4) { /* a slice at an offset: ranges, not only whole tensors */
    const size_t off = n / 4, len = n / 2;
    fill(want + off, len, n + 1);
    st = genie_tensor_write(t, off, want + off, len);
    if (st != GENIE_OK) {
      rc = failed("genie_tensor_write (slice)", st);
      goto done;
    }
  }
  memset(got, 0, n);
  st = genie_tensor_read(t, 0, got, n);
  if (st != GENIE_OK) {
    rc = failed("genie_tensor_read", st);
    goto done;
  }
  if (memcmp(want, got, n) != 0) {
    size_t i = 0;
    while (want[i] == got[i]) ++i;
    fprintf(stderr, "transfer_tool: %zu bytes: first difference at byte %zu\n", n, i);
    rc = 1;
  } else {
    printf("roundtrip %zu ok\n", n);
    fflush(stdout); /* read line by line while it runs (tests/scripts/ucx_test.sh) */
  }
done:
  genie_tensor_destroy(t);
  free(want);
  free(got);
  return rc;
}

int main(int argc, char **argv) {
  genie_context_t *ctx = NULL;
  genie_status_t st;
  int rc = 0;
  if (argc < 2) {
    fprintf(stderr, "usage: transfer_tool BYTES...\n");
    return 2;
  }
  st = genie_init(NULL, &ctx);
  if (st != GENIE_OK) return failed("genie_init", st);
  for (int i = 1; i < argc && rc == 0; ++i) rc = roundtrip(ctx, (size_t)strtoull(argv[i], NULL, 10));
  genie_shutdown(ctx);
  return rc;
}
