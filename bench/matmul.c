/*
 * bench_matmul — a matrix product through Genie (a 1-node graph submitted
 * to an embedded context, inputs resident, submit + wait + release of the
 * future) against the same product by cblas_sgemm called directly, in the
 * same process, interleaved A/B.
 *
 * Both sides call the same OpenBLAS library loaded once in this process,
 * so they run with the same BLAS thread count (printed). The ratio is
 * direct time / Genie time per pair: 1.0 means no overhead, the goal is
 * >= 0.90.
 */
#define _GNU_SOURCE /* cpu_set_t in OpenBLAS's cblas.h */

#include <cblas.h>
#include <math.h>

#include <genie_seed.h>
#include "bench_util.h"

typedef struct shape {
  int m, k, n;
  const char *label;
} shape_t;

static const shape_t full_shapes[] = {
    {256, 256, 256, "square"},
    {1024, 1024, 1024, "square"},
    {2048, 2048, 2048, "square"},
    {128, 768, 2304, "block attn.c_attn"},
    {128, 768, 768, "block attn.c_proj"},
    {128, 768, 3072, "block mlp.c_fc"},
    {128, 3072, 768, "block mlp.c_proj"},
};
static const shape_t quick_shapes[] = {
    {32, 32, 32, "square"},
    {16, 48, 40, "rectangular"},
};

static const char *const input_names[2] = {"a", "b"};

/* Seconds per Genie submission of `graph`, averaged over `reps`. */
static double time_genie(genie_context_t *ctx, const genie_graph_t *graph, genie_tensor_t *const *inputs,
                         int reps) {
  double t0 = bu_now_s();
  int r;
  for (r = 0; r < reps; ++r) {
    genie_future_t *fut = NULL;
    bu_check(genie_graph_submit(ctx, graph, input_names, inputs, 2, &fut), "genie_graph_submit");
    bu_check(genie_future_wait(fut, -1), "executing matmul");
    genie_future_destroy(fut);
  }
  return (bu_now_s() - t0) / reps;
}

/* Seconds per direct cblas_sgemm, averaged over `reps`. */
static double time_direct(const shape_t *s, const float *a, const float *b, float *c, int reps) {
  double t0 = bu_now_s();
  int r;
  for (r = 0; r < reps; ++r)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->m, s->n, s->k, 1.0f, a, s->k, b, s->n, 0.0f, c,
                s->n);
  return (bu_now_s() - t0) / reps;
}

/* Largest |genie - direct| relative to the largest |direct|. */
static double relative_diff(genie_context_t *ctx, const genie_graph_t *graph, genie_tensor_t *const *inputs,
                            const float *c, size_t count) {
  genie_future_t *fut = NULL;
  genie_tensor_t *out = NULL;
  float *got = bu_malloc(count * sizeof(float));
  double diff = 0.0, scale = 0.0;
  size_t i;
  bu_check(genie_graph_submit(ctx, graph, input_names, inputs, 2, &fut), "genie_graph_submit");
  bu_check(genie_future_wait(fut, -1), "executing matmul");
  bu_check(genie_future_output(fut, 0, &out), "genie_future_output");
  bu_check(genie_tensor_read(out, 0, got, count * sizeof(float)), "genie_tensor_read");
  for (i = 0; i < count; ++i) {
    double d = fabs((double)got[i] - (double)c[i]);
    if (d > diff) diff = d;
    if (fabs((double)c[i]) > scale) scale = fabs((double)c[i]);
  }
  genie_tensor_destroy(out);
  genie_future_destroy(fut);
  free(got);
  return scale > 0 ? diff / scale : diff;
}

