/*
 * bench_cost_model_accuracy — how well the scheduler's cost model predicts
 * what runs (docs/benchmarks.md, "Cost-model accuracy"), beside the Djinn
 * brief's target: 90% of predictions within ±25% of the measured time.
 *
 * Workloads, each run embedded (this process's CPU, the profile the
 * scheduler calibrated for it):
 *   block   the GPT-2 transformer block (samples/c/transformer_block_graph.h,
 *           b1 s128 d768; --quick s16);
 *   decode  a GPT-2-style decode step with KV caches (samples/c/
 *           gpt2_decode.h, 2 layers, hidden 256), the graph a captured
 *           nanoGPT decode step has the shape of;
 * and a multi-node decode loop: the same decode step on a master and a
 * worker on loopback (layer 1's weights and caches on the worker), planned
 * across the two.
 *
 * Predicted: genie_plan_explain_bound's per-node "predicted_s" and the
 * plan's "predicted_total_s". Measured: each node's span in an execution
 * trace (genie_trace_start), the median over the runs; the graph's span;
 * for the multi-node loop the master's measured stage time against the
 * plan's prediction per step (server info's last_plan_measured_ns and
 * last_plan_predicted_ns). Prints, per op class and per stage, the median
 * of measured / predicted and the share within ±25%, twice: before
 * learning (the first plan, from the calibrated rates alone) and after
 * warm-up (a plan made after the first runs taught the cost model their
 * nodes' times: sched/learned_cost.hpp; the multi-node loop: 20 steps after
 * 20 more that taught the master its stages and its worker's), and beside
 * them the machine's own spread of the same measurement (the floor: no
 * prediction agrees with a measurement more often than the measurement
 * agrees with itself). The cost model starts from nothing
 * learned: the profile cache is a fresh directory of this run (so the device
 * is calibrated again first). This benchmark only measures; it asserts
 * nothing.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <genie_seed.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../samples/c/gpt2_decode.h"
#include "../samples/c/transformer_block_graph.h"
#include "bench_util.h"
#include "server_pair.h"

#define MAX_ROWS 64
#define MAX_NODES 1024

/* Ratios (measured / predicted) collected under one label, before learning
 * (r[0]) and after warm-up (r[1]); and the machine's own spread of the same
 * measurement (r[2], FLOOR: measured / measured, no model in it): for a
 * stage, each run after warm-up over the median of those runs; for a node,
 * the median of its odd runs over that of its even runs. No prediction can
 * be within +-25% more often than the measurement agrees with itself. */
typedef struct row {
  char label[48];
  double *r[3];
  size_t n[3], cap[3];
} row_t;

enum { BEFORE = 0, AFTER = 1, FLOOR = 2 };
static row_t rows[MAX_ROWS];
static int n_rows;

static void add_ratio(int when, const char *label, double ratio) {
  int i;
  row_t *w = NULL;
  if (!(ratio > 0)) return;
  for (i = 0; i < n_rows; ++i)
    if (strcmp(rows[i].label, label) == 0) w = &rows[i];
  if (w == NULL) {
    if (n_rows == MAX_ROWS) return;
    w = &rows[n_rows++];
    snprintf(w->label, sizeof w->label, "%s", label);
  }
  if (w->n[when] == w->cap[when]) {
    w->cap[when] = w->cap[when] ? 2 * w->cap[when] : 16;
    w->r[when] = realloc(w->r[when], w->cap[when] * sizeof(double));
    if (w->r[when] == NULL) abort();
  }
  w->r[when][w->n[when]++] = ratio;
}

static size_t within_25(const double *r, size_t n) {
  size_t i, within = 0;
  for (i = 0; i < n; ++i) within += r[i] >= 0.75 && r[i] <= 1.25;
  return within;
}

static void print_row(const row_t *w) {
  int k;
  printf("%-34s %6zu", w->label, w->n[BEFORE] > w->n[AFTER] ? w->n[BEFORE] : w->n[AFTER]);
  for (k = BEFORE; k <= FLOOR; ++k) {
    if (w->n[k] == 0) {
      printf(" %9s %8s", "-", "-");
      continue;
    }
    printf(" %9.3f %7.0f%%", bu_stats(w->r[k], w->n[k]).median,
           100.0 * (double)within_25(w->r[k], w->n[k]) / (double)w->n[k]);
  }
  printf("\n");
}

static cJSON *parse_file(const char *path) {
  FILE *f = fopen(path, "rb");
  long n;
  char *text;
  cJSON *j;
  if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(1);
  }
  text = bu_malloc((size_t)n + 1);
  if (fread(text, 1, (size_t)n, f) != (size_t)n) exit(1);
  text[n] = '\0';
  fclose(f);
  j = cJSON_Parse(text);
  free(text);
  if (j == NULL) {
    fprintf(stderr, "%s is not JSON\n", path);
    exit(1);
  }
  return j;
}

