/*
 * Models on cuda:0 match the CPU (C API, embedded mode): the GPT-2
 * transformer block of samples/c/transformer_block_graph.h with its
 * weights resident on the GPU, whose plan places the block's heavy nodes
 * there (genie_plan_explain_bound), and the decode loop of
 * samples/c/gpt2_decode.h with every layer's weights and KV caches on the
 * GPU, token by token, and the block again through a GPU server over
 * loopback (its weights on the server's cuda:0). Exits 77 with the reason where cuda:0 is
 * unavailable (no driver, no device).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <genie.h>
#include <genie_seed.h>

#include "../../samples/c/gpt2_decode.h"
#include "../../samples/c/transformer_block_graph.h"

static int failures = 0;

static void expect(int ok, const char *what) {
  if (ok) {
    printf("ok: %s\n", what);
  } else {
    printf("FAIL: %s\n", what);
    ++failures;
  }
}

static void must(genie_status_t st, const char *what) {
  if (st == GENIE_OK) return;
  fprintf(stderr, "%s: %s: %s\n", what, genie_status_str(st), genie_last_error());
  exit(1);
}

/* Largest |a - b| relative to the largest |a| (NaN anywhere: huge). */
static double rel_diff(const float *a, const float *b, size_t n) {
  double d = 0, s = 1e-12;
  size_t i;
  for (i = 0; i < n; ++i) {
    if (isnan(a[i]) || isnan(b[i])) return 1e30;
    if (fabs(a[i] - b[i]) > d) d = fabs(a[i] - b[i]);
    if (fabs(a[i]) > s) s = fabs(a[i]);
  }
  return d / s;
}

/* A new tensor of `ctx` on `device` holding `src`'s bytes. */
static genie_tensor_t *copy_to(genie_context_t *ctx, genie_tensor_t *src, const char *device) {
  genie_tensor_t *t = NULL;
  genie_dtype_t dt;
  int64_t shape[GENIE_MAX_DIMS];
  size_t nd, nbytes;
  void *bytes;
  must(genie_tensor_info(src, &dt, shape, &nd, &nbytes), "genie_tensor_info");
  bytes = malloc(nbytes ? nbytes : 1);
  must(genie_tensor_read(src, 0, bytes, nbytes), "genie_tensor_read");
  must(genie_tensor_alloc(ctx, dt, shape, nd, device, &t), "genie_tensor_alloc");
  must(genie_tensor_write(t, 0, bytes, nbytes), "genie_tensor_write");
  free(bytes);
  return t;
}

/* Expects `got` (n_got values) to match `want` within 1e-3. */
static void expect_match(const float *want, size_t n_want, const float *got, size_t n_got, const char *what) {
  char msg[160];
  snprintf(msg, sizeof msg, "%s: the output has the CPU's size", what);
  expect(n_want == n_got, msg);
  if (n_want != n_got) return;
  printf("%s: max relative difference %.2e\n", what, rel_diff(want, got, n_want));
  snprintf(msg, sizeof msg, "%s matches the CPU", what);
  expect(rel_diff(want, got, n_want) < 1e-3, msg);
}

static float *run_block(genie_context_t *ctx, const genie_graph_t *g, genie_tensor_t *const *in, size_t *n) {
  genie_future_t *f = NULL;
  genie_tensor_t *out = NULL;
  genie_dtype_t dt;
  int64_t shape[GENIE_MAX_DIMS];
  size_t nd, nbytes;
  float *v;
  must(genie_graph_submit(ctx, g, tb_input_names, in, TB_NUM_INPUTS, &f), "genie_graph_submit");
  must(genie_future_wait(f, -1), "executing the block");
  must(genie_future_output_by_name(f, TB_OUTPUT_NAME, &out), "block output");
  must(genie_tensor_info(out, &dt, shape, &nd, &nbytes), "genie_tensor_info");
  v = malloc(nbytes);
  must(genie_tensor_read(out, 0, v, nbytes), "genie_tensor_read");
  *n = nbytes / sizeof(float);
  genie_tensor_destroy(out);
  genie_future_destroy(f);
  return v;
}

/* The same block through a GPU server over loopback (genie_server_create in
 * this process): the weights on remote:1, the server's cuda:0. */
