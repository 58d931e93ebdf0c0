/* Bad input at every public function: a specific status, a detail naming the
 * problem, no crash, no leak (LeakSanitizer), and the context stays usable. */
#include <math.h>
#include <stdint.h>

#include "check.h"

static genie_context_t *g_ctx = NULL;

/* Runs a small valid graph: proves the context still works after an error. */
static void expect_context_usable(void) {
  genie_graph_t *g = NULL;
  const int64_t s[1] = {3};
  const char *in[1] = {"a"};
  const char *out[1] = {"b"};
  const float a[3] = {-1, 0, 2};
  float b[3] = {0};
  genie_tensor_t *ta = NULL, *tb = NULL;
  genie_future_t *f = NULL;
  REQUIRE_OK(genie_graph_create("probe", &g));
  REQUIRE_OK(genie_graph_add_input(g, "a", GENIE_DTYPE_F32, s, 1));
  REQUIRE_OK(genie_graph_add_node(g, "relu", "r", in, 1, out, 1));
  REQUIRE_OK(genie_graph_mark_output(g, "b"));
  REQUIRE_OK(genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, s, 1, "cpu", &ta));
  REQUIRE_OK(genie_tensor_write(ta, 0, a, sizeof a));
  REQUIRE_OK(genie_graph_submit(g_ctx, g, in, &ta, 1, &f));
  REQUIRE_OK(genie_future_wait(f, -1));
  REQUIRE_OK(genie_future_output(f, 0, &tb));
  REQUIRE_OK(genie_tensor_read(tb, 0, b, sizeof b));
  CHECK(b[0] == 0 && b[1] == 0 && b[2] == 2);
  genie_tensor_destroy(ta);
  genie_tensor_destroy(tb);
  genie_future_destroy(f);
  genie_graph_destroy(g);
}

static void test_null_and_wrong_handles(void) {
  genie_config_t *cfg = NULL;
  genie_graph_t *g = NULL;
  genie_tensor_t *t = NULL;
  genie_future_t *f = NULL;
  genie_context_t *c = NULL;
  const int64_t s[1] = {2};
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_create(NULL));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_config_set_master_port(NULL, 1));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_init(NULL, NULL));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_tensor_alloc(NULL, GENIE_DTYPE_F32, s, 1, "cpu", &t));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, s, 1, "cpu", NULL));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, NULL, 1, "cpu", &t));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_tensor_write(NULL, 0, s, 1));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_tensor_read(NULL, 0, &c, 1));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_tensor_info(NULL, NULL, NULL, NULL, NULL));
  CHECK(genie_tensor_device(NULL) == NULL);
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_graph_create("x", NULL));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_graph_add_input(NULL, "a", GENIE_DTYPE_F32, s, 1));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_graph_validate(NULL));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_graph_hash(NULL, NULL));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_graph_from_json(NULL, 0, &g));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_graph_submit(NULL, NULL, NULL, NULL, 0, &f));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_future_wait(NULL, 0));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_future_poll(NULL));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_future_output(NULL, 0, &t));
  /* Destroy functions accept NULL. */
  genie_config_destroy(NULL);
  genie_tensor_destroy(NULL);
  genie_graph_destroy(NULL);
  genie_future_destroy(NULL);
  genie_server_destroy(NULL);
  genie_shutdown(NULL);
  CHECK(genie_is_initialized(NULL) == 0);
  /* A pointer that is no handle at all is refused without being read. */
  int not_a_handle = 0;
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_tensor_write((genie_tensor_t *)&not_a_handle, 0, s, 1));
  EXPECT_DETAIL("not a tensor handle");
  genie_tensor_destroy((genie_tensor_t *)&not_a_handle);

  /* A handle of another kind is refused, not misused. */
  REQUIRE_OK(genie_graph_create("g", &g));
  REQUIRE_OK(genie_config_create(&cfg));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_tensor_write((genie_tensor_t *)g, 0, s, 1));
  EXPECT_DETAIL("tensor");
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_graph_validate((genie_graph_t *)cfg));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE,
                genie_tensor_alloc((genie_context_t *)g, GENIE_DTYPE_F32, s, 1, "cpu", &t));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_init((genie_config_t *)g, &c));
  CHECK(c == NULL); /* out-parameters untouched on failure */
  genie_graph_destroy(g);
  genie_config_destroy(cfg);
  CHECK(t == NULL && f == NULL);
}

