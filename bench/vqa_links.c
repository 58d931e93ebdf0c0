/*
 * bench_vqa_links — a VQA-style multimodal model across three servers (the
 * design documents' example): a small ViT-like vision encoder (patch
 * embedding, layer norm, self-attention, residual, MLP, residual, mean
 * pool; module "vision", modality vision) and a text encoder of the same
 * shape over a token embedding (module "text", modality text), fused by a
 * head (concat, linear, gelu, linear to answer logits; module "fusion"),
 * built as one Genie graph with module, modality and role annotations.
 *
 * Run five ways, requests interleaved (the order rotates every request):
 *   local     embedded mode, in this process;
 *   split     remote, the vision weights resident on worker B, the text
 *             weights on worker C, the fusion head's on the master A (the
 *             model sharded over the servers, as in the design documents);
 *             the master's scheduler places the graph;
 *   pinned    the same weights, the graph without module paths: the
 *             scheduler's resident-weight rule alone keeps every encoder
 *             with its weights (the plan "split" gets unless moving a
 *             module to its inputs is predicted faster: sched pull_modules);
 *   one       remote, every weight resident on the master: all on one
 *             server (the workers idle);
 *   blind     remote with genie_config_set_semantics(cfg, 0): one remote
 *             call per operation, every weight sent with every request.
 * Each request writes the image patches and the question tokens, runs the
 * graph and reads the answer logits; the logits are checked equal across
 * the five (exit 1 if not). Two image sizes: "small" (32x32, 16 patches:
 * the weights outweigh the image) and "large" (256x256, 1024 patches: the
 * image outweighs the vision encoder's weights). For each, the plans the
 * master makes for split, pinned and one (genie_plan_explain_bound: the
 * devices of each module and the rules that decided, the bytes moved
 * between devices, the predicted time), then per side the request p50/p99,
 * the bytes on the client's wire per request (graph submissions and tensor
 * writes up, reads down), the bytes the master moved between servers per
 * request (server_transfer_bytes), and the ratios split/pinned, split/one,
 * split/local and blind/split (medians of per-request ratios).
 *
 * Servers: GENIE_BENCH_SERVER=host:port is the master, GENIE_VQA_WORKERS
 * names its two workers' node ids ("vqa-b,vqa-c"; bench/links/run.sh starts
 * the three in their own namespaces); without it, a master and two workers
 * are started in this process on 127.0.0.1. GENIE_BENCH_LABEL names the
 * link; GENIE_AUTH_TOKEN is the servers' token, if any.
 */
#include <cjson/cJSON.h>
#include <math.h>

#include "../samples/c/gpt2_decode.h"
#include "bench_util.h"

enum { LOCAL, SPLIT, PINNED, ONE, BLIND, SIDES };
static const char *const side_name[SIDES] = {"local", "split", "pinned", "one", "blind"};

/* Whether node() annotates module paths (the pinned side's graph has none). */
static int g_modules = 1;

typedef struct dims {
  int64_t d, patch, patches, vocab, tokens, answers;
} dims_t;

typedef struct weight {
  char name[48];
  int64_t shape[2];
  size_t ndim;
  int module; /* 0 vision, 1 text, 2 fusion: where the split deployment puts it */
  float *data;
} weight_t;

#define MAX_W 24
typedef struct model {
  dims_t dm;
  genie_graph_t *g;
  weight_t w[MAX_W];
  size_t nw;
} model_t;

static void add_weight(model_t *m, genie_graph_t *g, const char *name, int64_t a, int64_t b, int module,
                       uint64_t *seed, float scale, float offset) {
  weight_t *w = &m->w[m->nw++];
  size_t n, j;
  snprintf(w->name, sizeof w->name, "%s", name);
  w->shape[0] = a;
  w->shape[1] = b;
  w->ndim = b > 0 ? 2 : 1;
  w->module = module;
  n = (size_t)a * (size_t)(b > 0 ? b : 1);
  w->data = bu_malloc(sizeof(float) * n);
  for (j = 0; j < n; ++j) w->data[j] = gd_rand(seed) * scale + offset;
  bu_check(genie_graph_add_input(g, name, GENIE_DTYPE_F32, w->shape, w->ndim), name);
  bu_check(genie_graph_set_role(g, name, GENIE_TENSOR_ROLE_WEIGHT), "role");
}

