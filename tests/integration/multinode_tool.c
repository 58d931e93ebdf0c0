/* A client for the multi-node integration test (tests/scripts/
 * multinode_test.sh). It connects to a master with the GENIE_* environment
 * and runs one scenario against a worker named WORKER that joined it:
 *
 *   split WORKER WORKER_PORT
 *       y = relu(x @ w1) @ w2 with w1 resident on WORKER and x, w2 on the
 *       master: the graph runs split across both (the worker runs a part:
 *       its graphs_executed grows; bytes move between the servers), and y
 *       equals the same graph run in-process.
 *   decode WORKER STEPS
 *       a GPT-2-style decoder (2 layers, hidden 32, 2 heads) decoding STEPS
 *       tokens with a KV cache per layer: layer 0's weights and cache on the
 *       master, layer 1's on WORKER. Each step binds the caches the previous
 *       step returned (they stay where they were produced). Asserts that no
 *       KV-cache byte moves between the servers after the first step, that
 *       activations do move (the model really spans both), and that every
 *       step's logits match the same loop run in-process.
 *
 * Prints "ok" and counters on success. Exit status: 0 on success, 1 when an
 * assertion fails (the reason on stderr), 3 when a Genie call fails, 2 on
 * bad usage. */
#include <genie.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CALL(expr)                                                                           \
  do {                                                                                       \
    genie_status_t st_ = (expr);                                                             \
    if (st_ != GENIE_OK) {                                                                   \
      fprintf(stderr, "multinode_tool: %s: %s: %s\n", #expr, genie_status_str(st_),          \
              genie_last_error());                                                           \
      exit(3);                                                                               \
    }                                                                                        \
  } while (0)

#define EXPECT(cond, ...)                                 \
  do {                                                    \
    if (!(cond)) {                                        \
      fprintf(stderr, "multinode_tool: FAILED: " __VA_ARGS__); \
      fprintf(stderr, "\n");                              \
      exit(1);                                            \
    }                                                     \
  } while (0)

/* --- small helpers ---------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform in [-0.5, 0.5) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (float)((rng_state >> 40) & 0xffffff) / 16777216.0f - 0.5f;
}

static float *random_floats(size_t n, float scale) {
  float *v = malloc(n * sizeof *v);
  for (size_t i = 0; i < n; ++i) v[i] = frand() * scale;
  return v;
}

static genie_context_t *connect_master(void) {
  genie_context_t *ctx = NULL;
  CALL(genie_init(NULL, &ctx));
  EXPECT(genie_context_is_embedded(ctx) == 0, "GENIE_MASTER_ADDR is not set");
  return ctx;
}

static genie_context_t *embedded(void) {
  genie_config_t *cfg = NULL;
  genie_context_t *ctx = NULL;
  CALL(genie_config_create(&cfg));
  CALL(genie_config_set_use_env(cfg, 0));
  CALL(genie_init(cfg, &ctx));
  genie_config_destroy(cfg);
  return ctx;
}

static genie_tensor_t *tensor(genie_context_t *ctx, const char *device, const int64_t *shape, size_t ndim,
                              const float *data) {
  genie_tensor_t *t = NULL;
  size_t n = 1;
  for (size_t i = 0; i < ndim; ++i) n *= (size_t)shape[i];
  CALL(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, shape, ndim, device, &t));
  if (data) CALL(genie_tensor_write(t, 0, data, n * sizeof(float)));
  return t;
}

/* A number from the server's info JSON (cJSON, unformatted): "key":value
 * after `within` (or from the start). -1 when absent. */
static double info_number(const char *json, const char *within, const char *key) {
  const char *p = json;
  if (within) {
    p = strstr(json, within);
    if (!p) return -1;
  }
  char pat[128];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *end = within ? strchr(p, '}') : NULL;
  const char *q = strstr(p, pat);
  if (!q || (end && q > end)) return -1;
  return strtod(q + strlen(pat), NULL);
}

static char *server_info(genie_context_t *ctx) {
  char *json = NULL;
  CALL(genie_context_server_info(ctx, &json));
  return json;
}

