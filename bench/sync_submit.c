/*
 * bench_sync_submit — one client's synchronous loop: submit a one-`relu`
 * graph of 16 floats, wait for it, destroy its future (which frees the
 * output), as `bench_rpc_roundtrip`'s remote case, against one server.
 * Prints the distribution of one call's time.
 *
 * The server is a `genie serve` in a child process, or, with
 * GENIE_MASTER_ADDR and GENIE_MASTER_PORT set, the one they name: each
 * side can then be placed on CPUs of its own (`taskset -c 1 genie serve
 * --port P` and `taskset -c 0 bench_sync_submit`, docs/benchmarks.md).
 */
#include "bench_util.h"
#include "server_process.h"

int main(int argc, char **argv) {
  const bu_options_t o = bu_parse_args(argc, argv, " (calls, default 50000)");
  const int calls = o.iters ? o.iters : o.quick ? 200 : 50000;
  const int warmup = o.quick ? 20 : 2000;
  const char *addr = getenv("GENIE_MASTER_ADDR");
  const int external = addr && *addr && getenv("GENIE_MASTER_PORT");
  bsp_server_t server = {0, 0, -1};
  genie_config_t *cfg = NULL;
  genie_context_t *ctx = NULL;
  genie_graph_t *g = NULL;
  genie_tensor_t *x = NULL;
  const int64_t shape[1] = {16};
  const char *in[1] = {"x"}, *out[1] = {"y"};
  const float data[16] = {1, -1};
  double *lat_us = bu_malloc(sizeof(double) * (size_t)calls);
  bu_stats_t s;
  FILE *json;
  int i;

  if (!external) server = bsp_start(0); /* before any thread */
  bu_check(genie_config_create(&cfg), "genie_config_create");
  if (!external) {
    bu_check(genie_config_set_use_env(cfg, 0), "genie_config_set_use_env");
    bu_check(genie_config_set_master_addr(cfg, "127.0.0.1"), "genie_config_set_master_addr");
    bu_check(genie_config_set_master_port(cfg, server.port), "genie_config_set_master_port");
  }
  bu_check(genie_init(cfg, &ctx), "genie_init");
  genie_config_destroy(cfg);
  bu_check(genie_graph_create("tiny", &g), "genie_graph_create");
  bu_check(genie_graph_add_input(g, "x", GENIE_DTYPE_F32, shape, 1), "genie_graph_add_input");
  bu_check(genie_graph_add_node(g, "relu", "r", in, 1, out, 1), "genie_graph_add_node");
  bu_check(genie_graph_mark_output(g, "y"), "genie_graph_mark_output");
  bu_check(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, shape, 1, "remote:0", &x), "genie_tensor_alloc");
  bu_check(genie_tensor_write(x, 0, data, sizeof data), "genie_tensor_write");
  for (i = -warmup; i < calls; ++i) {
    genie_future_t *f = NULL;
    const double t0 = bu_now_s();
    bu_check(genie_graph_submit(ctx, g, in, &x, 1, &f), "genie_graph_submit");
    bu_check(genie_future_wait(f, 30000), "genie_future_wait");
    genie_future_destroy(f);
    if (i >= 0) lat_us[i] = (bu_now_s() - t0) * 1e6;
  }
  s = bu_stats(lat_us, (size_t)calls);
  printf("synchronous submit+wait+destroy of a 1-op graph, %d calls after %d, server %s\n", calls, warmup,
         external ? "named by GENIE_MASTER_ADDR/PORT" : "in a child process");
  printf("p50 %.2f us  p99 %.2f us  min %.2f us  max %.2f us\n", s.median, s.p99, s.min, s.max);
  json = bu_json_open(o.json_path);
  if (json)
    fprintf(json, "{\"bench\":\"sync_submit\",\"calls\":%d,\"p50_us\":%.3f,\"p99_us\":%.3f,\"min_us\":%.3f,\"max_us\":%.3f}\n",
            calls, s.median, s.p99, s.min, s.max);
  bu_json_close(json, o.json_path);

  genie_tensor_destroy(x);
  genie_graph_destroy(g);
  genie_shutdown(ctx);
  free(lat_us);
  if (!external) bsp_stop(&server);
  return 0;
}
