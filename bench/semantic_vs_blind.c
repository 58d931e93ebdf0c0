/*
 * bench_semantic_vs_blind — what the semantics buy: a GPT-2-style decode
 * loop (samples/c/gpt2_decode.h: 2 layers, hidden 128, 2 heads, vocabulary
 * 1000, KV cache per layer) run three ways, steps interleaved (the order
 * rotates every step):
 *   local     embedded mode, in this process;
 *   semantic  remote, weights and KV caches resident on the server, graph
 *             deltas (the default);
 *   blind     remote with genie_config_set_semantics(cfg, 0): one remote
 *             call per operation, weights and caches sent with every step
 *             (API remoting).
 * Every step's logits are checked equal across the three (exit 1 if not).
 * Reports per side the session setup (tensors allocated and written), the
 * first step, the decode step p50/p99, tokens/s, bytes per step each way
 * (the client's counters: graph submissions and tensor writes up, tensor
 * reads down), what the network adds per step ((remote - local), medians of
 * the per-step differences) and the ratios semantic/local and
 * blind/semantic (medians of per-step ratios).
 * Then a small CNN batch the same three ways (run_cnn).
 * Server: GENIE_BENCH_SERVER=host:port (e.g. across emulated links,
 * bench/links/run.sh), else one started in this process on 127.0.0.1.
 * GENIE_BENCH_LABEL names the link in the output; GENIE_AUTH_TOKEN is the
 * server's token, if it has one.
 */
#include <math.h>

#include "../samples/c/gpt2_decode.h"
#include "bench_util.h"

enum { LOCAL, SEMANTIC, BLIND, SIDES };
static const char *const side_name[SIDES] = {"local", "semantic", "blind"};

static double client_counter(genie_context_t *ctx, const char *key) {
  return genie_context_is_embedded(ctx) == 1 ? 0 : bu_client_counter(ctx, key);
}

static double bytes_up(genie_context_t *ctx) {
  return client_counter(ctx, "graph_bytes_sent") + client_counter(ctx, "tensor_bytes_written");
}
/* Reads, and completions (outputs' bytes that came back inside them included). */
static double bytes_down(genie_context_t *ctx) {
  return client_counter(ctx, "tensor_bytes_read") + client_counter(ctx, "completion_bytes");
}

/* Workload 2: a small CNN on a batch of 8 RGB 32x32 images (conv 3->16,
 * relu, max-pool, conv 16->32, relu, max-pool, flatten, linear -> 10), its
 * weights allocated once on the context's default device; each run sends
 * the batch and reads the logits. Prints its table; returns 1 when the
 * sides' logits differ. */