int main(int argc, char **argv) {
  bu_options_t opt = bu_parse_args(argc, argv, ", A/B pairs (default 11; --quick: 5)");
  const shape_t *shapes = opt.quick ? quick_shapes : full_shapes;
  size_t n_shapes =
      opt.quick ? sizeof quick_shapes / sizeof *quick_shapes : sizeof full_shapes / sizeof *full_shapes;
  int pairs = opt.iters ? opt.iters : (opt.quick ? 5 : 11);
  /* Each timed sample repeats the product until it lasts about this long,
   * so that small shapes are not measured at the clock's resolution. */
  double sample_s = opt.quick ? 0.0 : 0.05;
  FILE *json = bu_json_open(opt.json_path);
  genie_context_t *ctx = NULL;
  size_t si;
  int failed = 0;

  bu_check(genie_init(NULL, &ctx), "genie_init");
  printf("matmul: Genie 1-node graph (embedded, resident inputs, submit+wait) vs cblas_sgemm direct\n");
  printf("BLAS: %s; %d BLAS threads on both sides (one library in this process)\n", openblas_get_config(),
         openblas_get_num_threads());
  printf("%d interleaved pairs per shape after 2 warm-ups of each; ratio = direct time / Genie time\n\n",
         pairs);
  printf("%5s %5s %5s  %-18s %5s  %-22s  %-22s  %-19s  %s\n", "m", "k", "n", "shape", "reps", "Genie GFLOP/s",
         "direct GFLOP/s", "ratio", "max rel.");
  printf("%5s %5s %5s  %-18s %5s  %-22s  %-22s  %-19s  %s\n", "", "", "", "", "", "median (min-max)",
         "median (min-max)", "median (min-max)", "diff");
  if (json) {
    fprintf(json,
            "{\"benchmark\": \"matmul\", \"quick\": %s, \"pairs\": %d, \"blas_threads\": %d, \"blas\": ",
            opt.quick ? "true" : "false", pairs, openblas_get_num_threads());
    bu_json_str(json, openblas_get_config());
    fprintf(json, ", \"results\": [");
  }

  for (si = 0; si < n_shapes; ++si) {
    const shape_t *s = &shapes[si];
    const int64_t a_shape[2] = {s->m, s->k}, b_shape[2] = {s->k, s->n};
    const char *node_in[2] = {"a", "b"};
    const char *node_out[1] = {"c"};
    double flops = 2.0 * s->m * s->k * s->n;
    genie_graph_t *graph = NULL;
    genie_tensor_t *inputs[2] = {NULL, NULL};
    float *a = bu_malloc(sizeof(float) * (size_t)s->m * (size_t)s->k);
    float *b = bu_malloc(sizeof(float) * (size_t)s->k * (size_t)s->n);
    float *c = bu_malloc(sizeof(float) * (size_t)s->m * (size_t)s->n);
    double *g_gflops = bu_malloc(sizeof(double) * (size_t)pairs);
    double *d_gflops = bu_malloc(sizeof(double) * (size_t)pairs);
    double *ratio = bu_malloc(sizeof(double) * (size_t)pairs);
    bu_stats_t gs, ds, rs;
    double rel;
    int reps = 1, p;

    bu_check(genie_graph_create("matmul", &graph), "genie_graph_create");
    bu_check(genie_graph_add_input(graph, "a", GENIE_DTYPE_F32, a_shape, 2), "add input a");
    bu_check(genie_graph_add_input(graph, "b", GENIE_DTYPE_F32, b_shape, 2), "add input b");
    bu_check(genie_graph_add_node(graph, "matmul", "mm", node_in, 2, node_out, 1), "add node");
    bu_check(genie_graph_mark_output(graph, "c"), "mark output");
    bu_check(genie_graph_validate(graph), "validate");
    bu_check(genie_seed_tensor(ctx, graph, "a", &inputs[0]), "seeding a");
    bu_check(genie_seed_tensor(ctx, graph, "b", &inputs[1]), "seeding b");
    genie_seed_fill("a", GENIE_DTYPE_F32, a_shape, 2, a);
    genie_seed_fill("b", GENIE_DTYPE_F32, b_shape, 2, b);

    time_genie(ctx, graph, inputs, 1);
    time_direct(s, a, b, c, 1);
    {
      double t = time_genie(ctx, graph, inputs, 1);
      double td = time_direct(s, a, b, c, 1);
      if (td < t) t = td;
      if (sample_s > 0 && t < sample_s) reps = (int)(sample_s / (t > 1e-7 ? t : 1e-7)) + 1;
    }
    for (p = 0; p < pairs; ++p) {
      double tg = time_genie(ctx, graph, inputs, reps);
      double td = time_direct(s, a, b, c, reps);
      g_gflops[p] = flops / tg * 1e-9;
      d_gflops[p] = flops / td * 1e-9;
      ratio[p] = td / tg;
    }
    rel = relative_diff(ctx, graph, inputs, c, (size_t)s->m * (size_t)s->n);
    gs = bu_stats(g_gflops, (size_t)pairs);
    ds = bu_stats(d_gflops, (size_t)pairs);
    rs = bu_stats(ratio, (size_t)pairs);
    printf("%5d %5d %5d  %-18s %5d  %6.1f (%6.1f-%6.1f)  %6.1f (%6.1f-%6.1f)  %5.3f (%5.3f-%5.3f)  %.1e%s\n",
           s->m, s->k, s->n, s->label, reps, gs.median, gs.min, gs.max, ds.median, ds.min, ds.max, rs.median,
           rs.min, rs.max, rel, rel > 1e-4 ? "  RESULTS DIFFER" : "");
    if (rel > 1e-4) failed = 1;
    if (json)
      fprintf(json,
              "%s\n  {\"m\": %d, \"k\": %d, \"n\": %d, \"label\": \"%s\", \"reps\": %d, "
              "\"genie_gflops\": {\"median\": %.4g, \"min\": %.4g, \"max\": %.4g}, "
              "\"direct_gflops\": {\"median\": %.4g, \"min\": %.4g, \"max\": %.4g}, "
              "\"ratio\": {\"median\": %.4g, \"min\": %.4g, \"max\": %.4g}, \"rel_diff\": %.3g}",
              si ? "," : "", s->m, s->k, s->n, s->label, reps, gs.median, gs.min, gs.max, ds.median, ds.min,
              ds.max, rs.median, rs.min, rs.max, rel);

    free(ratio);
    free(d_gflops);
    free(g_gflops);
    free(c);
    free(b);
    free(a);
    genie_tensor_destroy(inputs[0]);
    genie_tensor_destroy(inputs[1]);
    genie_graph_destroy(graph);
  }
  if (json) fprintf(json, "\n]}\n");
  bu_json_close(json, opt.json_path);
  genie_shutdown(ctx);
  if (failed) fprintf(stderr, "bench_matmul: Genie's result differs from cblas_sgemm's\n");
  return failed;
}
