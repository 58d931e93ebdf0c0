/* Custom operators through the C API: registration (and every way a bad
 * one is refused), use in graphs (values computed by the vendor's kernel,
 * attributes, variadic inputs, several outputs, JSON), errors of inference
 * and of kernels reported with the node and the op, the cost callback in
 * the plan, unregistration (destroy runs once), op libraries, and where an
 * embedded graph runs: a tiny one of built-in ops on the submitting thread,
 * a custom op's kernel on an executor worker. */
#include <math.h>

#include "check.h"
#include "inline_runs.h"

static int g_destroyed = 0;
static void count_destroy(void *user_data) { g_destroyed += *(int *)user_data; }

/* "test.swish": y = x * sigmoid(beta * x), float x, attribute beta (float,
 * default 1); attribute fail=1 makes the kernel fail. */
static genie_status_t swish_infer(genie_op_ctx_t *ctx, const genie_op_tensor_t *in, size_t n_in,
                                  genie_op_tensor_t *out, size_t n_out, void *user_data) {
  (void)user_data;
  if (n_in != 1 || n_out != 1) return GENIE_ERR_INTERNAL;
  if (in[0].dtype != GENIE_DTYPE_F32) {
    genie_op_set_error(ctx, "x must be f32");
    return GENIE_ERR_DTYPE_MISMATCH;
  }
  out[0].dtype = in[0].dtype;
  out[0].ndim = in[0].ndim;
  for (uint32_t i = 0; i < in[0].ndim; ++i) out[0].shape[i] = in[0].shape[i];
  return GENIE_OK;
}

static genie_status_t swish_kernel(genie_op_ctx_t *ctx, const genie_op_tensor_t *in, size_t n_in,
                                   genie_op_tensor_t *out, size_t n_out, void *user_data) {
  (void)n_in;
  (void)n_out;
  (void)user_data;
  int64_t fail = 0;
  if (genie_op_attr_int(ctx, "fail", &fail) == GENIE_OK && fail) {
    genie_op_set_error(ctx, "asked to fail");
    return GENIE_ERR_INVALID_ATTRIBUTE;
  }
  double beta = 1.0;
  genie_status_t st = genie_op_attr_float(ctx, "beta", &beta);
  if (st != GENIE_OK && st != GENIE_ERR_NOT_FOUND) return st;
  /* Views are dense row-major. */
  if (in[0].ndim != 2 || in[0].strides[1] != 1 || in[0].strides[0] != in[0].shape[1]) return GENIE_ERR_INTERNAL;
  const float *x = (const float *)in[0].data;
  float *y = (float *)out[0].data;
  const size_t n = out[0].nbytes / sizeof(float);
  for (size_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + expf(-(float)beta * x[i]));
  return GENIE_OK;
}

static double swish_flops(genie_op_ctx_t *ctx, const genie_op_tensor_t *in, size_t n_in,
                          const genie_op_tensor_t *out, size_t n_out, void *user_data) {
  (void)ctx;
  (void)in;
  (void)n_in;
  (void)n_out;
  (void)user_data;
  double n = 1;
  for (uint32_t i = 0; i < out[0].ndim; ++i) n *= (double)out[0].shape[i];
  return 1000.0 * n; /* distinctive, so the plan shows it was used */
}

/* "test.sum_prod": any number >= 1 of same-shape f32 inputs; outputs their
 * sum and their product. Reads attributes of every type. */
static genie_status_t sp_infer(genie_op_ctx_t *ctx, const genie_op_tensor_t *in, size_t n_in,
                               genie_op_tensor_t *out, size_t n_out, void *user_data) {
  (void)user_data;
  for (size_t i = 1; i < n_in; ++i)
    if (in[i].ndim != in[0].ndim || memcmp(in[i].shape, in[0].shape, in[0].ndim * sizeof(int64_t)) != 0) {
      genie_op_set_error(ctx, "inputs must have one shape");
      return GENIE_ERR_SHAPE_MISMATCH;
    }
  for (size_t k = 0; k < n_out; ++k) out[k] = in[0];
  return GENIE_OK;
}

