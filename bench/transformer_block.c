/*
 * bench_transformer_block — latency of one GPT-2 block (the graph of
 * samples/c/transformer_block_graph.h: batch 1, seq 128, hidden 768, 12
 * heads, MLP 3072) in an embedded context with resident weights, against
 * its floor measured in the same run, interleaved: the block's matrix
 * products alone (four linears and, per head, q·kᵀ and p·v) as direct
 * cblas_sgemm calls on the same thread count. The floor leaves out layer
 * norms, softmax, GELU, bias and residual adds, so Genie can approach it
 * but not reach it.
 */
#define _GNU_SOURCE /* cpu_set_t in OpenBLAS's cblas.h */

#include <cblas.h>
#include <math.h>

#include <genie_seed.h>
#include "../samples/c/transformer_block_graph.h"
#include "bench_util.h"

/* Buffers for the floor: activations and weights of the same sizes. */
typedef struct floor_bufs {
  float *x, *w_qkv, *qkv, *scores, *ctx, *w_proj, *attn, *w_fc, *fc, *w_fc_proj, *out;
} floor_bufs_t;

static void floor_alloc(floor_bufs_t *f, const tb_dims_t *d) {
  size_t t = (size_t)(d->batch * d->seq), e = (size_t)d->hidden, m = (size_t)d->mlp;
  const int64_t w_qkv[2] = {3 * d->hidden, d->hidden}, w_proj[2] = {d->hidden, d->hidden};
  const int64_t w_fc[2] = {d->mlp, d->hidden}, w_fc_proj[2] = {d->hidden, d->mlp};
  const int64_t x_shape[2] = {(int64_t)t, d->hidden};
  f->x = bu_malloc(sizeof(float) * t * e);
  f->w_qkv = bu_malloc(sizeof(float) * 3 * e * e);
  f->qkv = bu_malloc(sizeof(float) * t * 3 * e);
  f->scores = bu_malloc(sizeof(float) * (size_t)d->seq * (size_t)d->seq);
  f->ctx = bu_malloc(sizeof(float) * t * e);
  f->w_proj = bu_malloc(sizeof(float) * e * e);
  f->attn = bu_malloc(sizeof(float) * t * e);
  f->w_fc = bu_malloc(sizeof(float) * m * e);
  f->fc = bu_malloc(sizeof(float) * t * m);
  f->w_fc_proj = bu_malloc(sizeof(float) * e * m);
  f->out = bu_malloc(sizeof(float) * t * e);
  genie_seed_fill("x", GENIE_DTYPE_F32, x_shape, 2, f->x);
  genie_seed_fill("h.0.attn.c_attn.weight", GENIE_DTYPE_F32, w_qkv, 2, f->w_qkv);
  genie_seed_fill("h.0.attn.c_proj.weight", GENIE_DTYPE_F32, w_proj, 2, f->w_proj);
  genie_seed_fill("h.0.mlp.c_fc.weight", GENIE_DTYPE_F32, w_fc, 2, f->w_fc);
  genie_seed_fill("h.0.mlp.c_proj.weight", GENIE_DTYPE_F32, w_fc_proj, 2, f->w_fc_proj);
}

static void floor_free(floor_bufs_t *f) {
  free(f->x);
  free(f->w_qkv);
  free(f->qkv);
  free(f->scores);
  free(f->ctx);
  free(f->w_proj);
  free(f->attn);
  free(f->w_fc);
  free(f->fc);
  free(f->w_fc_proj);
  free(f->out);
}

/* C[t, n] = A[t, k] · W[n, k]ᵀ, the `linear` layout. */
static void linear_gemm(int t, int k, int n, const float *a, const float *w, float *c) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, n, k, 1.0f, a, k, w, k, 0.0f, c, n);
}

/* Seconds for the block's matrix products (batch 1). Heads are read in
 * place from the fused qkv buffer (leading dimension 3E), as a fused
 * attention kernel would. */
static double time_floor(floor_bufs_t *f, const tb_dims_t *d) {
  int s = (int)d->seq, e = (int)d->hidden, m = (int)d->mlp, dh = e / (int)d->heads, h;
  double t0 = bu_now_s();
  linear_gemm(s, e, 3 * e, f->x, f->w_qkv, f->qkv);
  for (h = 0; h < d->heads; ++h) {
    const size_t col = (size_t)h * (size_t)dh; /* the head's first column */
    const float *q = f->qkv + col, *k = f->qkv + e + col, *v = f->qkv + 2 * e + col;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s, s, dh, 1.0f, q, 3 * e, k, 3 * e, 0.0f, f->scores,
                s);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, dh, s, 1.0f, f->scores, s, v, 3 * e, 0.0f,
                f->ctx + col, e);
  }
  linear_gemm(s, e, e, f->ctx, f->w_proj, f->attn);
  linear_gemm(s, e, m, f->attn, f->w_fc, f->fc);
  linear_gemm(s, m, e, f->fc, f->w_fc_proj, f->out);
  return bu_now_s() - t0;
}

/* Seconds from submission to completion; *exec_s gets the future's own
 * execution time (first node start to last node end). */
static double time_genie(genie_context_t *ctx, const genie_graph_t *graph, genie_tensor_t *const *inputs,
                         double *exec_s) {
  genie_future_t *fut = NULL;
  uint64_t exec_ns = 0;
  double t0 = bu_now_s(), t;
  bu_check(genie_graph_submit(ctx, graph, tb_input_names, inputs, TB_NUM_INPUTS, &fut), "genie_graph_submit");
  bu_check(genie_future_wait(fut, -1), "executing the block");
  t = bu_now_s() - t0;
  bu_check(genie_future_exec_ns(fut, &exec_ns), "genie_future_exec_ns");
  genie_future_destroy(fut);
  *exec_s = (double)exec_ns * 1e-9;
  return t;
}