static void test_config_and_init(void) {
  genie_config_t *cfg = NULL;
  genie_context_t *c = NULL;
  REQUIRE_OK(genie_config_create(&cfg));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_master_port(cfg, 0));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_master_port(cfg, 70000));
  EXPECT_DETAIL("70000");
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_node_id(cfg, "bad id!"));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_role(cfg, (genie_node_role_t)7));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_backend(cfg, (genie_backend_t)1000));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_log_level(cfg, (genie_log_level_t)9));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_timeout_ms(cfg, 0));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_num_threads(cfg, -1));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_memory_budget(cfg, -1));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_session_quota(cfg, 0, -1, 0));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_config_set_session_quota(NULL, 0, 0, 0));
  EXPECT_OK(genie_config_set_memory_budget(cfg, 0));
  EXPECT_OK(genie_config_set_session_quota(cfg, 1 << 20, 16, 2));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_max_graph_bytes(cfg, -1));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_max_graph_nodes(cfg, (int64_t)1 << 41));
  EXPECT_DETAIL("max graph nodes");
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_stage_timeout_ms(cfg, 5));
  EXPECT_DETAIL("stage timeout");
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_config_set_stage_timeout_ms(NULL, 1000));
  EXPECT_OK(genie_config_set_max_graph_bytes(cfg, 0));
  EXPECT_OK(genie_config_set_max_graph_nodes(cfg, 200000));
  EXPECT_OK(genie_config_set_stage_timeout_ms(cfg, 1000));

  /* Header/library ABI mismatch. */
  EXPECT_STATUS(GENIE_ERR_VERSION_MISMATCH, genie_init_abi(GENIE_ABI_VERSION + 1, cfg, &c));
  EXPECT_DETAIL("ABI");

  /* Bad environment values name the variable. */
  setenv("GENIE_NUM_THREADS", "many", 1);
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_init(cfg, &c));
  EXPECT_DETAIL("GENIE_NUM_THREADS");
  unsetenv("GENIE_NUM_THREADS");
  setenv("GENIE_BACKEND", "carrier-pigeon", 1);
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_init(cfg, &c));
  EXPECT_DETAIL("GENIE_BACKEND");
  /* ... unless the environment is switched off. */
  EXPECT_OK(genie_config_set_use_env(cfg, 0));
  EXPECT_OK(genie_init(cfg, &c));
  genie_shutdown(c);
  c = NULL;
  unsetenv("GENIE_BACKEND");
  /* The environment overrides the builder. */
  EXPECT_OK(genie_config_set_use_env(cfg, 1));
  EXPECT_OK(genie_config_set_node_id(cfg, "from-builder"));
  setenv("GENIE_NODE_ID", "from-env", 1);
  REQUIRE_OK(genie_init(cfg, &c));
  CHECK(strcmp(genie_context_node_id(c), "from-env") == 0);
  genie_shutdown(c);
  unsetenv("GENIE_NODE_ID");
  genie_config_destroy(cfg);
}

static void test_tensor_errors(void) {
  genie_tensor_t *t = NULL;
  const int64_t neg[2] = {2, -3};
  const int64_t huge[3] = {INT64_C(1) << 40, INT64_C(1) << 40, 16};
  const int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  const int64_t s[1] = {4};
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, neg, 2, "cpu", &t));
  EXPECT_DETAIL("negative");
  EXPECT_STATUS(GENIE_ERR_TOO_LARGE, genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, huge, 3, "cpu", &t));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, nine, 9, "cpu", &t));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_tensor_alloc(g_ctx, (genie_dtype_t)42, s, 1, "cpu", &t));
  EXPECT_STATUS(GENIE_ERR_PARSE, genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, s, 1, "tpu:0", &t));
  EXPECT_DETAIL("tpu:0");
  EXPECT_STATUS(GENIE_ERR_PARSE, genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, s, 1, "cpu:x", &t));
  EXPECT_STATUS(GENIE_ERR_UNSUPPORTED, genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, s, 1, "remote:0", &t));
  EXPECT_DETAIL("GENIE_MASTER_ADDR");
  EXPECT_STATUS(GENIE_ERR_UNSUPPORTED, genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, s, 1, "node-b/gpu:1", &t));
  EXPECT_STATUS(GENIE_ERR_UNSUPPORTED, genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, s, 1, "cpu:3", &t));
  CHECK(t == NULL);

  REQUIRE_OK(genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, s, 1, "cpu", &t));
  float buf[8] = {0};
  EXPECT_STATUS(GENIE_ERR_SIZE_MISMATCH, genie_tensor_write(t, 0, buf, 17));
  EXPECT_STATUS(GENIE_ERR_SIZE_MISMATCH, genie_tensor_write(t, 12, buf, 8));
  EXPECT_STATUS(GENIE_ERR_SIZE_MISMATCH, genie_tensor_read(t, SIZE_MAX, buf, 2)); /* offset overflow */
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_tensor_write(t, 0, NULL, 4));
  EXPECT_OK(genie_tensor_write(t, 16, NULL, 0)); /* empty write at the end is fine */
  genie_tensor_destroy(t);
  expect_context_usable();
}

static genie_graph_t *two_inputs(const char *op) {
  genie_graph_t *g = NULL;
  const int64_t s[2] = {2, 3};
  const char *in[2] = {"a", "b"};
  const char *out[1] = {"c"};
  REQUIRE_OK(genie_graph_create(op, &g));
  REQUIRE_OK(genie_graph_add_input(g, "a", GENIE_DTYPE_F32, s, 2));
  REQUIRE_OK(genie_graph_add_input(g, "b", GENIE_DTYPE_F32, s, 2));
  REQUIRE_OK(genie_graph_add_node(g, op, "n", in, 2, out, 1));
  REQUIRE_OK(genie_graph_mark_output(g, "c"));
  return g;
}