/* The median of x[1], x[3], ... over that of x[0], x[2], ... */
static double odd_even(const double *x, size_t n) {
  double *h[2];
  size_t m[2] = {0, 0}, i;
  double r;
  h[0] = bu_malloc(sizeof(double) * n);
  h[1] = bu_malloc(sizeof(double) * n);
  for (i = 0; i < n; ++i) h[i % 2][m[i % 2]++] = x[i];
  r = bu_stats(h[1], m[1]).median / bu_stats(h[0], m[0]).median;
  free(h[0]);
  free(h[1]);
  return r;
}

/* Each of x[0..n) over their median, as FLOOR ratios of `label`. */
static void add_spread(const char *label, double *x, size_t n) {
  size_t i;
  double med;
  if (n == 0) return;
  med = bu_stats(x, n).median;
  for (i = 0; i < n; ++i) add_ratio(FLOOR, label, x[i] / med);
}

typedef void (*run_fn)(void *arg);

/* Runs `run` `runs` times under a trace and adds, per node of the plan, the
 * median measured time over its predicted time to the node's op class, and
 * the graph's median time over the plan's total to `stage`. */
static void measure(int when, genie_context_t *ctx, const genie_graph_t *g, const char *const *names,
                    genie_tensor_t *const *inputs, size_t n_inputs, run_fn run, void *arg, int runs,
                    const char *stage) {
  char *explain = NULL, path[64], label[48];
  cJSON *plan, *trace, *node, *ev;
  double *dur = bu_malloc(sizeof(double) * (size_t)runs), graph_us[256];
  size_t n_graph = 0, k;
  int i;
  bu_check(genie_plan_explain_bound(ctx, g, names, inputs, n_inputs, &explain), "genie_plan_explain_bound");
  plan = cJSON_Parse(explain);
  genie_free(explain);
  snprintf(path, sizeof path, "/tmp/genie_cost_model_%d.json", (int)getpid());
  bu_check(genie_trace_start(path), "genie_trace_start");
  for (i = 0; i < runs; ++i) run(arg);
  bu_check(genie_trace_stop(), "genie_trace_stop");
  trace = parse_file(path);
  unlink(path);
  cJSON_ArrayForEach(ev, cJSON_GetObjectItem(trace, "traceEvents")) {
    const cJSON *cat = cJSON_GetObjectItem(ev, "cat");
    if (cJSON_IsString(cat) && strcmp(cat->valuestring, "graph") == 0 && n_graph < 256)
      graph_us[n_graph++] = cJSON_GetObjectItem(ev, "dur")->valuedouble;
  }
  cJSON_ArrayForEach(node, cJSON_GetObjectItem(plan, "nodes")) {
    const char *name = cJSON_GetObjectItem(node, "name")->valuestring;
    const char *op = cJSON_GetObjectItem(node, "op")->valuestring;
    const double predicted_s = cJSON_GetObjectItem(node, "predicted_s")->valuedouble;
    size_t n = 0;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(trace, "traceEvents")) {
      const cJSON *cat = cJSON_GetObjectItem(ev, "cat"), *args = cJSON_GetObjectItem(ev, "args");
      const cJSON *nn = cJSON_GetObjectItem(args, "node");
      if (cJSON_IsString(cat) && strcmp(cat->valuestring, "node") == 0 && cJSON_IsString(nn) &&
          strcmp(nn->valuestring, name) == 0 && n < (size_t)runs)
        dur[n++] = cJSON_GetObjectItem(ev, "dur")->valuedouble * 1e-6;
    }
    if (n == 0 || !(predicted_s > 0)) continue;
    snprintf(label, sizeof label, "op %s", op);
    if (when == AFTER && n >= 4) add_ratio(FLOOR, label, odd_even(dur, n)); /* before bu_stats sorts dur */
    add_ratio(when, label, bu_stats(dur, n).median / predicted_s);
  }
  /* Each run of the graph is one stage. */
  snprintf(label, sizeof label, "stage %s (whole graph)", stage);
  for (k = 0; k < n_graph; ++k)
    add_ratio(when, label, graph_us[k] * 1e-6 / cJSON_GetObjectItem(plan, "predicted_total_s")->valuedouble);
  if (when == AFTER) add_spread(label, graph_us, n_graph);
  cJSON_Delete(trace);
  cJSON_Delete(plan);
  free(dur);
}

typedef struct block_run {
  genie_context_t *ctx;
  genie_graph_t *g;
  genie_tensor_t **in;
} block_run_t;

static void run_block(void *arg) {
  block_run_t *b = arg;
  genie_future_t *f = NULL;
  bu_check(genie_graph_submit(b->ctx, b->g, tb_input_names, b->in, TB_NUM_INPUTS, &f), "genie_graph_submit");
  bu_check(genie_future_wait(f, -1), "the block");
  genie_future_destroy(f);
}