static void remote_block(const genie_graph_t *g, genie_tensor_t *const *cpu, const float *want, size_t n_want) {
  genie_server_t *srv = NULL;
  genie_config_t *cfg = NULL;
  genie_context_t *rctx = NULL;
  genie_tensor_t *in[TB_NUM_INPUTS] = {NULL};
  int32_t port = 0;
  float *got;
  size_t n_got;
  int i;
  must(genie_server_create(NULL, "127.0.0.1", 0, &srv), "genie_server_create");
  must(genie_server_port(srv, &port), "genie_server_port");
  must(genie_config_create(&cfg), "genie_config_create");
  must(genie_config_set_use_env(cfg, 0), "genie_config_set_use_env");
  must(genie_config_set_master_addr(cfg, "127.0.0.1"), "genie_config_set_master_addr");
  must(genie_config_set_master_port(cfg, port), "genie_config_set_master_port");
  must(genie_init(cfg, &rctx), "genie_init (remote)");
  for (i = 0; i < TB_NUM_INPUTS; ++i) in[i] = copy_to(rctx, cpu[i], i == 0 ? "remote:0" : "remote:1");
  expect(strcmp(genie_tensor_device(in[1]), "remote:1") == 0, "a weight lives on remote:1 (the server's GPU)");
  got = run_block(rctx, g, in, &n_got);
  expect_match(want, n_want, got, n_got, "the block on a GPU server over loopback");
  free(got);
  for (i = 0; i < TB_NUM_INPUTS; ++i) genie_tensor_destroy(in[i]);
  genie_shutdown(rctx);
  genie_config_destroy(cfg);
  genie_server_destroy(srv);
}

static void transformer_block(genie_context_t *ctx) {
  tb_dims_t d = tb_gpt2_dims(32);
  genie_graph_t *g = NULL;
  genie_tensor_t *cpu[TB_NUM_INPUTS] = {NULL}, *gpu[TB_NUM_INPUTS] = {NULL};
  float *want, *got;
  size_t n_want, n_got;
  char *plan = NULL;
  int i;
  d.hidden = 256;
  d.heads = 4;
  d.mlp = 1024;
  must(tb_build_graph(&d, &g), "building the block");
  for (i = 0; i < TB_NUM_INPUTS; ++i) {
    must(genie_seed_tensor(ctx, g, tb_input_names[i], &cpu[i]), "seeding an input");
    /* x stays in host memory, as a client's input; the weights live on the GPU. */
    gpu[i] = copy_to(ctx, cpu[i], i == 0 ? "cpu" : "cuda:0");
  }
  must(genie_plan_explain_bound(ctx, g, tb_input_names, gpu, TB_NUM_INPUTS, &plan), "genie_plan_explain_bound");
  expect(strstr(plan, "cuda:0") != NULL, "the block's plan places nodes on cuda:0");
  genie_free(plan);
  want = run_block(ctx, g, cpu, &n_want);
  got = run_block(ctx, g, gpu, &n_got);
  expect_match(want, n_want, got, n_got, "the block on cuda:0");
  free(got);
  remote_block(g, cpu, want, n_want);
  free(want);
  for (i = 0; i < TB_NUM_INPUTS; ++i) {
    genie_tensor_destroy(cpu[i]);
    genie_tensor_destroy(gpu[i]);
  }
  genie_graph_destroy(g);
}

static void decode_loop(genie_context_t *ctx) {
  gd_dims_t dm = {128, 4, 2, 500, 3};
  gd_model_t m;
  gd_session_t cpu, gpu;
  const char *on_gpu[2] = {"cuda:0", "cuda:0"};
  float *lc = malloc(sizeof(float) * (size_t)dm.vocab), *lg = malloc(sizeof(float) * (size_t)dm.vocab);
  double worst = 0;
  int step, same_tokens = 1;
  gd_model_init(&m, dm, 42);
  gd_session_open(&cpu, ctx, &m, NULL, 1);
  gd_session_open(&gpu, ctx, &m, on_gpu, 1);
  for (step = 0; step < 8; ++step) {
    double r;
    gd_step(&cpu, lc);
    gd_step(&gpu, lg);
    r = rel_diff(lc, lg, (size_t)dm.vocab);
    if (r > worst) worst = r;
    same_tokens &= cpu.token == gpu.token;
  }
  printf("decode: worst relative difference of the logits over 8 steps %.2e\n", worst);
  expect(worst < 1e-3, "the decode loop's logits on cuda:0 match the CPU");
  expect(same_tokens, "the decode loop on cuda:0 picks the CPU's tokens");
  gd_session_close(&cpu);
  gd_session_close(&gpu);
  gd_model_free(&m);
  free(lc);
  free(lg);
}

int main(void) {
  genie_context_t *ctx = NULL;
  genie_tensor_t *probe = NULL;
  const int64_t one[1] = {1};
  must(genie_init(NULL, &ctx), "genie_init");
  if (genie_tensor_alloc(ctx, GENIE_DTYPE_F32, one, 1, "cuda:0", &probe) != GENIE_OK) {
    printf("skip: cuda:0 is unavailable: %s\n", genie_last_error());
    genie_shutdown(ctx);
    return 77;
  }
  genie_tensor_destroy(probe);
  transformer_block(ctx);
  decode_loop(ctx);
  genie_shutdown(ctx);
  return failures ? 1 : 0;
}