static void test_graph_errors(void) {
  genie_graph_t *g = NULL;
  const int64_t s[2] = {2, 3}, s2[2] = {3, 5}, bad[2] = {4, 5};
  const char *ab[2] = {"a", "b"};
  const char *c1[1] = {"c"};
  const char *d1[1] = {"d"};
  const char *cd[1] = {"c"};
  REQUIRE_OK(genie_graph_create("bad", &g));
  REQUIRE_OK(genie_graph_add_input(g, "a", GENIE_DTYPE_F32, s, 2));
  EXPECT_STATUS(GENIE_ERR_INVALID_GRAPH, genie_graph_add_input(g, "a", GENIE_DTYPE_F32, s, 2));
  EXPECT_DETAIL("'a'");
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_graph_add_input(g, "", GENIE_DTYPE_F32, s, 2));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_graph_add_input(g, "z", (genie_dtype_t)0, s, 2));
  EXPECT_STATUS(GENIE_ERR_UNKNOWN_OP, genie_graph_add_node(g, "matmull", "n", ab, 2, c1, 1));
  EXPECT_DETAIL("matmul"); /* suggests the close name */
  EXPECT_STATUS(GENIE_ERR_INVALID_GRAPH, genie_graph_add_node(g, "relu", "n", ab, 2, c1, 1)); /* arity */
  const float k[6] = {0};
  EXPECT_STATUS(GENIE_ERR_SIZE_MISMATCH, genie_graph_add_constant(g, "k", GENIE_DTYPE_F32, s, 2, k, 20));
  EXPECT_STATUS(GENIE_ERR_NOT_FOUND, genie_graph_set_attr_int(g, "ghost", "axis", 1));
  EXPECT_STATUS(GENIE_ERR_NOT_FOUND, genie_graph_set_phase(g, "ghost", GENIE_PHASE_DECODE));
  EXPECT_STATUS(GENIE_ERR_NOT_FOUND, genie_graph_set_role(g, "ghost", GENIE_TENSOR_ROLE_WEIGHT));

  /* Dangling input. */
  REQUIRE_OK(genie_graph_add_node(g, "add", "n", ab, 2, c1, 1));
  REQUIRE_OK(genie_graph_mark_output(g, "c"));
  EXPECT_STATUS(GENIE_ERR_INVALID_GRAPH, genie_graph_mark_output(g, "c"));
  EXPECT_STATUS(GENIE_ERR_INVALID_ATTRIBUTE, genie_graph_set_attr_int(g, "n", "axis", 1));
  EXPECT_STATUS(GENIE_ERR_INVALID_GRAPH, genie_graph_validate(g));
  EXPECT_DETAIL("'b'");
  /* Shape mismatch names the node. */
  REQUIRE_OK(genie_graph_add_input(g, "b", GENIE_DTYPE_F32, bad, 2));
  EXPECT_STATUS(GENIE_ERR_SHAPE_MISMATCH, genie_graph_validate(g));
  EXPECT_DETAIL("'n'");
  genie_graph_destroy(g);

  /* dtype mismatch */
  REQUIRE_OK(genie_graph_create("dtypes", &g));
  REQUIRE_OK(genie_graph_add_input(g, "a", GENIE_DTYPE_F32, s, 2));
  REQUIRE_OK(genie_graph_add_input(g, "b", GENIE_DTYPE_I32, s, 2));
  REQUIRE_OK(genie_graph_add_node(g, "add", "n", ab, 2, c1, 1));
  REQUIRE_OK(genie_graph_mark_output(g, "c"));
  EXPECT_STATUS(GENIE_ERR_DTYPE_MISMATCH, genie_graph_validate(g));
  genie_graph_destroy(g);

  /* Cycle: c = add(a, d); d = relu(c). */
  REQUIRE_OK(genie_graph_create("cycle", &g));
  REQUIRE_OK(genie_graph_add_input(g, "a", GENIE_DTYPE_F32, s, 2));
  const char *ad[2] = {"a", "d"};
  REQUIRE_OK(genie_graph_add_node(g, "add", "n1", ad, 2, c1, 1));
  REQUIRE_OK(genie_graph_add_node(g, "relu", "n2", cd, 1, d1, 1));
  REQUIRE_OK(genie_graph_mark_output(g, "d"));
  EXPECT_STATUS(GENIE_ERR_INVALID_GRAPH, genie_graph_validate(g));
  EXPECT_DETAIL("cycle");
  genie_graph_destroy(g);

  /* No outputs. */
  REQUIRE_OK(genie_graph_create("empty", &g));
  EXPECT_STATUS(GENIE_ERR_INVALID_GRAPH, genie_graph_validate(g));
  genie_graph_destroy(g);

  /* Missing required attribute; overflowing reshape. */
  REQUIRE_OK(genie_graph_create("attrs", &g));
  REQUIRE_OK(genie_graph_add_input(g, "a", GENIE_DTYPE_F32, s, 2));
  const char *a1[1] = {"a"};
  REQUIRE_OK(genie_graph_add_node(g, "reshape", "r", a1, 1, c1, 1));
  REQUIRE_OK(genie_graph_mark_output(g, "c"));
  EXPECT_STATUS(GENIE_ERR_INVALID_ATTRIBUTE, genie_graph_validate(g));
  EXPECT_DETAIL("shape");
  EXPECT_STATUS(GENIE_ERR_INVALID_ATTRIBUTE, genie_graph_set_attr_float(g, "r", "shape", 1.0));
  const int64_t huge[3] = {INT64_C(1) << 40, INT64_C(1) << 40, 1 << 20};
  REQUIRE_OK(genie_graph_set_attr_ints(g, "r", "shape", huge, 3));
  genie_status_t st = genie_graph_validate(g);
  CHECK(st == GENIE_ERR_TOO_LARGE || st == GENIE_ERR_SHAPE_MISMATCH);
  int64_t ok_shape[1] = {6};
  REQUIRE_OK(genie_graph_set_attr_ints(g, "r", "shape", ok_shape, 1));
  EXPECT_OK(genie_graph_validate(g));
  genie_graph_destroy(g);

  /* Submission errors: unbound, unknown, twice bound, wrong dtype, wrong shape. */
  g = two_inputs("matmul");
  genie_tensor_t *ta = NULL, *tb = NULL, *ti = NULL, *tw = NULL;
  genie_future_t *f = NULL;
  REQUIRE_OK(genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, s, 2, "cpu", &ta));
  REQUIRE_OK(genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, s2, 2, "cpu", &tb));
  REQUIRE_OK(genie_tensor_alloc(g_ctx, GENIE_DTYPE_I32, s, 2, "cpu", &ti));
  REQUIRE_OK(genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, bad, 2, "cpu", &tw));
  genie_tensor_t *only_a[1] = {ta};
  EXPECT_STATUS(GENIE_ERR_INVALID_GRAPH, genie_graph_submit(g_ctx, g, ab, only_a, 1, &f));
  EXPECT_DETAIL("'b'");
  const char *ghost[2] = {"a", "ghost"};
  genie_tensor_t *pair[2] = {ta, tb};
  EXPECT_STATUS(GENIE_ERR_INVALID_GRAPH, genie_graph_submit(g_ctx, g, ghost, pair, 2, &f));
  const char *twice[2] = {"a", "a"};
  EXPECT_STATUS(GENIE_ERR_INVALID_GRAPH, genie_graph_submit(g_ctx, g, twice, pair, 2, &f));
  genie_tensor_t *wrong_dtype[2] = {ti, tb};
  EXPECT_STATUS(GENIE_ERR_DTYPE_MISMATCH, genie_graph_submit(g_ctx, g, ab, wrong_dtype, 2, &f));
  genie_tensor_t *wrong_shape[2] = {ta, tw};
  EXPECT_STATUS(GENIE_ERR_SHAPE_MISMATCH, genie_graph_submit(g_ctx, g, ab, wrong_shape, 2, &f));
  /* Matmul of [2,3] @ [2,3] (declared) fails validation at submit. */
  genie_tensor_t *same[2] = {ta, ta};
  EXPECT_STATUS(GENIE_ERR_SHAPE_MISMATCH, genie_graph_submit(g_ctx, g, ab, same, 2, &f));
  CHECK(f == NULL);
  genie_graph_destroy(g);
  genie_tensor_destroy(ta);
  genie_tensor_destroy(tb);
  genie_tensor_destroy(ti);
  genie_tensor_destroy(tw);
  expect_context_usable();
}