static double max_abs_diff(const float *a, const float *b, size_t n, double *scale) {
  double d = 0, s = 0;
  for (size_t i = 0; i < n; ++i) {
    d = fmax(d, fabs((double)a[i] - (double)b[i]));
    s = fmax(s, fabs((double)b[i]));
  }
  *scale = s;
  return d;
}

static void run_and_read(genie_context_t *ctx, genie_graph_t *g, const char *const *names, genie_tensor_t **in,
                         size_t n_in, float *out, size_t out_bytes) {
  genie_future_t *f = NULL;
  genie_tensor_t *y = NULL;
  CALL(genie_graph_submit(ctx, g, names, in, n_in, &f));
  CALL(genie_future_wait(f, -1));
  CALL(genie_future_output(f, 0, &y));
  CALL(genie_tensor_read(y, 0, out, out_bytes));
  genie_tensor_destroy(y);
  genie_future_destroy(f);
}

/* --- split ------------------------------------------------------------------ */

static int cmd_split(const char *worker, int worker_port) {
  enum { M = 8, K = 64, N = 64, P = 16 };
  const int64_t xs[2] = {M, K}, w1s[2] = {K, N}, w2s[2] = {N, P};
  float *x = random_floats(M * K, 1), *w1 = random_floats(K * N, 0.25f), *w2 = random_floats(N * P, 0.25f);
  genie_graph_t *g = NULL;
  CALL(genie_graph_create("split", &g));
  CALL(genie_graph_add_input(g, "x", GENIE_DTYPE_F32, xs, 2));
  CALL(genie_graph_add_input(g, "w1", GENIE_DTYPE_F32, w1s, 2));
  CALL(genie_graph_add_input(g, "w2", GENIE_DTYPE_F32, w2s, 2));
  const char *mm1_in[2] = {"x", "w1"}, *mm1_out[1] = {"h"};
  const char *act_in[1] = {"h"}, *act_out[1] = {"a"};
  const char *mm2_in[2] = {"a", "w2"}, *mm2_out[1] = {"y"};
  CALL(genie_graph_add_node(g, "matmul", "mm1", mm1_in, 2, mm1_out, 1));
  CALL(genie_graph_add_node(g, "relu", "act", act_in, 1, act_out, 1));
  CALL(genie_graph_add_node(g, "matmul", "mm2", mm2_in, 2, mm2_out, 1));
  CALL(genie_graph_set_role(g, "w1", GENIE_ROLE_WEIGHT));
  CALL(genie_graph_set_role(g, "w2", GENIE_ROLE_WEIGHT));
  CALL(genie_graph_mark_output(g, "y"));
  const char *names[3] = {"x", "w1", "w2"};

  char dev[300];
  snprintf(dev, sizeof dev, "%s/cpu:0", worker);
  genie_context_t *ctx = connect_master();
  genie_tensor_t *in[3] = {tensor(ctx, NULL, xs, 2, x), tensor(ctx, dev, w1s, 2, w1), tensor(ctx, NULL, w2s, 2, w2)};
  EXPECT(strcmp(genie_tensor_device(in[1]), dev) == 0, "w1 reports device '%s', not '%s'", genie_tensor_device(in[1]),
         dev);
  float got[M * P], want[M * P];
  run_and_read(ctx, g, names, in, 3, got, sizeof got);

  genie_context_t *emb = embedded();
  genie_tensor_t *ein[3] = {tensor(emb, NULL, xs, 2, x), tensor(emb, NULL, w1s, 2, w1),
                            tensor(emb, NULL, w2s, 2, w2)};
  run_and_read(emb, g, names, ein, 3, want, sizeof want);
  double scale;
  const double diff = max_abs_diff(got, want, M * P, &scale);
  EXPECT(scale > 0 && diff <= 1e-5 * scale, "split result differs from in-process: max |diff| %g (scale %g)", diff,
         scale);

  /* Remote mode plans on the master, over its workers' devices too. */
  char *plan = NULL;
  CALL(genie_plan_explain(ctx, g, &plan));
  EXPECT(strstr(plan, dev) != NULL, "the master's plan does not list %s: %.400s", dev, plan);
  genie_free(plan);

  char *info = server_info(ctx);
  const double moved = info_number(info, NULL, "server_transfer_bytes");
  const double graphs = info_number(info, NULL, "multinode_graphs");
  const double workers = info_number(info, NULL, "workers");
  EXPECT(workers >= 1, "the master reports %g workers: %s", workers, info);
  EXPECT(graphs >= 1, "the master ran no multi-node graph: %s", info);
  EXPECT(moved > 0, "no byte moved between the servers, so the graph did not span them: %s", info);

  /* The worker ran its part: ask it directly. */
  genie_config_t *cfg = NULL;
  genie_context_t *wctx = NULL;
  CALL(genie_config_create(&cfg));
  CALL(genie_config_set_master_port(cfg, worker_port));
  CALL(genie_init(cfg, &wctx));
  genie_config_destroy(cfg);
  char *winfo = server_info(wctx);
  EXPECT(info_number(winfo, NULL, "graphs_executed") >= 1, "the worker executed no graph: %s", winfo);
  printf("ok split: %.0f bytes moved between servers; master %s\n", moved, info);
  genie_free(winfo);
  genie_free(info);
  genie_shutdown(wctx);
  for (int i = 0; i < 3; ++i) {
    genie_tensor_destroy(in[i]);
    genie_tensor_destroy(ein[i]);
  }
  genie_shutdown(ctx);
  genie_shutdown(emb);
  genie_graph_destroy(g);
  free(x);
  free(w1);
  free(w2);
  return 0;
}