static genie_status_t sp_kernel(genie_op_ctx_t *ctx, const genie_op_tensor_t *in, size_t n_in,
                                genie_op_tensor_t *out, size_t n_out, void *user_data) {
  (void)n_out;
  (void)user_data;
  const char *mode = NULL;
  const int64_t *ints = NULL;
  const double *floats = NULL;
  size_t n_ints = 0, n_floats = 0;
  if (genie_op_attr_string(ctx, "mode", &mode) != GENIE_OK || strcmp(mode, "plain") != 0) return GENIE_ERR_INTERNAL;
  if (genie_op_attr_ints(ctx, "ints", &ints, &n_ints) != GENIE_OK || n_ints != 2 || ints[1] != 7)
    return GENIE_ERR_INTERNAL;
  /* An ints attribute read as floats is converted. */
  if (genie_op_attr_floats(ctx, "ints", &floats, &n_floats) != GENIE_OK || n_floats != 2 || floats[1] != 7.0)
    return GENIE_ERR_INTERNAL;
  if (genie_op_attr_floats(ctx, "floats", &floats, &n_floats) != GENIE_OK || n_floats != 1 || floats[0] != 0.5)
    return GENIE_ERR_INTERNAL;
  /* Wrong type, missing attribute, NULL arguments. */
  int64_t i64;
  if (genie_op_attr_int(ctx, "mode", &i64) != GENIE_ERR_INVALID_ATTRIBUTE) return GENIE_ERR_INTERNAL;
  if (genie_op_attr_int(ctx, "nope", &i64) != GENIE_ERR_NOT_FOUND) return GENIE_ERR_INTERNAL;
  if (genie_op_attr_int(ctx, NULL, &i64) != GENIE_ERR_INVALID_ARGUMENT) return GENIE_ERR_INTERNAL;
  if (genie_op_attr_int(NULL, "mode", &i64) != GENIE_ERR_INVALID_ARGUMENT) return GENIE_ERR_INTERNAL;
  float *sum = (float *)out[0].data, *prod = (float *)out[1].data;
  const size_t n = out[0].nbytes / sizeof(float);
  for (size_t e = 0; e < n; ++e) {
    sum[e] = 0.0f;
    prod[e] = 1.0f;
    for (size_t i = 0; i < n_in; ++i) {
      sum[e] += ((const float *)in[i].data)[e];
      prod[e] *= ((const float *)in[i].data)[e];
    }
  }
  return GENIE_OK;
}

static genie_op_desc_t swish_desc(int *destroy_weight) {
  genie_op_desc_t d;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.name = "test.swish";
  d.min_inputs = d.max_inputs = 1;
  d.num_outputs = 1;
  d.infer = swish_infer;
  d.cpu_kernel = swish_kernel;
  d.flops = swish_flops;
  d.user_data = destroy_weight;
  d.destroy = count_destroy;
  return d;
}

