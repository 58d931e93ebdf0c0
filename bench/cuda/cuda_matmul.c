/*
 * bench_cuda_matmul — a matrix product through Genie on cuda:0 (a 1-node
 * graph submitted to an embedded context, inputs resident on the GPU,
 * submit + wait + release of the future) against cublasGemmEx called
 * directly on the same device in the same process (launch + synchronise),
 * interleaved A/B, per dtype. Both accumulate in f32 (no TF32). The ratio
 * is direct time / Genie time per pair; the goal is >= 0.95.
 *
 * Without a GPU it says why and exits 0 (docs/cuda.md).
 */
#include <cublas_v2.h>
#include <math.h>

#include "cuda_bench.h"

typedef struct shape {
  int m, k, n;
  const char *label;
} shape_t;

static const shape_t full_shapes[] = {
    {1024, 1024, 1024, "square"},       {4096, 4096, 4096, "square"},
    {8192, 8192, 8192, "square"},       {128, 768, 2304, "block attn.c_attn"},
    {128, 768, 3072, "block mlp.c_fc"}, {2048, 4096, 4096, "LLM prefill linear"},
};
static const shape_t quick_shapes[] = {{64, 64, 64, "square"}};
static const genie_dtype_t dtypes[] = {GENIE_DTYPE_F32, GENIE_DTYPE_F16, GENIE_DTYPE_BF16};
static const char *const input_names[2] = {"a", "b"};

static double time_genie(genie_context_t *ctx, const genie_graph_t *graph, genie_tensor_t *const *inputs, int reps) {
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

static cudaDataType_t cuda_type(genie_dtype_t t) {
  return t == GENIE_DTYPE_F32 ? CUDA_R_32F : t == GENIE_DTYPE_F16 ? CUDA_R_16F : CUDA_R_16BF;
}

/* Row-major C = A B as column-major Cᵀ = Bᵀ Aᵀ. */
static void gemm(cublasHandle_t h, const shape_t *s, genie_dtype_t t, const void *a, const void *b, void *c) {
  const float one = 1.0f, zero = 0.0f;
  cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, s->n, s->m, s->k, &one, b, cuda_type(t), s->n, a,
                                   cuda_type(t), s->k, &zero, c, cuda_type(t), s->n, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "bench_cuda_matmul: cublasGemmEx failed (%d)\n", (int)st);
    exit(1);
  }
}

static double time_direct(cublasHandle_t h, const shape_t *s, genie_dtype_t t, const void *a, const void *b,
                          void *c, int reps) {
  double t0 = bu_now_s();
  int r;
  for (r = 0; r < reps; ++r) {
    gemm(h, s, t, a, b, c);
    cb_cuda(cudaDeviceSynchronize(), "cublasGemmEx");
  }
  return (bu_now_s() - t0) / reps;
}