/* --- decode ------------------------------------------------------------------ */

enum { D = 32, H = 2, DH = 16, V = 50, F = 4 * D, LAYERS = 2, T0 = 3 };

struct Weights {
  float *wte;                 /* [V, D] */
  float *ln_w[LAYERS + 1], *ln_b[LAYERS + 1];
  float *ln2_w[LAYERS], *ln2_b[LAYERS];
  float *qkv[LAYERS], *o[LAYERS], *fc[LAYERS], *proj[LAYERS];
  float *k0[LAYERS], *v0[LAYERS]; /* [1, H, T0, DH] */
};

static void node(genie_graph_t *g, const char *op, const char *name, const char **in, size_t n_in, const char *out,
                 int layer) {
  const char *outs[1] = {out};
  CALL(genie_graph_add_node(g, op, name, in, n_in, outs, 1));
  if (layer >= 0) CALL(genie_graph_set_layer(g, name, layer));
  CALL(genie_graph_set_phase(g, name, GENIE_PHASE_DECODE));
}

/* The decode-step graph: token embedding e [1,1,D] (a graph input: the
 * client looks it up), per layer past k/v caches [1,H,-1,DH]; outputs:
 * logits [1,1,V], then each layer's new k and v caches. */
static genie_graph_t *decode_graph(void) {
  genie_graph_t *g = NULL;
  CALL(genie_graph_create("gpt2-decode", &g));
  const int64_t es[3] = {1, 1, D}, wte_s[2] = {V, D}, dvec[1] = {D}, cache_s[4] = {1, H, -1, DH};
  const int64_t qkv_s[2] = {3 * D, D}, o_s[2] = {D, D}, fc_s[2] = {F, D}, proj_s[2] = {D, F};
  CALL(genie_graph_add_input(g, "e", GENIE_DTYPE_F32, es, 3));
  CALL(genie_graph_add_input(g, "wte", GENIE_DTYPE_F32, wte_s, 2));
  CALL(genie_graph_set_role(g, "wte", GENIE_ROLE_WEIGHT));
  char x[64] = "e";
  for (int l = 0; l < LAYERS; ++l) {
    char n[LAYERS][16][48];
    const char *nm[] = {"ln1_w", "ln1_b", "qkv_w", "o_w", "ln2_w", "ln2_b", "fc_w", "proj_w", "k_cache", "v_cache"};
    for (int i = 0; i < 10; ++i) snprintf(n[l][i], sizeof n[l][i], "l%d.%s", l, nm[i]);
    CALL(genie_graph_add_input(g, n[l][0], GENIE_DTYPE_F32, dvec, 1));
    CALL(genie_graph_add_input(g, n[l][1], GENIE_DTYPE_F32, dvec, 1));
    CALL(genie_graph_add_input(g, n[l][2], GENIE_DTYPE_F32, qkv_s, 2));
    CALL(genie_graph_add_input(g, n[l][3], GENIE_DTYPE_F32, o_s, 2));
    CALL(genie_graph_add_input(g, n[l][4], GENIE_DTYPE_F32, dvec, 1));
    CALL(genie_graph_add_input(g, n[l][5], GENIE_DTYPE_F32, dvec, 1));
    CALL(genie_graph_add_input(g, n[l][6], GENIE_DTYPE_F32, fc_s, 2));
    CALL(genie_graph_add_input(g, n[l][7], GENIE_DTYPE_F32, proj_s, 2));
    CALL(genie_graph_add_input(g, n[l][8], GENIE_DTYPE_F32, cache_s, 4));
    CALL(genie_graph_add_input(g, n[l][9], GENIE_DTYPE_F32, cache_s, 4));
    for (int i = 0; i < 8; ++i) CALL(genie_graph_set_role(g, n[l][i], GENIE_ROLE_WEIGHT));
    /* Layer 0's caches carry the annotation; layer 1's are found from the
     * graph (persistent inputs appended to and read by attention). */
    if (l == 0) {
      CALL(genie_graph_set_role(g, n[l][8], GENIE_ROLE_KV_CACHE));
      CALL(genie_graph_set_role(g, n[l][9], GENIE_ROLE_KV_CACHE));
    }
    char v[32][48];
#define V_(i, fmt) snprintf(v[i], sizeof v[i], "l%d." fmt, l)
    V_(0, "ln1"); V_(1, "qkv"); V_(2, "q"); V_(3, "k"); V_(4, "v"); V_(5, "q4"); V_(6, "k4"); V_(7, "v4");
    V_(8, "qh"); V_(9, "kh"); V_(10, "vh"); V_(11, "k_new"); V_(12, "v_new"); V_(13, "att"); V_(14, "att_t");
    V_(15, "att_flat"); V_(16, "att_o"); V_(17, "res1"); V_(18, "ln2"); V_(19, "fc"); V_(20, "gelu");
    V_(21, "mlp"); V_(22, "res2");
    char nn[32][64];
    for (int i = 0; i < 23; ++i) snprintf(nn[i], sizeof nn[i], "%s.op", v[i]);
    const char *in_ln1[3] = {x, n[l][0], n[l][1]};
    node(g, "layer_norm", nn[0], in_ln1, 3, v[0], l);
    const char *in_qkv[2] = {v[0], n[l][2]};
    node(g, "linear", nn[1], in_qkv, 2, v[1], l);
    const char *in_split[1] = {v[1]};
    const char *split_out[3] = {v[2], v[3], v[4]};
    CALL(genie_graph_add_node(g, "split", nn[2], in_split, 1, split_out, 3));
    const int64_t sizes[3] = {D, D, D}, shape4[4] = {1, 1, H, DH}, perm[4] = {0, 2, 1, 3}, flat[3] = {1, 1, D};
    CALL(genie_graph_set_attr_int(g, nn[2], "axis", -1));
    CALL(genie_graph_set_attr_ints(g, nn[2], "sizes", sizes, 3));
    CALL(genie_graph_set_layer(g, nn[2], l));
    for (int i = 0; i < 3; ++i) {
      const char *in_r[1] = {v[2 + i]};
      node(g, "reshape", nn[5 + i], in_r, 1, v[5 + i], l);
      CALL(genie_graph_set_attr_ints(g, nn[5 + i], "shape", shape4, 4));
      const char *in_p[1] = {v[5 + i]};
      node(g, "permute", nn[8 + i], in_p, 1, v[8 + i], l);
      CALL(genie_graph_set_attr_ints(g, nn[8 + i], "perm", perm, 4));
    }
    const char *in_kc[2] = {n[l][8], v[9]}, *in_vc[2] = {n[l][9], v[10]};
    node(g, "concat", nn[11], in_kc, 2, v[11], l);
    CALL(genie_graph_set_attr_int(g, nn[11], "axis", 2));
    node(g, "concat", nn[12], in_vc, 2, v[12], l);
    CALL(genie_graph_set_attr_int(g, nn[12], "axis", 2));
    const char *in_att[3] = {v[8], v[11], v[12]};
    node(g, "attention", nn[13], in_att, 3, v[13], l);
    const char *in_t[1] = {v[13]};
    node(g, "permute", nn[14], in_t, 1, v[14], l);
    CALL(genie_graph_set_attr_ints(g, nn[14], "perm", perm, 4));
    const char *in_f[1] = {v[14]};
    node(g, "reshape", nn[15], in_f, 1, v[15], l);
    CALL(genie_graph_set_attr_ints(g, nn[15], "shape", flat, 3));
    const char *in_o[2] = {v[15], n[l][3]};
    node(g, "linear", nn[16], in_o, 2, v[16], l);
    const char *in_r1[2] = {x, v[16]};
    node(g, "add", nn[17], in_r1, 2, v[17], l);
    const char *in_ln2[3] = {v[17], n[l][4], n[l][5]};
    node(g, "layer_norm", nn[18], in_ln2, 3, v[18], l);
    const char *in_fc[2] = {v[18], n[l][6]};
    node(g, "linear", nn[19], in_fc, 2, v[19], l);
    const char *in_g[1] = {v[19]};
    node(g, "gelu", nn[20], in_g, 1, v[20], l);
    const char *in_pr[2] = {v[20], n[l][7]};
    node(g, "linear", nn[21], in_pr, 2, v[21], l);
    const char *in_r2[2] = {v[17], v[21]};
    node(g, "add", nn[22], in_r2, 2, v[22], l);
    snprintf(x, sizeof x, "%s", v[22]);
#undef V_
  }
  CALL(genie_graph_add_input(g, "lnf_w", GENIE_DTYPE_F32, dvec, 1));
  CALL(genie_graph_add_input(g, "lnf_b", GENIE_DTYPE_F32, dvec, 1));
  CALL(genie_graph_set_role(g, "lnf_w", GENIE_ROLE_WEIGHT));
  CALL(genie_graph_set_role(g, "lnf_b", GENIE_ROLE_WEIGHT));
  const char *in_lnf[3] = {x, "lnf_w", "lnf_b"};
  node(g, "layer_norm", "lnf", in_lnf, 3, "xf", -1);
  const char *in_head[2] = {"xf", "wte"};
  node(g, "linear", "lm_head", in_head, 2, "logits", -1);
  CALL(genie_graph_mark_output(g, "logits"));
  for (int l = 0; l < LAYERS; ++l) {
    char k[32], v[32];
    snprintf(k, sizeof k, "l%d.k_new", l);
    snprintf(v, sizeof v, "l%d.v_new", l);
    CALL(genie_graph_mark_output(g, k));
    CALL(genie_graph_mark_output(g, v));
  }
  return g;
}