#define CNN_N 8
static int run_cnn(genie_context_t *const *ctx, int runs) {
  static const int64_t xs[4] = {CNN_N, 3, 32, 32}, w1s[4] = {16, 3, 3, 3}, b1s[1] = {16}, w2s[4] = {32, 16, 3, 3},
                       b2s[1] = {32}, fws[2] = {10, 2048}, fbs[1] = {10};
  static const char *const wn[6] = {"c1_w", "c1_b", "c2_w", "c2_b", "fc_w", "fc_b"};
  const int64_t *ws[6] = {w1s, b1s, w2s, b2s, fws, fbs};
  const size_t wnd[6] = {4, 1, 4, 1, 2, 1};
  const int64_t pad[2] = {1, 1}, k2[2] = {2, 2};
  const char *names[7] = {"x", "c1_w", "c1_b", "c2_w", "c2_b", "fc_w", "fc_b"};
  genie_graph_t *g = NULL;
  genie_tensor_t *w[SIDES][6];
  float *x, *out[SIDES], *data[6];
  double *t[SIDES], *r_sl, *r_bs, up0[SIDES], down0[SIDES];
  uint64_t seed = 0x5eed;
  size_t xn = (size_t)CNN_N * 3 * 32 * 32, i, j;
  int k, it, bad = 0;
  bu_stats_t st[SIDES], rsl, rbs;
  {
    const char *in[3];
    const char *o1[1];
    bu_check(genie_graph_create("cnn", &g), "genie_graph_create");
    bu_check(genie_graph_add_input(g, "x", GENIE_DTYPE_F32, xs, 4), "x");
    for (i = 0; i < 6; ++i) {
      bu_check(genie_graph_add_input(g, wn[i], GENIE_DTYPE_F32, ws[i], wnd[i]), wn[i]);
      bu_check(genie_graph_set_role(g, wn[i], GENIE_TENSOR_ROLE_WEIGHT), "role");
    }
#define CNN_NODE(op, name, n, outv, ...)                                       \
  do {                                                                        \
    const char *a_[] = {__VA_ARGS__};                                         \
    memcpy(in, a_, sizeof a_);                                                \
    o1[0] = outv;                                                             \
    bu_check(genie_graph_add_node(g, op, name, in, n, o1, 1), name);          \
  } while (0)
    CNN_NODE("conv2d", "conv1", 3, "h1", "x", "c1_w", "c1_b");
    bu_check(genie_graph_set_attr_ints(g, "conv1", "padding", pad, 2), "padding");
    CNN_NODE("relu", "relu1", 1, "a1", "h1");
    CNN_NODE("max_pool2d", "pool1", 1, "p1", "a1");
    bu_check(genie_graph_set_attr_ints(g, "pool1", "kernel", k2, 2), "kernel");
    CNN_NODE("conv2d", "conv2", 3, "h2", "p1", "c2_w", "c2_b");
    bu_check(genie_graph_set_attr_ints(g, "conv2", "padding", pad, 2), "padding");
    CNN_NODE("relu", "relu2", 1, "a2", "h2");
    CNN_NODE("max_pool2d", "pool2", 1, "p2", "a2");
    bu_check(genie_graph_set_attr_ints(g, "pool2", "kernel", k2, 2), "kernel");
    CNN_NODE("flatten", "flat", 1, "f", "p2");
    CNN_NODE("linear", "fc", 3, "logits", "f", "fc_w", "fc_b");
#undef CNN_NODE
    bu_check(genie_graph_mark_output(g, "logits"), "mark");
    bu_check(genie_graph_set_role(g, "logits", GENIE_TENSOR_ROLE_OUTPUT), "role");
  }
  x = bu_malloc(sizeof(float) * xn);
  for (j = 0; j < xn; ++j) x[j] = gd_rand(&seed);
  for (i = 0; i < 6; ++i) {
    size_t n = 1;
    for (j = 0; j < wnd[i]; ++j) n *= (size_t)ws[i][j];
    data[i] = bu_malloc(sizeof(float) * n);
    for (j = 0; j < n; ++j) data[i][j] = gd_rand(&seed) * 0.2f;
  }
  r_sl = bu_malloc(sizeof(double) * (size_t)runs);
  r_bs = bu_malloc(sizeof(double) * (size_t)runs);
  for (k = 0; k < SIDES; ++k) {
    out[k] = bu_malloc(sizeof(float) * CNN_N * 10);
    t[k] = bu_malloc(sizeof(double) * (size_t)runs);
    for (i = 0; i < 6; ++i) {
      size_t n = 1;
      for (j = 0; j < wnd[i]; ++j) n *= (size_t)ws[i][j];
      bu_check(genie_tensor_alloc(ctx[k], GENIE_DTYPE_F32, ws[i], wnd[i], NULL, &w[k][i]), "weight alloc");
      bu_check(genie_tensor_write(w[k][i], 0, data[i], n * sizeof(float)), "weight write");
    }
  }
  for (it = -1; it < runs; ++it) { /* run -1: the warm-up */
    for (j = 0; j < SIDES; ++j) {
      const int side = (int)((it + 1 + (int)j) % SIDES);
      genie_tensor_t *bound[7], *lg = NULL;
      genie_future_t *f = NULL;
      double t0;
      if (it == 0) up0[side] = bytes_up(ctx[side]), down0[side] = bytes_down(ctx[side]);
      t0 = bu_now_s();
      bu_check(genie_tensor_alloc(ctx[side], GENIE_DTYPE_F32, xs, 4, "cpu", &bound[0]), "x alloc");
      bu_check(genie_tensor_write(bound[0], 0, x, xn * sizeof(float)), "x write");
      for (i = 0; i < 6; ++i) bound[1 + i] = w[side][i];
      bu_check(genie_graph_submit(ctx[side], g, names, bound, 7, &f), "cnn submit");
      bu_check(genie_future_wait(f, -1), "cnn run");
      bu_check(genie_future_output(f, 0, &lg), "cnn logits");
      bu_check(genie_tensor_read(lg, 0, out[side], sizeof(float) * CNN_N * 10), "cnn read");
      if (it >= 0) t[side][it] = (bu_now_s() - t0) * 1e3;
      genie_tensor_destroy(lg);
      genie_future_destroy(f);
      genie_tensor_destroy(bound[0]);
    }
    for (j = 0; j < CNN_N * 10; ++j)
      for (k = 1; k < SIDES; ++k)
        if (fabsf(out[k][j] - out[LOCAL][j]) > 1e-4f * (1.0f + fabsf(out[LOCAL][j]))) bad = 1;
    if (it >= 0) r_sl[it] = t[SEMANTIC][it] / t[LOCAL][it], r_bs[it] = t[BLIND][it] / t[SEMANTIC][it];
  }
  printf("\nsmall CNN, batch %d of 3x32x32 (2 conv+relu+pool, linear; weights resident where the side allows),\n"
         "%d runs per side interleaved after a warm-up; outputs %s\n\n",
         CNN_N, runs, bad ? "DIFFER" : "equal on all three sides");
  printf("%-9s %9s %9s %12s %12s\n", "side", "p50 ms", "p99 ms", "up B/run", "down B/run");
  for (k = 0; k < SIDES; ++k) {
    const double upb = (bytes_up(ctx[k]) - up0[k]) / runs, downb = (bytes_down(ctx[k]) - down0[k]) / runs;
    st[k] = bu_stats(t[k], (size_t)runs);
    printf("%-9s %9.3f %9.3f %12.0f %12.0f\n", side_name[k], st[k].median, st[k].p99, upb, downb);
  }
  rsl = bu_stats(r_sl, (size_t)runs);
  rbs = bu_stats(r_bs, (size_t)runs);
  printf("\nper run: semantic/local %.3f, blind/semantic %.3f (medians of per-run ratios)\n", rsl.median, rbs.median);
  for (k = 0; k < SIDES; ++k) {
    for (i = 0; i < 6; ++i) genie_tensor_destroy(w[k][i]);
    free(out[k]);
    free(t[k]);
  }
  for (i = 0; i < 6; ++i) free(data[i]);
  free(x);
  free(r_sl);
  free(r_bs);
  genie_graph_destroy(g);
  return bad;
}

