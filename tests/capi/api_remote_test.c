/* Remote mode through genie.h alone: a server in this process
 * (genie_server_create), a client context pointed at it, and the same calls
 * as embedded mode — with the same results. */
#include <math.h>
#include <stdint.h>
#include <time.h>

#include "check.h"
#include "mlp_graph.h"

/* s = a + a, for feeding an output into a second graph. */
static genie_graph_t *build_double(void) {
  genie_graph_t *g = NULL;
  const int64_t zs[2] = {2, -1};
  const char *add_in[2] = {"a", "a"};
  const char *add_out[1] = {"s"};
  REQUIRE_OK(genie_graph_create("double", &g));
  REQUIRE_OK(genie_graph_add_input(g, "a", GENIE_DTYPE_F32, zs, 2));
  REQUIRE_OK(genie_graph_add_node(g, "add", "dbl", add_in, 2, add_out, 1));
  REQUIRE_OK(genie_graph_mark_output(g, "s"));
  return g;
}

static float g_x[6], g_w[12];

static void init_inputs(void) {
  for (int i = 0; i < 6; ++i) g_x[i] = (float)(i - 2) * 0.5f;
  for (int i = 0; i < 12; ++i) g_w[i] = (float)((i * 7) % 5 - 2) * 0.25f;
}

static genie_config_t *config_for(int32_t port, int64_t timeout_ms) {
  genie_config_t *cfg = NULL;
  REQUIRE_OK(genie_config_create(&cfg));
  REQUIRE_OK(genie_config_set_use_env(cfg, 0));
  REQUIRE_OK(genie_config_set_num_threads(cfg, 2));
  if (port > 0) {
    REQUIRE_OK(genie_config_set_master_addr(cfg, "127.0.0.1"));
    REQUIRE_OK(genie_config_set_master_port(cfg, port));
  }
  REQUIRE_OK(genie_config_set_timeout_ms(cfg, timeout_ms));
  return cfg;
}

/* Runs the MLP on ctx and returns z (8 floats) in out; tensors from `device`. */
static void run_mlp(genie_context_t *ctx, const char *device, float *out) {
  const int64_t xs[2] = {2, 3}, ws[2] = {4, 3};
  genie_tensor_t *tx = NULL, *tw = NULL, *tz = NULL;
  REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, xs, 2, device, &tx));
  REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, ws, 2, device, &tw));
  EXPECT_OK(genie_tensor_write(tx, 0, g_x, sizeof g_x));
  EXPECT_OK(genie_tensor_write(tw, 0, g_w, 24));
  EXPECT_OK(genie_tensor_write(tw, 24, (const char *)g_w + 24, 24));
  genie_graph_t *g = build_mlp("mlp");
  const char *names[2] = {"x", "w"};
  genie_tensor_t *ins[2] = {tx, tw};
  genie_future_t *f = NULL;
  REQUIRE_OK(genie_graph_submit(ctx, g, names, ins, 2, &f));
  genie_graph_destroy(g);
  genie_tensor_destroy(tx); /* the submission holds its own reference */
  genie_tensor_destroy(tw);
  EXPECT_OK(genie_future_wait(f, 10000));
  REQUIRE_OK(genie_future_output(f, 0, &tz));
  EXPECT_OK(genie_tensor_read(tz, 0, out, 8 * sizeof(float)));
  genie_tensor_destroy(tz);
  genie_future_destroy(f);
}

/* Pulls "key": N out of flat JSON; -1 if absent. */
static long json_number(const char *json, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(json, pat);
  return p ? strtol(p + strlen(pat), NULL, 10) : -1;
}