static const char *prefixed(char *buf, size_t n, const char *prefix, const char *name) {
  snprintf(buf, n, "%s.%s", prefix, name);
  return buf;
}

/* One node `prefix.name` (op) reading `in`, writing `prefix.out`, in module
 * `prefix` with its modality. An input named "/NAME" is the graph's NAME,
 * any other this module's. */
static void node(genie_graph_t *g, const char *prefix, genie_modality_t mod, const char *op, const char *name,
                 const char *out, int n_in, const char *const *in) {
  char nm[64], o[64], ins[4][64];
  const char *inp[4], *outp[1];
  int i;
  for (i = 0; i < n_in; ++i) {
    if (in[i][0] == '/')
      snprintf(ins[i], sizeof ins[i], "%s", in[i] + 1);
    else
      prefixed(ins[i], sizeof ins[i], prefix, in[i]);
    inp[i] = ins[i];
  }
  prefixed(nm, sizeof nm, prefix, name);
  prefixed(o, sizeof o, prefix, out);
  outp[0] = o;
  bu_check(genie_graph_add_node(g, op, nm, inp, (size_t)n_in, outp, 1), nm);
  if (g_modules) bu_check(genie_graph_set_module(g, nm, prefix), "module");
  if (mod != GENIE_MODALITY_UNKNOWN) bu_check(genie_graph_set_modality(g, nm, mod), "modality");
}
#define NODE(g, p, mod, op, name, out, ...)                               \
  do {                                                                    \
    const char *in_[] = {__VA_ARGS__};                                    \
    node(g, p, mod, op, name, out, (int)(sizeof in_ / sizeof *in_), in_); \
  } while (0)

/* The encoder body both modalities share, from `prefix.x` [n, d] to
 * `prefix.feat` [1, d]: x + attn(ln(x)), then + mlp(.), mean over rows. */
static void encoder_body(model_t *m, const char *p, genie_modality_t mod, uint64_t *seed) {
  genie_graph_t *g = m->g;
  const int64_t d = m->dm.d, mean_axes[1] = {0};
  const int module = mod == GENIE_MODALITY_VISION ? 0 : 1;
  char nm[64];
  add_weight(m, g, prefixed(nm, sizeof nm, p, "ln_w"), d, 0, module, seed, 0.1f, 1.0f);
  add_weight(m, g, prefixed(nm, sizeof nm, p, "ln_b"), d, 0, module, seed, 0.1f, 0.0f);
  add_weight(m, g, prefixed(nm, sizeof nm, p, "fc1_w"), 2 * d, d, module, seed, 0.15f, 0.0f);
  add_weight(m, g, prefixed(nm, sizeof nm, p, "fc1_b"), 2 * d, 0, module, seed, 0.1f, 0.0f);
  add_weight(m, g, prefixed(nm, sizeof nm, p, "fc2_w"), d, 2 * d, module, seed, 0.1f, 0.0f);
  add_weight(m, g, prefixed(nm, sizeof nm, p, "fc2_b"), d, 0, module, seed, 0.1f, 0.0f);
  NODE(g, p, mod, "layer_norm", "ln", "h", "x", "ln_w", "ln_b");
  NODE(g, p, mod, "attention", "attn", "a", "h", "h", "h");
  NODE(g, p, mod, "add", "res1", "r", "x", "a");
  NODE(g, p, mod, "linear", "fc1", "m1", "r", "fc1_w", "fc1_b");
  NODE(g, p, mod, "gelu", "gelu", "m2", "m1");
  NODE(g, p, mod, "linear", "fc2", "m3", "m2", "fc2_w", "fc2_b");
  NODE(g, p, mod, "add", "res2", "y", "r", "m3");
  NODE(g, p, mod, "reduce_mean", "pool", "feat", "y");
  bu_check(genie_graph_set_attr_ints(g, prefixed(nm, sizeof nm, p, "pool"), "axes", mean_axes, 1), "axes");
  bu_check(genie_graph_set_attr_int(g, nm, "keepdims", 1), "keepdims");
}

