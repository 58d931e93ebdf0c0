/* The C API end to end in embedded mode: configuration, context, tensors,
 * graph building, submission, futures, JSON and hashing. */
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "mlp_graph.h"

static int g_cb_calls = 0;
static genie_status_t g_cb_status = 12345;
static void on_done(genie_future_t *f, genie_status_t status, void *user) {
  (void)f;
  g_cb_calls += 1;
  g_cb_status = status;
  *(int *)user = 42;
}

static void test_versions_and_status(void) {
  CHECK(genie_version() == GENIE_VERSION);
  CHECK(genie_abi_version() == GENIE_ABI_VERSION);
  CHECK(strcmp(genie_version_string(), "0.2.0") == 0);
  CHECK(strcmp(genie_status_str(GENIE_OK), "GENIE_OK") == 0);
  CHECK(strcmp(genie_status_str(GENIE_ERR_PARSE), "GENIE_ERR_PARSE") == 0);
  CHECK(strcmp(genie_status_str(-999), "unknown status") == 0);
  for (genie_status_t s = GENIE_ERR_INTERNAL; s <= GENIE_IN_PROGRESS; ++s)
    CHECK(strcmp(genie_status_str(s), "unknown status") != 0);
  CHECK(genie_dtype_size(GENIE_DTYPE_F32) == 4);
  CHECK(genie_dtype_size(GENIE_DTYPE_BF16) == 2);
  CHECK(genie_dtype_size(GENIE_DTYPE_I64) == 8);
  CHECK(genie_dtype_size(GENIE_DTYPE_BOOL) == 1);
  CHECK(genie_dtype_size((genie_dtype_t)99) == 0);
  CHECK(strcmp(genie_dtype_name(GENIE_DTYPE_F16), "f16") == 0);
  CHECK(strcmp(genie_dtype_name((genie_dtype_t)99), "invalid") == 0);
}

