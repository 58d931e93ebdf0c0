/*
 * bench_delta_decode — graph deltas on a decode loop: a GPT-2-tiny decoder
 * (samples/c/gpt2_decode.h: 2 layers, hidden 128, 2 heads,
 * vocabulary 1000, KV cache per layer) decoding token by token against a
 * `genie serve` server on loopback (started in this process), with graph
 * deltas (the default) and without (genie_config_set_graph_deltas 0), two
 * contexts, interleaved steps. Reports the graph-submission bytes per step
 * on the wire (the client's counters, which the server's match) and the
 * step latency (submit .. logits read), p50/p99, and the per-pair ratio.
 * Goal: >= 90% of the submission bytes saved.
 */
#include "../samples/c/gpt2_decode.h"
#include "bench_util.h"

static genie_context_t *remote_ctx(int32_t port, int deltas) {
  genie_config_t *cfg = NULL;
  genie_context_t *ctx = NULL;
  bu_check(genie_config_create(&cfg), "genie_config_create");
  bu_check(genie_config_set_use_env(cfg, 0), "genie_config_set_use_env");
  bu_check(genie_config_set_master_addr(cfg, "127.0.0.1"), "genie_config_set_master_addr");
  bu_check(genie_config_set_master_port(cfg, port), "genie_config_set_master_port");
  bu_check(genie_config_set_graph_deltas(cfg, deltas), "genie_config_set_graph_deltas");
  bu_check(genie_init(cfg, &ctx), "genie_init");
  genie_config_destroy(cfg);
  return ctx;
}

static double step_ms(gd_session_t *s, float *logits) {
  const double t0 = bu_now_s();
  gd_step(s, logits);
  return (bu_now_s() - t0) * 1e3;
}

int main(int argc, char **argv) {
  const bu_options_t o = bu_parse_args(argc, argv, " (decode steps per side; default 200, --quick 5)");
  const int steps = o.iters ? o.iters : (o.quick ? 5 : 200);
  const int warmup = o.quick ? 1 : 5;
  gd_dims_t dims;
  gd_model_t m;
  genie_config_t *scfg = NULL;
  genie_server_t *server = NULL;
  int32_t port = 0;
  genie_context_t *cd, *cf;
  gd_session_t sd, sf;
  float *logits;
  double *td, *tf, *ratio, bd0, bf0, nd0, nf0, bd, bf, bfull;
  bu_stats_t sdl, sfl, sq;
  int i;
  FILE *json;

  dims = gd_tiny_dims(o.quick);
  gd_model_init(&m, dims, 7);
  logits = bu_malloc(sizeof(float) * (size_t)dims.vocab);
  bu_check(genie_config_create(&scfg), "genie_config_create");
  bu_check(genie_config_set_use_env(scfg, 0), "genie_config_set_use_env");
  bu_check(genie_server_create(scfg, "127.0.0.1", 0, &server), "genie_server_create");
  genie_config_destroy(scfg);
  bu_check(genie_server_port(server, &port), "genie_server_port");
  cd = remote_ctx(port, 1);
  cf = remote_ctx(port, 0);
  gd_session_open(&sd, cd, &m, NULL, 0);
  gd_session_open(&sf, cf, &m, NULL, 0);
  for (i = 0; i < warmup; ++i) {
    step_ms(&sd, logits);
    step_ms(&sf, logits);
  }
  bd0 = bu_client_counter(cd, "graph_bytes_sent");
  bf0 = bu_client_counter(cf, "graph_bytes_sent");
  nd0 = bu_client_counter(cd, "graph_submits_delta");
  nf0 = bu_client_counter(cf, "graph_submits_full");
  td = bu_malloc(sizeof(double) * (size_t)steps);
  tf = bu_malloc(sizeof(double) * (size_t)steps);
  ratio = bu_malloc(sizeof(double) * (size_t)steps);
  for (i = 0; i < steps; ++i) {
    /* Alternate which side goes first, so neither always follows the other. */
    if (i % 2 == 0) {
      td[i] = step_ms(&sd, logits);
      tf[i] = step_ms(&sf, logits);
    } else {
      tf[i] = step_ms(&sf, logits);
      td[i] = step_ms(&sd, logits);
    }
    ratio[i] = td[i] / tf[i];
  }
  bd = (bu_client_counter(cd, "graph_bytes_sent") - bd0) / steps;
  bf = (bu_client_counter(cf, "graph_bytes_sent") - bf0) / steps;
  bfull = bu_client_counter(cd, "graph_bytes_full") / (steps + warmup);
  if (bu_client_counter(cd, "graph_submits_delta") - nd0 != steps || bu_client_counter(cf, "graph_submits_full") - nf0 != steps) {
    fprintf(stderr, "bench: the delta side did not send every measured step as a delta\n");
    return 1;
  }
  sdl = bu_stats(td, (size_t)steps);
  sfl = bu_stats(tf, (size_t)steps);
  sq = bu_stats(ratio, (size_t)steps);
  printf("GPT-2-tiny decode loop (%d layers, hidden %d, %d heads, vocab %d, KV cache from %d tokens) on a\n"
         "loopback server in this process: graph deltas vs full graphs, %d interleaved steps after %d warm-ups\n\n",
         dims.layers, dims.d, dims.heads, dims.vocab, dims.t0, steps, warmup);
  printf("%-34s %12s\n", "graph submission bytes per step", "bytes");
  printf("%-34s %12.0f\n", "full graph (deltas off)", bf);
  printf("%-34s %12.0f\n", "delta (deltas on)", bd);
  printf("%-34s %11.1f%%\n", "saved", 100.0 * (1.0 - bd / bf));
  printf("(the delta side's full-graph equivalent: %.0f bytes per step)\n\n", bfull);
  printf("%-34s %9s %9s %9s %9s\n", "step latency (submit..read)", "p50 ms", "p99 ms", "min ms", "max ms");
  printf("%-34s %9.3f %9.3f %9.3f %9.3f\n", "full graph", sfl.median, sfl.p99, sfl.min, sfl.max);
  printf("%-34s %9.3f %9.3f %9.3f %9.3f\n", "delta", sdl.median, sdl.p99, sdl.min, sdl.max);
  printf("\ndelta / full per pair: median %.3f (min %.3f, max %.3f)\n", sq.median, sq.min, sq.max);
  json = bu_json_open(o.json_path);
  if (json) {
    fprintf(json,
            "{\"bench\":\"delta_decode\",\"steps\":%d,\"bytes_per_step_full\":%.1f,\"bytes_per_step_delta\":%.1f,"
            "\"saved_fraction\":%.4f,\"full_p50_ms\":%.4f,\"full_p99_ms\":%.4f,\"delta_p50_ms\":%.4f,"
            "\"delta_p99_ms\":%.4f,\"ratio_median\":%.4f}\n",
            steps, bf, bd, 1.0 - bd / bf, sfl.median, sfl.p99, sdl.median, sdl.p99, sq.median);
  }
  bu_json_close(json, o.json_path);
  gd_session_close(&sd);
  gd_session_close(&sf);
  genie_shutdown(cd);
  genie_shutdown(cf);
  genie_server_destroy(server);
  gd_model_free(&m);
  free(logits);
  free(td);
  free(tf);
  free(ratio);
  return 0;
}