static void test_execution_errors(void) {
  /* An embedding id outside the table fails at execution: the future
   * reports it, naming the node; nothing is leaked. */
  genie_graph_t *g = NULL;
  const int64_t ids_s[1] = {3}, tab_s[2] = {4, 2};
  const char *in[2] = {"ids", "table"};
  const char *out[1] = {"e"};
  REQUIRE_OK(genie_graph_create("emb", &g));
  REQUIRE_OK(genie_graph_add_input(g, "ids", GENIE_DTYPE_I64, ids_s, 1));
  REQUIRE_OK(genie_graph_add_input(g, "table", GENIE_DTYPE_F32, tab_s, 2));
  REQUIRE_OK(genie_graph_add_node(g, "embedding", "lookup", in, 2, out, 1));
  REQUIRE_OK(genie_graph_mark_output(g, "e"));
  genie_tensor_t *ti = NULL, *tt = NULL, *te = NULL;
  REQUIRE_OK(genie_tensor_alloc(g_ctx, GENIE_DTYPE_I64, ids_s, 1, "cpu", &ti));
  REQUIRE_OK(genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, tab_s, 2, "cpu", &tt));
  const int64_t ids[3] = {0, 7, 1};
  REQUIRE_OK(genie_tensor_write(ti, 0, ids, sizeof ids));
  genie_tensor_t *ins[2] = {ti, tt};
  genie_future_t *f = NULL;
  REQUIRE_OK(genie_graph_submit(g_ctx, g, in, ins, 2, &f));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_future_wait(f, -1));
  EXPECT_DETAIL("lookup");
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_future_poll(f));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_future_output(f, 0, &te));
  CHECK(te == NULL);
  genie_future_destroy(f);
  genie_tensor_destroy(ti);
  genie_tensor_destroy(tt);
  genie_graph_destroy(g);
  expect_context_usable();
}

static void test_json_errors(void) {
  genie_graph_t *g = NULL;
  const char *cases[] = {
      "",
      "{",
      "[1,2,3]",
      "{\"format\":\"genie-graph\"",
      "{\"nodes\":42}",
      "not json at all",
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    EXPECT_STATUS(GENIE_ERR_PARSE, genie_graph_from_json(cases[i], strlen(cases[i]), &g));
    CHECK(g == NULL);
  }
  /* Text not NUL-terminated within len is fine: only len bytes are read. */
  char buf[4] = {'{', '}', 'x', 'x'};
  genie_status_t st = genie_graph_from_json(buf, 1, &g);
  CHECK(st == GENIE_ERR_PARSE && g == NULL);
}

static void test_wait_timeout(void) {
  /* A chain of large matmuls: a wait of 0 ms must time out, leaving the
   * future valid; then it completes. Destroying a running future is safe. */
  genie_graph_t *g = NULL;
  const int64_t s[2] = {1024, 1024};
  REQUIRE_OK(genie_graph_create("slow", &g));
  REQUIRE_OK(genie_graph_add_input(g, "m0", GENIE_DTYPE_F32, s, 2));
  char in_name[16], out_name[16], node_name[16];
  for (int i = 0; i < 6; ++i) {
    snprintf(in_name, sizeof in_name, "m%d", i);
    snprintf(out_name, sizeof out_name, "m%d", i + 1);
    snprintf(node_name, sizeof node_name, "mm%d", i);
    const char *in[2] = {in_name, in_name};
    const char *out[1] = {out_name};
    REQUIRE_OK(genie_graph_add_node(g, "matmul", node_name, in, 2, out, 1));
  }
  REQUIRE_OK(genie_graph_mark_output(g, "m6"));
  genie_tensor_t *t = NULL;
  REQUIRE_OK(genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, s, 2, "cpu", &t));
  const char *names[1] = {"m0"};
  genie_future_t *f1 = NULL, *f2 = NULL;
  REQUIRE_OK(genie_graph_submit(g_ctx, g, names, &t, 1, &f1));
  REQUIRE_OK(genie_graph_submit(g_ctx, g, names, &t, 1, &f2));
  EXPECT_STATUS(GENIE_ERR_TIMEOUT, genie_future_wait(f1, 0));
  EXPECT_STATUS(GENIE_IN_PROGRESS, genie_future_poll(f1));
  genie_tensor_t *out = NULL;
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_future_output(f1, 0, &out));
  EXPECT_DETAIL("not completed");
  genie_tensor_destroy(t); /* the running graphs hold their own reference */
  genie_future_destroy(f2); /* still running: finishes in the background */
  EXPECT_OK(genie_future_wait(f1, -1));
  genie_future_destroy(f1);
  genie_graph_destroy(g);
}

