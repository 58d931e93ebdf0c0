/* Embedded mode over several devices through the C API: with the test
 * device backend loaded (GENIE_DEVICE_BACKENDS=test), tensors are allocated
 * on test:0 and test:1 by name, errors raised inside the plugin reach the
 * caller with their status and detail, a graph whose weight lives on a
 * test device runs by the scheduler's plan with the CPU's results, and a
 * tiny graph the plan puts on the CPU runs on the submitting thread as it
 * does without other devices (inline_runs.h). */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "inline_runs.h"
#include "mlp_graph.h"

int main(void) {
  genie_context_t *ctx = NULL;
  genie_graph_t *g = NULL;
  genie_tensor_t *x = NULL, *w = NULL, *t = NULL, *z = NULL;
  genie_future_t *f = NULL;
  char dir[] = "/tmp/genie-devices-test-XXXXXX";
  const int64_t xs[2] = {2, 3}, ws[2] = {4, 3}, vs[1] = {8}, huge[2] = {1 << 20, 1 << 20};
  const float xv[6] = {1, -2, 3, 0.5f, 0.25f, -1};
  const float wv[12] = {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1};
  const float bias[4] = {0.5f, -0.5f, 1.0f, -2.0f}; /* as in mlp_graph.h */
  float zv[8], back[8], v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const char *names[2] = {"x", "w"};
  genie_tensor_t *inputs[2];
  int i, j, k;

  if (!getenv("GENIE_DEVICE_BACKENDS") || !getenv("GENIE_DEVICE_BACKEND_PATH")) {
    printf("skipped: GENIE_DEVICE_BACKENDS / GENIE_DEVICE_BACKEND_PATH not set (run through ctest)\n");
    return 77;
  }
  if (!mkdtemp(dir)) return 1;
  setenv("XDG_CACHE_HOME", dir, 1); /* the CPU calibration's cache */
  REQUIRE_OK(genie_init(NULL, &ctx));

  /* Allocation by device name, zero-filled, read and written through the
   * plugin. */
  REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, vs, 1, "test:0", &t));
  CHECK(strcmp(genie_tensor_device(t), "test:0") == 0);
  EXPECT_OK(genie_tensor_read(t, 0, back, sizeof back));
  CHECK(back[0] == 0.f && back[7] == 0.f);
  EXPECT_OK(genie_tensor_write(t, 0, v, sizeof v));
  EXPECT_OK(genie_tensor_read(t, 4, back, 8));
  CHECK(back[0] == 2.f && back[1] == 3.f);
  genie_tensor_destroy(t);
  t = NULL;

  /* Errors: a device the backend lacks, an unknown kind, and memory the
   * plugin refuses (its genie::Error crosses into libgenie intact). */
  EXPECT_STATUS(GENIE_ERR_UNSUPPORTED, genie_tensor_alloc(ctx, GENIE_DTYPE_F32, vs, 1, "test:7", &t));
  EXPECT_DETAIL("test:0, test:1");
  EXPECT_STATUS(GENIE_ERR_PARSE, genie_tensor_alloc(ctx, GENIE_DTYPE_F32, vs, 1, "tpu:0", &t));
  EXPECT_DETAIL("tpu:0");
  EXPECT_STATUS(GENIE_ERR_OUT_OF_MEMORY, genie_tensor_alloc(ctx, GENIE_DTYPE_F32, huge, 2, "test:1", &t));
  EXPECT_DETAIL("test:1");
  CHECK(t == NULL);

  /* z = relu(x @ w^T + b) with the weight resident on test:1. */
  g = build_mlp("on-devices");
  REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, xs, 2, "cpu", &x));
  REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, ws, 2, "test:1", &w));
  CHECK(strcmp(genie_tensor_device(w), "test:1") == 0);
  REQUIRE_OK(genie_tensor_write(x, 0, xv, sizeof xv));
  REQUIRE_OK(genie_tensor_write(w, 0, wv, sizeof wv));
  inputs[0] = x;
  inputs[1] = w;
  for (k = 0; k < 2; ++k) {
    REQUIRE_OK(genie_graph_submit(ctx, g, names, inputs, 2, &f));
    REQUIRE_OK(genie_future_wait(f, 30000));
    REQUIRE_OK(genie_future_output(f, 0, &z));
    /* The weight pinned the linear node to test:1; where relu ran, the
     * output stays. */
    CHECK(strncmp(genie_tensor_device(z), "test:", 5) == 0 || strcmp(genie_tensor_device(z), "cpu:0") == 0);
    EXPECT_OK(genie_tensor_read(z, 0, zv, sizeof zv));
    for (i = 0; i < 2; ++i)
      for (j = 0; j < 4; ++j) {
        float s = bias[j];
        int c;
        for (c = 0; c < 3; ++c) s += xv[i * 3 + c] * wv[j * 3 + c];
        s = s > 0 ? s : 0;
        CHECK(fabsf(zv[i * 4 + j] - s) < 1e-5f);
      }
    genie_tensor_destroy(z);
    genie_future_destroy(f);
  }

  /* The plan explains where each node went: the linear node on test:1. */
  {
    char *json = NULL;
    EXPECT_OK(genie_plan_explain_bound(ctx, g, names, inputs, 2, &json));
    CHECK(json != NULL && strstr(json, "test:1") != NULL && strstr(json, "resident_weight") != NULL);
    genie_free(json);
  }

  genie_tensor_destroy(x);
  genie_tensor_destroy(w);
  genie_graph_destroy(g);
  genie_shutdown(ctx);

  /* One worker thread, the test devices loaded (from the environment). */
  {
    genie_config_t *cfg = NULL;
    REQUIRE_OK(genie_config_create(&cfg));
    REQUIRE_OK(genie_config_set_num_threads(cfg, 1));
    REQUIRE_OK(genie_init(cfg, &ctx));
    genie_config_destroy(cfg);
    check_where_graphs_run(ctx);
    genie_shutdown(ctx);
  }
  return test_summary("devices_test");
}