static void model_build(model_t *m, dims_t dm) {
  const int64_t img[2] = {dm.patches, dm.patch}, q[1] = {dm.tokens};
  uint64_t seed = 0x71a;
  genie_graph_t *g;
  memset(m, 0, sizeof *m);
  m->dm = dm;
  bu_check(genie_graph_create("vqa", &m->g), "genie_graph_create");
  g = m->g;
  bu_check(genie_graph_add_input(g, "image", GENIE_DTYPE_F32, img, 2), "image");
  bu_check(genie_graph_add_input(g, "question", GENIE_DTYPE_I64, q, 1), "question");
  bu_check(genie_graph_set_role(g, "image", GENIE_TENSOR_ROLE_INPUT), "role");
  bu_check(genie_graph_set_role(g, "question", GENIE_TENSOR_ROLE_INPUT), "role");
  add_weight(m, g, "vision.pe_w", dm.d, dm.patch, 0, &seed, 0.15f, 0.0f);
  add_weight(m, g, "vision.pe_b", dm.d, 0, 0, &seed, 0.1f, 0.0f);
  NODE(g, "vision", GENIE_MODALITY_VISION, "linear", "patch_embed", "x", "/image", "pe_w", "pe_b");
  encoder_body(m, "vision", GENIE_MODALITY_VISION, &seed);
  add_weight(m, g, "text.emb", dm.vocab, dm.d, 1, &seed, 1.0f, 0.0f);
  NODE(g, "text", GENIE_MODALITY_TEXT, "embedding", "embed", "x", "/question", "emb");
  encoder_body(m, "text", GENIE_MODALITY_TEXT, &seed);
  add_weight(m, g, "fusion.w1", dm.d, 2 * dm.d, 2, &seed, 0.1f, 0.0f);
  add_weight(m, g, "fusion.b1", dm.d, 0, 2, &seed, 0.1f, 0.0f);
  add_weight(m, g, "fusion.w2", dm.answers, dm.d, 2, &seed, 0.1f, 0.0f);
  add_weight(m, g, "fusion.b2", dm.answers, 0, 2, &seed, 0.1f, 0.0f);
  NODE(g, "fusion", GENIE_MODALITY_UNKNOWN, "concat", "concat", "f", "/vision.feat", "/text.feat");
  bu_check(genie_graph_set_attr_int(g, "fusion.concat", "axis", 1), "axis");
  NODE(g, "fusion", GENIE_MODALITY_UNKNOWN, "linear", "fc1", "h", "f", "w1", "b1");
  NODE(g, "fusion", GENIE_MODALITY_UNKNOWN, "gelu", "gelu", "g", "h");
  NODE(g, "fusion", GENIE_MODALITY_UNKNOWN, "linear", "head", "logits", "g", "w2", "b2");
  bu_check(genie_graph_mark_output(g, "fusion.logits"), "mark");
}

static void model_free(model_t *m) {
  size_t i;
  for (i = 0; i < m->nw; ++i) free(m->w[i].data);
  genie_graph_destroy(m->g);
}

static size_t weight_bytes(const weight_t *w) {
  return sizeof(float) * (size_t)w->shape[0] * (size_t)(w->ndim == 2 ? w->shape[1] : 1);
}

/* The model's weights on `ctx`: module k's on devices[k] (NULL: the
 * context's default device). */
static void weights_place(const model_t *m, genie_context_t *ctx, const char *const devices[3],
                          genie_tensor_t **out) {
  size_t i;
  for (i = 0; i < m->nw; ++i) {
    const weight_t *w = &m->w[i];
    bu_check(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, w->shape, w->ndim, devices[w->module], &out[i]),
             "weight alloc");
    bu_check(genie_tensor_write(out[i], 0, w->data, weight_bytes(w)), "weight write");
  }
}

static double info_number(genie_context_t *ctx, const char *key) {
  char *json = NULL, pat[96];
  const char *p;
  double v = 0;
  if (genie_context_is_embedded(ctx) == 1) return 0;
  bu_check(genie_context_server_info(ctx, &json), "genie_context_server_info");
  snprintf(pat, sizeof pat, "\"%s\":", key);
  if ((p = strstr(json, pat)) != NULL) v = strtod(p + strlen(pat), NULL);
  genie_free(json);
  return v;
}

typedef struct wire {
  double up, down, between;
} wire_t;

static wire_t wire_now(genie_context_t *ctx) {
  wire_t w = {0, 0, 0};
  if (genie_context_is_embedded(ctx) == 1) return w;
  w.up = bu_client_counter(ctx, "graph_bytes_sent") + bu_client_counter(ctx, "tensor_bytes_written");
  /* Reads, and completions (outputs that came back inside them). */
  w.down = bu_client_counter(ctx, "tensor_bytes_read") + bu_client_counter(ctx, "completion_bytes");
  w.between = info_number(ctx, "server_transfer_bytes");
  return w;
}

