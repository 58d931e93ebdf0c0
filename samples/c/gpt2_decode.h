/* A GPT-2-style decoder for decode-loop tests and benchmarks (header-only
 * C99, public API only): token embedding e [1,1,D] given by the client,
 * `layers` pre-norm blocks (layer_norm, fused qkv linear, split, heads,
 * KV-cache append with concat, attention, output projection, residual,
 * layer_norm, MLP with gelu, residual), final layer_norm and an LM head
 * tied to the embedding table. Each layer's past keys and values are graph
 * inputs [1,H,-1,DH] (the dynamic length takes the bound size, so every
 * step submits the same graph); the new caches are graph outputs 1.. (k, v
 * per layer), which the next step binds where they were produced.
 *
 * Inputs, in binding order: "e", "wte", per layer l "l<l>.ln1_w",
 * "l<l>.ln1_b", "l<l>.qkv_w", "l<l>.o_w", "l<l>.ln2_w", "l<l>.ln2_b",
 * "l<l>.fc_w", "l<l>.proj_w", "l<l>.k_cache", "l<l>.v_cache", then "lnf_w",
 * "lnf_b". */
#ifndef GENIE_GPT2_DECODE_H
#define GENIE_GPT2_DECODE_H

#include <genie.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GD_MAX_LAYERS 8
#define GD_PER_LAYER 10
#define GD_MAX_INPUTS (2 + GD_MAX_LAYERS * GD_PER_LAYER + 2)

typedef struct gd_dims {
  int d, heads, layers, vocab, t0; /* hidden, heads, layers, vocabulary, initial cache length */
} gd_dims_t;

/* The GPT-2-tiny of the decode benchmarks: 2 layers, 2 heads, caches from
 * 8 tokens; hidden 128 and vocabulary 1000, or 32 and 50 when `quick`. */
static inline gd_dims_t gd_tiny_dims(int quick) {
  gd_dims_t dm;
  dm.d = quick ? 32 : 128;
  dm.heads = 2;
  dm.layers = 2;
  dm.vocab = quick ? 50 : 1000;
  dm.t0 = 8;
  return dm;
}

/* Exits with the failed call on stderr (tests and benchmarks alike). */
static void gd_check(genie_status_t st, const char *what) {
  if (st == GENIE_OK) return;
  fprintf(stderr, "gpt2_decode: %s: %s: %s\n", what, genie_status_str(st), genie_last_error());
  exit(3);
}

static void gd_node(genie_graph_t *g, const char *op, const char *name, const char **in, size_t n_in,
                    const char *out, int layer) {
  const char *outs[1];
  outs[0] = out;
  gd_check(genie_graph_add_node(g, op, name, in, n_in, outs, 1), name);
  if (layer >= 0) gd_check(genie_graph_set_layer(g, name, layer), "genie_graph_set_layer");
  gd_check(genie_graph_set_phase(g, name, GENIE_PHASE_DECODE), "genie_graph_set_phase");
}

static const char *const gd_layer_inputs[GD_PER_LAYER] = {"ln1_w", "ln1_b", "qkv_w", "o_w",     "ln2_w",
                                                         "ln2_b", "fc_w",  "proj_w", "k_cache", "v_cache"};

/* The decode-step graph. `kv_annotated`: bit l set = layer l's caches carry
 * GENIE_TENSOR_ROLE_KV_CACHE (else they are only found from the graph). */
