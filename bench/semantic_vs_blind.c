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
static double bytes_down(genie_context_t *ctx) { return client_counter(ctx, "tensor_bytes_read"); }

static genie_context_t *make_ctx(const char *host, int32_t port, int side) {
  genie_config_t *cfg = NULL;
  genie_context_t *ctx = NULL;
  bu_check(genie_config_create(&cfg), "genie_config_create");
  bu_check(genie_config_set_use_env(cfg, 0), "genie_config_set_use_env");
  if (side != LOCAL) {
    bu_check(genie_config_set_master_addr(cfg, host), "genie_config_set_master_addr");
    bu_check(genie_config_set_master_port(cfg, port), "genie_config_set_master_port");
    bu_check(genie_config_set_semantics(cfg, side == SEMANTIC), "genie_config_set_semantics");
    if (getenv("GENIE_AUTH_TOKEN"))
      bu_check(genie_config_set_auth_token(cfg, getenv("GENIE_AUTH_TOKEN")), "genie_config_set_auth_token");
  }
  bu_check(genie_init(cfg, &ctx), "genie_init");
  genie_config_destroy(cfg);
  return ctx;
}

int main(int argc, char **argv) {
  const bu_options_t o = bu_parse_args(argc, argv, " (decode steps per side; default 32, --quick 4)");
  const int steps = o.iters ? o.iters : (o.quick ? 4 : 32);
  const char *server_env = getenv("GENIE_BENCH_SERVER");
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

  if (server_env && *server_env) {
    const char *colon = strrchr(server_env, ':');
    if (!colon || colon == server_env || (size_t)(colon - server_env) >= sizeof host) {
      fprintf(stderr, "bench: GENIE_BENCH_SERVER='%s' is not host:port\n", server_env);
      return 2;
    }
    memcpy(host, server_env, (size_t)(colon - server_env));
    host[colon - server_env] = '\0';
    port = (int32_t)atoi(colon + 1);
  } else {
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
    ctx[k] = make_ctx(host, port, k);
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
  for (k = 0; k < SIDES; ++k) {
    gd_session_close(&s[k]);
    genie_shutdown(ctx[k]);
    free(logits[k]);
    free(t[k]);
    free(added[k]);
  }
  if (server) genie_server_destroy(server);
  gd_model_free(&m);
  free(ratio_sl);
  free(ratio_bs);
  return 0;
}
