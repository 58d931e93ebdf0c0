/* genie_plan_explain and genie_plan_explain_bound through the C API:
 * embedded plans, bad input. */
#include <stdlib.h>

#include "check.h"
#include "mlp_graph.h"

int main(void) {
  genie_context_t *ctx = NULL;
  genie_graph_t *g = NULL, *bad = NULL, *dyn = NULL;
  char *json = NULL;
  char dir[] = "/tmp/genie-plan-test-XXXXXX";

  /* Keep the calibration cache out of the user's home. */
  if (!mkdtemp(dir)) {
    fprintf(stderr, "mkdtemp failed\n");
    return 1;
  }
  setenv("XDG_CACHE_HOME", dir, 1);

  REQUIRE_OK(genie_init(NULL, &ctx));
  g = build_mlp("explained");
  EXPECT_OK(genie_plan_explain(ctx, g, &json));
  CHECK(json != NULL);
  if (json) {
    /* Every node is placed on the CPU, with its rule and the cost figures. */
    CHECK(strstr(json, "\"name\":\t\"fc\"") != NULL);
    CHECK(strstr(json, "\"name\":\t\"act\"") != NULL);
    CHECK(strstr(json, "\"rule\":\t\"only_device\"") != NULL);
    CHECK(strstr(json, "\"flops\":\t56") != NULL); /* 2*2*4*3 + 2*4 (bias) */
    CHECK(strstr(json, "cpu:0") != NULL);
    CHECK(strstr(json, "\"stage\":\t\"forward\"") != NULL); /* the annotation wins */
    CHECK(strstr(json, "\"stage_source\":\t\"annotation\"") != NULL);
    CHECK(strstr(json, "\"predicted_total_s\"") != NULL);
    genie_free(json);
  }
  /* The graph handle is not changed: it can still be submitted as before. */
  {
    uint64_t h1 = 0, h2 = 0;
    EXPECT_OK(genie_graph_hash(g, &h1));
    EXPECT_OK(genie_plan_explain(ctx, g, &json));
    genie_free(json);
    EXPECT_OK(genie_graph_hash(g, &h2));
    CHECK(h1 == h2);
  }

  /* Bad input. */
  json = (char *)"untouched";
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_plan_explain(NULL, g, &json));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_plan_explain(ctx, NULL, &json));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_plan_explain((genie_context_t *)g, g, &json));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_plan_explain(ctx, g, NULL));
  CHECK(strcmp(json, "untouched") == 0);

  REQUIRE_OK(genie_graph_create("no-outputs", &bad));
  EXPECT_STATUS(GENIE_ERR_INVALID_GRAPH, genie_plan_explain(ctx, bad, &json));
  EXPECT_DETAIL("no outputs");

  {
    const int64_t shape[2] = {-1, 4};
    const char *in[1] = {"x"}, *out[1] = {"y"};
    REQUIRE_OK(genie_graph_create("dynamic", &dyn));
    REQUIRE_OK(genie_graph_add_input(dyn, "x", GENIE_DTYPE_F32, shape, 2));
    REQUIRE_OK(genie_graph_add_node(dyn, "relu", "r", in, 1, out, 1));
    REQUIRE_OK(genie_graph_mark_output(dyn, "y"));
    EXPECT_STATUS(GENIE_ERR_INVALID_GRAPH, genie_plan_explain(ctx, dyn, &json));
    EXPECT_DETAIL("dynamic shape");
  }
  CHECK(strcmp(json, "untouched") == 0);

  /* Bound: the bound size resolves the dynamic dimension (the plan's bytes
   * follow it), and the bindings obey genie_graph_submit's rules. */
  {
    const int64_t small[2] = {3, 4}, big[2] = {1000, 4};
    const char *names[1] = {"x"}, *wrong[1] = {"nope"};
    genie_tensor_t *ts = NULL, *tb = NULL, *ti = NULL;
    char *js = NULL, *jb = NULL;
    REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, small, 2, NULL, &ts));
    REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, big, 2, NULL, &tb));
    REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_I32, small, 2, NULL, &ti));
    EXPECT_OK(genie_plan_explain_bound(ctx, dyn, names, &ts, 1, &js));
    EXPECT_OK(genie_plan_explain_bound(ctx, dyn, names, &tb, 1, &jb));
    CHECK(js != NULL && jb != NULL);
    if (js && jb) {
      CHECK(strstr(js, "\"name\":\t\"r\"") != NULL);
      CHECK(strstr(js, "\"bytes\":\t96") != NULL);   /* 3x4 f32 read + written */
      CHECK(strstr(jb, "\"bytes\":\t32000") != NULL); /* 1000x4 */
    }
    genie_free(js);
    genie_free(jb);
    json = (char *)"untouched";
    EXPECT_STATUS(GENIE_ERR_INVALID_GRAPH, genie_plan_explain_bound(ctx, dyn, wrong, &ts, 1, &json));
    EXPECT_STATUS(GENIE_ERR_DTYPE_MISMATCH, genie_plan_explain_bound(ctx, dyn, names, &ti, 1, &json));
    EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_plan_explain_bound(ctx, dyn, NULL, &ts, 1, &json));
    EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE,
                  genie_plan_explain_bound(ctx, dyn, names, (genie_tensor_t *const *)&g, 1, &json));
    EXPECT_STATUS(GENIE_ERR_INVALID_GRAPH, genie_plan_explain_bound(ctx, dyn, NULL, NULL, 0, &json));
    CHECK(strcmp(json, "untouched") == 0);
    genie_tensor_destroy(ti);
    genie_tensor_destroy(tb);
    genie_tensor_destroy(ts);
  }

  genie_graph_destroy(dyn);
  genie_graph_destroy(bad);
  genie_graph_destroy(g);
  genie_shutdown(ctx);
  {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  }
  return test_summary("plan_explain_test");
}