static genie_graph_t *gd_graph(gd_dims_t dm, unsigned kv_annotated) {
  const int64_t D = dm.d, H = dm.heads, DH = dm.d / dm.heads, F = 4 * dm.d;
  const int64_t es[3] = {1, 1, D}, wte_s[2] = {dm.vocab, D}, dvec[1] = {D}, cache_s[4] = {1, H, -1, DH};
  const int64_t qkv_s[2] = {3 * D, D}, o_s[2] = {D, D}, fc_s[2] = {F, D}, proj_s[2] = {D, F};
  const int64_t *shapes[GD_PER_LAYER] = {dvec, dvec, qkv_s, o_s, dvec, dvec, fc_s, proj_s, cache_s, cache_s};
  const size_t ndims[GD_PER_LAYER] = {1, 1, 2, 2, 1, 1, 2, 2, 4, 4};
  const int64_t sizes[3] = {D, D, D}, shape4[4] = {1, 1, H, DH}, perm[4] = {0, 2, 1, 3}, flat[3] = {1, 1, D};
  static const char *const vn[23] = {"ln1", "qkv",  "q",      "k",   "v",     "q4",  "k4",  "v4",
                                     "qh",  "kh",   "vh",     "k_new", "v_new", "att", "att_t", "att_flat",
                                     "att_o", "res1", "ln2", "fc",  "gelu",  "mlp", "res2"};
  genie_graph_t *g = NULL;
  char x[64] = "e";
  int l, i;
  gd_check(genie_graph_create("gpt2-decode", &g), "genie_graph_create");
  gd_check(genie_graph_add_input(g, "e", GENIE_DTYPE_F32, es, 3), "e");
  gd_check(genie_graph_add_input(g, "wte", GENIE_DTYPE_F32, wte_s, 2), "wte");
  gd_check(genie_graph_set_role(g, "wte", GENIE_TENSOR_ROLE_WEIGHT), "wte role");
  for (l = 0; l < dm.layers; ++l) {
    char n[GD_PER_LAYER][64], v[23][64], nn[23][72];
    const char *in[3];
    const char *split_out[3];
    for (i = 0; i < GD_PER_LAYER; ++i) {
      snprintf(n[i], sizeof n[i], "l%d.%s", l, gd_layer_inputs[i]);
      gd_check(genie_graph_add_input(g, n[i], GENIE_DTYPE_F32, shapes[i], ndims[i]), n[i]);
      if (i < 8)
        gd_check(genie_graph_set_role(g, n[i], GENIE_TENSOR_ROLE_WEIGHT), "weight role");
      else if (kv_annotated & (1u << l))
        gd_check(genie_graph_set_role(g, n[i], GENIE_TENSOR_ROLE_KV_CACHE), "kv role");
    }
    for (i = 0; i < 23; ++i) {
      snprintf(v[i], sizeof v[i], "l%d.%s", l, vn[i]);
      snprintf(nn[i], sizeof nn[i], "%.63s.op", v[i]);
    }
    in[0] = x, in[1] = n[0], in[2] = n[1];
    gd_node(g, "layer_norm", nn[0], in, 3, v[0], l);
    in[0] = v[0], in[1] = n[2];
    gd_node(g, "linear", nn[1], in, 2, v[1], l);
    in[0] = v[1];
    split_out[0] = v[2], split_out[1] = v[3], split_out[2] = v[4];
    gd_check(genie_graph_add_node(g, "split", nn[2], in, 1, split_out, 3), "split");
    gd_check(genie_graph_set_attr_int(g, nn[2], "axis", -1), "split axis");
    gd_check(genie_graph_set_attr_ints(g, nn[2], "sizes", sizes, 3), "split sizes");
    gd_check(genie_graph_set_layer(g, nn[2], l), "split layer");
    for (i = 0; i < 3; ++i) {
      in[0] = v[2 + i];
      gd_node(g, "reshape", nn[5 + i], in, 1, v[5 + i], l);
      gd_check(genie_graph_set_attr_ints(g, nn[5 + i], "shape", shape4, 4), "reshape");
      in[0] = v[5 + i];
      gd_node(g, "permute", nn[8 + i], in, 1, v[8 + i], l);
      gd_check(genie_graph_set_attr_ints(g, nn[8 + i], "perm", perm, 4), "permute");
    }
    in[0] = n[8], in[1] = v[9];
    gd_node(g, "concat", nn[11], in, 2, v[11], l);
    gd_check(genie_graph_set_attr_int(g, nn[11], "axis", 2), "concat axis");
    in[0] = n[9], in[1] = v[10];
    gd_node(g, "concat", nn[12], in, 2, v[12], l);
    gd_check(genie_graph_set_attr_int(g, nn[12], "axis", 2), "concat axis");
    in[0] = v[8], in[1] = v[11], in[2] = v[12];
    gd_node(g, "attention", nn[13], in, 3, v[13], l);
    in[0] = v[13];
    gd_node(g, "permute", nn[14], in, 1, v[14], l);
    gd_check(genie_graph_set_attr_ints(g, nn[14], "perm", perm, 4), "permute");
    in[0] = v[14];
    gd_node(g, "reshape", nn[15], in, 1, v[15], l);
    gd_check(genie_graph_set_attr_ints(g, nn[15], "shape", flat, 3), "reshape");
    in[0] = v[15], in[1] = n[3];
    gd_node(g, "linear", nn[16], in, 2, v[16], l);
    in[0] = x, in[1] = v[16];
    gd_node(g, "add", nn[17], in, 2, v[17], l);
    in[0] = v[17], in[1] = n[4], in[2] = n[5];
    gd_node(g, "layer_norm", nn[18], in, 3, v[18], l);
    in[0] = v[18], in[1] = n[6];
    gd_node(g, "linear", nn[19], in, 2, v[19], l);
    in[0] = v[19];
    gd_node(g, "gelu", nn[20], in, 1, v[20], l);
    in[0] = v[20], in[1] = n[7];
    gd_node(g, "linear", nn[21], in, 2, v[21], l);
    in[0] = v[17], in[1] = v[21];
    gd_node(g, "add", nn[22], in, 2, v[22], l);
    snprintf(x, sizeof x, "%s", v[22]);
  }
  {
    const char *in[3];
    char k[64];
    gd_check(genie_graph_add_input(g, "lnf_w", GENIE_DTYPE_F32, dvec, 1), "lnf_w");
    gd_check(genie_graph_add_input(g, "lnf_b", GENIE_DTYPE_F32, dvec, 1), "lnf_b");
    gd_check(genie_graph_set_role(g, "lnf_w", GENIE_TENSOR_ROLE_WEIGHT), "role");
    gd_check(genie_graph_set_role(g, "lnf_b", GENIE_TENSOR_ROLE_WEIGHT), "role");
    in[0] = x, in[1] = "lnf_w", in[2] = "lnf_b";
    gd_node(g, "layer_norm", "lnf", in, 3, "xf", -1);
    in[0] = "xf", in[1] = "wte";
    gd_node(g, "linear", "lm_head", in, 2, "logits", -1);
    gd_check(genie_graph_mark_output(g, "logits"), "mark logits");
    /* What the caller reads each step: a remote step carries it back inside
     * its completion. */
    gd_check(genie_graph_set_role(g, "logits", GENIE_TENSOR_ROLE_OUTPUT), "logits role");
    for (l = 0; l < dm.layers; ++l) {
      snprintf(k, sizeof k, "l%d.k_new", l);
      gd_check(genie_graph_mark_output(g, k), "mark k");
      snprintf(k, sizeof k, "l%d.v_new", l);
      gd_check(genie_graph_mark_output(g, k), "mark v");
    }
  }
  return g;
}

