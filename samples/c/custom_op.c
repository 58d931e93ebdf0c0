/* A custom operator registered by the program itself (docs/custom-ops.md):
 * "acme.swish", y = x * sigmoid(beta * x), used in a graph with built-in
 * ops around it and run embedded (or remote, against a `genie serve` that
 * loaded the same op from an op library). Prints the output and checks it.
 *
 *   sample_custom_op            exit 0 when the values are right */
#include <genie.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static genie_status_t swish_infer(genie_op_ctx_t *ctx, const genie_op_tensor_t *in, size_t n_in,
                                  genie_op_tensor_t *out, size_t n_out, void *user_data) {
  (void)n_in, (void)n_out, (void)user_data;
  if (in[0].dtype != GENIE_DTYPE_F32) {
    genie_op_set_error(ctx, "x must be f32");
    return GENIE_ERR_DTYPE_MISMATCH;
  }
  out[0] = in[0]; /* same dtype and shape */
  return GENIE_OK;
}

static genie_status_t swish_cpu(genie_op_ctx_t *ctx, const genie_op_tensor_t *in, size_t n_in,
                                genie_op_tensor_t *out, size_t n_out, void *user_data) {
  (void)n_in, (void)n_out, (void)user_data;
  double beta = 1.0;
  genie_status_t st = genie_op_attr_float(ctx, "beta", &beta);
  if (st != GENIE_OK && st != GENIE_ERR_NOT_FOUND) return st; /* absent: the default */
  const float *x = (const float *)in[0].data;
  float *y = (float *)out[0].data;
  for (size_t i = 0; i < out[0].nbytes / sizeof(float); ++i) y[i] = x[i] / (1.0f + expf(-(float)beta * x[i]));
  return GENIE_OK;
}

#define TRY(call)                                                                         \
  do {                                                                                    \
    genie_status_t st_ = (call);                                                          \
    if (st_ != GENIE_OK) {                                                                \
      fprintf(stderr, "%s: %s: %s\n", #call, genie_status_str(st_), genie_last_error()); \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

int main(void) {
  genie_op_desc_t d;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.name = "acme.swish";
  d.min_inputs = d.max_inputs = 1;
  d.num_outputs = 1;
  d.infer = swish_infer;
  d.cpu_kernel = swish_cpu;
  TRY(genie_op_register(&d));

  /* z = swish(x * 2, beta = 1.5) - x */
  int64_t shape[1] = {6};
  genie_graph_t *g;
  TRY(genie_graph_create("custom_op", &g));
  TRY(genie_graph_add_input(g, "x", GENIE_DTYPE_F32, shape, 1));
  const char *mul_in[2] = {"x", "x"}, *mul_out[1] = {"x2"};
  TRY(genie_graph_add_node(g, "add", "double", mul_in, 2, mul_out, 1));
  const char *sw_in[1] = {"x2"}, *sw_out[1] = {"s"};
  TRY(genie_graph_add_node(g, "acme.swish", "swish", sw_in, 1, sw_out, 1));
  TRY(genie_graph_set_attr_float(g, "swish", "beta", 1.5));
  const char *sub_in[2] = {"s", "x"}, *sub_out[1] = {"z"};
  TRY(genie_graph_add_node(g, "sub", "minus_x", sub_in, 2, sub_out, 1));
  TRY(genie_graph_mark_output(g, "z"));

  genie_context_t *ctx;
  TRY(genie_init(NULL, &ctx));
  const float x[6] = {-3, -1, -0.25f, 0, 0.5f, 2};
  float z[6];
  genie_tensor_t *xt, *zt;
  genie_future_t *f;
  TRY(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, shape, 1, NULL, &xt));
  TRY(genie_tensor_write(xt, 0, x, sizeof x));
  const char *names[1] = {"x"};
  TRY(genie_graph_submit(ctx, g, names, &xt, 1, &f));
  TRY(genie_future_wait(f, -1));
  TRY(genie_future_output(f, 0, &zt));
  TRY(genie_tensor_read(zt, 0, z, sizeof z));

  int bad = 0;
  for (int i = 0; i < 6; ++i) {
    const float x2 = 2 * x[i], want = x2 / (1.0f + expf(-1.5f * x2)) - x[i];
    printf("x %6.2f  z %9.5f\n", x[i], z[i]);
    bad |= fabsf(z[i] - want) > 1e-5f;
  }
  printf("custom op acme.swish: %s\n", bad ? "WRONG" : "ok");
  genie_tensor_destroy(zt);
  genie_future_destroy(f);
  genie_tensor_destroy(xt);
  genie_graph_destroy(g);
  genie_shutdown(ctx);
  genie_op_unregister("acme.swish");
  return bad;
}
