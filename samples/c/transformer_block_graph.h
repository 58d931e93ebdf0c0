/*
 * transformer_block_graph.h — builds one GPT-2 transformer block as a Genie
 * graph. Shared by samples/c/transformer_block.c and
 * bench/transformer_block.c so that the sample, the benchmark and
 * samples/graphs/transformer_block.json are the same graph.
 *
 *   x ─ ln_1 ─ c_attn ─ split ─ q,k,v ─ reshape+permute [B,H,S,D]
 *     ─ attention (causal) ─ permute+reshape ─ c_proj ─ (+x) = resid_1
 *   resid_1 ─ ln_2 ─ c_fc ─ gelu(tanh) ─ c_proj ─ (+resid_1) = h.0.out
 *
 * Weights are graph inputs with role WEIGHT (bound to resident tensors at
 * each submission); x has role INPUT. Every node carries layer 0, phase
 * prefill, modality text and its module path (as in Hugging Face GPT-2).
 * Linear weights are [out, in] (the `linear` op, PyTorch nn.Linear layout).
 *
 * Header-only C99; uses only genie.h.
 */
#ifndef GENIE_SAMPLES_TRANSFORMER_BLOCK_GRAPH_H
#define GENIE_SAMPLES_TRANSFORMER_BLOCK_GRAPH_H

#include <genie.h>
#include <stdint.h>

typedef struct tb_dims {
  int64_t batch, seq, hidden, heads, mlp;
} tb_dims_t;

/* GPT-2 small: hidden 768, 12 heads, MLP 3072, batch 1. */
static inline tb_dims_t tb_gpt2_dims(int64_t seq) {
  tb_dims_t d;
  d.batch = 1;
  d.seq = seq;
  d.hidden = 768;
  d.heads = 12;
  d.mlp = 3072;
  return d;
}

/* Graph inputs in declaration order: x first, then the weights. */
#define TB_NUM_INPUTS 13
static const char *const tb_input_names[TB_NUM_INPUTS] = {
    "x",
    "h.0.ln_1.weight",
    "h.0.ln_1.bias",
    "h.0.attn.c_attn.weight",
    "h.0.attn.c_attn.bias",
    "h.0.attn.c_proj.weight",
    "h.0.attn.c_proj.bias",
    "h.0.ln_2.weight",
    "h.0.ln_2.bias",
    "h.0.mlp.c_fc.weight",
    "h.0.mlp.c_fc.bias",
    "h.0.mlp.c_proj.weight",
    "h.0.mlp.c_proj.bias",
};
#define TB_OUTPUT_NAME "h.0.out"

/* Builder state: after the first failure every later step is skipped, so
 * the status and genie_last_error() describe that first failure. */
typedef struct tb_builder {
  genie_graph_t *g;
  genie_status_t st;
} tb_builder_t;

static inline void tb_input(tb_builder_t *b, const char *name, genie_tensor_role_t role, const int64_t *shape,
                            size_t ndim) {
  if (b->st == GENIE_OK) b->st = genie_graph_add_input(b->g, name, GENIE_DTYPE_F32, shape, ndim);
  if (b->st == GENIE_OK) b->st = genie_graph_set_role(b->g, name, role);
}

/* Adds node `name` (op, up to 3 inputs, up to 3 outputs; unused slots NULL)
 * with the block's annotations and module path `module`. */
static inline void tb_node(tb_builder_t *b, const char *op, const char *name, const char *module,
                           const char *in0, const char *in1, const char *in2, const char *out0,
                           const char *out1, const char *out2) {
  const char *ins[3];
  const char *outs[3];
  size_t n_in = 0, n_out = 0;
  if (in0) ins[n_in++] = in0;
  if (in1) ins[n_in++] = in1;
  if (in2) ins[n_in++] = in2;
  if (out0) outs[n_out++] = out0;
  if (out1) outs[n_out++] = out1;
  if (out2) outs[n_out++] = out2;
  if (b->st == GENIE_OK) b->st = genie_graph_add_node(b->g, op, name, ins, n_in, outs, n_out);
  if (b->st == GENIE_OK) b->st = genie_graph_set_layer(b->g, name, 0);
  if (b->st == GENIE_OK) b->st = genie_graph_set_phase(b->g, name, GENIE_PHASE_PREFILL);
  if (b->st == GENIE_OK) b->st = genie_graph_set_modality(b->g, name, GENIE_MODALITY_TEXT);
  if (b->st == GENIE_OK) b->st = genie_graph_set_module(b->g, name, module);
}

static inline void tb_attr_int(tb_builder_t *b, const char *node, const char *key, int64_t v) {
  if (b->st == GENIE_OK) b->st = genie_graph_set_attr_int(b->g, node, key, v);
}

static inline void tb_attr_float(tb_builder_t *b, const char *node, const char *key, double v) {
  if (b->st == GENIE_OK) b->st = genie_graph_set_attr_float(b->g, node, key, v);
}