/* Binds the image, the question and the weights: names/bound of n. */
static size_t bind(const model_t *m, genie_tensor_t *image, genie_tensor_t *question,
                   genie_tensor_t *const *w, const char **names, genie_tensor_t **bound) {
  size_t i, n = 0;
  names[n] = "image", bound[n++] = image;
  names[n] = "question", bound[n++] = question;
  for (i = 0; i < m->nw; ++i) names[n] = m->w[i].name, bound[n++] = w[i];
  return n;
}

/* One request: writes the inputs, runs the graph, reads the logits. */
static double request(const model_t *m, genie_graph_t *graph, genie_context_t *ctx, genie_tensor_t *const *w,
                      const float *img, const int64_t *q, float *logits) {
  const int64_t ishape[2] = {m->dm.patches, m->dm.patch}, qshape[1] = {m->dm.tokens};
  const char *names[2 + MAX_W];
  genie_tensor_t *bound[2 + MAX_W], *image = NULL, *question = NULL, *out = NULL;
  genie_future_t *f = NULL;
  const double t0 = bu_now_s();
  size_t n;
  bu_check(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, ishape, 2, "cpu", &image), "image alloc");
  bu_check(genie_tensor_write(image, 0, img, sizeof(float) * (size_t)(m->dm.patches * m->dm.patch)), "image");
  bu_check(genie_tensor_alloc(ctx, GENIE_DTYPE_I64, qshape, 1, "cpu", &question), "question alloc");
  bu_check(genie_tensor_write(question, 0, q, sizeof(int64_t) * (size_t)m->dm.tokens), "question");
  n = bind(m, image, question, w, names, bound);
  bu_check(genie_graph_submit(ctx, graph, names, bound, n, &f), "vqa submit");
  bu_check(genie_future_wait(f, -1), "vqa run");
  bu_check(genie_future_output(f, 0, &out), "vqa logits");
  bu_check(genie_tensor_read(out, 0, logits, sizeof(float) * (size_t)m->dm.answers), "vqa read");
  genie_tensor_destroy(out);
  genie_future_destroy(f);
  genie_tensor_destroy(image);
  genie_tensor_destroy(question);
  return (bu_now_s() - t0) * 1e3;
}

/* Prints where the master would run each module of the graph bound as a
 * request on `w` binds it (genie_plan_explain_bound), what it moves
 * between devices and its predicted time. Returns 1 when every node is on
 * one device. */
static int explain(const model_t *m, genie_graph_t *graph, genie_context_t *ctx, genie_tensor_t *const *w,
                   const char *what) {
  static const char *const mods[3] = {"vision", "text", "fusion"};
  const int64_t ishape[2] = {m->dm.patches, m->dm.patch}, qshape[1] = {m->dm.tokens};
  const char *names[2 + MAX_W];
  genie_tensor_t *bound[2 + MAX_W], *image = NULL, *question = NULL;
  char *json = NULL, first[64] = "";
  cJSON *doc, *it;
  double moved = 0;
  int one = 1, k;
  size_t n;
  bu_check(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, ishape, 2, "cpu", &image), "image alloc");
  bu_check(genie_tensor_alloc(ctx, GENIE_DTYPE_I64, qshape, 1, "cpu", &question), "question alloc");
  n = bind(m, image, question, w, names, bound);
  bu_check(genie_plan_explain_bound(ctx, graph, names, bound, n, &json), "genie_plan_explain_bound");
  doc = cJSON_Parse(json);
  if (!doc) {
    fprintf(stderr, "bench: the plan is not JSON\n");
    exit(1);
  }
  printf("  plan %-6s", what);
  for (k = 0; k < 3; ++k) {
    char devs[256] = "", rules[128] = "";
    cJSON_ArrayForEach(it, cJSON_GetObjectItem(doc, "nodes")) {
      const char *nm = cJSON_GetStringValue(cJSON_GetObjectItem(it, "name"));
      const char *dev = cJSON_GetStringValue(cJSON_GetObjectItem(it, "device"));
      const char *rule = cJSON_GetStringValue(cJSON_GetObjectItem(it, "rule"));
      if (!nm || !dev || strncmp(nm, mods[k], strlen(mods[k])) != 0) continue;
      if (!first[0]) snprintf(first, sizeof first, "%s", dev);
      if (strcmp(first, dev) != 0) one = 0;
      if (!strstr(devs, dev))
        snprintf(devs + strlen(devs), sizeof devs - strlen(devs), "%s%s", *devs ? "+" : "", dev);
      if (rule && !strstr(rules, rule))
        snprintf(rules + strlen(rules), sizeof rules - strlen(rules), "%s%s", *rules ? "," : "", rule);
    }
    printf(" %s on %s (%s);", mods[k], devs, rules);
  }
  cJSON_ArrayForEach(it, cJSON_GetObjectItem(doc, "transfers")) {
    moved += cJSON_GetNumberValue(cJSON_GetObjectItem(it, "bytes"));
  }
  printf(" moves %.0f B; predicted %.3f ms\n", moved,
         cJSON_GetNumberValue(cJSON_GetObjectItem(doc, "predicted_total_s")) * 1e3);
  cJSON_Delete(doc);
  genie_free(json);
  genie_tensor_destroy(image);
  genie_tensor_destroy(question);
  return one;
}

