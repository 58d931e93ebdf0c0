/* Client for tests/scripts/custom_ops_test.sh: loads the op library given
 * as argv[1], builds a graph using its op "testlib.add_scalar" (c = 0.5),
 * and runs it on the context GENIE_MASTER_ADDR/PORT name. Prints
 * "ok <y...>" and exits 0, or prints "error <STATUS> <detail>" and exits 1. */
#include <genie.h>
#include <stdio.h>

static int failed(const char *what, genie_status_t st) {
  printf("error %s %s: %s\n", genie_status_str(st), what, genie_last_error());
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: custom_op_tool OP_LIBRARY\n");
    return 2;
  }
  genie_status_t st = genie_op_library_load(argv[1]);
  if (st != GENIE_OK) return failed("load", st);
  genie_context_t *ctx = NULL;
  if ((st = genie_init(NULL, &ctx)) != GENIE_OK) return failed("init", st);

  int64_t shape[1] = {4};
  genie_graph_t *g = NULL;
  const char *in[1] = {"x"}, *out[1] = {"y"};
  if ((st = genie_graph_create("remote_custom", &g)) != GENIE_OK ||
      (st = genie_graph_add_input(g, "x", GENIE_DTYPE_F32, shape, 1)) != GENIE_OK ||
      (st = genie_graph_add_node(g, "testlib.add_scalar", "add", in, 1, out, 1)) != GENIE_OK ||
      (st = genie_graph_set_attr_float(g, "add", "c", 0.5)) != GENIE_OK ||
      (st = genie_graph_mark_output(g, "y")) != GENIE_OK)
    return failed("build", st);
  const float x[4] = {1, 2, 3, 4};
  float y[4] = {0};
  genie_tensor_t *t = NULL, *o = NULL;
  genie_future_t *f = NULL;
  if ((st = genie_tensor_alloc(ctx, GENIE_DTYPE_F32, shape, 1, NULL, &t)) != GENIE_OK ||
      (st = genie_tensor_write(t, 0, x, sizeof x)) != GENIE_OK)
    return failed("tensor", st);
  if ((st = genie_graph_submit(ctx, g, in, &t, 1, &f)) != GENIE_OK) return failed("submit", st);
  if ((st = genie_future_wait(f, -1)) != GENIE_OK) return failed("run", st);
  if ((st = genie_future_output(f, 0, &o)) != GENIE_OK || (st = genie_tensor_read(o, 0, y, sizeof y)) != GENIE_OK)
    return failed("read", st);
  printf("ok %g %g %g %g\n", y[0], y[1], y[2], y[3]);
  genie_tensor_destroy(o);
  genie_future_destroy(f);
  genie_tensor_destroy(t);
  genie_graph_destroy(g);
  genie_shutdown(ctx);
  return 0;
}