static long server_count(genie_context_t *ctx, const char *key) {
  char *json = NULL;
  if (genie_context_server_info(ctx, &json) != GENIE_OK) return -2;
  const long n = json_number(json, key);
  genie_free(json);
  return n;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

typedef struct {
  int calls;
  genie_status_t status;
  genie_status_t read_status; /* a blocking remote call from the callback */
} cb_record_t;

static void on_done(genie_future_t *f, genie_status_t status, void *user) {
  cb_record_t *r = (cb_record_t *)user;
  genie_tensor_t *t = NULL;
  float v[8];
  r->status = status;
  if (genie_future_output(f, 0, &t) == GENIE_OK) {
    r->read_status = genie_tensor_read(t, 0, v, sizeof v);
    genie_tensor_destroy(t);
  }
  __atomic_store_n(&r->calls, r->calls + 1, __ATOMIC_RELEASE);
}

/* Resubmitting one graph handle (the client keeps its snapshot and JSON
 * while the graph is unchanged, the server its parsed graph): other bound
 * shapes and a changed graph are honoured, and many submissions from one
 * thread can be in flight at once (remote submit does not wait for the
 * server). Runs on ctx, embedded or remote alike. */
static void check_resubmission(genie_context_t *ctx) {
  enum { kInFlight = 32 };
  genie_graph_t *g = build_double();
  const char *names[1] = {"a"};
  const int64_t s4[2] = {2, 4}, s3[2] = {2, 3};
  genie_tensor_t *a4 = NULL, *a3 = NULL, *out = NULL;
  genie_future_t *f = NULL;
  float v[8], got[8];
  for (int i = 0; i < 8; ++i) v[i] = (float)i - 3.0f;
  REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, s4, 2, NULL, &a4));
  REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, s3, 2, NULL, &a3));
  EXPECT_OK(genie_tensor_write(a4, 0, v, sizeof v));
  EXPECT_OK(genie_tensor_write(a3, 0, v, 6 * sizeof(float)));
  /* {2,4}, {2,3}, {2,4}: each run has its own bound shape. */
  for (int round = 0; round < 3; ++round) {
    genie_tensor_t *a = round == 1 ? a3 : a4;
    const size_t n = round == 1 ? 6 : 8;
    size_t nd = 0;
    int64_t shp[GENIE_MAX_DIMS];
    REQUIRE_OK(genie_graph_submit(ctx, g, names, &a, 1, &f));
    EXPECT_OK(genie_future_wait(f, 10000));
    REQUIRE_OK(genie_future_output(f, 0, &out));
    EXPECT_OK(genie_tensor_info(out, NULL, shp, &nd, NULL));
    CHECK(nd == 2 && shp[1] == (int64_t)n / 2);
    EXPECT_OK(genie_tensor_read(out, 0, got, n * sizeof(float)));
    for (size_t i = 0; i < n; ++i) CHECK(got[i] == 2 * v[i]);
    genie_tensor_destroy(out);
    genie_future_destroy(f);
  }
  /* Changed after submissions: the next one runs the new graph. */
  const char *mul_in[2] = {"s", "a"};
  const char *mul_out[1] = {"t"};
  REQUIRE_OK(genie_graph_add_node(g, "mul", "sq", mul_in, 2, mul_out, 1));
  REQUIRE_OK(genie_graph_mark_output(g, "t"));
  REQUIRE_OK(genie_graph_submit(ctx, g, names, &a4, 1, &f));
  EXPECT_OK(genie_future_wait(f, 10000));
  size_t n_out = 0;
  EXPECT_OK(genie_future_num_outputs(f, &n_out));
  CHECK(n_out == 2);
  REQUIRE_OK(genie_future_output_by_name(f, "t", &out));
  EXPECT_OK(genie_tensor_read(out, 0, got, sizeof got));
  for (int i = 0; i < 8; ++i) CHECK(got[i] == 2 * v[i] * v[i]);
  genie_tensor_destroy(out);
  genie_future_destroy(f);
  /* Many in flight from this thread, each with its own input. */
  genie_tensor_t *ins[kInFlight];
  genie_future_t *fs[kInFlight];
  for (int k = 0; k < kInFlight; ++k) {
    float w[8];
    for (int i = 0; i < 8; ++i) w[i] = (float)(k * 8 + i);
    REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, s4, 2, NULL, &ins[k]));
    EXPECT_OK(genie_tensor_write(ins[k], 0, w, sizeof w));
  }
  for (int k = 0; k < kInFlight; ++k) REQUIRE_OK(genie_graph_submit(ctx, g, names, &ins[k], 1, &fs[k]));
  for (int k = 0; k < kInFlight; ++k) {
    EXPECT_OK(genie_future_wait(fs[k], 10000));
    REQUIRE_OK(genie_future_output_by_name(fs[k], "t", &out));
    EXPECT_OK(genie_tensor_read(out, 0, got, sizeof got));
    for (int i = 0; i < 8; ++i) {
      const float w = (float)(k * 8 + i);
      CHECK(got[i] == 2 * w * w);
    }
    genie_tensor_destroy(out);
    genie_future_destroy(fs[k]);
    genie_tensor_destroy(ins[k]);
  }
  genie_tensor_destroy(a4);
  genie_tensor_destroy(a3);
  genie_graph_destroy(g);
}