static void test_bad_registrations(void) {
  int one = 1;
  genie_op_desc_t d = swish_desc(&one);
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_op_register(NULL));
  d.struct_size = 8;
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_op_register(&d));
  EXPECT_DETAIL("struct_size");
  d = swish_desc(&one);
  d.name = NULL;
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_op_register(&d));
  const char *bad_names[] = {"", "relu", "bad name", "9lives", "a..b", "trailing.", "uni\xc3\xa9",
                             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
  for (size_t i = 0; i < sizeof bad_names / sizeof *bad_names; ++i) {
    d.name = bad_names[i];
    EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_op_register(&d));
  }
  d.name = "relu";
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_op_register(&d));
  EXPECT_DETAIL("built-in");
  d.name = "bad name";
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_op_register(&d));
  EXPECT_DETAIL("offset 3");
  d.name = "bad/name";
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_op_register(&d));
  EXPECT_DETAIL("('/')");
  d = swish_desc(&one);
  d.min_inputs = -1;
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_op_register(&d));
  d = swish_desc(&one);
  d.max_inputs = 0;
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_op_register(&d));
  d = swish_desc(&one);
  d.num_outputs = 0;
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_op_register(&d));
  d = swish_desc(&one);
  d.infer = NULL;
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_op_register(&d));
  EXPECT_DETAIL("infer");
  d = swish_desc(&one);
  d.cpu_kernel = NULL;
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_op_register(&d));
  EXPECT_DETAIL("cpu_kernel");
  d = swish_desc(&one);
  d.cuda_kernel = swish_kernel;
  EXPECT_STATUS(GENIE_ERR_UNSUPPORTED, genie_op_register(&d));

  /* A desc from a newer header: larger, its unknown tail zero (accepted) or
   * not (refused). */
  struct {
    genie_op_desc_t d;
    uint64_t newer_field;
  } big;
  memset(&big, 0, sizeof big);
  big.d = swish_desc(&one);
  big.d.struct_size = sizeof big;
  big.d.name = "test.newer";
  big.newer_field = 1;
  EXPECT_STATUS(GENIE_ERR_VERSION_MISMATCH, genie_op_register(&big.d));
  big.newer_field = 0;
  big.d.destroy = NULL;
  EXPECT_OK(genie_op_register(&big.d));
  CHECK(genie_op_is_registered("test.newer") == 1);
  EXPECT_OK(genie_op_unregister("test.newer"));
  CHECK(genie_op_is_registered("test.newer") == 0);

  CHECK(g_destroyed == 0); /* a refused registration never calls destroy */
}

static genie_graph_t *swish_graph(genie_dtype_t dtype) {
  genie_graph_t *g = NULL;
  int64_t shape[2] = {2, 3};
  REQUIRE_OK(genie_graph_create("swish", &g));
  REQUIRE_OK(genie_graph_add_input(g, "x", dtype, shape, 2));
  const char *in[1] = {"x"}, *out[1] = {"y"};
  REQUIRE_OK(genie_graph_add_node(g, "test.swish", "sw", in, 1, out, 1));
  REQUIRE_OK(genie_graph_set_attr_int(g, "sw", "beta", 2)); /* an int read as a float */
  REQUIRE_OK(genie_graph_mark_output(g, "y"));
  return g;
}

/* Runs g on x (6 floats) and reads 6 floats of output `which`; returns the
 * future's status. */
static genie_status_t run(genie_context_t *ctx, genie_graph_t *g, const float *x, size_t which, float *y) {
  int64_t shape[2] = {2, 3};
  genie_tensor_t *t = NULL, *o = NULL;
  genie_future_t *f = NULL;
  REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, shape, 2, NULL, &t));
  REQUIRE_OK(genie_tensor_write(t, 0, x, 6 * sizeof(float)));
  const char *names[1] = {"x"};
  genie_status_t st = genie_graph_submit(ctx, g, names, &t, 1, &f);
  if (st == GENIE_OK) st = genie_future_wait(f, -1);
  if (st == GENIE_OK) {
    REQUIRE_OK(genie_future_output(f, which, &o));
    REQUIRE_OK(genie_tensor_read(o, 0, y, 6 * sizeof(float)));
  }
  genie_tensor_destroy(o);
  genie_future_destroy(f);
  genie_tensor_destroy(t);
  return st;
}

