/* genie_graph_import_onnx: a small model built here byte by byte (the
 * protobuf wire format of the ONNX schema, so the test needs no ONNX
 * library) imports and runs with its initializers as resident weights; bad
 * models (truncated, an unsupported op, initializers of the wrong size, a
 * symbolic dimension ...) fail with a status and a detail naming the
 * problem, and leave the out-parameters untouched. */
#include <math.h>
#include <stdint.h>

#include "check.h"

/* ---- A minimal protobuf writer ------------------------------------------ */

typedef struct {
  uint8_t *p;
  size_t n, cap;
} buf_t;

static void put_raw(buf_t *b, const void *data, size_t len) {
  if (b->n + len > b->cap) {
    b->cap = (b->n + len) * 2 + 64;
    b->p = (uint8_t *)realloc(b->p, b->cap);
    if (!b->p) abort();
  }
  if (len) memcpy(b->p + b->n, data, len);
  b->n += len;
}

static void put_varint(buf_t *b, uint64_t v) {
  uint8_t c;
  do {
    c = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v) c |= 0x80;
    put_raw(b, &c, 1);
  } while (v);
}

static void put_int(buf_t *b, int field, int64_t v) { /* varint field */
  put_varint(b, (uint64_t)field << 3);
  put_varint(b, (uint64_t)v);
}

static void put_bytes(buf_t *b, int field, const void *data, size_t len) {
  put_varint(b, ((uint64_t)field << 3) | 2);
  put_varint(b, len);
  put_raw(b, data, len);
}

static void put_str(buf_t *b, int field, const char *s) { put_bytes(b, field, s, strlen(s)); }

/* Appends `sub` as message field `field` and frees it. */
static void put_msg(buf_t *b, int field, buf_t *sub) {
  put_bytes(b, field, sub->p, sub->n);
  free(sub->p);
  memset(sub, 0, sizeof *sub);
}

/* ---- ONNX messages (field numbers of onnx.proto) ------------------------ */

enum { ONNX_FLOAT = 1, ONNX_INT64 = 7 };

/* TensorProto of float data: dims, data_type, name, raw_data of `n` floats. */
static buf_t tensor_f32(const char *name, const int64_t *dims, size_t ndim, const float *v, size_t n) {
  buf_t t = {0};
  size_t i;
  for (i = 0; i < ndim; ++i) put_int(&t, 1, dims[i]);
  put_int(&t, 2, ONNX_FLOAT);
  put_str(&t, 8, name);
  put_bytes(&t, 9, v, n * sizeof(float));
  return t;
}

/* ValueInfoProto of a float tensor; a dimension < 0 is written symbolic. */
static buf_t value_info(const char *name, const int64_t *dims, size_t ndim) {
  buf_t shape = {0}, tt = {0}, type = {0}, vi = {0};
  size_t i;
  for (i = 0; i < ndim; ++i) {
    buf_t d = {0};
    if (dims[i] >= 0)
      put_int(&d, 1, dims[i]);
    else
      put_str(&d, 2, "batch");
    put_msg(&shape, 1, &d);
  }
  put_int(&tt, 1, ONNX_FLOAT);
  put_msg(&tt, 2, &shape);
  put_msg(&type, 1, &tt);
  put_str(&vi, 1, name);
  put_msg(&vi, 2, &type);
  return vi;
}

static buf_t node(const char *op, const char *name, const char *in0, const char *in1, const char *out) {
  buf_t n = {0};
  put_str(&n, 1, in0);
  if (in1) put_str(&n, 1, in1);
  put_str(&n, 2, out);
  put_str(&n, 3, name);
  put_str(&n, 4, op);
  return n;
}

/* What to break in the model. */
typedef struct {
  const char *middle_op;      /* the op of the second node ("Add") */
  const char *middle_domain;  /* its domain (NULL: the default) */
  size_t w_values;            /* float values written for W (12) */
  int64_t w_rows;             /* W's declared first dimension (3) */
  int64_t x_batch;            /* x's first dimension (< 0: symbolic) */
} spec_t;

static const spec_t kGood = {"Add", NULL, 12, 3, 2};

static const float kW[20] = {0.5f, -1, 2, 0, 1, 0.25f, -0.5f, 3, -2, 1, 0, 1.5f,
                             1, 1, 1, 1, 1, 1, 1, 1};
static const float kB[4] = {0.1f, -3, 0.2f, 0};

/* y = Relu(Add(MatMul(x[2,3], W[3,4]), b[4])), x a model input, W and b
 * initializers, opset 13. Node names as torch.onnx.export writes them. */