static void test_remote(void) {
  genie_config_t *scfg = NULL;
  genie_server_t *srv = NULL;
  int32_t port = 0;
  REQUIRE_OK(genie_config_create(&scfg));
  REQUIRE_OK(genie_config_set_use_env(scfg, 0));
  REQUIRE_OK(genie_config_set_node_id(scfg, "srv-node"));
  REQUIRE_OK(genie_config_set_num_threads(scfg, 2));
  REQUIRE_OK(genie_server_create(scfg, NULL, 0, &srv));
  genie_config_destroy(scfg);
  REQUIRE_OK(genie_server_port(srv, &port));
  CHECK(port > 0);

  /* The reference: embedded mode. */
  float want[8], got[8], got_host[8];
  genie_config_t *ecfg = config_for(0, 10000);
  genie_context_t *emb = NULL;
  REQUIRE_OK(genie_init(ecfg, &emb));
  genie_config_destroy(ecfg);
  run_mlp(emb, NULL, want);
  check_resubmission(emb);
  char *json = NULL;
  EXPECT_STATUS(GENIE_ERR_UNSUPPORTED, genie_context_server_info(emb, &json));
  genie_shutdown(emb);

  genie_config_t *cfg = config_for(port, 10000);
  EXPECT_OK(genie_config_set_node_id(cfg, "client-node"));
  genie_context_t *ctx = NULL;
  REQUIRE_OK(genie_init(cfg, &ctx));
  genie_config_destroy(cfg);
  CHECK(genie_is_initialized(ctx) == 1);
  CHECK(genie_context_is_embedded(ctx) == 0);
  int connected = -1;
  EXPECT_OK(genie_context_is_connected(ctx, &connected));
  CHECK(connected == 1);
  CHECK(server_count(ctx, "sessions") == 1);
  CHECK(server_count(ctx, "tensors") == 0);

  /* Same results as embedded, from server tensors and from host tensors
   * (copied to the server for the submission). */
  run_mlp(ctx, NULL, got);
  CHECK(memcmp(got, want, sizeof want) == 0);
  run_mlp(ctx, "cpu", got_host);
  CHECK(memcmp(got_host, want, sizeof want) == 0);
  check_resubmission(ctx);
  for (int i = 0; i < 2; ++i)
    for (int o = 0; o < 4; ++o) {
      double acc = (double[4]){0.5, -0.5, 1.0, -2.0}[o];
      for (int k = 0; k < 3; ++k) acc += (double)g_x[i * 3 + k] * g_w[o * 3 + k];
      CHECK(fabs(got[i * 4 + o] - (acc > 0 ? acc : 0)) < 1e-5);
    }
  CHECK(server_count(ctx, "tensors") == 0); /* every handle destroyed: freed on the server */

  /* Devices in remote mode. */
  const int64_t s4[1] = {4};
  genie_tensor_t *t = NULL;
  REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, s4, 1, NULL, &t));
  CHECK(strcmp(genie_tensor_device(t), "remote:0") == 0);
  genie_tensor_destroy(t);
  REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, s4, 1, "srv-node/cpu", &t));
  CHECK(strcmp(genie_tensor_device(t), "remote:0") == 0);
  genie_tensor_destroy(t);
  REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, s4, 1, "cpu", &t));
  CHECK(strcmp(genie_tensor_device(t), "cpu:0") == 0);
  genie_tensor_destroy(t);
  EXPECT_STATUS(GENIE_ERR_UNSUPPORTED, genie_tensor_alloc(ctx, GENIE_DTYPE_F32, s4, 1, "remote:1", &t));
  EXPECT_DETAIL("remote:0");
  EXPECT_STATUS(GENIE_ERR_UNSUPPORTED, genie_tensor_alloc(ctx, GENIE_DTYPE_F32, s4, 1, "other/cpu", &t));
  EXPECT_DETAIL("srv-node");
  EXPECT_STATUS(GENIE_ERR_UNSUPPORTED, genie_tensor_alloc(ctx, GENIE_DTYPE_F32, s4, 1, "gpu:0", &t));
  EXPECT_STATUS(GENIE_ERR_PARSE, genie_tensor_alloc(ctx, GENIE_DTYPE_F32, s4, 1, "tpu:0", &t));

  /* Lazy outputs: a future's output feeds the next graph on the server;
   * nothing is read back until asked for. */
  const int64_t xs[2] = {2, 3}, ws[2] = {4, 3};
  genie_tensor_t *tx = NULL, *tw = NULL, *tz = NULL, *tz2 = NULL, *ts = NULL;
  REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, xs, 2, "remote:0", &tx));
  REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, ws, 2, "remote:0", &tw));
  EXPECT_OK(genie_tensor_write(tx, 0, g_x, sizeof g_x));
  EXPECT_OK(genie_tensor_write(tw, 0, g_w, sizeof g_w));
  genie_graph_t *mlp = build_mlp("mlp"), *dbl = build_double();
  const char *names[2] = {"x", "w"};
  genie_tensor_t *ins[2] = {tx, tw};
  genie_future_t *f1 = NULL, *f2 = NULL;
  REQUIRE_OK(genie_graph_submit(ctx, mlp, names, ins, 2, &f1));
  EXPECT_OK(genie_future_wait(f1, 10000));
  REQUIRE_OK(genie_future_output(f1, 0, &tz));
  REQUIRE_OK(genie_future_output_by_name(f1, "z", &tz2)); /* a second handle, same tensor */
  CHECK(strcmp(genie_tensor_device(tz), "remote:0") == 0);
  genie_dtype_t dt = GENIE_DTYPE_INVALID;
  int64_t shp[GENIE_MAX_DIMS];
  size_t nd = 0, nb = 0;
  EXPECT_OK(genie_tensor_info(tz, &dt, shp, &nd, &nb));
  CHECK(dt == GENIE_DTYPE_F32 && nd == 2 && shp[0] == 2 && shp[1] == 4 && nb == 32);
  uint64_t ns = 0;
  EXPECT_OK(genie_future_exec_ns(f1, &ns));
  CHECK(ns > 0);
  genie_future_destroy(f1);
  CHECK(server_count(ctx, "tensors") == 3); /* x, w, z */
  const char *n2[1] = {"a"};
  genie_tensor_t *i2[1] = {tz};
  REQUIRE_OK(genie_graph_submit(ctx, dbl, n2, i2, 1, &f2));
  genie_tensor_destroy(tz); /* tz2 still names it */
  EXPECT_OK(genie_future_wait(f2, 10000));
  REQUIRE_OK(genie_future_output(f2, 0, &ts));
  genie_future_destroy(f2);
  float s[8], z[8];
  EXPECT_OK(genie_tensor_read(ts, 0, s, sizeof s));
  EXPECT_OK(genie_tensor_read(tz2, 0, z, sizeof z));
  CHECK(memcmp(z, want, sizeof z) == 0);
  for (int i = 0; i < 8; ++i) CHECK(s[i] == 2 * want[i]);
  CHECK(server_count(ctx, "tensors") == 4); /* x, w, z, s */
  genie_tensor_destroy(tz2);
  CHECK(server_count(ctx, "tensors") == 3); /* the last handle of z is gone */

  /* Validation happens before anything is sent, with the embedded messages. */
  genie_tensor_t *bad = NULL;
  const int64_t bs[2] = {3, 3};
  REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, bs, 2, NULL, &bad));
  ins[0] = bad;
  EXPECT_STATUS(GENIE_ERR_SHAPE_MISMATCH, genie_graph_submit(ctx, mlp, names, ins, 2, &f1));
  EXPECT_DETAIL("input 'x'");
  genie_tensor_destroy(bad);
  ins[0] = tx;

  /* The completion callback runs on the loop thread; a blocking remote
   * call from it is refused instead of deadlocking. */
  cb_record_t rec = {0, 12345, 12345};
  REQUIRE_OK(genie_graph_submit(ctx, mlp, names, ins, 2, &f1));
  EXPECT_OK(genie_future_set_callback(f1, on_done, &rec));
  EXPECT_OK(genie_future_wait(f1, 10000));
  for (int i = 0; i < 500 && __atomic_load_n(&rec.calls, __ATOMIC_ACQUIRE) == 0; ++i) sleep_ms(10);
  CHECK(rec.calls == 1 && rec.status == GENIE_OK);
  CHECK(rec.read_status == GENIE_ERR_UNSUPPORTED || rec.read_status == GENIE_OK);
  genie_future_destroy(f1);

  /* A graph still running at shutdown completes (or reports SHUTDOWN). */
  REQUIRE_OK(genie_graph_submit(ctx, mlp, names, ins, 2, &f1));
  genie_graph_destroy(mlp);
  genie_graph_destroy(dbl);
  CHECK(server_count(ctx, "tensors") >= 3);
  genie_shutdown(ctx);
  const genie_status_t fs = genie_future_poll(f1);
  CHECK(fs == GENIE_OK || fs == GENIE_ERR_SHUTDOWN);
  genie_future_destroy(f1);
  EXPECT_STATUS(GENIE_ERR_SHUTDOWN, genie_tensor_read(ts, 0, s, sizeof s));
  genie_tensor_destroy(ts);
  genie_tensor_destroy(tx);
  genie_tensor_destroy(tw);

  /* Shutdown said goodbye: the server freed the session's tensors. */
  cfg = config_for(port, 10000);
  REQUIRE_OK(genie_init(cfg, &ctx));
  genie_config_destroy(cfg);
  long left = -1;
  for (int i = 0; i < 200; ++i) {
    left = server_count(ctx, "tensors");
    if (left == 0 && server_count(ctx, "sessions") == 1) break;
    sleep_ms(10);
  }
  CHECK(left == 0);
  CHECK(server_count(ctx, "sessions") == 1);

  /* The server goes away: calls fail with CONNECTION within the timeout, and
   * shutdown does not hang. */
  genie_shutdown(ctx);
  cfg = config_for(port, 1500);
  REQUIRE_OK(genie_init(cfg, &ctx));
  genie_config_destroy(cfg);
  REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, s4, 1, NULL, &t));
  EXPECT_OK(genie_context_is_connected(ctx, &connected));
  CHECK(connected == 1);
  genie_server_destroy(srv);
  double t0 = now_ms();
  float v4[4];
  EXPECT_STATUS(GENIE_ERR_CONNECTION, genie_tensor_read(t, 0, v4, sizeof v4));
  CHECK(now_ms() - t0 < 4000);
  /* The connection is lost, and the query says so without waiting. */
  t0 = now_ms();
  EXPECT_OK(genie_context_is_connected(ctx, &connected));
  CHECK(connected == 0);
  CHECK(now_ms() - t0 < 100);
  t0 = now_ms();
  genie_tensor_destroy(t);
  genie_shutdown(ctx);
  CHECK(now_ms() - t0 < 2000);

  /* Nobody listening: genie_init fails with CONNECTION naming the address. */
  cfg = config_for(port, 1500);
  EXPECT_STATUS(GENIE_ERR_CONNECTION, genie_init(cfg, &ctx));
  char where[64];
  snprintf(where, sizeof where, "127.0.0.1:%d", (int)port);
  EXPECT_DETAIL(where);
  genie_config_destroy(cfg);
}