int main(int argc, char **argv) {
  bu_options_t opt = bu_parse_args(argc, argv, ", A/B pairs (default 11; --quick: 3)");
  const shape_t *shapes = opt.quick ? quick_shapes : full_shapes;
  size_t n_shapes = opt.quick ? 1 : sizeof full_shapes / sizeof *full_shapes, si, di;
  int pairs = opt.iters ? opt.iters : (opt.quick ? 3 : 11), first = 1, failed = 0;
  double sample_s = opt.quick ? 0.0 : 0.05;
  genie_context_t *ctx = NULL;
  cublasHandle_t h = NULL;
  FILE *json;

  bu_check(genie_init(NULL, &ctx), "genie_init");
  cb_require_gpu("bench_cuda_matmul", ctx, opt.json_path);
  json = bu_json_open(opt.json_path);
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "bench_cuda_matmul: cublasCreate failed\n");
    return 1;
  }
  cb_print_gpu();
  printf("matmul on cuda:0: Genie 1-node graph (embedded, inputs resident, submit+wait) vs cublasGemmEx + sync\n");
  printf("%d interleaved pairs per shape after a warm-up; ratio = direct time / Genie time (goal >= 0.95)\n\n", pairs);
  printf("%-5s %5s %5s %5s  %-20s %5s  %-12s %-12s %-21s %s\n", "dtype", "m", "k", "n", "shape", "reps",
         "Genie TF/s", "cuBLAS TF/s", "ratio med (min-max)", "max rel. diff");
  if (json) fprintf(json, "{\"benchmark\": \"cuda_matmul\", \"quick\": %s, \"pairs\": %d, \"results\": [",
                    opt.quick ? "true" : "false", pairs);

  for (di = 0; di < sizeof dtypes / sizeof *dtypes; ++di) {
    const genie_dtype_t t = dtypes[di];
    const size_t es = t == GENIE_DTYPE_F32 ? 4 : 2;
    for (si = 0; si < n_shapes; ++si) {
      const shape_t *s = &shapes[si];
      const int64_t a_shape[2] = {s->m, s->k}, b_shape[2] = {s->k, s->n};
      const char *node_in[2] = {"a", "b"}, *node_out[1] = {"c"};
      const size_t na = (size_t)s->m * s->k, nb = (size_t)s->k * s->n, nc = (size_t)s->m * s->n;
      const double flops = 2.0 * s->m * s->k * s->n;
      genie_graph_t *graph = NULL;
      genie_tensor_t *inputs[2] = {NULL, NULL}, *out = NULL;
      genie_future_t *fut = NULL;
      void *ha = bu_malloc(na * es), *hb = bu_malloc(nb * es), *hc = bu_malloc(nc * es), *hg = bu_malloc(nc * es);
      void *da = NULL, *db = NULL, *dc = NULL;
      double *ratio = bu_malloc(sizeof(double) * (size_t)pairs), *gt = bu_malloc(sizeof(double) * (size_t)pairs);
      double *dt = bu_malloc(sizeof(double) * (size_t)pairs), diff = 0, scale = 0;
      bu_stats_t rs, gs, ds;
      int reps = 1, p;
      size_t i;

      bu_check(genie_graph_create("matmul", &graph), "genie_graph_create");
      bu_check(genie_graph_add_input(graph, "a", t, a_shape, 2), "add input a");
      bu_check(genie_graph_add_input(graph, "b", t, b_shape, 2), "add input b");
      bu_check(genie_graph_add_node(graph, "matmul", "mm", node_in, 2, node_out, 1), "add node");
      bu_check(genie_graph_mark_output(graph, "c"), "mark output");
      bu_check(genie_graph_validate(graph), "validate");
      cb_fill(t, na, ha, 1);
      cb_fill(t, nb, hb, 2);
      bu_check(genie_tensor_alloc(ctx, t, a_shape, 2, "cuda:0", &inputs[0]), "alloc a on cuda:0");
      bu_check(genie_tensor_alloc(ctx, t, b_shape, 2, "cuda:0", &inputs[1]), "alloc b on cuda:0");
      bu_check(genie_tensor_write(inputs[0], 0, ha, na * es), "write a");
      bu_check(genie_tensor_write(inputs[1], 0, hb, nb * es), "write b");
      cb_cuda(cudaMalloc(&da, na * es), "cudaMalloc");
      cb_cuda(cudaMalloc(&db, nb * es), "cudaMalloc");
      cb_cuda(cudaMalloc(&dc, nc * es), "cudaMalloc");
      cb_cuda(cudaMemcpy(da, ha, na * es, cudaMemcpyHostToDevice), "cudaMemcpy");
      cb_cuda(cudaMemcpy(db, hb, nb * es, cudaMemcpyHostToDevice), "cudaMemcpy");

      time_genie(ctx, graph, inputs, 1);
      time_direct(h, s, t, da, db, dc, 1);
      {
        double tg = time_genie(ctx, graph, inputs, 1), td = time_direct(h, s, t, da, db, dc, 1);
        double tmin = tg < td ? tg : td;
        if (sample_s > 0 && tmin < sample_s) reps = (int)(sample_s / (tmin > 1e-7 ? tmin : 1e-7)) + 1;
      }
      for (p = 0; p < pairs; ++p) {
        double tg = time_genie(ctx, graph, inputs, reps), td = time_direct(h, s, t, da, db, dc, reps);
        gt[p] = flops / tg * 1e-12;
        dt[p] = flops / td * 1e-12;
        ratio[p] = td / tg;
      }
      /* Same product on both sides: compare the results. */
      bu_check(genie_graph_submit(ctx, graph, input_names, inputs, 2, &fut), "genie_graph_submit");
      bu_check(genie_future_wait(fut, -1), "executing matmul");
      bu_check(genie_future_output(fut, 0, &out), "genie_future_output");
      bu_check(genie_tensor_read(out, 0, hg, nc * es), "genie_tensor_read");
      cb_cuda(cudaMemcpy(hc, dc, nc * es, cudaMemcpyDeviceToHost), "cudaMemcpy");
      for (i = 0; i < nc; ++i) {
        double g = cb_load(t, hg, i), c = cb_load(t, hc, i);
        if (fabs(g - c) > diff) diff = fabs(g - c);
        if (fabs(c) > scale) scale = fabs(c);
      }
      diff = scale > 0 ? diff / scale : diff;
      if (diff > (t == GENIE_DTYPE_F32 ? 1e-4 : 2e-2)) failed = 1;
      rs = bu_stats(ratio, (size_t)pairs);
      gs = bu_stats(gt, (size_t)pairs);
      ds = bu_stats(dt, (size_t)pairs);
      printf("%-5s %5d %5d %5d  %-20s %5d  %-12.1f %-12.1f %5.3f (%5.3f-%5.3f)  %.1e\n", genie_dtype_name(t), s->m,
             s->k, s->n, s->label, reps, gs.median, ds.median, rs.median, rs.min, rs.max, diff);
      if (json)
        fprintf(json,
                "%s\n  {\"dtype\": \"%s\", \"m\": %d, \"k\": %d, \"n\": %d, \"reps\": %d, \"genie_tflops\": %.4g, "
                "\"cublas_tflops\": %.4g, \"ratio\": {\"median\": %.4g, \"min\": %.4g, \"max\": %.4g}, "
                "\"rel_diff\": %.3g}",
                first ? "" : ",", genie_dtype_name(t), s->m, s->k, s->n, reps, gs.median, ds.median, rs.median,
                rs.min, rs.max, diff);
      first = 0;
      genie_tensor_destroy(out);
      genie_future_destroy(fut);
      genie_tensor_destroy(inputs[0]);
      genie_tensor_destroy(inputs[1]);
      genie_graph_destroy(graph);
      cudaFree(da);
      cudaFree(db);
      cudaFree(dc);
      free(ha), free(hb), free(hc), free(hg), free(ratio), free(gt), free(dt);
    }
  }
  if (json) fprintf(json, "\n]}\n");
  bu_json_close(json, opt.json_path);
  cublasDestroy(h);
  genie_shutdown(ctx);
  if (failed) fprintf(stderr, "bench_cuda_matmul: Genie's result differs from cuBLAS's\n");
  return failed;
}