static void print_row(const char *what, bu_stats_t ms, double tokens, double flops) {
  printf("%-28s %8.3f %8.3f %8.3f %8.3f %12.0f %10.1f\n", what, ms.median, ms.p99, ms.min, ms.max,
         tokens / (ms.median * 1e-3), flops / (ms.median * 1e-3) * 1e-9);
}

static void json_stats(FILE *j, const char *key, bu_stats_t ms) {
  fprintf(j, "\"%s\": {\"p50\": %.4g, \"p99\": %.4g, \"min\": %.4g, \"max\": %.4g}", key, ms.median, ms.p99,
          ms.min, ms.max);
}

int main(int argc, char **argv) {
  bu_options_t opt = bu_parse_args(argc, argv, ", A/B pairs (default 50; --quick: 5)");
  tb_dims_t d = tb_gpt2_dims(128);
  int pairs = opt.iters ? opt.iters : (opt.quick ? 5 : 50);
  FILE *json = bu_json_open(opt.json_path);
  genie_context_t *ctx = NULL;
  genie_graph_t *graph = NULL;
  genie_tensor_t *inputs[TB_NUM_INPUTS];
  double *genie_ms = bu_malloc(sizeof(double) * (size_t)pairs);
  double *exec_ms = bu_malloc(sizeof(double) * (size_t)pairs);
  double *floor_ms = bu_malloc(sizeof(double) * (size_t)pairs);
  double *ratio = bu_malloc(sizeof(double) * (size_t)pairs);
  double tokens, flops, exec_s;
  bu_stats_t gs, es, fs, rs;
  size_t nodes = 0;
  floor_bufs_t fb;
  int i;

  if (opt.quick) {
    d.seq = 16;
    d.hidden = 64;
    d.heads = 4;
    d.mlp = 256;
  }
  tokens = (double)(d.batch * d.seq);
  flops = tb_flops(&d);
  bu_check(tb_build_graph(&d, &graph), "building the block");
  bu_check(genie_graph_num_nodes(graph, &nodes), "genie_graph_num_nodes");
  bu_check(genie_init(NULL, &ctx), "genie_init");
  for (i = 0; i < TB_NUM_INPUTS; ++i)
    bu_check(genie_seed_tensor(ctx, graph, tb_input_names[i], &inputs[i]), tb_input_names[i]);
  floor_alloc(&fb, &d);

  for (i = 0; i < 3; ++i) {
    time_genie(ctx, graph, inputs, &exec_s);
    time_floor(&fb, &d);
  }
  for (i = 0; i < pairs; ++i) {
    genie_ms[i] = time_genie(ctx, graph, inputs, &exec_s) * 1e3;
    exec_ms[i] = exec_s * 1e3;
    floor_ms[i] = time_floor(&fb, &d) * 1e3;
    ratio[i] = floor_ms[i] / genie_ms[i];
  }
  gs = bu_stats(genie_ms, (size_t)pairs);
  es = bu_stats(exec_ms, (size_t)pairs);
  fs = bu_stats(floor_ms, (size_t)pairs);
  rs = bu_stats(ratio, (size_t)pairs);

  printf("GPT-2 block: batch %lld, seq %lld, hidden %lld, %lld heads, MLP %lld; %zu nodes; embedded\n",
         (long long)d.batch, (long long)d.seq, (long long)d.hidden, (long long)d.heads, (long long)d.mlp,
         nodes);
  printf("BLAS: %s; %d BLAS threads on both sides\n", openblas_get_config(), openblas_get_num_threads());
  printf("%d interleaved pairs after 3 warm-ups (p99 of fewer than 100 samples is the max)\n\n", pairs);
  printf("%-28s %8s %8s %8s %8s %12s %10s\n", "", "p50 ms", "p99 ms", "min ms", "max ms", "tokens/s",
         "GFLOP/s");
  print_row("Genie block (submit..wait)", gs, tokens, flops);
  print_row("  of which executing", es, tokens, flops);
  print_row("floor: cblas GEMMs only", fs, tokens, flops);
  printf("\nfloor / Genie per pair: median %.3f (min %.3f, max %.3f)\n", rs.median, rs.min, rs.max);

  if (json) {
    fprintf(json,
            "{\"benchmark\": \"transformer_block\", \"quick\": %s, \"pairs\": %d, "
            "\"blas_threads\": %d, \"batch\": %lld, \"seq\": %lld, \"hidden\": %lld, "
            "\"heads\": %lld, \"mlp\": %lld, \"nodes\": %zu, \"tokens_per_s_p50\": %.6g, ",
            opt.quick ? "true" : "false", pairs, openblas_get_num_threads(), (long long)d.batch,
            (long long)d.seq, (long long)d.hidden, (long long)d.heads, (long long)d.mlp, nodes,
            tokens / (gs.median * 1e-3));
    json_stats(json, "genie_ms", gs);
    fprintf(json, ", ");
    json_stats(json, "genie_exec_ms", es);
    fprintf(json, ", ");
    json_stats(json, "floor_ms", fs);
    fprintf(json, ", \"floor_over_genie\": {\"median\": %.4g, \"min\": %.4g, \"max\": %.4g}}\n", rs.median,
            rs.min, rs.max);
  }
  bu_json_close(json, opt.json_path);

  floor_free(&fb);
  for (i = 0; i < TB_NUM_INPUTS; ++i) genie_tensor_destroy(inputs[i]);
  genie_graph_destroy(graph);
  genie_shutdown(ctx);
  free(ratio);
  free(floor_ms);
  free(exec_ms);
  free(genie_ms);
  return 0;
}