/* Tokens too short to be secrets are refused; a server reachable from the
 * network needs a token, or an explicit allowance. */
static void test_listen_guard(void) {
  genie_config_t *cfg = NULL;
  genie_server_t *srv = NULL;
  REQUIRE_OK(genie_config_create(&cfg));
  REQUIRE_OK(genie_config_set_use_env(cfg, 0));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_auth_token(cfg, "short-secret"));
  EXPECT_DETAIL("at least 16");
  EXPECT_OK(genie_config_set_auth_token(cfg, "")); /* no authentication */
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_server_create(cfg, "0.0.0.0", 0, &srv));
  EXPECT_DETAIL("without authentication");
  CHECK(srv == NULL);
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_config_set_allow_insecure(NULL, 1));
  EXPECT_OK(genie_config_set_allow_insecure(cfg, 1));
  REQUIRE_OK(genie_server_create(cfg, "0.0.0.0", 0, &srv));
  genie_server_destroy(srv);
  srv = NULL;
  EXPECT_OK(genie_config_set_allow_insecure(cfg, 0));
  /* Long enough, but guessable: refused when a server would use it. */
  EXPECT_OK(genie_config_set_auth_token(cfg, "aaaaaaaaaaaaaaaaaaaa"));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_server_create(cfg, "127.0.0.1", 0, &srv));
  EXPECT_DETAIL("openssl rand -hex 32");
  CHECK(srv == NULL);
  EXPECT_OK(genie_config_set_auth_token(cfg, "a-shared-secret-9f41c07e2b"));
  REQUIRE_OK(genie_server_create(cfg, "0.0.0.0", 0, &srv));
  genie_server_destroy(srv);
  srv = NULL;
  EXPECT_OK(genie_config_set_auth_token(cfg, ""));
  REQUIRE_OK(genie_server_create(cfg, "127.0.0.1", 0, &srv)); /* loopback needs neither */
  genie_server_destroy(srv);
  genie_config_destroy(cfg);
}