/* Runs STEPS decode steps on ctx; layer l's weights and initial caches on
 * devices[l] (NULL: the default device), everything else on the default.
 * logits[step * V ..] receive each step's logits. `after_step` (may be
 * NULL) runs after each step. */
static void decode_loop(genie_context_t *ctx, const struct Weights *w, const char *const devices[LAYERS], int steps,
                        float *logits, void (*after_step)(genie_context_t *, int)) {
  const int64_t wte_s[2] = {V, D}, dvec[1] = {D}, qkv_s[2] = {3 * D, D}, o_s[2] = {D, D}, fc_s[2] = {F, D},
                proj_s[2] = {D, F}, cache_s[4] = {1, H, T0, DH}, es[3] = {1, 1, D};
  enum { NIN = 2 + LAYERS * 10 + 2 };
  const char *names[NIN];
  genie_tensor_t *in[NIN];
  char name_buf[NIN][48];
  size_t k = 0;
  names[k] = "e";
  in[k++] = NULL; /* per step */
  names[k] = "wte";
  in[k++] = tensor(ctx, NULL, wte_s, 2, w->wte);
  for (int l = 0; l < LAYERS; ++l) {
    const char *nm[] = {"ln1_w", "ln1_b", "qkv_w", "o_w", "ln2_w", "ln2_b", "fc_w", "proj_w", "k_cache", "v_cache"};
    const float *data[] = {w->ln_w[l], w->ln_b[l], w->qkv[l], w->o[l], w->ln2_w[l], w->ln2_b[l], w->fc[l],
                           w->proj[l], w->k0[l],  w->v0[l]};
    const int64_t *shapes[] = {dvec, dvec, qkv_s, o_s, dvec, dvec, fc_s, proj_s, cache_s, cache_s};
    const size_t nd[] = {1, 1, 2, 2, 1, 1, 2, 2, 4, 4};
    for (int i = 0; i < 10; ++i) {
      snprintf(name_buf[k], sizeof name_buf[k], "l%d.%s", l, nm[i]);
      names[k] = name_buf[k];
      in[k++] = tensor(ctx, devices[l], shapes[i], nd[i], data[i]);
    }
  }
  names[k] = "lnf_w";
  in[k++] = tensor(ctx, NULL, dvec, 1, w->ln_w[LAYERS]);
  names[k] = "lnf_b";
  in[k++] = tensor(ctx, NULL, dvec, 1, w->ln_b[LAYERS]);
  genie_graph_t *g = decode_graph();
  int token = 7;
  for (int s = 0; s < steps; ++s) {
    /* The token's embedding, looked up by the client: a fresh host tensor. */
    genie_tensor_t *e = NULL;
    CALL(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, es, 3, "cpu", &e));
    CALL(genie_tensor_write(e, 0, w->wte + (size_t)token * D, D * sizeof(float)));
    in[0] = e;
    genie_future_t *f = NULL;
    CALL(genie_graph_submit(ctx, g, names, in, NIN, &f));
    CALL(genie_future_wait(f, -1));
    genie_tensor_t *lg = NULL;
    CALL(genie_future_output(f, 0, &lg));
    CALL(genie_tensor_read(lg, 0, logits + (size_t)s * V, V * sizeof(float)));
    genie_tensor_destroy(lg);
    /* The new caches replace the old ones, where they were produced. */
    for (int l = 0; l < LAYERS; ++l) {
      for (int kv = 0; kv < 2; ++kv) {
        const size_t slot = 2 + (size_t)l * 10 + 8 + (size_t)kv;
        genie_tensor_destroy(in[slot]);
        CALL(genie_future_output(f, 1 + (size_t)l * 2 + (size_t)kv, &in[slot]));
      }
    }
    genie_future_destroy(f);
    genie_tensor_destroy(e);
    /* Next token: the argmax (the same in both runs, as the logits match). */
    int best = 0;
    for (int i = 1; i < V; ++i)
      if (logits[(size_t)s * V + i] > logits[(size_t)s * V + best]) best = i;
    token = best;
    if (after_step) after_step(ctx, s);
  }
  for (size_t i = 1; i < NIN; ++i) genie_tensor_destroy(in[i]);
  genie_graph_destroy(g);
}

