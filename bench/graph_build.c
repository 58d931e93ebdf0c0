/*
 * bench_graph_build — the cost of the graph API itself on a 500-node graph:
 * building it call by call, validating it (shape inference), exporting it
 * to JSON and importing that JSON. No execution.
 *
 * The graph is a residual ladder, as in a deep network: 250 times
 * h = h + linear(h, w, b), every node annotated with phase, layer and
 * module path. Import is also shown relative to building, since both
 * produce the same graph (from text, or from C calls).
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_util.h"

static void build(int rungs, genie_graph_t **out) {
  const int64_t x_shape[2] = {8, 64}, w_shape[2] = {64, 64}, b_shape[1] = {64};
  genie_graph_t *g = NULL;
  char h[64], lin_out[64], node[64], module[64];
  int i;
  bu_check(genie_graph_create("ladder", &g), "genie_graph_create");
  bu_check(genie_graph_add_input(g, "x", GENIE_DTYPE_F32, x_shape, 2), "add input x");
  bu_check(genie_graph_add_input(g, "w", GENIE_DTYPE_F32, w_shape, 2), "add input w");
  bu_check(genie_graph_add_input(g, "b", GENIE_DTYPE_F32, b_shape, 1), "add input b");
  bu_check(genie_graph_set_role(g, "w", GENIE_TENSOR_ROLE_WEIGHT), "set role");
  bu_check(genie_graph_set_role(g, "b", GENIE_TENSOR_ROLE_WEIGHT), "set role");
  snprintf(h, sizeof h, "x");
  for (i = 0; i < rungs; ++i) {
    const char *lin_in[3];
    const char *add_in[2];
    const char *outs[1];
    char next[64];
    snprintf(module, sizeof module, "layers.%d", i);
    snprintf(lin_out, sizeof lin_out, "l%d", i);
    snprintf(next, sizeof next, "h%d", i);
    lin_in[0] = h;
    lin_in[1] = "w";
    lin_in[2] = "b";
    outs[0] = lin_out;
    snprintf(node, sizeof node, "linear%d", i);
    bu_check(genie_graph_add_node(g, "linear", node, lin_in, 3, outs, 1), "add linear");
    bu_check(genie_graph_set_phase(g, node, GENIE_PHASE_FORWARD), "set phase");
    bu_check(genie_graph_set_layer(g, node, i), "set layer");
    bu_check(genie_graph_set_module(g, node, module), "set module");
    add_in[0] = lin_out;
    add_in[1] = h;
    outs[0] = next;
    snprintf(node, sizeof node, "add%d", i);
    bu_check(genie_graph_add_node(g, "add", node, add_in, 2, outs, 1), "add add");
    bu_check(genie_graph_set_phase(g, node, GENIE_PHASE_FORWARD), "set phase");
    bu_check(genie_graph_set_layer(g, node, i), "set layer");
    bu_check(genie_graph_set_module(g, node, module), "set module");
    memcpy(h, next, sizeof h);
  }
  bu_check(genie_graph_mark_output(g, h), "mark output");
  *out = g;
}

static void print_row(const char *what, bu_stats_t us, size_t nodes) {
  printf("%-22s %10.1f %10.1f %10.1f %10.0f\n", what, us.median, us.min, us.max,
         us.median * 1e3 / (double)nodes);
}

static void json_row(FILE *j, const char *key, bu_stats_t us, int last) {
  fprintf(j, "\"%s_us\": {\"median\": %.4g, \"min\": %.4g, \"max\": %.4g}%s", key, us.median, us.min, us.max,
          last ? "" : ", ");
}

int main(int argc, char **argv) {
  bu_options_t opt = bu_parse_args(argc, argv, " (default 30; --quick: 3)");
  int rungs = opt.quick ? 25 : 250;
  int iters = opt.iters ? opt.iters : (opt.quick ? 3 : 30);
  FILE *json = bu_json_open(opt.json_path);
  double *t_build = bu_malloc(sizeof(double) * (size_t)iters);
  double *t_validate = bu_malloc(sizeof(double) * (size_t)iters);
  double *t_export = bu_malloc(sizeof(double) * (size_t)iters);
  double *t_import = bu_malloc(sizeof(double) * (size_t)iters);
  double *import_over_build = bu_malloc(sizeof(double) * (size_t)iters);
  bu_stats_t sb, sv, se, si, sr;
  size_t nodes = 0, json_len = 0;
  int i;

  /* One untimed round first: page faults and allocator growth. */
  for (i = -1; i < iters; ++i) {
    genie_graph_t *g = NULL, *back = NULL;
    char *text = NULL;
    double t0 = bu_now_s(), t1, t2, t3, t4;
    build(rungs, &g);
    t1 = bu_now_s();
    bu_check(genie_graph_validate(g), "genie_graph_validate");
    t2 = bu_now_s();
    bu_check(genie_graph_to_json(g, &text, &json_len), "genie_graph_to_json");
    t3 = bu_now_s();
    bu_check(genie_graph_from_json(text, json_len, &back), "genie_graph_from_json");
    t4 = bu_now_s();
    bu_check(genie_graph_num_nodes(back, &nodes), "genie_graph_num_nodes");
    if (nodes != 2 * (size_t)rungs) {
      fprintf(stderr, "bench_graph_build: imported graph has %zu nodes, expected %d\n", nodes, 2 * rungs);
      exit(1);
    }
    genie_graph_destroy(back);
    genie_free(text);
    genie_graph_destroy(g);
    if (i < 0) continue;
    t_build[i] = (t1 - t0) * 1e6;
    t_validate[i] = (t2 - t1) * 1e6;
    t_export[i] = (t3 - t2) * 1e6;
    t_import[i] = (t4 - t3) * 1e6;
    import_over_build[i] = t_import[i] / t_build[i];
  }
  sb = bu_stats(t_build, (size_t)iters);
  sv = bu_stats(t_validate, (size_t)iters);
  se = bu_stats(t_export, (size_t)iters);
  si = bu_stats(t_import, (size_t)iters);
  sr = bu_stats(import_over_build, (size_t)iters);

  printf("graph API: %zu-node residual ladder (linear + add, annotated), JSON %zu bytes\n", nodes, json_len);
  printf("%d iterations after 1 warm-up; Genie %s\n\n", iters, genie_version_string());
  printf("%-22s %10s %10s %10s %10s\n", "step", "median us", "min us", "max us", "ns/node");
  print_row("build (C calls)", sb, nodes);
  print_row("validate", sv, nodes);
  print_row("export to JSON", se, nodes);
  print_row("import from JSON", si, nodes);
  printf(
      "\nexport %.0f MB/s, import %.0f MB/s (median); import / build per iteration: "
      "median %.2f (min %.2f, max %.2f)\n",
      (double)json_len / se.median, (double)json_len / si.median, sr.median, sr.min, sr.max);

  if (json) {
    fprintf(json,
            "{\"benchmark\": \"graph_build\", \"quick\": %s, \"iters\": %d, \"nodes\": %zu, "
            "\"json_bytes\": %zu, ",
            opt.quick ? "true" : "false", iters, nodes, json_len);
    json_row(json, "build", sb, 0);
    json_row(json, "validate", sv, 0);
    json_row(json, "export", se, 0);
    json_row(json, "import", si, 1);
    fprintf(json, "}\n");
  }
  bu_json_close(json, opt.json_path);
  free(import_over_build);
  free(t_import);
  free(t_export);
  free(t_validate);
  free(t_build);
  return 0;
}
