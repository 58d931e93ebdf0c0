/* An op library for the tests (loaded with genie_op_library_load and
 * `genie serve --op-library`): registers "testlib.add_scalar", y = x + c
 * for f32 x and a float attribute c (default 1). */
#include <genie.h>
#include <string.h>

static genie_status_t infer(genie_op_ctx_t *ctx, const genie_op_tensor_t *in, size_t n_in,
                            genie_op_tensor_t *out, size_t n_out, void *user_data) {
  (void)n_in;
  (void)n_out;
  (void)user_data;
  if (in[0].dtype != GENIE_DTYPE_F32) {
    genie_op_set_error(ctx, "x must be f32");
    return GENIE_ERR_DTYPE_MISMATCH;
  }
  out[0] = in[0];
  return GENIE_OK;
}

static genie_status_t kernel(genie_op_ctx_t *ctx, const genie_op_tensor_t *in, size_t n_in,
                             genie_op_tensor_t *out, size_t n_out, void *user_data) {
  (void)n_in;
  (void)n_out;
  (void)user_data;
  double c = 1.0;
  if (genie_op_attr_float(ctx, "c", &c) != GENIE_OK) c = 1.0; /* absent: the default */
  const float *x = (const float *)in[0].data;
  float *y = (float *)out[0].data;
  for (size_t i = 0; i < out[0].nbytes / sizeof(float); ++i) y[i] = x[i] + (float)c;
  return GENIE_OK;
}

__attribute__((visibility("default"))) genie_status_t genie_op_library_init(void) {
  genie_op_desc_t d;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.name = "testlib.add_scalar";
  d.min_inputs = d.max_inputs = 1;
  d.num_outputs = 1;
  d.infer = infer;
  d.cpu_kernel = kernel;
  return genie_op_register(&d);
}