/* Runs one image size: plans, then `runs` interleaved requests per side.
 * Returns 1 when the sides' logits differ. */
static int run_size(const char *size, dims_t dm, genie_context_t *const ctx[SIDES],
                    const char *const workers[2], int runs, FILE *json) {
  const char *const dev_one[3] = {NULL, NULL, NULL};
  model_t m, plain;
  genie_tensor_t *w[SIDES][MAX_W];
  float *img, *logits[SIDES];
  int64_t *q;
  double *t[SIDES], *r_so, *r_sl, *r_bs, *r_sp;
  wire_t moved[SIDES];
  bu_stats_t st[SIDES], so, sl, bs, sp;
  uint64_t seed = 0xfeed;
  size_t i, wbytes[3] = {0, 0, 0};
  int it, j, k, bad = 0, split_one, one_one;
  char wsplit[2][64];
  model_build(&m, dm);
  g_modules = 0;
  model_build(&plain, dm);
  g_modules = 1;
  for (i = 0; i < m.nw; ++i) wbytes[m.w[i].module] += weight_bytes(&m.w[i]);
  img = bu_malloc(sizeof(float) * (size_t)(dm.patches * dm.patch));
  for (i = 0; i < (size_t)(dm.patches * dm.patch); ++i) img[i] = gd_rand(&seed);
  q = bu_malloc(sizeof(int64_t) * (size_t)dm.tokens);
  for (i = 0; i < (size_t)dm.tokens; ++i) q[i] = (int64_t)((i * 7919u + 13u) % (size_t)dm.vocab);
  for (k = 0; k < 2; ++k) snprintf(wsplit[k], sizeof wsplit[k], "%s/cpu:0", workers[k]);
  {
    const char *const ds[3] = {wsplit[0], wsplit[1], NULL};
    for (k = 0; k < SIDES; ++k)
      if (k != PINNED) weights_place(&m, ctx[k], k == SPLIT ? ds : dev_one, w[k]);
    memcpy(w[PINNED], w[SPLIT], sizeof w[SPLIT]); /* the same tensors, the graph without module paths */
  }
  printf(
      "\n[%s] image %lld patches x %lld (%.0f kB), question %lld tokens; weights: vision %.0f kB, text %.0f "
      "kB, "
      "fusion %.0f kB\n",
      size, (long long)dm.patches, (long long)dm.patch, dm.patches * dm.patch * 4 / 1e3, (long long)dm.tokens,
      wbytes[0] / 1e3, wbytes[1] / 1e3, wbytes[2] / 1e3);
  split_one = explain(&m, m.g, ctx[SPLIT], w[SPLIT], "split");
  explain(&m, plain.g, ctx[PINNED], w[PINNED], "pinned");
  one_one = explain(&m, m.g, ctx[ONE], w[ONE], "one");
  for (k = 0; k < SIDES; ++k) {
    logits[k] = bu_malloc(sizeof(float) * (size_t)dm.answers);
    t[k] = bu_malloc(sizeof(double) * (size_t)runs);
    moved[k].up = moved[k].down = moved[k].between = 0;
  }
  r_so = bu_malloc(sizeof(double) * (size_t)runs);
  r_sl = bu_malloc(sizeof(double) * (size_t)runs);
  r_bs = bu_malloc(sizeof(double) * (size_t)runs);
  r_sp = bu_malloc(sizeof(double) * (size_t)runs);
  for (it = -1; it < runs; ++it) { /* -1: the warm-up (plans, graph caches) */
    for (j = 0; j < SIDES; ++j) {
      const int side = (it + 1 + j) % SIDES;
      const wire_t a = wire_now(ctx[side]);
      const double ms = request(&m, side == PINNED ? plain.g : m.g, ctx[side], w[side], img, q, logits[side]);
      const wire_t b = wire_now(ctx[side]);
      if (it < 0) continue;
      t[side][it] = ms;
      moved[side].up += b.up - a.up;
      moved[side].down += b.down - a.down;
      moved[side].between += b.between - a.between;
    }
    for (i = 0; i < (size_t)dm.answers; ++i)
      for (k = 1; k < SIDES; ++k)
        if (fabsf(logits[k][i] - logits[LOCAL][i]) > 1e-3f * (1.0f + fabsf(logits[LOCAL][i]))) bad = 1;
    if (it >= 0) {
      r_so[it] = t[SPLIT][it] / t[ONE][it];
      r_sl[it] = t[SPLIT][it] / t[LOCAL][it];
      r_bs[it] = t[BLIND][it] / t[SPLIT][it];
      r_sp[it] = t[SPLIT][it] / t[PINNED][it];
    }
  }
  printf("  %d requests per side interleaved after a warm-up; answer logits %s\n", runs,
         bad ? "DIFFER" : "equal on all five sides");
  printf("  %-7s %9s %9s %12s %12s %14s\n", "side", "p50 ms", "p99 ms", "up B/req", "down B/req",
         "between B/req");
  for (k = 0; k < SIDES; ++k) {
    st[k] = bu_stats(t[k], (size_t)runs);
    printf("  %-7s %9.3f %9.3f %12.0f %12.0f %14.0f\n", side_name[k], st[k].median, st[k].p99,
           moved[k].up / runs, moved[k].down / runs, moved[k].between / runs);
  }
  so = bu_stats(r_so, (size_t)runs);
  sl = bu_stats(r_sl, (size_t)runs);
  bs = bu_stats(r_bs, (size_t)runs);
  sp = bu_stats(r_sp, (size_t)runs);
  printf(
      "  per request: split/pinned %.3f, split/one %.3f, split/local %.3f, blind/split %.3f (medians of "
      "per-request ratios)\n",
      sp.median, so.median, sl.median, bs.median);
  if (json) {
    fprintf(json,
            "%s\"%s\":{\"patches\":%lld,\"runs\":%d,\"split_plan_one_server\":%s,\"one_plan_one_server\":%s",
            strcmp(size, "small") == 0 ? "" : ",", size, (long long)dm.patches, runs,
            split_one ? "true" : "false", one_one ? "true" : "false");
    for (k = 0; k < SIDES; ++k)
      fprintf(json,
              ",\"%s\":{\"p50_ms\":%.4f,\"p99_ms\":%.4f,\"up_bytes\":%.1f,\"down_bytes\":%.1f,"
              "\"between_bytes\":%.1f}",
              side_name[k], st[k].median, st[k].p99, moved[k].up / runs, moved[k].down / runs,
              moved[k].between / runs);
    fprintf(json,
            ",\"split_over_pinned\":%.4f,\"split_over_one\":%.4f,\"split_over_local\":%.4f,"
            "\"blind_over_split\":%.4f}",
            sp.median, so.median, sl.median, bs.median);
  }
  for (k = 0; k < SIDES; ++k) {
    if (k != PINNED)
      for (i = 0; i < m.nw; ++i) genie_tensor_destroy(w[k][i]);
    free(logits[k]);
    free(t[k]);
  }
  free(r_so);
  free(r_sl);
  free(r_bs);
  free(r_sp);
  free(img);
  free(q);
  model_free(&m);
  model_free(&plain);
  return bad;
}