/* Stale handles. A destroyed handle must be refused with INVALID_HANDLE even
 * after the allocator has reused its object's memory for a new object of the
 * same kind, and the new object must not be touched. With handles that were
 * addresses, a new object usually came back at the destroyed one's address:
 * its handle compared equal to the stale one, and a call with the stale
 * handle wrote into the new object. Each case destroys a handle, makes many
 * new objects of the kind (so the memory is reused), and then checks that
 * no new handle equals the stale one, that the stale one is refused
 * (destroying it again does nothing), and that every new object is intact. */
#define STALE_ROUNDS 64

static void test_stale_tensor(void) {
  const int64_t s[1] = {4};
  genie_tensor_t *stale = NULL, *fresh[STALE_ROUNDS] = {NULL};
  REQUIRE_OK(genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, s, 1, "cpu", &stale));
  genie_tensor_destroy(stale);
  for (int i = 0; i < STALE_ROUNDS; ++i) {
    /* Churn first: free memory of the size of a tensor object many times. */
    genie_tensor_t *tmp = NULL;
    REQUIRE_OK(genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, s, 1, "cpu", &tmp));
    CHECK(tmp != stale);
    genie_tensor_destroy(tmp);
    REQUIRE_OK(genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, s, 1, "cpu", &fresh[i]));
    CHECK(fresh[i] != stale);
    const float v[4] = {(float)i, (float)i, (float)i, (float)i};
    REQUIRE_OK(genie_tensor_write(fresh[i], 0, v, sizeof v));
  }
  const float junk[4] = {-7, -7, -7, -7};
  float back[4] = {0};
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_tensor_write(stale, 0, junk, sizeof junk));
  EXPECT_DETAIL("destroyed");
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_tensor_read(stale, 0, back, sizeof back));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_tensor_info(stale, NULL, NULL, NULL, NULL));
  CHECK(genie_tensor_device(stale) == NULL);
  genie_tensor_t *bind[1] = {stale};
  const char *name[1] = {"a"};
  genie_graph_t *g = NULL;
  genie_future_t *f = NULL;
  REQUIRE_OK(genie_graph_create("stale", &g));
  REQUIRE_OK(genie_graph_add_input(g, "a", GENIE_DTYPE_F32, s, 1));
  const char *out[1] = {"b"};
  REQUIRE_OK(genie_graph_add_node(g, "relu", "r", name, 1, out, 1));
  REQUIRE_OK(genie_graph_mark_output(g, "b"));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_graph_submit(g_ctx, g, name, bind, 1, &f));
  CHECK(f == NULL);
  genie_graph_destroy(g);
  genie_tensor_destroy(stale); /* already destroyed: nothing happens */
  for (int i = 0; i < STALE_ROUNDS; ++i) {
    EXPECT_OK(genie_tensor_read(fresh[i], 0, back, sizeof back));
    CHECK(back[0] == (float)i && back[3] == (float)i);
    genie_tensor_destroy(fresh[i]);
  }
}

static void test_stale_config(void) {
  genie_config_t *stale = NULL, *fresh[STALE_ROUNDS] = {NULL};
  genie_context_t *c = NULL;
  REQUIRE_OK(genie_config_create(&stale));
  genie_config_destroy(stale);
  for (int i = 0; i < STALE_ROUNDS; ++i) {
    REQUIRE_OK(genie_config_create(&fresh[i]));
    CHECK(fresh[i] != stale);
    REQUIRE_OK(genie_config_set_use_env(fresh[i], 0));
    REQUIRE_OK(genie_config_set_node_id(fresh[i], "fresh-node"));
  }
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_config_set_node_id(stale, "stale-node"));
  EXPECT_DETAIL("destroyed");
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_config_set_role(stale, GENIE_NODE_ROLE_WORKER));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_init(stale, &c));
  CHECK(c == NULL);
  genie_config_destroy(stale);
  /* The newest config (most likely at the stale one's address) kept its
   * own node id. */
  REQUIRE_OK(genie_init(fresh[STALE_ROUNDS - 1], &c));
  CHECK(strcmp(genie_context_node_id(c), "fresh-node") == 0);
  genie_shutdown(c);
  for (int i = 0; i < STALE_ROUNDS; ++i) genie_config_destroy(fresh[i]);
}

