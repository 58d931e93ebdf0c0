/* A program built against an installed Genie (pkg-config and CMake). */
#include <genie.h>
#include <stdio.h>

int main(void) {
  genie_context_t *ctx = NULL;
  genie_graph_t *g = NULL;
  genie_tensor_t *a = NULL, *out = NULL;
  genie_future_t *f = NULL;
  const int64_t shape[1] = {4};
  const float in[4] = {-2, -1, 1, 2};
  float res[4] = {0};
  const char *names[1] = {"a"};
  const char *outs[1] = {"b"};
  genie_status_t s;
  if ((s = genie_init(NULL, &ctx)) != GENIE_OK ||
      (s = genie_graph_create("consumer", &g)) != GENIE_OK ||
      (s = genie_graph_add_input(g, "a", GENIE_DTYPE_F32, shape, 1)) != GENIE_OK ||
      (s = genie_graph_add_node(g, "relu", "r", names, 1, outs, 1)) != GENIE_OK ||
      (s = genie_graph_mark_output(g, "b")) != GENIE_OK ||
      (s = genie_tensor_alloc(ctx, GENIE_DTYPE_F32, shape, 1, "cpu", &a)) != GENIE_OK ||
      (s = genie_tensor_write(a, 0, in, sizeof in)) != GENIE_OK ||
      (s = genie_graph_submit(ctx, g, names, &a, 1, &f)) != GENIE_OK ||
      (s = genie_future_wait(f, -1)) != GENIE_OK ||
      (s = genie_future_output(f, 0, &out)) != GENIE_OK ||
      (s = genie_tensor_read(out, 0, res, sizeof res)) != GENIE_OK) {
    fprintf(stderr, "consumer: %s: %s\n", genie_status_str(s), genie_last_error());
    return 1;
  }
  genie_tensor_destroy(a);
  genie_tensor_destroy(out);
  genie_future_destroy(f);
  genie_graph_destroy(g);
  genie_shutdown(ctx);
  if (res[0] != 0 || res[1] != 0 || res[2] != 1 || res[3] != 2) {
    fprintf(stderr, "consumer: wrong result\n");
    return 1;
  }
  printf("consumer ok (genie %s)\n", genie_version_string());
  return 0;
}
