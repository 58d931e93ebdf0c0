/* Concurrency: many threads submit to one context; callbacks run exactly
 * once; shutdown waits for graphs in flight, whose futures then complete. */
#include <pthread.h>
#include <stdint.h>

#include "check.h"

enum { kThreads = 4, kSubmits = 40 };

static genie_context_t *g_ctx;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_callbacks = 0;
static int g_bad_results = 0;

static genie_graph_t *scale_graph(void) {
  /* out = (x + x) * x, elementwise */
  genie_graph_t *g = NULL;
  const int64_t s[1] = {256};
  const char *xx[2] = {"x", "x"};
  const char *sx[2] = {"s", "x"};
  const char *o1[1] = {"s"};
  const char *o2[1] = {"out"};
  REQUIRE_OK(genie_graph_create("scale", &g));
  REQUIRE_OK(genie_graph_add_input(g, "x", GENIE_DTYPE_F32, s, 1));
  REQUIRE_OK(genie_graph_add_node(g, "add", "sum", xx, 2, o1, 1));
  REQUIRE_OK(genie_graph_add_node(g, "mul", "prod", sx, 2, o2, 1));
  REQUIRE_OK(genie_graph_mark_output(g, "out"));
  return g;
}

static void on_done(genie_future_t *f, genie_status_t status, void *user) {
  (void)user;
  genie_tensor_t *t = NULL;
  float v[256];
  int bad = status != GENIE_OK || genie_future_output(f, 0, &t) != GENIE_OK ||
            genie_tensor_read(t, 0, v, sizeof v) != GENIE_OK;
  const float x = (float)(intptr_t)user;
  for (int i = 0; !bad && i < 256; ++i) bad = v[i] != 2 * x * x;
  genie_tensor_destroy(t);
  pthread_mutex_lock(&g_mu);
  g_callbacks += 1;
  g_bad_results += bad;
  pthread_mutex_unlock(&g_mu);
}

static void *submitter(void *arg) {
  const int id = (int)(intptr_t)arg;
  genie_graph_t *g = scale_graph();
  const int64_t s[1] = {256};
  const char *names[1] = {"x"};
  for (int i = 0; i < kSubmits; ++i) {
    genie_tensor_t *t = NULL;
    genie_future_t *f = NULL;
    float x[256];
    const float val = (float)(id * 100 + i);
    for (int k = 0; k < 256; ++k) x[k] = val;
    REQUIRE_OK(genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, s, 1, "cpu", &t));
    REQUIRE_OK(genie_tensor_write(t, 0, x, sizeof x));
    REQUIRE_OK(genie_graph_submit(g_ctx, g, names, &t, 1, &f));
    genie_tensor_destroy(t);
    REQUIRE_OK(genie_future_set_callback(f, on_done, (void *)(intptr_t)val));
    REQUIRE_OK(genie_future_wait(f, -1));
    genie_future_destroy(f); /* returns only after the callback finished */
  }
  genie_graph_destroy(g);
  return NULL;
}

/* A completion callback that submits again while genie_shutdown is waiting
 * for it: the submission is refused with GENIE_ERR_SHUTDOWN (or accepted if
 * it came first), and shutdown completes. */
static genie_graph_t *g_slow_graph;
static genie_tensor_t *g_slow_input;
static genie_future_t *g_inner_future;
static genie_status_t g_inner_status = 12345;

static void submit_from_callback(genie_future_t *f, genie_status_t status, void *user) {
  const char *names[1] = {"m0"};
  (void)f;
  (void)status;
  g_inner_status = genie_graph_submit((genie_context_t *)user, g_slow_graph, names, &g_slow_input, 1,
                                      &g_inner_future);
}

static void test_callback_submits_during_shutdown(void) {
  genie_context_t *ctx = NULL;
  genie_config_t *cfg = NULL;
  genie_future_t *f = NULL;
  const int64_t s[2] = {512, 512};
  const char *names[1] = {"m0"};
  char a[8], b[8], node[8];
  int i;
  REQUIRE_OK(genie_config_create(&cfg));
  REQUIRE_OK(genie_config_set_use_env(cfg, 0));
  REQUIRE_OK(genie_init(cfg, &ctx));
  genie_config_destroy(cfg);
  REQUIRE_OK(genie_graph_create("slow", &g_slow_graph));
  REQUIRE_OK(genie_graph_add_input(g_slow_graph, "m0", GENIE_DTYPE_F32, s, 2));
  for (i = 0; i < 8; ++i) {
    const char *in[2] = {a, a}, *out[1] = {b};
    snprintf(a, sizeof a, "m%d", i);
    snprintf(b, sizeof b, "m%d", i + 1);
    snprintf(node, sizeof node, "mm%d", i);
    REQUIRE_OK(genie_graph_add_node(g_slow_graph, "matmul", node, in, 2, out, 1));
  }
  REQUIRE_OK(genie_graph_mark_output(g_slow_graph, b));
  REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, s, 2, "cpu", &g_slow_input));
  REQUIRE_OK(genie_graph_submit(ctx, g_slow_graph, names, &g_slow_input, 1, &f));
  REQUIRE_OK(genie_future_set_callback(f, submit_from_callback, ctx));
  genie_shutdown(ctx); /* the callback runs while this waits */
  CHECK(g_inner_status == GENIE_ERR_SHUTDOWN || g_inner_status == GENIE_OK);
  EXPECT_OK(genie_future_wait(f, 0));
  genie_future_destroy(f);
  genie_future_destroy(g_inner_future);
  genie_tensor_destroy(g_slow_input);
  genie_graph_destroy(g_slow_graph);
}

int main(void) {
  genie_config_t *cfg = NULL;
  REQUIRE_OK(genie_config_create(&cfg));
  REQUIRE_OK(genie_config_set_use_env(cfg, 0));
  REQUIRE_OK(genie_config_set_num_threads(cfg, 3));
  REQUIRE_OK(genie_init(cfg, &g_ctx));
  pthread_t th[kThreads];
  for (int i = 0; i < kThreads; ++i) pthread_create(&th[i], NULL, submitter, (void *)(intptr_t)i);
  for (int i = 0; i < kThreads; ++i) pthread_join(th[i], NULL);
  CHECK(g_callbacks == kThreads * kSubmits);
  CHECK(g_bad_results == 0);

  /* Shutdown with graphs in flight: it waits for them; their futures
   * complete normally and can still be waited on; outputs are refused. */
  genie_graph_t *g = scale_graph();
  const int64_t s[1] = {256};
  const char *names[1] = {"x"};
  genie_future_t *fs[16];
  genie_tensor_t *t = NULL;
  REQUIRE_OK(genie_tensor_alloc(g_ctx, GENIE_DTYPE_F32, s, 1, "cpu", &t));
  for (int i = 0; i < 16; ++i) REQUIRE_OK(genie_graph_submit(g_ctx, g, names, &t, 1, &fs[i]));
  genie_shutdown(g_ctx);
  for (int i = 0; i < 16; ++i) {
    genie_tensor_t *o = NULL;
    EXPECT_OK(genie_future_wait(fs[i], 0));
    EXPECT_STATUS(GENIE_ERR_SHUTDOWN, genie_future_output(fs[i], 0, &o));
    genie_future_destroy(fs[i]);
  }
  EXPECT_STATUS(GENIE_ERR_SHUTDOWN, genie_tensor_write(t, 0, s, 4));
  genie_tensor_destroy(t);
  genie_graph_destroy(g);
  genie_config_destroy(cfg);
  test_callback_submits_during_shutdown();
  return test_summary("api_threads_test");
}