static void test_stale_context(void) {
  enum { N = 8 }; /* contexts start threads: fewer rounds */
  const int64_t s[1] = {2};
  genie_context_t *stale = embedded_context(1), *fresh[N] = {NULL};
  genie_shutdown(stale);
  for (int i = 0; i < N; ++i) {
    fresh[i] = embedded_context(1);
    CHECK(fresh[i] != stale);
  }
  genie_tensor_t *t = NULL;
  int connected = -5;
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_tensor_alloc(stale, GENIE_DTYPE_F32, s, 1, "cpu", &t));
  EXPECT_DETAIL("destroyed");
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_context_is_connected(stale, &connected));
  CHECK(t == NULL && connected == -5);
  CHECK(genie_is_initialized(stale) == 0);
  CHECK(genie_context_is_embedded(stale) == -1);
  CHECK(genie_context_node_id(stale) == NULL);
  genie_shutdown(stale); /* already shut down: nothing happens */
  for (int i = 0; i < N; ++i) {
    CHECK(genie_is_initialized(fresh[i]) == 1);
    EXPECT_OK(genie_tensor_alloc(fresh[i], GENIE_DTYPE_F32, s, 1, "cpu", &t));
    genie_tensor_destroy(t);
    genie_shutdown(fresh[i]);
  }
}

static genie_graph_t *one_input_graph(const char *input) {
  genie_graph_t *g = NULL;
  const int64_t s[1] = {3};
  REQUIRE_OK(genie_graph_create("g", &g));
  REQUIRE_OK(genie_graph_add_input(g, input, GENIE_DTYPE_F32, s, 1));
  return g;
}

static void test_stale_graph(void) {
  genie_graph_t *stale = one_input_graph("old"), *fresh[STALE_ROUNDS] = {NULL};
  genie_graph_destroy(stale);
  for (int i = 0; i < STALE_ROUNDS; ++i) {
    fresh[i] = one_input_graph("new");
    CHECK(fresh[i] != stale);
  }
  const int64_t s[1] = {3};
  size_t n = 99;
  const char *name = NULL;
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_graph_add_input(stale, "intruder", GENIE_DTYPE_F32, s, 1));
  EXPECT_DETAIL("destroyed");
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_graph_num_inputs(stale, &n));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_graph_node_name(stale, 0, &name));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_graph_validate(stale));
  CHECK(n == 99 && name == NULL);
  genie_graph_destroy(stale);
  for (int i = 0; i < STALE_ROUNDS; ++i) {
    EXPECT_OK(genie_graph_num_inputs(fresh[i], &n));
    CHECK(n == 1);
    EXPECT_OK(genie_graph_input_name(fresh[i], 0, &name));
    CHECK(name != NULL && strcmp(name, "new") == 0);
    genie_graph_destroy(fresh[i]);
  }
}

/* A completed future of relu(x) with x = {v, v, v}. */
static genie_future_t *relu_future(genie_graph_t *g, float v) {
  const int64_t s[1] = {3};
  const float x[3] = {v, v, v};
  const char *name[1] = {"x"};
  genie_tensor_t *t = NULL;
  genie_future_t *f = NULL;
  REQUIRE_OK(genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, s, 1, "cpu", &t));
  REQUIRE_OK(genie_tensor_write(t, 0, x, sizeof x));
  REQUIRE_OK(genie_graph_submit(g_ctx, g, name, &t, 1, &f));
  genie_tensor_destroy(t);
  REQUIRE_OK(genie_future_wait(f, -1));
  return f;
}

static void test_stale_future(void) {
  enum { N = 16 };
  genie_graph_t *g = one_input_graph("x");
  const char *in[1] = {"x"}, *out[1] = {"y"};
  REQUIRE_OK(genie_graph_add_node(g, "relu", "r", in, 1, out, 1));
  REQUIRE_OK(genie_graph_mark_output(g, "y"));
  genie_future_t *stale = relu_future(g, 100), *fresh[N] = {NULL};
  genie_future_destroy(stale);
  for (int i = 0; i < N; ++i) {
    fresh[i] = relu_future(g, (float)i);
    CHECK(fresh[i] != stale);
  }
  genie_tensor_t *t = NULL;
  size_t n = 99;
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_future_wait(stale, 0));
  EXPECT_DETAIL("destroyed");
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_future_poll(stale));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_future_num_outputs(stale, &n));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_future_output(stale, 0, &t));
  CHECK(t == NULL && n == 99);
  genie_future_destroy(stale);
  for (int i = 0; i < N; ++i) {
    float y[3] = {-1, -1, -1};
    REQUIRE_OK(genie_future_output(fresh[i], 0, &t));
    EXPECT_OK(genie_tensor_read(t, 0, y, sizeof y));
    CHECK(y[0] == (float)i && y[2] == (float)i);
    genie_tensor_destroy(t);
    genie_future_destroy(fresh[i]);
  }
  genie_graph_destroy(g);
}

static void test_stale_server(void) {
  enum { N = 4 }; /* servers bind ports and start threads: fewer rounds */
  genie_server_t *stale = NULL, *fresh[N] = {NULL};
  int32_t port = -1;
  REQUIRE_OK(genie_server_create(NULL, "127.0.0.1", 0, &stale));
  genie_server_destroy(stale);
  for (int i = 0; i < N; ++i) {
    REQUIRE_OK(genie_server_create(NULL, "127.0.0.1", 0, &fresh[i]));
    CHECK(fresh[i] != stale);
  }
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_server_port(stale, &port));
  EXPECT_DETAIL("destroyed");
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_server_stop(stale));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_server_wait(stale));
  CHECK(port == -1);
  genie_server_destroy(stale);
  for (int i = 0; i < N; ++i) {
    EXPECT_OK(genie_server_port(fresh[i], &port));
    CHECK(port > 0);
    genie_server_destroy(fresh[i]);
  }
}

static void on_event(genie_event_type_t type, const char *json, void *user) {
  (void)type;
  (void)json;
  (void)user;
}