/* The model's parameters and initial caches (deterministic). */
typedef struct gd_model {
  gd_dims_t dims;
  size_t n_inputs;
  char names[GD_MAX_INPUTS][48];
  const char *name_ptrs[GD_MAX_INPUTS];
  int64_t shapes[GD_MAX_INPUTS][4];
  size_t ndim[GD_MAX_INPUTS];
  int layer[GD_MAX_INPUTS]; /* -1: not of a layer */
  float *data[GD_MAX_INPUTS]; /* NULL for "e" */
} gd_model_t;

static float gd_rand(uint64_t *s) { /* uniform in [-0.5, 0.5) */
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return (float)((*s >> 40) & 0xffffff) / 16777216.0f - 0.5f;
}

static void gd_model_init(gd_model_t *m, gd_dims_t dm, uint64_t seed) {
  const int64_t D = dm.d, H = dm.heads, DH = dm.d / dm.heads, F = 4 * dm.d;
  const int64_t per[GD_PER_LAYER][4] = {{D}, {D}, {3 * D, D}, {D, D}, {D}, {D}, {F, D}, {D, F},
                                        {1, H, dm.t0, DH}, {1, H, dm.t0, DH}};
  const size_t per_nd[GD_PER_LAYER] = {1, 1, 2, 2, 1, 1, 2, 2, 4, 4};
  size_t k = 0, i, j;
  int l;
  uint64_t s = seed ? seed : 0x9e3779b97f4a7c15ull;
  memset(m, 0, sizeof *m);
  m->dims = dm;
  snprintf(m->names[k], sizeof m->names[k], "e");
  m->shapes[k][0] = 1, m->shapes[k][1] = 1, m->shapes[k][2] = D, m->ndim[k] = 3, m->layer[k++] = -1;
  snprintf(m->names[k], sizeof m->names[k], "wte");
  m->shapes[k][0] = dm.vocab, m->shapes[k][1] = D, m->ndim[k] = 2, m->layer[k++] = -1;
  for (l = 0; l < dm.layers; ++l)
    for (i = 0; i < GD_PER_LAYER; ++i) {
      snprintf(m->names[k], sizeof m->names[k], "l%d.%s", l, gd_layer_inputs[i]);
      memcpy(m->shapes[k], per[i], sizeof per[i]);
      m->ndim[k] = per_nd[i];
      m->layer[k++] = l;
    }
  snprintf(m->names[k], sizeof m->names[k], "lnf_w");
  m->shapes[k][0] = D, m->ndim[k] = 1, m->layer[k++] = -1;
  snprintf(m->names[k], sizeof m->names[k], "lnf_b");
  m->shapes[k][0] = D, m->ndim[k] = 1, m->layer[k++] = -1;
  m->n_inputs = k;
  for (k = 0; k < m->n_inputs; ++k) {
    size_t n = 1;
    const char *nm = m->names[k];
    const int norm_w = strstr(nm, "ln1_w") || strstr(nm, "ln2_w") || strcmp(nm, "lnf_w") == 0;
    const float scale = strstr(nm, "cache") || strcmp(nm, "wte") == 0 ? 1.0f : (strstr(nm, "ln") ? 0.2f : 0.3f);
    m->name_ptrs[k] = m->names[k];
    if (k == 0) continue;
    for (j = 0; j < m->ndim[k]; ++j) n *= (size_t)m->shapes[k][j];
    m->data[k] = (float *)malloc(n * sizeof(float));
    for (j = 0; j < n; ++j) m->data[k][j] = gd_rand(&s) * scale + (norm_w ? 1.0f : 0.0f);
  }
}