typedef struct decode_run {
  gd_session_t *s;
  float *logits;
} decode_run_t;

static void run_decode(void *arg) {
  decode_run_t *d = arg;
  gd_step(d->s, d->logits);
}

/* Removes `dir` and what lies in it and its subdirectories (the profile cache). */
static void remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  char path[512];
  struct stat st;
  if (d == NULL) return;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
      remove_tree(path);
    else
      unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

/* The temporary profile cache, removed at exit (bu_check exits on failure). */
static char cache_dir[] = "/tmp/genie_cost_model_XXXXXX";
static void remove_cache_dir(void) { remove_tree(cache_dir); }

static double info_number(genie_context_t *ctx, const char *key) {
  char *json = NULL;
  cJSON *j;
  double v = -1;
  bu_check(genie_context_server_info(ctx, &json), "genie_context_server_info");
  j = cJSON_Parse(json);
  genie_free(json);
  if (cJSON_IsNumber(cJSON_GetObjectItem(j, key))) v = cJSON_GetObjectItem(j, key)->valuedouble;
  cJSON_Delete(j);
  return v;
}

int main(int argc, char **argv) {
  const bu_options_t o = bu_parse_args(argc, argv, " (runs per workload; default 20, --quick 3)");
  const int runs = o.iters ? o.iters : (o.quick ? 3 : 20);
  tb_dims_t d = tb_gpt2_dims(o.quick ? 16 : 128);
  gd_dims_t dims;
  gd_model_t m;
  genie_context_t *ctx = NULL, *remote = NULL;
  genie_graph_t *block = NULL;
  genie_tensor_t *in[TB_NUM_INPUTS], *e = NULL;
  bpair_t pair;
  FILE *json;
  genie_config_t *cfg;
  gd_session_t s, split;
  float *logits;
  const char *devices[2] = {NULL, "cm-worker/cpu:0"};
  const int64_t es[3] = {1, 1, 0};
  int64_t e_shape[3];
  int i;
  size_t k;
  block_run_t br;
  decode_run_t dr;

  /* Nothing learned yet: a profile cache of this run's own. */
  if (mkdtemp(cache_dir) == NULL || setenv("XDG_CACHE_HOME", cache_dir, 1) != 0) {
    perror("a temporary profile cache");
    return 1;
  }
  atexit(remove_cache_dir);
  cfg = bpair_config();
  bu_check(genie_init(cfg, &ctx), "genie_init");
  genie_config_destroy(cfg);

  /* The transformer block. */
  bu_check(tb_build_graph(&d, &block), "building the block");
  for (k = 0; k < TB_NUM_INPUTS; ++k) bu_check(genie_seed_tensor(ctx, block, tb_input_names[k], &in[k]), "seed");
  br.ctx = ctx, br.g = block, br.in = in;
  run_block(&br); /* warm-up */
  measure(BEFORE, ctx, block, tb_input_names, in, TB_NUM_INPUTS, run_block, &br, runs, "block");
  measure(AFTER, ctx, block, tb_input_names, in, TB_NUM_INPUTS, run_block, &br, runs, "block");

  /* The decode step. */
  dims = bench_decode_dims(o.quick);
  gd_model_init(&m, dims, 11);
  logits = bu_malloc(sizeof(float) * (size_t)dims.vocab);
  gd_session_open(&s, ctx, &m, NULL, 0);
  dr.s = &s, dr.logits = logits;
  run_decode(&dr);
  memcpy(e_shape, es, sizeof es);
  e_shape[2] = dims.d;
  bu_check(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, e_shape, 3, NULL, &e), "embedding");
  for (i = BEFORE; i <= AFTER; ++i) {
    /* Explained with the caches the next step binds (and the embedding,
     * bound for the plan only: each step binds its own). */
    genie_tensor_t *bound[GD_MAX_INPUTS];
    memcpy(bound, s.in, sizeof bound);
    bound[0] = e;
    measure(i, ctx, s.g, m.name_ptrs, bound, m.n_inputs, run_decode, &dr, runs, "decode");
  }
  genie_tensor_destroy(e);

  /* The multi-node decode loop. */
  pair = bpair_start("cm-master", "cm-worker");
  remote = pair.ctx;
  gd_session_open(&split, remote, &m, devices, 0);
  gd_step(&split, logits); /* warm-up */
  for (i = 0; i < runs; ++i) {
    gd_step(&split, logits);
    add_ratio(BEFORE, "stage multi-node decode (plan)",
              info_number(remote, "last_plan_measured_ns") / info_number(remote, "last_plan_predicted_ns"));
  }
  /* Warm-up: the master learns its own stages and the worker's (each step
   * binds longer caches, so each is planned with what is known by then). */
  for (i = 0; i < runs; ++i) gd_step(&split, logits);
  {
    double *measured = bu_malloc(sizeof(double) * (size_t)runs);
    for (i = 0; i < runs; ++i) {
      gd_step(&split, logits);
      measured[i] = info_number(remote, "last_plan_measured_ns");
      add_ratio(AFTER, "stage multi-node decode (plan)", measured[i] / info_number(remote, "last_plan_predicted_ns"));
    }
    add_spread("stage multi-node decode (plan)", measured, (size_t)runs);
    free(measured);
  }

  printf(
      "Cost model: measured / predicted time (embedded on this machine's CPU; multi-node: a master and\n"
      "a worker on loopback); %d runs per workload; before learning and after warm-up (%d runs);\n"
      "target: 90%% within +-25%% (Djinn brief)\n\n",
      runs, runs);
  printf("%-34s %6s %9s %8s %9s %8s %9s %8s\n", "", "", "before", "", "after", "", "floor", "");
  printf("%-34s %6s %9s %8s %9s %8s %9s %8s\n", "op class / stage", "count", "median", "in 25%", "median",
         "in 25%", "median", "in 25%");
  for (i = 0; i < n_rows; ++i) print_row(&rows[i]);
  {
    /* [when][0: nodes, 1: stages] */
    size_t all[3][2] = {{0, 0}, {0, 0}, {0, 0}}, within[3][2] = {{0, 0}, {0, 0}, {0, 0}};
    int w, kind;
    for (w = BEFORE; w <= FLOOR; ++w)
      for (i = 0; i < n_rows; ++i) {
        kind = strncmp(rows[i].label, "op ", 3) == 0 ? 0 : 1;
        all[w][kind] += rows[i].n[w];
        within[w][kind] += within_25(rows[i].r[w], rows[i].n[w]);
      }
#define SHARE(w, k) (all[w][k] ? (double)within[w][k] / (double)all[w][k] : 0.0)
    printf("\nwithin +-25%% (target 90%%):      before   after   floor\n");
    printf("  nodes (median per node)       %5.0f%%  %5.0f%%  %5.0f%%\n", 100 * SHARE(BEFORE, 0),
           100 * SHARE(AFTER, 0), 100 * SHARE(FLOOR, 0));
    printf("  stages (each run)             %5.0f%%  %5.0f%%  %5.0f%%\n", 100 * SHARE(BEFORE, 1),
           100 * SHARE(AFTER, 1), 100 * SHARE(FLOOR, 1));
    json = bu_json_open(o.json_path);
    if (json) {
      fprintf(json,
              "{\"bench\":\"cost_model_accuracy\",\"runs\":%d,\"nodes\":%zu,\"within_25\":%.4f,"
              "\"within_25_after\":%.4f,\"within_25_floor\":%.4f,\"stages_within_25\":%.4f,"
              "\"stages_within_25_after\":%.4f,\"stages_within_25_floor\":%.4f,\"rows\":[",
              runs, all[BEFORE][0], SHARE(BEFORE, 0), SHARE(AFTER, 0), SHARE(FLOOR, 0), SHARE(BEFORE, 1),
              SHARE(AFTER, 1), SHARE(FLOOR, 1));
      for (i = 0; i < n_rows; ++i) {
        fprintf(json, "%s{\"label\":", i ? "," : "");
        bu_json_str(json, rows[i].label);
        for (w = BEFORE; w <= FLOOR; ++w) {
          bu_stats_t st = {0};
          if (rows[i].n[w]) st = bu_stats(rows[i].r[w], rows[i].n[w]);
          fprintf(json,
                  ",\"%s\":{\"count\":%zu,\"median\":%.4f,\"min\":%.4f,\"max\":%.4f,\"within_25\":%.4f}",
                  w == BEFORE ? "before" : w == AFTER ? "after" : "floor", rows[i].n[w], st.median, st.min,
                  st.max,
                  rows[i].n[w] ? (double)within_25(rows[i].r[w], rows[i].n[w]) / (double)rows[i].n[w] : 0.0);
        }
        fprintf(json, "}");
      }
      fprintf(json, "]}\n");
      bu_json_close(json, o.json_path);
    }
#undef SHARE
  }

  gd_session_close(&split);
  bpair_stop(&pair);
  gd_session_close(&s);
  for (k = 0; k < TB_NUM_INPUTS; ++k) genie_tensor_destroy(in[k]);
  genie_graph_destroy(block);
  gd_model_free(&m);
  free(logits);
  for (i = 0; i < n_rows; ++i) {
    free(rows[i].r[BEFORE]);
    free(rows[i].r[AFTER]);
    free(rows[i].r[FLOOR]);
  }
  genie_shutdown(ctx);
  return 0;
}