static void test_stale_subscription(void) {
  uint64_t old_id = 0, new_id = 0;
  REQUIRE_OK(genie_subscribe(g_ctx, GENIE_EVENT_NODE_LOST, on_event, NULL, &old_id));
  REQUIRE_OK(genie_unsubscribe(g_ctx, old_id));
  REQUIRE_OK(genie_subscribe(g_ctx, GENIE_EVENT_NODE_LOST, on_event, NULL, &new_id));
  CHECK(new_id != old_id);
  EXPECT_STATUS(GENIE_ERR_NOT_FOUND, genie_unsubscribe(g_ctx, old_id));
  EXPECT_OK(genie_unsubscribe(g_ctx, new_id)); /* the stale id did not end the new one */
}

/* The two role enumerations have no value in common: each is refused where
 * the other is expected. */
static void test_role_enums(void) {
  genie_config_t *cfg = NULL;
  genie_graph_t *g = one_input_graph("a");
  REQUIRE_OK(genie_config_create(&cfg));
  const genie_tensor_role_t tensor_roles[] = {GENIE_TENSOR_ROLE_UNSPECIFIED, GENIE_TENSOR_ROLE_WEIGHT,
                                              GENIE_TENSOR_ROLE_ACTIVATION,  GENIE_TENSOR_ROLE_KV_CACHE,
                                              GENIE_TENSOR_ROLE_INPUT,       GENIE_TENSOR_ROLE_OUTPUT};
  const genie_node_role_t node_roles[] = {GENIE_NODE_ROLE_CLIENT, GENIE_NODE_ROLE_SERVER,
                                          GENIE_NODE_ROLE_WORKER};
  for (size_t i = 0; i < sizeof tensor_roles / sizeof tensor_roles[0]; ++i) {
    EXPECT_OK(genie_graph_set_role(g, "a", tensor_roles[i]));
    EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_role(cfg, (genie_node_role_t)tensor_roles[i]));
    EXPECT_DETAIL("genie_node_role_t");
  }
  for (size_t i = 0; i < sizeof node_roles / sizeof node_roles[0]; ++i) {
    EXPECT_OK(genie_config_set_role(cfg, node_roles[i]));
    EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT,
                  genie_graph_set_role(g, "a", (genie_tensor_role_t)node_roles[i]));
    EXPECT_DETAIL("genie_tensor_role_t");
  }
  genie_config_destroy(cfg);
  genie_graph_destroy(g);
}

/* How many "shape" members of `json` are [] (whatever the spacing). */
static int count_empty_shapes(const char *json) {
  int n = 0;
  for (const char *p = strstr(json, "\"shape\":"); p; p = strstr(p + 1, "\"shape\":")) {
    const char *v = p + strlen("\"shape\":");
    while (*v == ' ' || *v == '\t' || *v == '\n') ++v;
    if (v[0] == '[') {
      ++v;
      while (*v == ' ' || *v == '\t' || *v == '\n') ++v;
      if (*v == ']') ++n;
    }
  }
  return n;
}

/* The header's shape rule (Shapes at the top of genie.h), at every function
 * that takes or returns a shape: ndim 0 is a scalar and `shape` may then be
 * NULL; NULL with ndim > 0, ndim > GENIE_MAX_DIMS and negative dimensions
 * are refused (only graph inputs take -1); a 0 dimension is an empty
 * tensor; a scalar's shape is returned as ndim 0 with the array untouched,
 * and written as [] in JSON. */