static buf_t model_bytes(const spec_t *s) {
  buf_t m = {0}, g = {0}, op = {0}, t, n, vi;
  const int64_t wd[2] = {s->w_rows, 4}, bd[1] = {4}, xd[2] = {s->x_batch, 3}, yd[2] = {2, 4};
  n = node("MatMul", "/fc/MatMul", "x", "W", "h");
  put_msg(&g, 1, &n);
  n = node(s->middle_op, "/fc/Add", "h", "b", "z");
  if (s->middle_domain) put_str(&n, 7, s->middle_domain);
  put_msg(&g, 1, &n);
  n = node("Relu", "/act/Relu", "z", NULL, "y");
  put_msg(&g, 1, &n);
  put_str(&g, 2, "tiny");
  t = tensor_f32("W", wd, 2, kW, s->w_values);
  put_msg(&g, 5, &t);
  t = tensor_f32("b", bd, 1, kB, 4);
  put_msg(&g, 5, &t);
  vi = value_info("x", xd, 2);
  put_msg(&g, 11, &vi);
  vi = value_info("y", yd, 2);
  put_msg(&g, 12, &vi);
  put_int(&m, 1, 8); /* ir_version */
  put_str(&m, 2, "api_onnx_test");
  put_msg(&m, 7, &g);
  put_str(&op, 1, "");
  put_int(&op, 2, 13);
  put_msg(&m, 8, &op);
  return m;
}

/* ---- Tests --------------------------------------------------------------- */

static genie_context_t *g_ctx = NULL;

/* Imports `bytes`, expecting `want`; on failure checks the out-parameters
 * were left untouched and the detail mentions each of `needles`. */
static void expect_import_fails(genie_status_t want, const void *bytes, size_t len, const char *n1,
                                const char *n2) {
  genie_graph_t *g = (genie_graph_t *)&g_ctx; /* sentinels: must stay as they are */
  genie_tensor_t **w = (genie_tensor_t **)&g;
  size_t nw = 12345;
  EXPECT_STATUS(want, genie_graph_import_onnx(g_ctx, bytes, len, NULL, &g, &w, &nw));
  if (n1) EXPECT_DETAIL(n1);
  if (n2) EXPECT_DETAIL(n2);
  CHECK(g == (genie_graph_t *)&g_ctx && w == (genie_tensor_t **)&g && nw == 12345);
}

static void test_imports_and_runs(void) {
  buf_t m = model_bytes(&kGood);
  genie_graph_t *g = NULL;
  genie_tensor_t **w = NULL, *tx = NULL, *ty = NULL;
  genie_future_t *f = NULL;
  size_t nw = 0, n_in = 0, i, r, c, k;
  const char *names[3];
  genie_tensor_t *bound[3];
  const float x[6] = {1, 2, 3, -1, 0.5f, 4};
  const int64_t xs[2] = {2, 3};
  float y[8] = {0}, want;
  genie_dtype_t dt = GENIE_DTYPE_INVALID;
  int64_t shape[GENIE_MAX_DIMS];
  size_t ndim = 0;

  REQUIRE_OK(genie_graph_import_onnx(g_ctx, m.p, m.n, NULL, &g, &w, &nw));
  free(m.p);
  CHECK(nw == 2);
  REQUIRE_OK(genie_graph_num_inputs(g, &n_in));
  CHECK(n_in == 3);
  for (i = 0; i < n_in; ++i) REQUIRE_OK(genie_graph_input_name(g, i, &names[i]));
  CHECK(strcmp(names[0], "x") == 0 && strcmp(names[1], "W") == 0 && strcmp(names[2], "b") == 0);
  /* The weights are resident tensors holding the initializers' values. */
  REQUIRE_OK(genie_tensor_info(w[0], &dt, shape, &ndim, NULL));
  CHECK(dt == GENIE_DTYPE_F32 && ndim == 2 && shape[0] == 3 && shape[1] == 4);
  {
    float back[12];
    REQUIRE_OK(genie_tensor_read(w[0], 0, back, sizeof back));
    CHECK(memcmp(back, kW, sizeof back) == 0);
  }
  REQUIRE_OK(genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, xs, 2, NULL, &tx));
  REQUIRE_OK(genie_tensor_write(tx, 0, x, sizeof x));
  bound[0] = tx;
  bound[1] = w[0];
  bound[2] = w[1];
  /* Twice: the weights stay bound and unchanged across submissions. */
  for (k = 0; k < 2; ++k) {
    REQUIRE_OK(genie_graph_submit(g_ctx, g, names, bound, 3, &f));
    REQUIRE_OK(genie_future_wait(f, -1));
    REQUIRE_OK(genie_future_output(f, 0, &ty));
    REQUIRE_OK(genie_tensor_read(ty, 0, y, sizeof y));
    for (r = 0; r < 2; ++r)
      for (c = 0; c < 4; ++c) {
        want = kB[c];
        for (i = 0; i < 3; ++i) want += x[r * 3 + i] * kW[i * 4 + c];
        if (want < 0) want = 0;
        CHECK(fabsf(y[r * 4 + c] - want) <= 1e-5f * (1 + fabsf(want)));
      }
    genie_tensor_destroy(ty);
    genie_future_destroy(f);
  }
  genie_tensor_destroy(tx);
  for (i = 0; i < nw; ++i) genie_tensor_destroy(w[i]);
  genie_free(w);
  genie_graph_destroy(g);
}

