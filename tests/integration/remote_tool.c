/* A client for the multi-process integration tests (tests/scripts/
 * remote_test.sh). It connects with the GENIE_* environment (master address,
 * port, token, timeout) and runs one scenario:
 *
 *   info         print the server's info JSON on one line
 *   write-loop   allocate a 256 MiB remote tensor and rewrite it forever
 *                (the test kills it mid-transfer)
 *   slow-graph   submit a long chain of large matmuls and wait (the test
 *                kills the server meanwhile); prints the final status name,
 *                and "connected 0|1" (genie_context_is_connected) before the
 *                submission and after the wait
 *   hold N       allocate N remote tensors of 1 MiB, print "ready", sleep
 *
 * Exit status: 0 on success, 3 when a Genie call fails (its status name and
 * detail on stderr), 2 on bad usage. */
#include <genie.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failed(const char *what, genie_status_t st) {
  fprintf(stderr, "remote_tool: %s: %s: %s\n", what, genie_status_str(st), genie_last_error());
  printf("%s\n", genie_status_str(st));
  fflush(stdout);
  return 3;
}

static int cmd_info(genie_context_t *ctx) {
  char *json = NULL;
  genie_status_t st = genie_context_server_info(ctx, &json);
  if (st != GENIE_OK) return failed("genie_context_server_info", st);
  printf("%s\n", json);
  genie_free(json);
  return 0;
}

static int cmd_write_loop(genie_context_t *ctx) {
  const size_t n = (size_t)256 << 20;
  const int64_t shape[1] = {(int64_t)n};
  genie_tensor_t *t = NULL;
  char *buf = malloc(n);
  genie_status_t st;
  if (!buf) return 3;
  memset(buf, 7, n);
  st = genie_tensor_alloc(ctx, GENIE_DTYPE_BOOL, shape, 1, "remote:0", &t);
  if (st != GENIE_OK) return failed("genie_tensor_alloc", st);
  printf("writing\n");
  fflush(stdout);
  for (;;) {
    st = genie_tensor_write(t, 0, buf, n);
    if (st != GENIE_OK) return failed("genie_tensor_write", st);
  }
}

static int print_connected(genie_context_t *ctx) {
  int up = -1;
  genie_status_t st = genie_context_is_connected(ctx, &up);
  if (st != GENIE_OK) return failed("genie_context_is_connected", st);
  printf("connected %d\n", up);
  fflush(stdout);
  return 0;
}

static int cmd_slow_graph(genie_context_t *ctx) {
  const int64_t s[2] = {1024, 1024};
  genie_graph_t *g = NULL;
  genie_tensor_t *t = NULL;
  genie_future_t *f = NULL;
  char a[16], b[16], node[16];
  const char *names[1] = {"m0"};
  int i;
  genie_status_t st = genie_graph_create("slow", &g);
  if (st == GENIE_OK) st = genie_graph_add_input(g, "m0", GENIE_DTYPE_F32, s, 2);
  for (i = 0; st == GENIE_OK && i < 400; ++i) {
    const char *in[2] = {a, a}, *out[1] = {b};
    snprintf(a, sizeof a, "m%d", i);
    snprintf(b, sizeof b, "m%d", i + 1);
    snprintf(node, sizeof node, "mm%d", i);
    st = genie_graph_add_node(g, "matmul", node, in, 2, out, 1);
  }
  if (st == GENIE_OK) st = genie_graph_mark_output(g, b);
  if (st == GENIE_OK) st = genie_tensor_alloc(ctx, GENIE_DTYPE_F32, s, 2, "remote:0", &t);
  if (st == GENIE_OK) st = genie_graph_submit(ctx, g, names, &t, 1, &f);
  if (st != GENIE_OK) return failed("setting up the slow graph", st);
  if (print_connected(ctx) != 0) return 3;
  printf("submitted\n");
  fflush(stdout);
  st = genie_future_wait(f, -1);
  printf("%s\n", genie_status_str(st));
  fprintf(stderr, "remote_tool: slow graph: %s: %s\n", genie_status_str(st), genie_last_error());
  if (print_connected(ctx) != 0) return 3;
  genie_future_destroy(f);
  genie_tensor_destroy(t);
  genie_graph_destroy(g);
  return st == GENIE_OK ? 0 : 3;
}

static int cmd_hold(genie_context_t *ctx, int n) {
  const int64_t shape[1] = {1 << 20};
  int i;
  for (i = 0; i < n; ++i) {
    genie_tensor_t *t = NULL; /* deliberately never destroyed: the test kills this process */
    genie_status_t st = genie_tensor_alloc(ctx, GENIE_DTYPE_BOOL, shape, 1, "remote:0", &t);
    if (st != GENIE_OK) return failed("genie_tensor_alloc", st);
  }
  printf("ready\n");
  fflush(stdout);
  for (;;) pause();
}

int main(int argc, char **argv) {
  genie_context_t *ctx = NULL;
  genie_status_t st;
  int rc;
  if (argc < 2) {
    fprintf(stderr, "usage: remote_tool info|write-loop|slow-graph|hold N\n");
    return 2;
  }
  st = genie_init(NULL, &ctx);
  if (st != GENIE_OK) return failed("genie_init", st);
  if (!strcmp(argv[1], "info")) rc = cmd_info(ctx);
  else if (!strcmp(argv[1], "write-loop")) rc = cmd_write_loop(ctx);
  else if (!strcmp(argv[1], "slow-graph")) rc = cmd_slow_graph(ctx);
  else if (!strcmp(argv[1], "hold") && argc == 3) rc = cmd_hold(ctx, atoi(argv[2]));
  else {
    fprintf(stderr, "remote_tool: unknown scenario '%s'\n", argv[1]);
    rc = 2;
  }
  genie_shutdown(ctx);
  return rc;
}
