/*
 * bench_binding_overhead — the C side of the per-call binding overhead
 * benchmark: the cost of one submission of a tiny graph (out = a + b, two
 * f32 [4] tensors) and the wait for it, embedded, with the input tensors
 * resident. bench/binding_overhead.sh runs this program and its Go, Rust
 * and Python twins interleaved and divides each by this one; the difference
 * is what a binding adds to the same C calls.
 *
 *   bench_binding_overhead [--iters N] [--quick] [--json FILE]
 *
 * Prints exactly one line on stdout: `per_call_ns <mean ns per call>` over
 * N timed calls (default 20000) after N/10 untimed ones. Each call is
 * genie_graph_submit + genie_future_wait + genie_future_destroy.
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_util.h"

int main(int argc, char **argv) {
  bu_options_t opt = bu_parse_args(argc, argv, " (default 20000; --quick: 200)");
  int iters = opt.iters ? opt.iters : (opt.quick ? 200 : 20000);
  const int64_t shape[1] = {4};
  const float av[4] = {1, 2, 3, 4}, bv[4] = {10, 20, 30, 40};
  const char *names[2] = {"a", "b"};
  const char *outs[1] = {"out"};
  genie_context_t *ctx = NULL;
  genie_graph_t *g = NULL;
  genie_tensor_t *t[2] = {NULL, NULL};
  FILE *json = bu_json_open(opt.json_path);
  double t0, per_call_ns;
  int i;

  /* Embedded (bench/binding_overhead.sh unsets GENIE_MASTER_ADDR): the
   * figure is the cost of the call, not of a network. */
  bu_check(genie_init(NULL, &ctx), "genie_init");
  if (genie_context_is_embedded(ctx) != 1) {
    fprintf(stderr, "bench: unset GENIE_MASTER_ADDR: this benchmark runs embedded\n");
    return 1;
  }
  bu_check(genie_graph_create("tiny_add", &g), "genie_graph_create");
  bu_check(genie_graph_add_input(g, "a", GENIE_DTYPE_F32, shape, 1), "add input a");
  bu_check(genie_graph_add_input(g, "b", GENIE_DTYPE_F32, shape, 1), "add input b");
  bu_check(genie_graph_add_node(g, "add", "add", names, 2, outs, 1), "add node");
  bu_check(genie_graph_mark_output(g, "out"), "mark output");
  bu_check(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, shape, 1, NULL, &t[0]), "alloc a");
  bu_check(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, shape, 1, NULL, &t[1]), "alloc b");
  bu_check(genie_tensor_write(t[0], 0, av, sizeof av), "write a");
  bu_check(genie_tensor_write(t[1], 0, bv, sizeof bv), "write b");

  t0 = 0;
  for (i = -(iters / 10); i < iters; ++i) {
    genie_future_t *f = NULL;
    if (i == 0) t0 = bu_now_s();
    bu_check(genie_graph_submit(ctx, g, names, t, 2, &f), "genie_graph_submit");
    bu_check(genie_future_wait(f, -1), "genie_future_wait");
    genie_future_destroy(f);
  }
  per_call_ns = (bu_now_s() - t0) * 1e9 / iters;
  printf("per_call_ns %.1f\n", per_call_ns);
  if (json) {
    fprintf(json, "{\"benchmark\": \"binding_overhead\", \"language\": \"c\", \"iters\": %d, \"per_call_ns\": %.1f}\n",
            iters, per_call_ns);
    bu_json_close(json, opt.json_path);
  }
  genie_tensor_destroy(t[0]);
  genie_tensor_destroy(t[1]);
  genie_graph_destroy(g);
  genie_shutdown(ctx);
  return 0;
}