static void gd_model_free(gd_model_t *m) {
  size_t k;
  for (k = 0; k < m->n_inputs; ++k) free(m->data[k]);
}

/* One decode loop on one context: the model's tensors (layer l's weights
 * and caches on devices[l], NULL = the default device; the rest on the
 * default device), the graph, and the next token. */
typedef struct gd_session {
  const gd_model_t *m;
  genie_context_t *ctx;
  genie_graph_t *g;
  genie_tensor_t *in[GD_MAX_INPUTS];
  int token;
} gd_session_t;

static void gd_session_open(gd_session_t *s, genie_context_t *ctx, const gd_model_t *m,
                            const char *const *devices, unsigned kv_annotated) {
  size_t k;
  memset(s, 0, sizeof *s);
  s->m = m;
  s->ctx = ctx;
  s->g = gd_graph(m->dims, kv_annotated);
  s->token = 7 % m->dims.vocab;
  for (k = 1; k < m->n_inputs; ++k) {
    const char *dev = m->layer[k] >= 0 && devices ? devices[m->layer[k]] : NULL;
    size_t n = 1, j;
    for (j = 0; j < m->ndim[k]; ++j) n *= (size_t)m->shapes[k][j];
    gd_check(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, m->shapes[k], m->ndim[k], dev, &s->in[k]), m->names[k]);
    gd_check(genie_tensor_write(s->in[k], 0, m->data[k], n * sizeof(float)), m->names[k]);
  }
}

/* One step: submits, waits, reads the logits (vocab floats), binds the new
 * caches for the next step and picks the next token (argmax). */
static void gd_step(gd_session_t *s, float *logits) {
  const gd_model_t *m = s->m;
  const int64_t es[3] = {1, 1, m->dims.d};
  genie_tensor_t *e = NULL, *lg = NULL;
  genie_future_t *f = NULL;
  int l, kv, i, best = 0;
  gd_check(genie_tensor_alloc(s->ctx, GENIE_DTYPE_F32, es, 3, "cpu", &e), "embedding tensor");
  gd_check(genie_tensor_write(e, 0, m->data[1] + (size_t)s->token * (size_t)m->dims.d,
                              (size_t)m->dims.d * sizeof(float)),
           "embedding write");
  s->in[0] = e;
  gd_check(genie_graph_submit(s->ctx, s->g, m->name_ptrs, s->in, m->n_inputs, &f), "genie_graph_submit");
  gd_check(genie_future_wait(f, -1), "decode step");
  gd_check(genie_future_output(f, 0, &lg), "logits");
  gd_check(genie_tensor_read(lg, 0, logits, (size_t)m->dims.vocab * sizeof(float)), "read logits");
  genie_tensor_destroy(lg);
  for (l = 0; l < m->dims.layers; ++l)
    for (kv = 0; kv < 2; ++kv) {
      const size_t slot = 2 + (size_t)l * GD_PER_LAYER + 8 + (size_t)kv;
      genie_tensor_destroy(s->in[slot]);
      gd_check(genie_future_output(f, 1 + (size_t)l * 2 + (size_t)kv, &s->in[slot]), "new cache");
    }
  genie_future_destroy(f);
  genie_tensor_destroy(e);
  s->in[0] = NULL;
  for (i = 1; i < m->dims.vocab; ++i)
    if (logits[i] > logits[best]) best = i;
  s->token = best;
}

static void gd_session_close(gd_session_t *s) {
  size_t k;
  for (k = 1; k < s->m->n_inputs; ++k) genie_tensor_destroy(s->in[k]);
  genie_graph_destroy(s->g);
}

#endif