static void test_swish(genie_context_t *ctx, int *weight) {
  genie_op_desc_t d = swish_desc(weight);
  EXPECT_OK(genie_op_register(&d));
  CHECK(genie_op_is_registered("test.swish") == 1);
  CHECK(genie_op_is_registered("relu") == 0);
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_op_register(&d)); /* a duplicate */
  EXPECT_DETAIL("already registered");

  const float x[6] = {-2, -1, 0, 0.5f, 1, 3};
  float y[6] = {0};
  genie_graph_t *g = swish_graph(GENIE_DTYPE_F32);
  EXPECT_OK(run(ctx, g, x, 0, y));
  for (int i = 0; i < 6; ++i) CHECK(fabsf(y[i] - x[i] / (1.0f + expf(-2.0f * x[i]))) < 1e-6f);

  /* JSON round trip keeps the op and its attribute. */
  char *json = NULL;
  genie_graph_t *g2 = NULL;
  EXPECT_OK(genie_graph_to_json(g, &json, NULL));
  CHECK(json && strstr(json, "\"test.swish\"") != NULL);
  EXPECT_OK(genie_graph_from_json(json, strlen(json), &g2));
  float y2[6] = {0};
  EXPECT_OK(run(ctx, g2, x, 0, y2));
  CHECK(memcmp(y, y2, sizeof y) == 0);
  genie_free(json);
  genie_graph_destroy(g2);

  /* The plan carries the op's own cost estimate (1000 FLOPs per element). */
  char *plan = NULL;
  EXPECT_OK(genie_plan_explain(ctx, g, &plan));
  const char *flops = plan ? strstr(plan, "\"flops\":") : NULL;
  CHECK(flops && strncmp(flops + strspn(flops + 8, " \t") + 8, "6000,", 5) == 0);
  genie_free(plan);

  /* A kernel error names the node, the op and the kernel's message. */
  EXPECT_OK(genie_graph_set_attr_int(g, "sw", "fail", 1));
  EXPECT_STATUS(GENIE_ERR_INVALID_ATTRIBUTE, run(ctx, g, x, 0, y));
  EXPECT_DETAIL("node 'sw' (test.swish)");
  EXPECT_DETAIL("asked to fail");
  genie_graph_destroy(g);

  /* An inference error: at validation, naming the node and the op. */
  g = swish_graph(GENIE_DTYPE_I32);
  EXPECT_STATUS(GENIE_ERR_DTYPE_MISMATCH, genie_graph_validate(g));
  EXPECT_DETAIL("node 'sw' (test.swish)");
  EXPECT_DETAIL("x must be f32");
  genie_graph_destroy(g);

  /* Arity comes from the desc. */
  g = swish_graph(GENIE_DTYPE_F32);
  const char *two[2] = {"x", "x"}, *out[1] = {"z"};
  EXPECT_STATUS(GENIE_ERR_INVALID_GRAPH, genie_graph_add_node(g, "test.swish", "sw2", two, 2, out, 1));
  genie_graph_destroy(g);
}

static void test_sum_prod(genie_context_t *ctx) {
  genie_op_desc_t d;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.name = "test.sum_prod";
  d.min_inputs = 1;
  d.max_inputs = -1;
  d.num_outputs = 2;
  d.infer = sp_infer;
  d.cpu_kernel = sp_kernel;
  EXPECT_OK(genie_op_register(&d));

  genie_graph_t *g = NULL;
  int64_t shape[2] = {2, 3};
  REQUIRE_OK(genie_graph_create("sp", &g));
  REQUIRE_OK(genie_graph_add_input(g, "x", GENIE_DTYPE_F32, shape, 2));
  const char *r_in[1] = {"x"}, *r_out[1] = {"r"};
  REQUIRE_OK(genie_graph_add_node(g, "relu", "relu", r_in, 1, r_out, 1));
  const char *in[3] = {"x", "r", "x"}, *out[2] = {"s", "p"};
  REQUIRE_OK(genie_graph_add_node(g, "test.sum_prod", "sp", in, 3, out, 2));
  REQUIRE_OK(genie_graph_set_attr_string(g, "sp", "mode", "plain"));
  const int64_t ints[2] = {3, 7};
  const double floats[1] = {0.5};
  REQUIRE_OK(genie_graph_set_attr_ints(g, "sp", "ints", ints, 2));
  REQUIRE_OK(genie_graph_set_attr_floats(g, "sp", "floats", floats, 1));
  const char *n_in[1] = {"p"}, *n_out[1] = {"np"};
  REQUIRE_OK(genie_graph_add_node(g, "neg", "neg", n_in, 1, n_out, 1)); /* a built-in after it */
  REQUIRE_OK(genie_graph_mark_output(g, "s"));
  REQUIRE_OK(genie_graph_mark_output(g, "np"));
  const float x[6] = {-2, -1, 0, 0.5f, 1, 3};
  float s[6], np[6];
  EXPECT_OK(run(ctx, g, x, 0, s));
  EXPECT_OK(run(ctx, g, x, 1, np));
  for (int i = 0; i < 6; ++i) {
    const float r = x[i] > 0 ? x[i] : 0;
    CHECK(s[i] == x[i] + r + x[i]);
    CHECK(np[i] == -(x[i] * r * x[i]));
  }
  genie_graph_destroy(g);
  EXPECT_OK(genie_op_unregister("test.sum_prod"));
}