static inline void tb_attr_ints(tb_builder_t *b, const char *node, const char *key, const int64_t *v,
                                size_t n) {
  if (b->st == GENIE_OK) b->st = genie_graph_set_attr_ints(b->g, node, key, v, n);
}

/* Reshapes `value` [B,S,E] to [B,S,H,E/H] and permutes it to heads
 * [B,H,S,E/H] (value `heads_value`). */
static inline void tb_to_heads(tb_builder_t *b, const tb_dims_t *d, const char *value,
                               const char *reshape_node, const char *split_value, const char *permute_node,
                               const char *heads_value) {
  const int64_t split_shape[4] = {d->batch, d->seq, d->heads, d->hidden / d->heads};
  const int64_t perm[4] = {0, 2, 1, 3};
  tb_node(b, "reshape", reshape_node, "h.0.attn", value, NULL, NULL, split_value, NULL, NULL);
  tb_attr_ints(b, reshape_node, "shape", split_shape, 4);
  tb_node(b, "permute", permute_node, "h.0.attn", split_value, NULL, NULL, heads_value, NULL, NULL);
  tb_attr_ints(b, permute_node, "perm", perm, 4);
}

/* Builds and validates the block. On success *out owns a new graph; on
 * failure returns the first failing status (genie_last_error() has the
 * detail) and leaves *out untouched. */
