/*
 * sample_mlp — a 2-layer MLP through the Genie C API; the same program
 * exists in Go (samples/go), Rust (samples/rust) and Python (samples/python)
 * and all four print the same checksum.
 *
 *   y = relu(x @ w1 + b1) @ w2 + b2
 *   x [4,64] input; w1 [64,128], b1 [128]; w2 [128,32], b2 [32]; y [4,32]
 *
 * The weights are allocated once as resident tensors on the context's
 * default device (host memory embedded, the server with GENIE_MASTER_ADDR
 * set) and bound by name at submission. Every node carries its semantic
 * annotations (phase, layer, module path) and every value its role. Values
 * are the seeded values of genie_seed.h (a function of each value's name).
 *
 *   sample_mlp        prints the mode and `checksum y = <sum of y>`
 */
#include <genie.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <genie_seed.h>

static const char *prog = "sample_mlp";

#define MLP_NUM_INPUTS 5
static const char *const mlp_inputs[MLP_NUM_INPUTS] = {"x", "w1", "b1", "w2", "b2"};

static int fail(const char *what, genie_status_t st) {
  fprintf(stderr, "%s: %s failed: %s: %s\n", prog, what, genie_status_str(st), genie_last_error());
  return 1;
}

/* Adds node `name` = op(a[, b]) -> out, annotated with its layer and module. */
static genie_status_t add_node(genie_graph_t *g, const char *op, const char *name, const char *a, const char *b,
                               const char *out, int32_t layer, const char *module) {
  const char *ins[2] = {a, b};
  genie_status_t st = genie_graph_add_node(g, op, name, ins, b ? 2 : 1, &out, 1);
  if (st == GENIE_OK) st = genie_graph_set_phase(g, name, GENIE_PHASE_FORWARD);
  if (st == GENIE_OK) st = genie_graph_set_layer(g, name, layer);
  if (st == GENIE_OK) st = genie_graph_set_module(g, name, module);
  return st;
}

static genie_status_t build_graph(genie_graph_t *g) {
  static const int64_t x_shape[2] = {4, 64}, w1_shape[2] = {64, 128}, b1_shape[1] = {128};
  static const int64_t w2_shape[2] = {128, 32}, b2_shape[1] = {32};
  genie_status_t st = GENIE_OK;
  if (st == GENIE_OK) st = genie_graph_add_input(g, "x", GENIE_DTYPE_F32, x_shape, 2);
  if (st == GENIE_OK) st = genie_graph_add_input(g, "w1", GENIE_DTYPE_F32, w1_shape, 2);
  if (st == GENIE_OK) st = genie_graph_add_input(g, "b1", GENIE_DTYPE_F32, b1_shape, 1);
  if (st == GENIE_OK) st = genie_graph_add_input(g, "w2", GENIE_DTYPE_F32, w2_shape, 2);
  if (st == GENIE_OK) st = genie_graph_add_input(g, "b2", GENIE_DTYPE_F32, b2_shape, 1);
  if (st == GENIE_OK) st = add_node(g, "matmul", "fc1.matmul", "x", "w1", "fc1.mm", 0, "mlp.fc1");
  if (st == GENIE_OK) st = add_node(g, "add", "fc1.bias", "fc1.mm", "b1", "fc1.out", 0, "mlp.fc1");
  if (st == GENIE_OK) st = add_node(g, "relu", "act1", "fc1.out", NULL, "act1.out", 0, "mlp.act1");
  if (st == GENIE_OK) st = add_node(g, "matmul", "fc2.matmul", "act1.out", "w2", "fc2.mm", 1, "mlp.fc2");
  if (st == GENIE_OK) st = add_node(g, "add", "fc2.bias", "fc2.mm", "b2", "y", 1, "mlp.fc2");
  if (st == GENIE_OK) st = genie_graph_set_role(g, "x", GENIE_TENSOR_ROLE_INPUT);
  if (st == GENIE_OK) st = genie_graph_set_role(g, "w1", GENIE_TENSOR_ROLE_WEIGHT);
  if (st == GENIE_OK) st = genie_graph_set_role(g, "b1", GENIE_TENSOR_ROLE_WEIGHT);
  if (st == GENIE_OK) st = genie_graph_set_role(g, "w2", GENIE_TENSOR_ROLE_WEIGHT);
  if (st == GENIE_OK) st = genie_graph_set_role(g, "b2", GENIE_TENSOR_ROLE_WEIGHT);
  if (st == GENIE_OK) st = genie_graph_set_role(g, "fc1.out", GENIE_TENSOR_ROLE_ACTIVATION);
  if (st == GENIE_OK) st = genie_graph_set_role(g, "act1.out", GENIE_TENSOR_ROLE_ACTIVATION);
  if (st == GENIE_OK) st = genie_graph_set_role(g, "y", GENIE_TENSOR_ROLE_OUTPUT);
  if (st == GENIE_OK) st = genie_graph_mark_output(g, "y");
  if (st == GENIE_OK) st = genie_graph_validate(g);
  return st;
}

