/* Where an embedded graph runs, for the C API tests: a tiny graph of
 * built-in ops on the submitting thread, a custom op's kernel on an
 * executor worker. check_where_graphs_run() registers "test.hold", whose
 * kernel holds its worker until the test lets it go, and runs both on a
 * context that must have one worker thread. */
#ifndef GENIE_TEST_INLINE_RUNS_H
#define GENIE_TEST_INLINE_RUNS_H

#include <pthread.h>
#include <time.h>

#include "check.h"

static pthread_mutex_t g_hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_hold_cv = PTHREAD_COND_INITIALIZER;
static int g_hold_entered = 0, g_hold_released = 0;
static pthread_t g_hold_thread, g_test_thread;

/* Waits up to 30 s for *flag under g_hold_mu; returns it. */
static int hold_wait(const int *flag) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += 30;
  pthread_mutex_lock(&g_hold_mu);
  int rc = 0;
  while (!*flag && rc == 0) rc = pthread_cond_timedwait(&g_hold_cv, &g_hold_mu, &until);
  const int v = *flag;
  pthread_mutex_unlock(&g_hold_mu);
  return v;
}

static genie_status_t hold_infer(genie_op_ctx_t *ctx, const genie_op_tensor_t *in, size_t n_in,
                                 genie_op_tensor_t *out, size_t n_out, void *user_data) {
  (void)ctx;
  (void)user_data;
  if (n_in != 1 || n_out != 1) return GENIE_ERR_INTERNAL;
  out[0] = in[0];
  return GENIE_OK;
}

/* y = x, once the test lets it go. */
static genie_status_t hold_kernel(genie_op_ctx_t *ctx, const genie_op_tensor_t *in, size_t n_in,
                                  genie_op_tensor_t *out, size_t n_out, void *user_data) {
  (void)ctx;
  (void)n_in;
  (void)n_out;
  (void)user_data;
  pthread_mutex_lock(&g_hold_mu);
  g_hold_thread = pthread_self();
  g_hold_entered = 1;
  pthread_cond_broadcast(&g_hold_cv);
  /* On the test's own thread nobody could let it go (the test fails). */
  const int stuck = pthread_equal(g_hold_thread, g_test_thread);
  pthread_mutex_unlock(&g_hold_mu);
  if (stuck || !hold_wait(&g_hold_released)) return GENIE_ERR_INTERNAL;
  memcpy(out[0].data, in[0].data, out[0].nbytes);
  return GENIE_OK;
}

static genie_graph_t *one_op_graph(const char *op) {
  genie_graph_t *g = NULL;
  int64_t shape[1] = {4};
  const char *in[1] = {"x"}, *out[1] = {"y"};
  REQUIRE_OK(genie_graph_create(op, &g));
  REQUIRE_OK(genie_graph_add_input(g, "x", GENIE_DTYPE_F32, shape, 1));
  REQUIRE_OK(genie_graph_add_node(g, op, "n", in, 1, out, 1));
  REQUIRE_OK(genie_graph_mark_output(g, "y"));
  return g;
}

/* With the context's only worker held by a custom op's kernel, a tiny graph
 * of built-in ops on a "cpu" tensor still completes within its submission:
 * it ran on the submitting thread. The custom op's kernel ran on a worker. */
static void check_where_graphs_run(genie_context_t *ctx) {
  genie_op_desc_t d;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.name = "test.hold";
  d.min_inputs = d.max_inputs = 1;
  d.num_outputs = 1;
  d.infer = hold_infer;
  d.cpu_kernel = hold_kernel;
  REQUIRE_OK(genie_op_register(&d));
  g_test_thread = pthread_self();
  g_hold_entered = g_hold_released = 0;
  int64_t shape[1] = {4};
  genie_tensor_t *x = NULL;
  REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, shape, 1, "cpu", &x));
  const float xv[4] = {-1, 2, -3, 4};
  REQUIRE_OK(genie_tensor_write(x, 0, xv, sizeof xv));
  const char *names[1] = {"x"};

  genie_graph_t *held = one_op_graph("test.hold");
  genie_future_t *fh = NULL;
  REQUIRE_OK(genie_graph_submit(ctx, held, names, &x, 1, &fh));
  CHECK(hold_wait(&g_hold_entered));
  CHECK(!pthread_equal(g_hold_thread, pthread_self()));

  genie_graph_t *tiny = one_op_graph("relu");
  genie_future_t *ft = NULL;
  REQUIRE_OK(genie_graph_submit(ctx, tiny, names, &x, 1, &ft));
  EXPECT_OK(genie_future_poll(ft)); /* complete: it did not wait for the worker */
  genie_tensor_t *y = NULL;
  float yv[4] = {0};
  EXPECT_OK(genie_future_output(ft, 0, &y));
  EXPECT_OK(genie_tensor_read(y, 0, yv, sizeof yv));
  CHECK(yv[0] == 0 && yv[1] == 2 && yv[2] == 0 && yv[3] == 4);
  genie_tensor_destroy(y);
  genie_future_destroy(ft);

  pthread_mutex_lock(&g_hold_mu);
  g_hold_released = 1;
  pthread_cond_broadcast(&g_hold_cv);
  pthread_mutex_unlock(&g_hold_mu);
  EXPECT_OK(genie_future_wait(fh, 30000));
  genie_future_destroy(fh);
  genie_graph_destroy(held);
  genie_graph_destroy(tiny);
  genie_tensor_destroy(x);
  EXPECT_OK(genie_op_unregister("test.hold"));
}

#endif