static void test_shape_rule(void) {
  const int64_t s3[1] = {3}, dyn[1] = {-1}, minus2[1] = {-2}, empty[2] = {0, 3};
  const int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  int64_t dims[GENIE_MAX_DIMS] = {-9, -9};
  size_t nd = 99, nb = 99;
  genie_dtype_t dt = GENIE_DTYPE_BOOL;
  genie_tensor_t *t = NULL;

  /* genie_tensor_alloc / genie_tensor_info */
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, NULL, 1, "cpu", &t));
  EXPECT_DETAIL("shape is NULL");
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, dyn, 1, "cpu", &t));
  EXPECT_DETAIL("negative");
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, nine, 9, "cpu", &t));
  EXPECT_DETAIL("GENIE_MAX_DIMS");
  CHECK(t == NULL);
  REQUIRE_OK(genie_tensor_alloc(g_ctx, GENIE_DTYPE_I64, NULL, 0, "cpu", &t));
  EXPECT_OK(genie_tensor_info(t, &dt, dims, &nd, &nb));
  CHECK(dt == GENIE_DTYPE_I64 && nd == 0 && nb == 8 && dims[0] == -9);
  genie_tensor_destroy(t);
  t = NULL;
  REQUIRE_OK(genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, s3, 0, "cpu", &t)); /* shape ignored with ndim 0 */
  EXPECT_OK(genie_tensor_info(t, NULL, dims, &nd, &nb));
  CHECK(nd == 0 && nb == 4 && dims[0] == -9);
  genie_tensor_destroy(t);
  REQUIRE_OK(genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, empty, 2, "cpu", &t));
  EXPECT_OK(genie_tensor_info(t, NULL, dims, &nd, &nb));
  CHECK(nd == 2 && nb == 0 && dims[0] == 0 && dims[1] == 3);
  EXPECT_OK(genie_tensor_write(t, 0, NULL, 0));
  EXPECT_STATUS(GENIE_ERR_SIZE_MISMATCH, genie_tensor_write(t, 0, dims, 1));
  genie_tensor_destroy(t);

  /* genie_graph_add_input / genie_graph_add_constant */
  genie_graph_t *g = NULL;
  const float two = 2, three[3] = {1, 2, 3};
  REQUIRE_OK(genie_graph_create("shapes", &g));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_graph_add_input(g, "i", GENIE_DTYPE_F32, NULL, 1));
  EXPECT_DETAIL("shape is NULL");
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_graph_add_input(g, "i", GENIE_DTYPE_F32, minus2, 1));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_graph_add_input(g, "i", GENIE_DTYPE_F32, nine, 9));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT,
                genie_graph_add_constant(g, "k", GENIE_DTYPE_F32, NULL, 1, three, 4));
  EXPECT_DETAIL("shape is NULL");
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT,
                genie_graph_add_constant(g, "k", GENIE_DTYPE_F32, dyn, 1, three, 4));
  EXPECT_STATUS(GENIE_ERR_SIZE_MISMATCH,
                genie_graph_add_constant(g, "k", GENIE_DTYPE_F32, NULL, 0, three, 12));
  REQUIRE_OK(genie_graph_add_input(g, "d", GENIE_DTYPE_F32, dyn, 1)); /* only inputs take -1 */
  genie_graph_destroy(g);
  REQUIRE_OK(genie_graph_create("shapes", &g));
  REQUIRE_OK(genie_graph_add_input(g, "x", GENIE_DTYPE_F32, s3, 1));
  REQUIRE_OK(genie_graph_add_input(g, "s", GENIE_DTYPE_F32, NULL, 0)); /* scalar input */
  REQUIRE_OK(genie_graph_add_constant(g, "k", GENIE_DTYPE_F32, NULL, 0, &two, sizeof two));
  const char *xs[2] = {"x", "s"}, *xsk[2] = {"xs", "k"}, *o1[1] = {"xs"}, *o2[1] = {"y"};
  REQUIRE_OK(genie_graph_add_node(g, "mul", "m", xs, 2, o1, 1));
  REQUIRE_OK(genie_graph_add_node(g, "add", "a", xsk, 2, o2, 1));
  REQUIRE_OK(genie_graph_mark_output(g, "y"));
  REQUIRE_OK(genie_graph_validate(g));
  dims[0] = -9;
  nd = 99;
  EXPECT_OK(genie_graph_value_info(g, "k", &dt, dims, &nd));
  CHECK(dt == GENIE_DTYPE_F32 && nd == 0 && dims[0] == -9);
  EXPECT_OK(genie_graph_value_info(g, "s", NULL, dims, &nd));
  CHECK(nd == 0 && dims[0] == -9);

  /* JSON: a scalar's shape is [], and it comes back a scalar. */
  char *json = NULL;
  size_t len = 0;
  genie_graph_t *back = NULL;
  REQUIRE_OK(genie_graph_to_json(g, &json, &len));
  CHECK(count_empty_shapes(json) == 2); /* s and k */
  REQUIRE_OK(genie_graph_from_json(json, len, &back));
  REQUIRE_OK(genie_graph_validate(back));
  nd = 99;
  EXPECT_OK(genie_graph_value_info(back, "s", NULL, dims, &nd));
  CHECK(nd == 0 && dims[0] == -9);
  genie_free(json);

  /* Run it: y = x * s + k with a scalar tensor bound to s. */
  genie_tensor_t *in[2] = {NULL, NULL}, *y = NULL;
  genie_future_t *f = NULL;
  const float sv = 10;
  float out[3] = {0};
  REQUIRE_OK(genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, s3, 1, "cpu", &in[0]));
  REQUIRE_OK(genie_tensor_write(in[0], 0, three, sizeof three));
  REQUIRE_OK(genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, NULL, 0, "cpu", &in[1]));
  REQUIRE_OK(genie_tensor_write(in[1], 0, &sv, sizeof sv));
  REQUIRE_OK(genie_graph_submit(g_ctx, back, xs, in, 2, &f));
  REQUIRE_OK(genie_future_wait(f, -1));
  REQUIRE_OK(genie_future_output(f, 0, &y));
  EXPECT_OK(genie_tensor_info(y, NULL, dims, &nd, &nb));
  CHECK(nd == 1 && dims[0] == 3 && nb == sizeof out);
  EXPECT_OK(genie_tensor_read(y, 0, out, sizeof out));
  CHECK(out[0] == 12 && out[1] == 22 && out[2] == 32);
  genie_tensor_destroy(y);
  genie_future_destroy(f);
  genie_tensor_destroy(in[0]);
  genie_tensor_destroy(in[1]);
  genie_graph_destroy(back);
  genie_graph_destroy(g);

  /* The JSON form refuses what the C calls refuse. */
  static const char neg_const[] =
      "{\"name\":\"j\",\"inputs\":[],\"constants\":[{\"name\":\"k\",\"dtype\":\"f32\",\"shape\":[-1],"
      "\"data\":\"\"}],\"nodes\":[],\"outputs\":[]}";
  back = NULL;
  CHECK(genie_graph_from_json(neg_const, sizeof neg_const - 1, &back) != GENIE_OK);
  CHECK(back == NULL);
  expect_context_usable();
}

int main(void) {
  g_ctx = embedded_context(0);
  test_null_and_wrong_handles();
  test_config_and_init();
  test_tensor_errors();
  test_graph_errors();
  test_execution_errors();
  test_json_errors();
  test_wait_timeout();
  test_stale_tensor();
  test_stale_config();
  test_stale_context();
  test_stale_graph();
  test_stale_future();
  test_stale_server();
  test_stale_subscription();
  test_role_enums();
  test_shape_rule();
  expect_context_usable();
  genie_shutdown(g_ctx);
  return test_summary("api_bad_input_test");
}
