/*
 * bench_remote_block — the GPT-2 block (samples/c/transformer_block_graph.h:
 * batch 1, seq 128, hidden 768, 12 heads) run remotely on a `genie serve`
 * server on loopback (started in this process with genie_server_create)
 * versus embedded, interleaved pairs. Weights and the input are resident on
 * each side; each run is submit + wait (the output stays where it was
 * produced). Goal: remote overhead <= 10%.
 */
#include <genie_seed.h>
#include "../samples/c/transformer_block_graph.h"
#include "bench_util.h"

typedef struct side {
  genie_context_t *ctx;
  genie_tensor_t *inputs[TB_NUM_INPUTS];
} side_t;

static void side_init(side_t *s, const genie_graph_t *g, const char *master, int32_t port, int threads) {
  genie_config_t *cfg = NULL;
  size_t i;
  bu_check(genie_config_create(&cfg), "genie_config_create");
  bu_check(genie_config_set_use_env(cfg, 0), "genie_config_set_use_env");
  bu_check(genie_config_set_num_threads(cfg, threads), "genie_config_set_num_threads");
  if (master) {
    bu_check(genie_config_set_master_addr(cfg, master), "genie_config_set_master_addr");
    bu_check(genie_config_set_master_port(cfg, port), "genie_config_set_master_port");
  }
  bu_check(genie_init(cfg, &s->ctx), master ? "genie_init (remote)" : "genie_init (embedded)");
  genie_config_destroy(cfg);
  for (i = 0; i < TB_NUM_INPUTS; ++i)
    bu_check(genie_seed_tensor(s->ctx, g, tb_input_names[i], &s->inputs[i]), "seeding an input");
}

static double side_run_ms(side_t *s, const genie_graph_t *g) {
  genie_future_t *f = NULL;
  double t0 = bu_now_s();
  bu_check(genie_graph_submit(s->ctx, g, tb_input_names, s->inputs, TB_NUM_INPUTS, &f), "genie_graph_submit");
  bu_check(genie_future_wait(f, -1), "genie_future_wait");
  t0 = (bu_now_s() - t0) * 1e3;
  genie_future_destroy(f);
  return t0;
}

static void side_free(side_t *s) {
  size_t i;
  for (i = 0; i < TB_NUM_INPUTS; ++i) genie_tensor_destroy(s->inputs[i]);
  genie_shutdown(s->ctx);
}

int main(int argc, char **argv) {
  const bu_options_t o = bu_parse_args(argc, argv, " (A/B pairs; default 30, --quick 3)");
  const int pairs = o.iters ? o.iters : (o.quick ? 3 : 30);
  const tb_dims_t d = tb_gpt2_dims(o.quick ? 16 : 128);
  genie_graph_t *g = NULL;
  genie_server_t *server = NULL;
  genie_config_t *scfg = NULL;
  side_t emb, rem;
  int32_t port = 0;
  double *e, *r, *ratio;
  bu_stats_t se, sr, sq;
  int i;
  FILE *json;

  bu_check(tb_build_graph(&d, &g), "building the block");
  bu_check(genie_config_create(&scfg), "genie_config_create");
  bu_check(genie_config_set_use_env(scfg, 0), "genie_config_set_use_env");
  bu_check(genie_server_create(scfg, "127.0.0.1", 0, &server), "genie_server_create");
  genie_config_destroy(scfg);
  bu_check(genie_server_port(server, &port), "genie_server_port");
  side_init(&emb, g, NULL, 0, 0);
  side_init(&rem, g, "127.0.0.1", port, 0);

  e = bu_malloc(sizeof(double) * (size_t)pairs);
  r = bu_malloc(sizeof(double) * (size_t)pairs);
  ratio = bu_malloc(sizeof(double) * (size_t)pairs);
  for (i = 0; i < 3; ++i) {
    side_run_ms(&emb, g);
    side_run_ms(&rem, g);
  }
  for (i = 0; i < pairs; ++i) {
    e[i] = side_run_ms(&emb, g);
    r[i] = side_run_ms(&rem, g);
    ratio[i] = r[i] / e[i];
  }
  se = bu_stats(e, (size_t)pairs);
  sr = bu_stats(r, (size_t)pairs);
  sq = bu_stats(ratio, (size_t)pairs);
  printf("GPT-2 block (batch %lld, seq %lld, hidden %lld, %lld heads): remote on loopback vs embedded\n",
         (long long)d.batch, (long long)d.seq, (long long)d.hidden, (long long)d.heads);
  printf("%d interleaved pairs after 3 warm-ups; server in this process (genie_server_create), same cores\n\n", pairs);
  printf("%-28s %9s %9s %9s %9s\n", "", "p50 ms", "p99 ms", "min ms", "max ms");
  printf("%-28s %9.3f %9.3f %9.3f %9.3f\n", "embedded (submit..wait)", se.median, se.p99, se.min, se.max);
  printf("%-28s %9.3f %9.3f %9.3f %9.3f\n", "remote (submit..wait)", sr.median, sr.p99, sr.min, sr.max);
  printf("\nremote / embedded per pair: median %.3f (min %.3f, max %.3f) -> overhead %.1f%%\n", sq.median, sq.min,
         sq.max, (sq.median - 1) * 100);
  json = bu_json_open(o.json_path);
  if (json) {
    fprintf(json, "{\"bench\":\"remote_block\",\"pairs\":%d,\"embedded_p50_ms\":%.4f,\"remote_p50_ms\":%.4f,"
                  "\"ratio_median\":%.4f}\n", pairs, se.median, sr.median, sq.median);
  }
  bu_json_close(json, o.json_path);
  free(e);
  free(r);
  free(ratio);
  side_free(&rem);
  side_free(&emb);
  genie_graph_destroy(g);
  genie_server_destroy(server);
  return 0;
}
