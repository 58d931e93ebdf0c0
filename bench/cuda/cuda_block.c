/*
 * bench_cuda_block — the GPT-2 transformer block (samples/c/
 * transformer_block_graph.h: batch 1, seq 128, hidden 768, 12 heads, f32)
 * through Genie on cuda:0, weights resident, against its matrix products
 * alone through cuBLAS on the same device (c_attn, per-head QKᵀ and PV as
 * strided batches, c_proj, c_fc, mlp c_proj): the floor no implementation
 * of the block goes below. Interleaved A/B; ratio = GEMM time / Genie time
 * (1.0 would be the GEMMs with everything else free).
 *
 * Third in each round, the same block on a GPU server over loopback
 * (genie_server_create in this process; weights on remote:1, its cuda:0):
 * what disaggregation costs over running on the local GPU, as
 * remote / embedded per round.
 *
 * Without a GPU it says why and exits 0 (docs/cuda.md).
 */
#include <cublas_v2.h>

#include <genie_seed.h>
#include "../../samples/c/transformer_block_graph.h"
#include "cuda_bench.h"

static void blas(cublasStatus_t s, const char *what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  fprintf(stderr, "bench_cuda_block: %s failed (%d)\n", what, (int)s);
  exit(1);
}

/* Row-major C[t, n] = A[t, k] W[n, k]ᵀ (the linear layout). */
static void linear(cublasHandle_t h, int t, int k, int n, const float *a, const float *w, float *c) {
  const float one = 1.0f, zero = 0.0f;
  blas(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, n, t, k, &one, w, k, a, k, &zero, c, n), "cublasSgemm");
}

typedef struct bufs {
  float *x, *w_qkv, *qkv, *scores, *ctx, *w_proj, *attn, *w_fc, *fc, *w_fc_proj, *out;
} bufs_t;

static double time_gemms(cublasHandle_t h, bufs_t *f, const tb_dims_t *d) {
  const int s = (int)d->seq, e = (int)d->hidden, m = (int)d->mlp, dh = e / (int)d->heads, H = (int)d->heads;
  const float one = 1.0f, zero = 0.0f;
  double t0 = bu_now_s();
  linear(h, s, e, 3 * e, f->x, f->w_qkv, f->qkv);
  /* scores[h] = Q_h K_hᵀ (s x s), heads read in place from qkv (row stride 3e). */
  blas(cublasSgemmStridedBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, s, s, dh, &one, f->qkv + e, 3 * e, dh, f->qkv, 3 * e,
                                 dh, &zero, f->scores, s, (long long)s * s, H),
       "scores");
  /* ctx[:, h] = P_h V_h (s x dh), written in place into ctx (row stride e). */
  blas(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, dh, s, s, &one, f->qkv + 2 * e, 3 * e, dh, f->scores,
                                 s, (long long)s * s, &zero, f->ctx, e, dh, H),
       "context");
  linear(h, s, e, e, f->ctx, f->w_proj, f->attn);
  linear(h, s, e, m, f->attn, f->w_fc, f->fc);
  linear(h, s, m, e, f->fc, f->w_fc_proj, f->out);
  cb_cuda(cudaDeviceSynchronize(), "GEMMs");
  return bu_now_s() - t0;
}

static double time_genie(genie_context_t *ctx, const genie_graph_t *g, genie_tensor_t *const *in) {
  genie_future_t *fut = NULL;
  double t0 = bu_now_s(), t;
  bu_check(genie_graph_submit(ctx, g, tb_input_names, in, TB_NUM_INPUTS, &fut), "genie_graph_submit");
  bu_check(genie_future_wait(fut, -1), "executing the block");
  t = bu_now_s() - t0;
  genie_future_destroy(fut);
  return t;
}

/* The seeded value of every input, allocated on `device` of `ctx` (the
 * weights stay there for every run). Seeds through `seed_ctx`'s host. */
