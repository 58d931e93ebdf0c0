/*
 * bench_placement_quality — how good the multi-node plans are, measured on
 * two `genie serve` servers on loopback (a master and a worker that joined
 * it, both started in this process with genie_server_create).
 *
 * The workload is a GPT-2-style decode loop (samples/c/
 * gpt2_decode.h: 2 layers, hidden 256, 4 heads, vocab 2000, KV caches):
 *
 *   chosen  layer 1's weights and KV cache resident on the worker, the rest
 *           on the master; the scheduler plans every step (co-location keeps
 *           each layer with its weights and cache; only activations move);
 *   naive   everything on the master: all on one node.
 *
 * Interleaved steps, one of each per pair. Reports (1) the chosen plan's
 * predicted completion time (sched::Plan::predicted_total_s) beside its
 * measured time on the master (its stages and transfers), per step, with
 * the median ratio; (2) the client-side step latency of chosen vs naive,
 * p50/p99 and the median ratio. On one machine over loopback the split plan
 * pays transfers a single node does not: the ratio shows that cost.
 */
#include <cjson/cJSON.h>

#include "../samples/c/gpt2_decode.h"
#include "bench_util.h"
#include "server_pair.h"

static double info_number(genie_context_t *ctx, const char *key) {
  char *json = NULL, pat[96];
  const char *p;
  double v = -1;
  bu_check(genie_context_server_info(ctx, &json), "genie_context_server_info");
  snprintf(pat, sizeof pat, "\"%s\":", key);
  if ((p = strstr(json, pat)) != NULL) v = strtod(p + strlen(pat), NULL);
  genie_free(json);
  return v;
}


/* The chosen step's plan as the master explains it: nodes per device and
 * the bytes it moves between devices, printed as one line (so that two
 * builds' placements compare in the same run). */
static void print_placement(genie_context_t *ctx, gd_session_t *s, gd_model_t *m, int d) {
  genie_tensor_t *bound[GD_MAX_INPUTS], *e = NULL;
  const int64_t e_shape[3] = {1, 1, d};
  char *explain = NULL;
  cJSON *plan, *it;
  char devs[4][64];
  int count[4] = {0, 0, 0, 0}, n_devs = 0, k;
  double moved = 0;
  bu_check(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, e_shape, 3, NULL, &e), "embedding");
  memcpy(bound, s->in, sizeof bound);
  bound[0] = e; /* each step binds its own; the plan needs one of its shape */
  bu_check(genie_plan_explain_bound(ctx, s->g, m->name_ptrs, bound, m->n_inputs, &explain),
           "genie_plan_explain_bound");
  plan = cJSON_Parse(explain);
  genie_free(explain);
  cJSON_ArrayForEach(it, cJSON_GetObjectItem(plan, "nodes")) {
    const char *dev = cJSON_GetObjectItem(it, "device")->valuestring;
    for (k = 0; k < n_devs && strcmp(devs[k], dev) != 0; ++k) {
    }
    if (k == n_devs && n_devs < 4) snprintf(devs[n_devs++], sizeof devs[0], "%s", dev);
    if (k < 4) ++count[k];
  }
  cJSON_ArrayForEach(it, cJSON_GetObjectItem(plan, "transfers")) moved += cJSON_GetObjectItem(it, "bytes")->valuedouble;
  printf("placement:");
  for (k = 0; k < n_devs; ++k) printf(" %s %d nodes;", devs[k], count[k]);
  printf(" %d transfers, %.0f bytes\n", cJSON_GetArraySize(cJSON_GetObjectItem(plan, "transfers")), moved);
  cJSON_Delete(plan);
  genie_tensor_destroy(e);
}

static double step_ms(gd_session_t *s, float *logits) {
  const double t0 = bu_now_s();
  gd_step(s, logits);
  return (bu_now_s() - t0) * 1e3;
}