static void test_auth(void) {
  genie_config_t *scfg = NULL;
  genie_server_t *srv = NULL;
  int32_t port = 0;
  REQUIRE_OK(genie_config_create(&scfg));
  REQUIRE_OK(genie_config_set_use_env(scfg, 0));
  REQUIRE_OK(genie_config_set_auth_token(scfg, "a-shared-secret-9f41c07e2b"));
  REQUIRE_OK(genie_server_create(scfg, NULL, 0, &srv));
  genie_config_destroy(scfg);
  REQUIRE_OK(genie_server_port(srv, &port));

  genie_context_t *ctx = NULL;
  genie_config_t *cfg = config_for(port, 5000);
  EXPECT_STATUS(GENIE_ERR_AUTH, genie_init(cfg, &ctx));
  EXPECT_DETAIL("requires authentication");
  EXPECT_OK(genie_config_set_auth_token(cfg, "wrong-shared-secret"));
  EXPECT_STATUS(GENIE_ERR_AUTH, genie_init(cfg, &ctx));
  EXPECT_OK(genie_config_set_auth_token(cfg, "a-shared-secret-9f41c07e2b"));
  REQUIRE_OK(genie_init(cfg, &ctx));
  genie_config_destroy(cfg);
  CHECK(server_count(ctx, "connections_refused") >= 1); /* the wrong token */
  genie_shutdown(ctx);
  genie_server_destroy(srv);
}

int main(void) {
  init_inputs();
  test_remote();
  test_auth();
  test_listen_guard();
  return test_summary("api_remote_test");
}
