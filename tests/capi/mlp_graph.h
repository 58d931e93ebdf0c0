/* The small annotated graph the C API tests share: z = relu(x @ w^T + b),
 * x [2,3] and w [4,3] graph inputs, b [4] a constant. */
#ifndef GENIE_TEST_MLP_GRAPH_H
#define GENIE_TEST_MLP_GRAPH_H

#include "check.h"

static genie_graph_t *build_mlp(const char *graph_name) {
  genie_graph_t *g = NULL;
  const int64_t xs[2] = {2, 3}, ws[2] = {4, 3}, bs[1] = {4};
  const float bias[4] = {0.5f, -0.5f, 1.0f, -2.0f};
  const char *lin_in[3] = {"x", "w", "b"};
  const char *lin_out[1] = {"y"};
  const char *relu_in[1] = {"y"};
  const char *relu_out[1] = {"z"};
  REQUIRE_OK(genie_graph_create(graph_name, &g));
  REQUIRE_OK(genie_graph_add_input(g, "x", GENIE_DTYPE_F32, xs, 2));
  REQUIRE_OK(genie_graph_add_input(g, "w", GENIE_DTYPE_F32, ws, 2));
  REQUIRE_OK(genie_graph_add_constant(g, "b", GENIE_DTYPE_F32, bs, 1, bias, sizeof bias));
  REQUIRE_OK(genie_graph_add_node(g, "linear", "fc", lin_in, 3, lin_out, 1));
  REQUIRE_OK(genie_graph_add_node(g, "relu", "act", relu_in, 1, relu_out, 1));
  REQUIRE_OK(genie_graph_set_role(g, "w", GENIE_TENSOR_ROLE_WEIGHT));
  REQUIRE_OK(genie_graph_set_role(g, "x", GENIE_TENSOR_ROLE_INPUT));
  REQUIRE_OK(genie_graph_set_phase(g, "fc", GENIE_PHASE_FORWARD));
  REQUIRE_OK(genie_graph_set_layer(g, "fc", 0));
  REQUIRE_OK(genie_graph_set_module(g, "fc", "mlp.fc"));
  REQUIRE_OK(genie_graph_set_modality(g, "fc", GENIE_MODALITY_TEXT));
  REQUIRE_OK(genie_graph_mark_output(g, "z"));
  return g;
}

#endif