int main(int argc, char **argv) {
  genie_graph_t *graph = NULL;
  genie_context_t *ctx = NULL;
  genie_tensor_t *inputs[MLP_NUM_INPUTS] = {NULL};
  genie_future_t *fut = NULL;
  genie_tensor_t *y = NULL;
  float *host = NULL;
  genie_dtype_t dtype;
  int64_t shape[GENIE_MAX_DIMS];
  size_t ndim, nbytes, i;
  genie_status_t st;
  int rc = 1;

  if (argc > 1) {
    fprintf(stderr, "usage: %s (no arguments; GENIE_MASTER_ADDR selects remote mode)\n", prog);
    return 2;
  }
  st = genie_graph_create("mlp", &graph);
  if (st == GENIE_OK) st = build_graph(graph);
  if (st != GENIE_OK) {
    genie_graph_destroy(graph);
    return fail("building the graph", st);
  }
  st = genie_init(NULL, &ctx); /* embedded, or remote when GENIE_MASTER_ADDR is set */
  if (st != GENIE_OK) {
    rc = fail("genie_init", st);
    goto done;
  }
  printf("mode %s\n", genie_context_is_embedded(ctx) == 1 ? "embedded" : "remote");

  /* Weights (and the input) become resident tensors holding seeded values. */
  for (i = 0; i < MLP_NUM_INPUTS; ++i) {
    st = genie_seed_tensor(ctx, graph, mlp_inputs[i], &inputs[i]);
    if (st != GENIE_OK) {
      rc = fail(mlp_inputs[i], st);
      goto done;
    }
  }
  st = genie_graph_submit(ctx, graph, mlp_inputs, inputs, MLP_NUM_INPUTS, &fut);
  if (st != GENIE_OK) {
    rc = fail("genie_graph_submit", st);
    goto done;
  }
  st = genie_future_wait(fut, -1);
  if (st == GENIE_OK) st = genie_future_output_by_name(fut, "y", &y);
  if (st == GENIE_OK) st = genie_tensor_info(y, &dtype, shape, &ndim, &nbytes);
  if (st != GENIE_OK) {
    rc = fail("executing the graph", st);
    goto done;
  }
  host = malloc(nbytes ? nbytes : 1);
  if (!host) {
    fprintf(stderr, "%s: out of memory\n", prog);
    goto done;
  }
  st = genie_tensor_read(y, 0, host, nbytes);
  if (st != GENIE_OK) {
    rc = fail("genie_tensor_read", st);
    goto done;
  }
  printf("output y shape [");
  for (i = 0; i < ndim; ++i) printf("%s%lld", i ? ", " : "", (long long)shape[i]);
  printf("] dtype %s\n", genie_dtype_name(dtype));
  printf("checksum y = %.4f\n", genie_checksum(dtype, host, nbytes / genie_dtype_size(dtype)));
  rc = 0;

done:
  free(host);
  genie_tensor_destroy(y);
  genie_future_destroy(fut);
  for (i = 0; i < MLP_NUM_INPUTS; ++i) genie_tensor_destroy(inputs[i]);
  genie_shutdown(ctx);
  genie_graph_destroy(graph);
  return rc;
}