static void place_inputs(genie_context_t *seed_ctx, genie_context_t *ctx, const genie_graph_t *graph,
                         const char *device, genie_tensor_t **in) {
  int i;
  for (i = 0; i < TB_NUM_INPUTS; ++i) {
    genie_tensor_t *host = NULL;
    genie_dtype_t dt;
    int64_t shape[GENIE_MAX_DIMS];
    size_t nd, nbytes;
    void *bytes;
    bu_check(genie_seed_tensor(seed_ctx, graph, tb_input_names[i], &host), "seeding an input");
    bu_check(genie_tensor_info(host, &dt, shape, &nd, &nbytes), "genie_tensor_info");
    bytes = bu_malloc(nbytes);
    bu_check(genie_tensor_read(host, 0, bytes, nbytes), "genie_tensor_read");
    bu_check(genie_tensor_alloc(ctx, dt, shape, nd, device, &in[i]), device);
    bu_check(genie_tensor_write(in[i], 0, bytes, nbytes), "genie_tensor_write");
    free(bytes);
    genie_tensor_destroy(host);
  }
}

int main(int argc, char **argv) {
  bu_options_t opt = bu_parse_args(argc, argv, ", A/B pairs (default 31; --quick: 3)");
  tb_dims_t d = tb_gpt2_dims(opt.quick ? 16 : 128);
  int pairs = opt.iters ? opt.iters : (opt.quick ? 3 : 31), p, i;
  genie_context_t *ctx = NULL, *rctx = NULL;
  genie_config_t *cfg = NULL;
  genie_server_t *server = NULL;
  int32_t port = 0;
  genie_graph_t *graph = NULL;
  genie_tensor_t *in[TB_NUM_INPUTS] = {NULL}, *rin[TB_NUM_INPUTS] = {NULL};
  cublasHandle_t h = NULL;
  bufs_t f;
  float **slots[] = {&f.x, &f.w_qkv, &f.qkv, &f.scores, &f.ctx, &f.w_proj, &f.attn, &f.w_fc, &f.fc, &f.w_fc_proj,
                     &f.out};
  const size_t s = (size_t)d.seq, e = (size_t)d.hidden, m = (size_t)d.mlp;
  const size_t counts[] = {s * e, 3 * e * e, s * 3 * e, (size_t)d.heads * s * s, s * e, e * e, s * e, m * e, s * m,
                           e * m, s * e};
  double *ratio = bu_malloc(sizeof(double) * (size_t)pairs), *gm = bu_malloc(sizeof(double) * (size_t)pairs);
  double *gg = bu_malloc(sizeof(double) * (size_t)pairs), *gr = bu_malloc(sizeof(double) * (size_t)pairs);
  double *rr = bu_malloc(sizeof(double) * (size_t)pairs);
  bu_stats_t rs, gs, ms, grs, rrs;
  FILE *json;
  size_t k;

  bu_check(genie_init(NULL, &ctx), "genie_init");
  cb_require_gpu("bench_cuda_block", ctx, opt.json_path);
  json = bu_json_open(opt.json_path);
  cb_print_gpu();
  bu_check(tb_build_graph(&d, &graph), "building the block");
  place_inputs(ctx, ctx, graph, "cuda:0", in);
  /* A GPU server on loopback: its remote:0 is its CPU, remote:1 its cuda:0. */
  bu_check(genie_config_create(&cfg), "genie_config_create");
  bu_check(genie_config_set_use_env(cfg, 0), "genie_config_set_use_env");
  bu_check(genie_server_create(cfg, "127.0.0.1", 0, &server), "genie_server_create");
  bu_check(genie_server_port(server, &port), "genie_server_port");
  bu_check(genie_config_set_master_addr(cfg, "127.0.0.1"), "genie_config_set_master_addr");
  bu_check(genie_config_set_master_port(cfg, port), "genie_config_set_master_port");
  bu_check(genie_init(cfg, &rctx), "genie_init (remote)");
  genie_config_destroy(cfg);
  place_inputs(ctx, rctx, graph, "remote:1", rin);
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
  for (k = 0; k < sizeof slots / sizeof *slots; ++k) {
    float *hostv = bu_malloc(counts[k] * sizeof(float));
    cb_fill(GENIE_DTYPE_F32, counts[k], hostv, (unsigned)k);
    cb_cuda(cudaMalloc((void **)slots[k], counts[k] * sizeof(float)), "cudaMalloc");
    cb_cuda(cudaMemcpy(*slots[k], hostv, counts[k] * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
    free(hostv);
  }
  printf("GPT-2 block (batch %lld, seq %lld, hidden %lld, %lld heads, f32) on cuda:0: Genie vs its GEMMs alone "
         "(cuBLAS),\nand on a GPU server over loopback (remote:1 = its cuda:0)\n"
         "%d interleaved rounds after a warm-up; ratio = GEMM time / Genie time\n\n",
         (long long)d.batch, (long long)d.seq, (long long)d.hidden, (long long)d.heads, pairs);
  time_genie(ctx, graph, in);
  time_gemms(h, &f, &d);
  time_genie(rctx, graph, rin);
  for (p = 0; p < pairs; ++p) {
    gg[p] = time_genie(ctx, graph, in) * 1e3;
    gm[p] = time_gemms(h, &f, &d) * 1e3;
    gr[p] = time_genie(rctx, graph, rin) * 1e3;
    ratio[p] = gm[p] / gg[p];
    rr[p] = gr[p] / gg[p];
  }
  gs = bu_stats(gg, (size_t)pairs);
  ms = bu_stats(gm, (size_t)pairs);
  rs = bu_stats(ratio, (size_t)pairs);
  grs = bu_stats(gr, (size_t)pairs);
  rrs = bu_stats(rr, (size_t)pairs);
  printf("%-26s %9s %9s %9s\n", "", "p50 ms", "p99 ms", "min ms");
  printf("%-26s %9.3f %9.3f %9.3f\n", "Genie block", gs.median, gs.p99, gs.min);
  printf("%-26s %9.3f %9.3f %9.3f\n", "its GEMMs (cuBLAS)", ms.median, ms.p99, ms.min);
  printf("%-26s %9.3f %9.3f %9.3f\n", "Genie block, GPU server", grs.median, grs.p99, grs.min);
  printf("ratio (floor / Genie): median %.3f (min %.3f, max %.3f)\n", rs.median, rs.min, rs.max);
  printf("GPU server / embedded per round: median %.3f (min %.3f, max %.3f)\n", rrs.median, rrs.min, rrs.max);
  if (json) {
    fprintf(json,
            "{\"benchmark\": \"cuda_block\", \"quick\": %s, \"pairs\": %d, \"seq\": %lld, "
            "\"genie_ms\": {\"p50\": %.4g, \"p99\": %.4g}, \"gemm_ms\": {\"p50\": %.4g, \"p99\": %.4g}, "
            "\"ratio\": {\"median\": %.4g, \"min\": %.4g, \"max\": %.4g}, "
            "\"server_ms\": {\"p50\": %.4g, \"p99\": %.4g}, \"server_over_embedded\": {\"median\": %.4g, "
            "\"min\": %.4g, \"max\": %.4g}}\n",
            opt.quick ? "true" : "false", pairs, (long long)d.seq, gs.median, gs.p99, ms.median, ms.p99, rs.median,
            rs.min, rs.max, grs.median, grs.p99, rrs.median, rrs.min, rrs.max);
  }
  bu_json_close(json, opt.json_path);
  for (k = 0; k < sizeof slots / sizeof *slots; ++k) cudaFree(*slots[k]);
  for (i = 0; i < TB_NUM_INPUTS; ++i) {
    genie_tensor_destroy(in[i]);
    genie_tensor_destroy(rin[i]);
  }
  genie_shutdown(rctx);
  genie_server_destroy(server);
  cublasDestroy(h);
  genie_graph_destroy(graph);
  genie_shutdown(ctx);
  free(ratio), free(gm), free(gg), free(gr), free(rr);
  return 0;
}