static inline genie_status_t tb_build_graph(const tb_dims_t *d, genie_graph_t **out) {
  const int64_t E = d->hidden, F = d->mlp;
  const int64_t x_shape[3] = {d->batch, d->seq, E};
  const int64_t vec_e[1] = {E}, vec_3e[1] = {3 * E}, vec_f[1] = {F};
  const int64_t w_qkv[2] = {3 * E, E}, w_proj[2] = {E, E}, w_fc[2] = {F, E}, w_fc_proj[2] = {E, F};
  const int64_t qkv_sizes[3] = {E, E, E};
  const int64_t perm[4] = {0, 2, 1, 3};
  const int64_t merged_shape[3] = {d->batch, d->seq, E};
  tb_builder_t b;
  b.g = NULL;
  b.st = genie_graph_create("gpt2_block", &b.g);

  tb_input(&b, "x", GENIE_TENSOR_ROLE_INPUT, x_shape, 3);
  tb_input(&b, "h.0.ln_1.weight", GENIE_TENSOR_ROLE_WEIGHT, vec_e, 1);
  tb_input(&b, "h.0.ln_1.bias", GENIE_TENSOR_ROLE_WEIGHT, vec_e, 1);
  tb_input(&b, "h.0.attn.c_attn.weight", GENIE_TENSOR_ROLE_WEIGHT, w_qkv, 2);
  tb_input(&b, "h.0.attn.c_attn.bias", GENIE_TENSOR_ROLE_WEIGHT, vec_3e, 1);
  tb_input(&b, "h.0.attn.c_proj.weight", GENIE_TENSOR_ROLE_WEIGHT, w_proj, 2);
  tb_input(&b, "h.0.attn.c_proj.bias", GENIE_TENSOR_ROLE_WEIGHT, vec_e, 1);
  tb_input(&b, "h.0.ln_2.weight", GENIE_TENSOR_ROLE_WEIGHT, vec_e, 1);
  tb_input(&b, "h.0.ln_2.bias", GENIE_TENSOR_ROLE_WEIGHT, vec_e, 1);
  tb_input(&b, "h.0.mlp.c_fc.weight", GENIE_TENSOR_ROLE_WEIGHT, w_fc, 2);
  tb_input(&b, "h.0.mlp.c_fc.bias", GENIE_TENSOR_ROLE_WEIGHT, vec_f, 1);
  tb_input(&b, "h.0.mlp.c_proj.weight", GENIE_TENSOR_ROLE_WEIGHT, w_fc_proj, 2);
  tb_input(&b, "h.0.mlp.c_proj.bias", GENIE_TENSOR_ROLE_WEIGHT, vec_e, 1);

  /* Attention half. */
  tb_node(&b, "layer_norm", "h.0.ln_1", "h.0.ln_1", "x", "h.0.ln_1.weight", "h.0.ln_1.bias", "h.0.ln_1.out",
          NULL, NULL);
  tb_attr_float(&b, "h.0.ln_1", "eps", 1e-5);
  tb_node(&b, "linear", "h.0.attn.c_attn", "h.0.attn.c_attn", "h.0.ln_1.out", "h.0.attn.c_attn.weight",
          "h.0.attn.c_attn.bias", "h.0.attn.qkv", NULL, NULL);
  tb_node(&b, "split", "h.0.attn.split", "h.0.attn", "h.0.attn.qkv", NULL, NULL, "h.0.attn.q", "h.0.attn.k",
          "h.0.attn.v");
  tb_attr_int(&b, "h.0.attn.split", "axis", -1);
  tb_attr_ints(&b, "h.0.attn.split", "sizes", qkv_sizes, 3);
  tb_to_heads(&b, d, "h.0.attn.q", "h.0.attn.q_reshape", "h.0.attn.q_split", "h.0.attn.q_permute",
              "h.0.attn.q_heads");
  tb_to_heads(&b, d, "h.0.attn.k", "h.0.attn.k_reshape", "h.0.attn.k_split", "h.0.attn.k_permute",
              "h.0.attn.k_heads");
  tb_to_heads(&b, d, "h.0.attn.v", "h.0.attn.v_reshape", "h.0.attn.v_split", "h.0.attn.v_permute",
              "h.0.attn.v_heads");
  tb_node(&b, "attention", "h.0.attn.sdpa", "h.0.attn", "h.0.attn.q_heads", "h.0.attn.k_heads",
          "h.0.attn.v_heads", "h.0.attn.ctx_heads", NULL, NULL);
  tb_attr_int(&b, "h.0.attn.sdpa", "causal", 1);
  tb_node(&b, "permute", "h.0.attn.merge_permute", "h.0.attn", "h.0.attn.ctx_heads", NULL, NULL,
          "h.0.attn.ctx_seq", NULL, NULL);
  tb_attr_ints(&b, "h.0.attn.merge_permute", "perm", perm, 4);
  tb_node(&b, "reshape", "h.0.attn.merge_reshape", "h.0.attn", "h.0.attn.ctx_seq", NULL, NULL, "h.0.attn.ctx",
          NULL, NULL);
  tb_attr_ints(&b, "h.0.attn.merge_reshape", "shape", merged_shape, 3);
  tb_node(&b, "linear", "h.0.attn.c_proj", "h.0.attn.c_proj", "h.0.attn.ctx", "h.0.attn.c_proj.weight",
          "h.0.attn.c_proj.bias", "h.0.attn.out", NULL, NULL);
  tb_node(&b, "add", "h.0.residual_1", "h.0", "x", "h.0.attn.out", NULL, "h.0.resid_1", NULL, NULL);

  /* MLP half. */
  tb_node(&b, "layer_norm", "h.0.ln_2", "h.0.ln_2", "h.0.resid_1", "h.0.ln_2.weight", "h.0.ln_2.bias",
          "h.0.ln_2.out", NULL, NULL);
  tb_attr_float(&b, "h.0.ln_2", "eps", 1e-5);
  tb_node(&b, "linear", "h.0.mlp.c_fc", "h.0.mlp.c_fc", "h.0.ln_2.out", "h.0.mlp.c_fc.weight",
          "h.0.mlp.c_fc.bias", "h.0.mlp.fc", NULL, NULL);
  /* GPT-2's "gelu_new" is the tanh approximation. */
  tb_node(&b, "gelu", "h.0.mlp.act", "h.0.mlp.act", "h.0.mlp.fc", NULL, NULL, "h.0.mlp.gelu", NULL, NULL);
  if (b.st == GENIE_OK) b.st = genie_graph_set_attr_string(b.g, "h.0.mlp.act", "approximate", "tanh");
  tb_node(&b, "linear", "h.0.mlp.c_proj", "h.0.mlp.c_proj", "h.0.mlp.gelu", "h.0.mlp.c_proj.weight",
          "h.0.mlp.c_proj.bias", "h.0.mlp.out", NULL, NULL);
  tb_node(&b, "add", "h.0.residual_2", "h.0", "h.0.resid_1", "h.0.mlp.out", NULL, TB_OUTPUT_NAME, NULL, NULL);

  if (b.st == GENIE_OK) b.st = genie_graph_mark_output(b.g, TB_OUTPUT_NAME);
  if (b.st == GENIE_OK) b.st = genie_graph_set_role(b.g, TB_OUTPUT_NAME, GENIE_TENSOR_ROLE_OUTPUT);
  if (b.st == GENIE_OK) b.st = genie_graph_validate(b.g);
  if (b.st != GENIE_OK) {
    genie_graph_destroy(b.g);
    return b.st;
  }
  *out = b.g;
  return GENIE_OK;
}

/* Multiply-adds ×2 of the block's matrix products (the four linears and
 * the two attention products, the full S×S score matrix), for GFLOP/s. */
static inline double tb_flops(const tb_dims_t *d) {
  double t = (double)(d->batch * d->seq), E = (double)d->hidden, F = (double)d->mlp;
  double linears = 2.0 * t * (E * 3 * E + E * E + E * F + F * E);
  double attn = 2.0 * 2.0 * (double)d->batch * (double)d->seq * (double)d->seq * E;
  return linears + attn;
}

#endif /* GENIE_SAMPLES_TRANSFORMER_BLOCK_GRAPH_H */