static void test_malformed(void) {
  buf_t m = model_bytes(&kGood);
  static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  size_t cut;
  /* Cut anywhere inside the graph field: the length prefix promises more. */
  for (cut = m.n / 4; cut < m.n; cut += m.n / 7) expect_import_fails(GENIE_ERR_PARSE, m.p, cut, "ONNX", NULL);
  expect_import_fails(GENIE_ERR_PARSE, junk, sizeof junk, "ONNX", NULL);
  expect_import_fails(GENIE_ERR_PARSE, m.p, 0, "not an ONNX model", NULL);
  free(m.p);
  /* A well-formed ModelProto without a graph. */
  memset(&m, 0, sizeof m);
  put_int(&m, 1, 8);
  expect_import_fails(GENIE_ERR_PARSE, m.p, m.n, "no graph", NULL);
  free(m.p);
}

static void test_unsupported_node_is_named(void) {
  spec_t s = kGood;
  buf_t m;
  s.middle_op = "NonMaxSuppression";
  m = model_bytes(&s);
  expect_import_fails(GENIE_ERR_UNSUPPORTED, m.p, m.n, "NonMaxSuppression", "/fc/Add");
  free(m.p);
  s = kGood;
  s.middle_domain = "com.microsoft";
  m = model_bytes(&s);
  expect_import_fails(GENIE_ERR_UNSUPPORTED, m.p, m.n, "com.microsoft", "/fc/Add");
  free(m.p);
}

static void test_wrong_initializer_sizes(void) {
  spec_t s = kGood;
  buf_t m;
  s.w_values = 11; /* raw_data one float short of [3, 4] */
  m = model_bytes(&s);
  expect_import_fails(GENIE_ERR_PARSE, m.p, m.n, "initializer 'W'", "44 bytes");
  free(m.p);
  s = kGood;
  s.w_values = 20;
  s.w_rows = 5; /* a consistent initializer that does not fit x [2, 3] */
  m = model_bytes(&s);
  expect_import_fails(GENIE_ERR_SHAPE_MISMATCH, m.p, m.n, "/fc/MatMul", NULL);
  free(m.p);
}

static void test_symbolic_dimension(void) {
  spec_t s = kGood;
  buf_t m;
  s.x_batch = -1;
  m = model_bytes(&s);
  expect_import_fails(GENIE_ERR_UNSUPPORTED, m.p, m.n, "symbolic dimension 'batch'", "'x'");
  free(m.p);
}

static void test_bad_arguments(void) {
  buf_t m = model_bytes(&kGood);
  genie_graph_t *g = NULL;
  genie_tensor_t **w = NULL;
  size_t nw = 0;
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_graph_import_onnx(NULL, m.p, m.n, NULL, &g, &w, &nw));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_graph_import_onnx(g_ctx, NULL, 10, NULL, &g, &w, &nw));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_graph_import_onnx(g_ctx, m.p, m.n, NULL, NULL, &w, &nw));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_graph_import_onnx(g_ctx, m.p, m.n, NULL, &g, NULL, &nw));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_graph_import_onnx(g_ctx, m.p, m.n, NULL, &g, &w, NULL));
  /* A device this context cannot allocate on (remote, embedded): no weight is kept. */
  EXPECT_STATUS(GENIE_ERR_UNSUPPORTED, genie_graph_import_onnx(g_ctx, m.p, m.n, "remote:0", &g, &w, &nw));
  CHECK(g == NULL && w == NULL && nw == 0);
  free(m.p);
}

int main(void) {
  g_ctx = embedded_context(0);
  test_imports_and_runs();
  test_malformed();
  test_unsupported_node_is_named();
  test_wrong_initializer_sizes();
  test_symbolic_dimension();
  test_bad_arguments();
  test_imports_and_runs(); /* the context is still usable */
  genie_shutdown(g_ctx);
  return test_summary("api_onnx_test");
}