static void test_embedded_run(void) {
  genie_config_t *cfg = NULL;
  genie_context_t *ctx = NULL;
  REQUIRE_OK(genie_config_create(&cfg));
  EXPECT_OK(genie_config_set_num_threads(cfg, 2));
  EXPECT_OK(genie_config_set_node_id(cfg, "test-node.1"));
  EXPECT_OK(genie_config_set_use_env(cfg, 0));
  REQUIRE_OK(genie_init(cfg, &ctx));
  genie_config_destroy(cfg); /* the context keeps its own copy */
  CHECK(genie_is_initialized(ctx) == 1);
  CHECK(genie_context_is_embedded(ctx) == 1);
  CHECK(strcmp(genie_context_node_id(ctx), "test-node.1") == 0);
  int connected = -1;
  EXPECT_OK(genie_context_is_connected(ctx, &connected));
  CHECK(connected == 1); /* embedded: nothing to lose */
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_context_is_connected(ctx, NULL));

  /* A scalar: ndim 0, shape may be NULL, one element; info writes no dims. */
  genie_tensor_t *scalar = NULL;
  REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, NULL, 0, "cpu", &scalar));
  int64_t sdims[GENIE_MAX_DIMS] = {-9};
  size_t snd = 9, snb = 0;
  EXPECT_OK(genie_tensor_info(scalar, NULL, sdims, &snd, &snb));
  CHECK(snd == 0 && snb == 4 && sdims[0] == -9);
  genie_tensor_destroy(scalar);

  /* Resident tensors. */
  const int64_t xs[2] = {2, 3}, ws[2] = {4, 3};
  float x[6], w[12];
  for (int i = 0; i < 6; ++i) x[i] = (float)(i - 2) * 0.5f;
  for (int i = 0; i < 12; ++i) w[i] = (float)((i * 7) % 5 - 2) * 0.25f;
  genie_tensor_t *tx = NULL, *tw = NULL;
  REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, xs, 2, "cpu", &tx));
  REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, ws, 2, NULL, &tw));
  CHECK(strcmp(genie_tensor_device(tx), "cpu:0") == 0);
  EXPECT_OK(genie_tensor_write(tx, 0, x, sizeof x));
  EXPECT_OK(genie_tensor_write(tw, 0, w, 24));                 /* two halves */
  EXPECT_OK(genie_tensor_write(tw, 24, (const char *)w + 24, 24));
  float back[12];
  EXPECT_OK(genie_tensor_read(tw, 0, back, sizeof back));
  CHECK(memcmp(back, w, sizeof w) == 0);
  genie_dtype_t dt = GENIE_DTYPE_INVALID;
  int64_t shp[GENIE_MAX_DIMS];
  size_t nd = 0, nb = 0;
  EXPECT_OK(genie_tensor_info(tx, &dt, shp, &nd, &nb));
  CHECK(dt == GENIE_DTYPE_F32 && nd == 2 && shp[0] == 2 && shp[1] == 3 && nb == 24);

  genie_graph_t *g = build_mlp("mlp");
  EXPECT_OK(genie_graph_validate(g));
  size_t nn = 0;
  EXPECT_OK(genie_graph_num_nodes(g, &nn));
  CHECK(nn == 2);
  /* Nodes by index, in the order they were added. */
  const char *node_name = NULL, *node_op = NULL;
  EXPECT_OK(genie_graph_node_name(g, 0, &node_name));
  EXPECT_OK(genie_graph_node_op(g, 0, &node_op));
  CHECK(node_name && strcmp(node_name, "fc") == 0 && node_op && strcmp(node_op, "linear") == 0);
  EXPECT_OK(genie_graph_node_name(g, 1, &node_name));
  EXPECT_OK(genie_graph_node_op(g, 1, &node_op));
  CHECK(node_name && strcmp(node_name, "act") == 0 && node_op && strcmp(node_op, "relu") == 0);
  node_name = node_op = NULL;
  EXPECT_STATUS(GENIE_ERR_NOT_FOUND, genie_graph_node_name(g, 2, &node_name));
  EXPECT_DETAIL("2");
  EXPECT_STATUS(GENIE_ERR_NOT_FOUND, genie_graph_node_op(g, 2, &node_op));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_graph_node_name(g, 0, NULL));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_graph_node_op(g, 0, NULL));
  CHECK(node_name == NULL && node_op == NULL);
  size_t nio = 0;
  const char *io_name = NULL;
  EXPECT_OK(genie_graph_num_inputs(g, &nio));
  CHECK(nio == 2);
  EXPECT_OK(genie_graph_input_name(g, 1, &io_name));
  CHECK(io_name != NULL && strcmp(io_name, "w") == 0);
  EXPECT_STATUS(GENIE_ERR_NOT_FOUND, genie_graph_input_name(g, 2, &io_name));
  EXPECT_OK(genie_graph_num_outputs(g, &nio));
  CHECK(nio == 1);
  EXPECT_OK(genie_graph_output_name(g, 0, &io_name));
  CHECK(io_name != NULL && strcmp(io_name, "z") == 0);
  EXPECT_STATUS(GENIE_ERR_NOT_FOUND, genie_graph_output_name(g, 1, &io_name));
  EXPECT_OK(genie_graph_value_info(g, "y", &dt, shp, &nd));
  CHECK(dt == GENIE_DTYPE_F32 && nd == 2 && shp[0] == 2 && shp[1] == 4);

  const char *names[2] = {"x", "w"};
  genie_tensor_t *ins[2] = {tx, tw};
  genie_future_t *fut = NULL;
  REQUIRE_OK(genie_graph_submit(ctx, g, names, ins, 2, &fut));
  genie_graph_destroy(g); /* submission took a snapshot */
  EXPECT_OK(genie_future_wait(fut, -1));
  EXPECT_OK(genie_future_poll(fut));
  int user = 0;
  EXPECT_OK(genie_future_set_callback(fut, on_done, &user)); /* already done: runs now */
  CHECK(g_cb_calls == 1 && g_cb_status == GENIE_OK && user == 42);
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_future_set_callback(fut, on_done, &user));
  size_t nout = 0;
  EXPECT_OK(genie_future_num_outputs(fut, &nout));
  CHECK(nout == 1);
  uint64_t ns = 0;
  EXPECT_OK(genie_future_exec_ns(fut, &ns));
  CHECK(ns > 0);

  genie_tensor_t *tz = NULL, *tz2 = NULL;
  REQUIRE_OK(genie_future_output(fut, 0, &tz));
  REQUIRE_OK(genie_future_output_by_name(fut, "z", &tz2));
  EXPECT_STATUS(GENIE_ERR_NOT_FOUND, genie_future_output(fut, 1, &tz2));
  EXPECT_STATUS(GENIE_ERR_NOT_FOUND, genie_future_output_by_name(fut, "nope", &tz2));
  float z[8], z2[8];
  EXPECT_OK(genie_tensor_read(tz, 0, z, sizeof z));
  EXPECT_OK(genie_tensor_read(tz2, 0, z2, sizeof z2));
  CHECK(memcmp(z, z2, sizeof z) == 0);
  const float bias[4] = {0.5f, -0.5f, 1.0f, -2.0f};
  for (int i = 0; i < 2; ++i)
    for (int o = 0; o < 4; ++o) {
      double acc = bias[o];
      for (int k = 0; k < 3; ++k) acc += (double)x[i * 3 + k] * w[o * 3 + k];
      const double want = acc > 0 ? acc : 0;
      CHECK(fabs(z[i * 4 + o] - want) < 1e-5);
    }
  genie_future_destroy(fut);
  /* Output handles outlive their future. */
  EXPECT_OK(genie_tensor_read(tz, 0, z2, sizeof z2));
  CHECK(memcmp(z, z2, sizeof z) == 0);

  /* Outputs feed the next submission without leaving the device. */
  genie_graph_t *g2 = NULL;
  const int64_t zs[2] = {2, 4};
  const char *add_in[2] = {"a", "a"};
  const char *add_out[1] = {"s"};
  REQUIRE_OK(genie_graph_create(NULL, &g2));
  REQUIRE_OK(genie_graph_add_input(g2, "a", GENIE_DTYPE_F32, zs, 2));
  REQUIRE_OK(genie_graph_add_node(g2, "add", "double", add_in, 2, add_out, 1));
  REQUIRE_OK(genie_graph_mark_output(g2, "s"));
  const char *n2[1] = {"a"};
  genie_tensor_t *i2[1] = {tz};
  REQUIRE_OK(genie_graph_submit(ctx, g2, n2, i2, 1, &fut));
  g_cb_calls = 0;
  EXPECT_OK(genie_future_wait(fut, 10000));
  genie_tensor_t *ts = NULL;
  REQUIRE_OK(genie_future_output(fut, 0, &ts));
  float s[8];
  EXPECT_OK(genie_tensor_read(ts, 0, s, sizeof s));
  for (int i = 0; i < 8; ++i) CHECK(s[i] == 2 * z[i]);
  genie_future_destroy(fut);
  genie_graph_destroy(g2);

  genie_tensor_destroy(tz2);
  genie_tensor_destroy(ts);
  genie_tensor_destroy(tw);

  genie_shutdown(ctx);
  CHECK(genie_is_initialized(ctx) == 0);
  CHECK(genie_context_is_embedded(ctx) == -1);
  CHECK(genie_context_node_id(ctx) == NULL);
  /* Tensors of a shut-down context refuse work but can be destroyed. */
  EXPECT_STATUS(GENIE_ERR_SHUTDOWN, genie_tensor_read(tz, 0, z, sizeof z));
  EXPECT_DETAIL("shut down");
  genie_tensor_destroy(tz);
  genie_tensor_destroy(tx);
}