/* The master's counters are cumulative (other scenarios ran before): this
 * run's figures are differences from a baseline taken before step 0. */
struct Moved {
  double total, kv, act;
};
static struct Moved moved_now(genie_context_t *ctx) {
  char *info = server_info(ctx);
  const char *roles = "\"server_transfer_bytes_by_role\":";
  struct Moved m = {info_number(info, NULL, "server_transfer_bytes"), info_number(info, roles, "kv_cache"),
                    info_number(info, roles, "activation")};
  if (m.kv < 0) m.kv = 0;
  if (m.act < 0) m.act = 0;
  genie_free(info);
  return m;
}
static struct Moved base, after_first, last;
static void record_transfers(genie_context_t *ctx, int step) {
  last = moved_now(ctx);
  if (step == 0) after_first = last;
}

static int cmd_decode(const char *worker, int steps) {
  struct Weights w;
  w.wte = random_floats((size_t)V * D, 1);
  for (int l = 0; l <= LAYERS; ++l) {
    w.ln_w[l] = random_floats(D, 0.2f);
    w.ln_b[l] = random_floats(D, 0.2f);
    for (int i = 0; i < D; ++i) w.ln_w[l][i] += 1.0f;
  }
  for (int l = 0; l < LAYERS; ++l) {
    w.ln2_w[l] = random_floats(D, 0.2f);
    w.ln2_b[l] = random_floats(D, 0.2f);
    for (int i = 0; i < D; ++i) w.ln2_w[l][i] += 1.0f;
    w.qkv[l] = random_floats((size_t)3 * D * D, 0.3f);
    w.o[l] = random_floats((size_t)D * D, 0.3f);
    w.fc[l] = random_floats((size_t)F * D, 0.3f);
    w.proj[l] = random_floats((size_t)D * F, 0.3f);
    w.k0[l] = random_floats((size_t)H * T0 * DH, 1);
    w.v0[l] = random_floats((size_t)H * T0 * DH, 1);
  }
  float *got = malloc((size_t)steps * V * sizeof(float));
  float *want = malloc((size_t)steps * V * sizeof(float));
  char dev[300];
  snprintf(dev, sizeof dev, "%s/cpu:0", worker);

  genie_context_t *ctx = connect_master();
  base = moved_now(ctx);
  const char *remote_devices[LAYERS] = {NULL, dev};
  decode_loop(ctx, &w, remote_devices, steps, got, record_transfers);
  char *info = server_info(ctx);

  genie_context_t *emb = embedded();
  const char *local_devices[LAYERS] = {NULL, NULL};
  decode_loop(emb, &w, local_devices, steps, want, NULL);
  for (int s = 0; s < steps; ++s) {
    double scale;
    const double diff = max_abs_diff(got + (size_t)s * V, want + (size_t)s * V, V, &scale);
    EXPECT(scale > 0 && diff <= 1e-4 * scale, "step %d: logits differ from in-process: max |diff| %g (scale %g)", s,
           diff, scale);
  }
  EXPECT(last.kv == after_first.kv,
         "KV-cache bytes crossed between the servers after the first step: %.0f in step 0, %.0f in all %d steps; "
         "master: %s",
         after_first.kv - base.kv, last.kv - base.kv, steps, info);
  EXPECT(last.act > base.act, "no activation moved between the servers: the model did not span them; master: %s",
         info);
  /* Only activations cross: no weight and no cache (whatever role the
   * server gave it) ever moved. */
  EXPECT(last.total - base.total == last.act - base.act,
         "bytes other than activations moved between the servers (%.0f of %.0f); master: %s",
         (last.total - base.total) - (last.act - base.act), last.total - base.total, info);
  EXPECT(info_number(info, NULL, "multinode_graphs") >= steps, "fewer multi-node graphs than steps: %s", info);
  printf("ok decode: %d steps; kv_cache bytes moved between servers: %.0f (in step 0: %.0f); activation bytes: %.0f\n",
         steps, last.kv - base.kv, after_first.kv - base.kv, last.act - base.act);
  printf("master %s\n", info);
  genie_free(info);
  genie_shutdown(ctx);
  genie_shutdown(emb);
  free(got);
  free(want);
  free(w.wte);
  for (int l = 0; l <= LAYERS; ++l) {
    free(w.ln_w[l]);
    free(w.ln_b[l]);
  }
  for (int l = 0; l < LAYERS; ++l) {
    free(w.ln2_w[l]);
    free(w.ln2_b[l]);
    free(w.qkv[l]);
    free(w.o[l]);
    free(w.fc[l]);
    free(w.proj[l]);
    free(w.k0[l]);
    free(w.v0[l]);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "split") == 0) return cmd_split(argv[2], atoi(argv[3]));
  if (argc == 4 && strcmp(argv[1], "decode") == 0) return cmd_decode(argv[2], atoi(argv[3]));
  fprintf(stderr, "usage: multinode_tool split WORKER WORKER_PORT | decode WORKER STEPS\n");
  return 2;
}