int main(int argc, char **argv) {
  const bu_options_t o = bu_parse_args(argc, argv, " (decode steps per side; default 60, --quick 4)");
  const int steps = o.iters ? o.iters : (o.quick ? 4 : 60);
  const int warmup = o.quick ? 1 : 3;
  gd_dims_t dims;
  gd_model_t m;
  bpair_t pair;
  genie_context_t *ctx = NULL;
  gd_session_t chosen, naive;
  const char *devices[2] = {NULL, "pq-worker/cpu:0"};
  float *logits;
  double *pred, *meas, *err, *tc, *tn, *ratio;
  bu_stats_t sp, sm, se, sc, sn, sq;
  int i;
  FILE *json;

  dims = bench_decode_dims(o.quick);
  gd_model_init(&m, dims, 11);
  logits = bu_malloc(sizeof(float) * (size_t)dims.vocab);

  pair = bpair_start("pq-master", "pq-worker");
  ctx = pair.ctx;

  gd_session_open(&chosen, ctx, &m, devices, 0);
  gd_session_open(&naive, ctx, &m, NULL, 0);
  for (i = 0; i < warmup; ++i) {
    step_ms(&chosen, logits);
    step_ms(&naive, logits);
  }
  pred = bu_malloc(sizeof(double) * (size_t)steps);
  meas = bu_malloc(sizeof(double) * (size_t)steps);
  err = bu_malloc(sizeof(double) * (size_t)steps);
  tc = bu_malloc(sizeof(double) * (size_t)steps);
  tn = bu_malloc(sizeof(double) * (size_t)steps);
  ratio = bu_malloc(sizeof(double) * (size_t)steps);
  for (i = 0; i < steps; ++i) {
    /* Alternate which side goes first; the prediction is read right after
     * the chosen plan's step. */
    if (i % 2) tn[i] = step_ms(&naive, logits);
    tc[i] = step_ms(&chosen, logits);
    pred[i] = info_number(ctx, "last_plan_predicted_ns") / 1e6;
    meas[i] = info_number(ctx, "last_plan_measured_ns") / 1e6;
    err[i] = meas[i] / pred[i];
    if (i % 2 == 0) tn[i] = step_ms(&naive, logits);
    ratio[i] = tc[i] / tn[i];
  }
  sp = bu_stats(pred, (size_t)steps);
  sm = bu_stats(meas, (size_t)steps);
  se = bu_stats(err, (size_t)steps);
  sc = bu_stats(tc, (size_t)steps);
  sn = bu_stats(tn, (size_t)steps);
  sq = bu_stats(ratio, (size_t)steps);
  printf("GPT-2-style decode (%d layers, hidden %d, %d heads, vocab %d, KV cache from %d tokens) on a master\n"
         "and a worker on loopback (one process, shared cores); %d interleaved steps after %d warm-ups\n\n",
         dims.layers, dims.d, dims.heads, dims.vocab, dims.t0, steps, warmup);
  printf("%-40s %9s %9s %9s %9s\n", "chosen plan (layer 1 on the worker)", "p50 ms", "p99 ms", "min ms", "max ms");
  printf("%-40s %9.3f %9.3f %9.3f %9.3f\n", "predicted completion", sp.median, sp.p99, sp.min, sp.max);
  printf("%-40s %9.3f %9.3f %9.3f %9.3f\n", "measured on the master", sm.median, sm.p99, sm.min, sm.max);
  printf("measured / predicted per step: median %.3f (min %.3f, max %.3f)\n\n", se.median, se.min, se.max);
  printf("%-40s %9s %9s %9s %9s\n", "step latency (client, submit..read)", "p50 ms", "p99 ms", "min ms", "max ms");
  printf("%-40s %9.3f %9.3f %9.3f %9.3f\n", "chosen plan (split over 2 servers)", sc.median, sc.p99, sc.min, sc.max);
  printf("%-40s %9.3f %9.3f %9.3f %9.3f\n", "naive: all on the master", sn.median, sn.p99, sn.min, sn.max);
  printf("chosen / naive per pair: median %.3f (min %.3f, max %.3f)\n", sq.median, sq.min, sq.max);
  print_placement(ctx, &chosen, &m, dims.d);
  json = bu_json_open(o.json_path);
  if (json) {
    fprintf(json,
            "{\"bench\":\"placement_quality\",\"steps\":%d,\"predicted_p50_ms\":%.4f,\"measured_p50_ms\":%.4f,"
            "\"measured_over_predicted_median\":%.4f,\"chosen_p50_ms\":%.4f,\"naive_p50_ms\":%.4f,"
            "\"chosen_over_naive_median\":%.4f}\n",
            steps, sp.median, sm.median, se.median, sc.median, sn.median, sq.median);
  }
  bu_json_close(json, o.json_path);
  gd_session_close(&chosen);
  gd_session_close(&naive);
  bpair_stop(&pair);
  gd_model_free(&m);
  free(logits);
  free(pred);
  free(meas);
  free(err);
  free(tc);
  free(tn);
  free(ratio);
  return 0;
}