static void test_hash_and_json(void) {
  genie_graph_t *a = build_mlp("first"), *b = build_mlp("second"), *c = NULL;
  uint64_t ha = 0, hb = 0, hc = 0;
  EXPECT_OK(genie_graph_hash(a, &ha));
  EXPECT_OK(genie_graph_hash(b, &hb));
  CHECK(ha == hb && ha != 0);
  /* A failed call leaves the graph unchanged. */
  EXPECT_STATUS(GENIE_ERR_INVALID_ATTRIBUTE, genie_graph_set_attr_string(b, "fc", "unused", "x"));
  EXPECT_OK(genie_graph_hash(b, &hb));
  CHECK(ha == hb);
  EXPECT_OK(genie_graph_set_layer(b, "fc", 1));
  EXPECT_OK(genie_graph_hash(b, &hb));
  CHECK(ha != hb);

  char *json = NULL, *json2 = NULL;
  size_t len = 0, len2 = 0;
  REQUIRE_OK(genie_graph_to_json(a, &json, &len));
  CHECK(len == strlen(json));
  REQUIRE_OK(genie_graph_from_json(json, len, &c));
  EXPECT_OK(genie_graph_hash(c, &hc));
  CHECK(hc == ha);
  REQUIRE_OK(genie_graph_to_json(c, &json2, &len2));
  CHECK(len == len2 && strcmp(json, json2) == 0);
  EXPECT_OK(genie_graph_validate(c));
  /* The import lists its nodes in the order of the export. */
  const char *na = NULL, *nc = NULL;
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_OK(genie_graph_node_name(a, i, &na));
    EXPECT_OK(genie_graph_node_name(c, i, &nc));
    CHECK(na && nc && strcmp(na, nc) == 0);
  }
  genie_free(json);
  genie_free(json2);
  genie_free(NULL);
  genie_graph_destroy(a);
  genie_graph_destroy(b);
  genie_graph_destroy(c);
  genie_graph_destroy(NULL);
}