int main(int argc, char **argv) {
  const bu_options_t o = bu_parse_args(argc, argv, " (decode steps per side; default 32, --quick 4)");
  const int steps = o.iters ? o.iters : (o.quick ? 4 : 32);
  const char *label = getenv("GENIE_BENCH_LABEL");
  char host[256] = "127.0.0.1";
  int32_t port = 0;
  genie_server_t *server = NULL;
  genie_context_t *ctx[SIDES];
  gd_session_t s[SIDES];
  gd_dims_t dims;
  gd_model_t m;
  float *logits[SIDES];
  double setup_ms[SIDES], first_ms[SIDES], up0[SIDES], down0[SIDES], up[SIDES], down[SIDES];
  double *t[SIDES], *added[SIDES], *ratio_sl, *ratio_bs;
  bu_stats_t st[SIDES], sa[SIDES], rsl, rbs;
  int i, k, j, mismatch = 0;
  FILE *json;

  if (!bu_bench_server(host, sizeof host, &port)) {
    genie_config_t *scfg = NULL;
    bu_check(genie_config_create(&scfg), "genie_config_create");
    bu_check(genie_config_set_use_env(scfg, 0), "genie_config_set_use_env");
    bu_check(genie_server_create(scfg, "127.0.0.1", 0, &server), "genie_server_create");
    genie_config_destroy(scfg);
    bu_check(genie_server_port(server, &port), "genie_server_port");
  }
  dims = gd_tiny_dims(o.quick);
  gd_model_init(&m, dims, 7);
  ratio_sl = bu_malloc(sizeof(double) * (size_t)steps);
  ratio_bs = bu_malloc(sizeof(double) * (size_t)steps);
  for (k = 0; k < SIDES; ++k) {
    double t0;
    logits[k] = bu_malloc(sizeof(float) * (size_t)dims.vocab);
    t[k] = bu_malloc(sizeof(double) * (size_t)steps);
    added[k] = bu_malloc(sizeof(double) * (size_t)steps);
    ctx[k] = bu_context(k == LOCAL ? NULL : host, port, k == SEMANTIC);
    t0 = bu_now_s();
    gd_session_open(&s[k], ctx[k], &m, NULL, 0);
    setup_ms[k] = (bu_now_s() - t0) * 1e3;
    t0 = bu_now_s();
    gd_step(&s[k], logits[k]);
    first_ms[k] = (bu_now_s() - t0) * 1e3;
    up0[k] = bytes_up(ctx[k]);
    down0[k] = bytes_down(ctx[k]);
  }
  for (i = 0; i < steps; ++i) {
    for (j = 0; j < SIDES; ++j) {
      const int side = (i + j) % SIDES;
      const double t0 = bu_now_s();
      gd_step(&s[side], logits[side]);
      t[side][i] = (bu_now_s() - t0) * 1e3;
    }
    for (j = 0; j < dims.vocab; ++j)
      for (k = 1; k < SIDES; ++k)
        if (fabsf(logits[k][j] - logits[LOCAL][j]) > 1e-4f * (1.0f + fabsf(logits[LOCAL][j]))) mismatch = 1;
    for (k = 0; k < SIDES; ++k) added[k][i] = t[k][i] - t[LOCAL][i];
    ratio_sl[i] = t[SEMANTIC][i] / t[LOCAL][i];
    ratio_bs[i] = t[BLIND][i] / t[SEMANTIC][i];
  }
  for (k = 0; k < SIDES; ++k) {
    up[k] = (bytes_up(ctx[k]) - up0[k]) / steps;
    down[k] = (bytes_down(ctx[k]) - down0[k]) / steps;
  }
  if (mismatch || s[SEMANTIC].token != s[LOCAL].token || s[BLIND].token != s[LOCAL].token) {
    fprintf(stderr, "bench: the three sides' logits differ\n");
    return 1;
  }
  for (k = 0; k < SIDES; ++k) {
    st[k] = bu_stats(t[k], (size_t)steps);
    sa[k] = bu_stats(added[k], (size_t)steps);
  }
  rsl = bu_stats(ratio_sl, (size_t)steps);
  rbs = bu_stats(ratio_bs, (size_t)steps);
  printf("GPT-2-tiny decode loop (%d layers, hidden %d, %d heads, vocab %d, KV cache from %d tokens), %d steps\n"
         "per side interleaved after one first step; server %s:%d%s%s; outputs equal on all three sides\n\n",
         dims.layers, dims.d, dims.heads, dims.vocab, dims.t0, steps, host, port, label ? ", link " : "",
         label ? label : "");
  printf("%-9s %9s %9s %9s %9s %9s %12s %12s %10s\n", "side", "setup ms", "first ms", "p50 ms", "p99 ms",
         "tok/s", "up B/step", "down B/step", "added ms");
  for (k = 0; k < SIDES; ++k)
    printf("%-9s %9.2f %9.2f %9.3f %9.3f %9.1f %12.0f %12.0f %10.3f\n", side_name[k], setup_ms[k], first_ms[k],
           st[k].median, st[k].p99, 1e3 / st[k].median, up[k], down[k], sa[k].median);
  printf("\nper step: semantic/local %.3f, blind/semantic %.3f (medians of per-step ratios)\n", rsl.median,
         rbs.median);
  printf("network added per step: semantic %.3f ms = %.1f%% of the local step, %.3f of blind's %.3f ms\n",
         sa[SEMANTIC].median, 100.0 * sa[SEMANTIC].median / st[LOCAL].median,
         sa[BLIND].median > 0 ? sa[SEMANTIC].median / sa[BLIND].median : 0.0, sa[BLIND].median);
  printf("bytes per step (both ways): blind / semantic = %.0fx\n",
         (up[BLIND] + down[BLIND]) / (up[SEMANTIC] + down[SEMANTIC]));
  json = bu_json_open(o.json_path);
  if (json) {
    fprintf(json, "{\"bench\":\"semantic_vs_blind\",\"link\":");
    bu_json_str(json, label ? label : "loopback");
    fprintf(json, ",\"steps\":%d", steps);
    for (k = 0; k < SIDES; ++k)
      fprintf(json,
              ",\"%s\":{\"setup_ms\":%.4f,\"first_ms\":%.4f,\"p50_ms\":%.4f,\"p99_ms\":%.4f,\"tokens_per_s\":%.2f,"
              "\"up_bytes_per_step\":%.1f,\"down_bytes_per_step\":%.1f,\"added_ms\":%.4f}",
              side_name[k], setup_ms[k], first_ms[k], st[k].median, st[k].p99, 1e3 / st[k].median, up[k], down[k],
              sa[k].median);
    fprintf(json, ",\"semantic_over_local\":%.4f,\"blind_over_semantic\":%.4f}\n", rsl.median, rbs.median);
  }
  bu_json_close(json, o.json_path);
  for (k = 0; k < SIDES; ++k) gd_session_close(&s[k]);
  mismatch = run_cnn(ctx, o.quick ? 3 : steps);
  for (k = 0; k < SIDES; ++k) {
    genie_shutdown(ctx[k]);
    free(logits[k]);
    free(t[k]);
    free(added[k]);
  }
  if (server) genie_server_destroy(server);
  gd_model_free(&m);
  free(ratio_sl);
  free(ratio_bs);
  if (mismatch) fprintf(stderr, "bench: the three sides' CNN logits differ\n");
  return mismatch;
}