/* A tiny graph runs on the submitting thread; a custom op's kernel on a
 * worker (inline_runs.h), in a context of one worker thread. */
static void test_where_embedded_graphs_run(void) {
  genie_context_t *ctx = embedded_context(1);
  check_where_graphs_run(ctx);
  genie_shutdown(ctx);
}

static void test_unregister(genie_context_t *ctx) {
  genie_graph_t *g = swish_graph(GENIE_DTYPE_F32);
  EXPECT_OK(genie_op_unregister("test.swish"));
  CHECK(g_destroyed == 1); /* destroy ran once, with the registered user_data */
  EXPECT_STATUS(GENIE_ERR_UNKNOWN_OP, genie_graph_validate(g));
  EXPECT_DETAIL("test.swish");
  float y[6];
  const float x[6] = {0};
  EXPECT_STATUS(GENIE_ERR_UNKNOWN_OP, run(ctx, g, x, 0, y));
  genie_graph_destroy(g);
  EXPECT_STATUS(GENIE_ERR_NOT_FOUND, genie_op_unregister("test.swish"));
  EXPECT_STATUS(GENIE_ERR_NOT_FOUND, genie_op_unregister("relu"));
  EXPECT_DETAIL("built-in");
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_op_unregister(NULL));
  CHECK(g_destroyed == 1);
}

static void test_library(genie_context_t *ctx) {
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_op_library_load(NULL));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_op_library_load(""));
  EXPECT_STATUS(GENIE_ERR_IO, genie_op_library_load("/nonexistent/libnothing.so"));
  EXPECT_DETAIL("/nonexistent/libnothing.so");
  const char *no_init = getenv("GENIE_TEST_NVML_LIBRARY"); /* a library without the entry point */
  if (no_init) {
    EXPECT_STATUS(GENIE_ERR_NOT_FOUND, genie_op_library_load(no_init));
    EXPECT_DETAIL("genie_op_library_init");
  }
  const char *lib = getenv("GENIE_TEST_OP_LIBRARY");
  if (!lib) {
    printf("op library part skipped: GENIE_TEST_OP_LIBRARY is not set\n");
    return;
  }
  CHECK(genie_op_is_registered("testlib.add_scalar") == 0);
  EXPECT_OK(genie_op_library_load(lib));
  EXPECT_OK(genie_op_library_load(lib)); /* again: nothing happens */
  CHECK(genie_op_is_registered("testlib.add_scalar") == 1);
  genie_graph_t *g = NULL;
  int64_t shape[2] = {2, 3};
  REQUIRE_OK(genie_graph_create("lib", &g));
  REQUIRE_OK(genie_graph_add_input(g, "x", GENIE_DTYPE_F32, shape, 2));
  const char *in[1] = {"x"}, *out[1] = {"y"};
  REQUIRE_OK(genie_graph_add_node(g, "testlib.add_scalar", "add", in, 1, out, 1));
  REQUIRE_OK(genie_graph_set_attr_float(g, "add", "c", 0.25));
  REQUIRE_OK(genie_graph_mark_output(g, "y"));
  const float x[6] = {1, 2, 3, 4, 5, 6};
  float y[6] = {0};
  EXPECT_OK(run(ctx, g, x, 0, y));
  for (int i = 0; i < 6; ++i) CHECK(y[i] == x[i] + 0.25f);
  genie_graph_destroy(g);
}

int main(void) {
  genie_context_t *ctx = embedded_context(2);
  int weight = 1;
  test_bad_registrations();
  test_swish(ctx, &weight);
  test_sum_prod(ctx);
  test_unregister(ctx);
  test_library(ctx);
  genie_shutdown(ctx);
  test_where_embedded_graphs_run();
  return test_summary("custom_ops_test");
}