int main(int argc, char **argv) {
  const bu_options_t o = bu_parse_args(argc, argv, " (requests per side and size; default 15, --quick 2)");
  const int runs = o.iters ? o.iters : (o.quick ? 2 : 15);
  const char *label = getenv("GENIE_BENCH_LABEL");
  const char *workers_env = getenv("GENIE_VQA_WORKERS");
  char host[256] = "127.0.0.1", wbuf[2][64] = {"vqa-b", "vqa-c"};
  const char *workers[2] = {wbuf[0], wbuf[1]};
  int32_t port = 0;
  genie_server_t *servers[3] = {NULL, NULL, NULL};
  genie_context_t *ctx[SIDES];
  dims_t small, large;
  FILE *json;
  int bad = 0, k;
  if (bu_bench_server(host, sizeof host, &port)) {
    const char *comma;
    if (!workers_env || !(comma = strchr(workers_env, ',')) || comma == workers_env || !comma[1] ||
        (size_t)(comma - workers_env) >= sizeof wbuf[0] || strlen(comma + 1) >= sizeof wbuf[1]) {
      fprintf(stderr, "bench: GENIE_VQA_WORKERS must name the master's two workers (e.g. vqa-b,vqa-c)\n");
      return 2;
    }
    memcpy(wbuf[0], workers_env, (size_t)(comma - workers_env));
    wbuf[0][comma - workers_env] = '\0';
    snprintf(wbuf[1], sizeof wbuf[1], "%s", comma + 1);
  } else {
    /* A master and two workers joined to it, in this process, on loopback. */
    for (k = 0; k < 3; ++k) {
      genie_config_t *cfg = NULL;
      bu_check(genie_config_create(&cfg), "genie_config_create");
      bu_check(genie_config_set_use_env(cfg, 0), "genie_config_set_use_env");
      bu_check(genie_config_set_node_id(cfg, k == 0 ? "vqa-a" : workers[k - 1]), "genie_config_set_node_id");
      if (k > 0) {
        bu_check(genie_config_set_master_addr(cfg, "127.0.0.1"), "genie_config_set_master_addr");
        bu_check(genie_config_set_master_port(cfg, port), "genie_config_set_master_port");
      }
      bu_check(genie_server_create(cfg, "127.0.0.1", 0, &servers[k]), "genie_server_create");
      genie_config_destroy(cfg);
      if (k == 0) bu_check(genie_server_port(servers[0], &port), "genie_server_port");
    }
  }
  ctx[LOCAL] = bu_context(NULL, 0, 1);
  ctx[SPLIT] = bu_context(host, port, 1);
  ctx[ONE] = ctx[PINNED] =
      ctx[SPLIT]; /* one session: the sides differ by where the weights are, or the graph */
  ctx[BLIND] = bu_context(host, port, 0);
  small.d = large.d = o.quick ? 32 : 64;
  small.patch = large.patch = 192;      /* 8x8 RGB patches */
  small.patches = 16;                   /* a 32x32 image */
  large.patches = o.quick ? 256 : 1024; /* 128x128 (--quick) or 256x256 */
  small.vocab = large.vocab = 1000;
  small.tokens = large.tokens = 16;
  small.answers = large.answers = 100;
  printf(
      "VQA-style model across three servers (master A, workers %s and %s): a ViT-like vision encoder and a "
      "text\n"
      "encoder (each: embedding, layer norm, self-attention, MLP, residuals, mean pool; hidden %lld) fused "
      "by a\n"
      "head (concat, linear, gelu, linear to %lld answers); server %s:%d%s%s\n",
      workers[0], workers[1], (long long)small.d, (long long)small.answers, host, port,
      label ? ", link " : "", label ? label : "");
  json = bu_json_open(o.json_path);
  if (json) {
    fprintf(json, "{\"bench\":\"vqa_links\",\"link\":");
    bu_json_str(json, label ? label : "loopback");
    fprintf(json, ",");
  }
  bad |= run_size("small", small, ctx, workers, runs, json);
  bad |= run_size("large", large, ctx, workers, runs, json);
  if (json) fprintf(json, "}\n");
  bu_json_close(json, o.json_path);
  genie_shutdown(ctx[BLIND]);
  genie_shutdown(ctx[SPLIT]);
  genie_shutdown(ctx[LOCAL]);
  for (k = 2; k >= 0; --k)
    if (servers[k]) genie_server_destroy(servers[k]);
  if (bad) fprintf(stderr, "bench: the sides' answer logits differ\n");
  return bad;
}
