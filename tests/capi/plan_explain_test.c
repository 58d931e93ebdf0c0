/* genie_plan_explain through the C API: embedded plans, bad input. */
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