static void test_reduced_precision(void) {
  genie_context_t *ctx = NULL;
  REQUIRE_OK(genie_init(NULL, &ctx));
  genie_graph_t *g = NULL;
  const int64_t s[1] = {4};
  const char *in[2] = {"a", "b"};
  const char *out[1] = {"c"};
  REQUIRE_OK(genie_graph_create("f16", &g));
  REQUIRE_OK(genie_graph_add_input(g, "a", GENIE_DTYPE_F16, s, 1));
  REQUIRE_OK(genie_graph_add_input(g, "b", GENIE_DTYPE_F16, s, 1));
  REQUIRE_OK(genie_graph_add_node(g, "mul", "m", in, 2, out, 1));
  REQUIRE_OK(genie_graph_mark_output(g, "c"));
  /* 1.5, -2, 0.25, 3 and 2, 0.5, 4, -1 in IEEE half. */
  const uint16_t a[4] = {0x3e00, 0xc000, 0x3400, 0x4200};
  const uint16_t b[4] = {0x4000, 0x3800, 0x4400, 0xbc00};
  genie_tensor_t *ta = NULL, *tb = NULL, *tc = NULL;
  REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F16, s, 1, "cpu:0", &ta));
  REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F16, s, 1, "cpu:0", &tb));
  EXPECT_OK(genie_tensor_write(ta, 0, a, sizeof a));
  EXPECT_OK(genie_tensor_write(tb, 0, b, sizeof b));
  genie_tensor_t *ins[2] = {ta, tb};
  genie_future_t *f = NULL;
  REQUIRE_OK(genie_graph_submit(ctx, g, in, ins, 2, &f));
  EXPECT_OK(genie_future_wait(f, -1));
  REQUIRE_OK(genie_future_output(f, 0, &tc));
  genie_dtype_t dt;
  EXPECT_OK(genie_tensor_info(tc, &dt, NULL, NULL, NULL));
  CHECK(dt == GENIE_DTYPE_F16);
  uint16_t c[4];
  EXPECT_OK(genie_tensor_read(tc, 0, c, sizeof c));
  /* 3, -1, 1, -3 */
  CHECK(c[0] == 0x4200 && c[1] == 0xbc00 && c[2] == 0x3c00 && c[3] == 0xc200);
  genie_tensor_destroy(ta);
  genie_tensor_destroy(tb);
  genie_tensor_destroy(tc);
  genie_future_destroy(f);
  genie_graph_destroy(g);
  genie_shutdown(ctx);
}

/* One graph handle whose input is [-1], submitted with 3 elements, again
 * with 3, then with 5 and 3 again: each submission takes its own shape (the
 * handle's prepared graph is reused only for the shapes it was prepared
 * for). */
static void test_resubmit_with_new_shapes(void) {
  genie_context_t *ctx = embedded_context(0);
  const int64_t dyn[1] = {-1};
  genie_graph_t *g = NULL;
  REQUIRE_OK(genie_graph_create("dyn", &g));
  REQUIRE_OK(genie_graph_add_input(g, "x", GENIE_DTYPE_F32, dyn, 1));
  const char *in[1] = {"x"}, *out[1] = {"y"};
  REQUIRE_OK(genie_graph_add_node(g, "neg", "n", in, 1, out, 1));
  REQUIRE_OK(genie_graph_mark_output(g, "y"));
  const int64_t sizes[4] = {3, 3, 5, 3};
  for (int k = 0; k < 4; ++k) {
    const int64_t n = sizes[k];
    float x[5] = {1, 2, 3, 4, 5}, y[5] = {0};
    genie_tensor_t *t = NULL, *o = NULL;
    genie_future_t *f = NULL;
    REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, &n, 1, "cpu", &t));
    EXPECT_OK(genie_tensor_write(t, 0, x, (size_t)n * sizeof(float)));
    REQUIRE_OK(genie_graph_submit(ctx, g, in, &t, 1, &f));
    EXPECT_OK(genie_future_wait(f, -1));
    REQUIRE_OK(genie_future_output(f, 0, &o));
    int64_t dims[GENIE_MAX_DIMS];
    size_t nd = 0, nb = 0;
    EXPECT_OK(genie_tensor_info(o, NULL, dims, &nd, &nb));
    CHECK(nd == 1 && dims[0] == n && nb == (size_t)n * sizeof(float));
    EXPECT_OK(genie_tensor_read(o, 0, y, nb));
    for (int64_t i = 0; i < n; ++i) CHECK(y[i] == -x[i]);
    genie_tensor_destroy(o);
    genie_future_destroy(f);
    genie_tensor_destroy(t);
  }
  genie_graph_destroy(g);
  genie_shutdown(ctx);
}

int main(void) {
  test_versions_and_status();
  test_embedded_run();
  test_hash_and_json();
  test_reduced_precision();
  test_resubmit_with_new_shapes();
  return test_summary("api_basic_test");
}
