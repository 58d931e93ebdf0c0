/*
 * bench_concurrent_clients — 64 concurrent clients (one remote context each,
 * on its own thread) x 1000 submissions of a tiny graph to one `genie serve`
 * server on loopback (a child process). Reports errors (expected: 0),
 * submissions per second beside one client alone making as many
 * submissions against the same server (measured first, in the same run;
 * long enough to be a rate, where 1000 calls took some 20 ms) and
 * per-submission latency.
 */
#include <pthread.h>

#include "bench_util.h"
#include "server_process.h"

typedef struct client {
  int32_t port;
  int submits;
  int errors;
  double *lat_us;
} client_t;

static void *client_main(void *arg) {
  client_t *c = arg;
  genie_config_t *cfg = NULL;
  genie_context_t *ctx = NULL;
  genie_graph_t *g = NULL;
  genie_tensor_t *x = NULL;
  const int64_t shape[1] = {16};
  const char *in[1] = {"x"}, *out[1] = {"y"};
  const float data[16] = {1, -1};
  int i;
  if (genie_config_create(&cfg) || genie_config_set_use_env(cfg, 0) ||
      genie_config_set_master_addr(cfg, "127.0.0.1") || genie_config_set_master_port(cfg, c->port) ||
      genie_init(cfg, &ctx) || genie_graph_create("tiny", &g) ||
      genie_graph_add_input(g, "x", GENIE_DTYPE_F32, shape, 1) || genie_graph_add_node(g, "relu", "r", in, 1, out, 1) ||
      genie_graph_mark_output(g, "y") || genie_tensor_alloc(ctx, GENIE_DTYPE_F32, shape, 1, "remote:0", &x) ||
      genie_tensor_write(x, 0, data, sizeof data)) {
    fprintf(stderr, "client setup failed: %s\n", genie_last_error());
    c->errors = c->submits;
  } else {
    for (i = 0; i < c->submits; ++i) {
      genie_future_t *f = NULL;
      const double t0 = bu_now_s();
      if (genie_graph_submit(ctx, g, in, &x, 1, &f) != GENIE_OK || genie_future_wait(f, 30000) != GENIE_OK) {
        if (c->errors++ < 3) fprintf(stderr, "submit failed: %s\n", genie_last_error());
      }
      c->lat_us[i] = (bu_now_s() - t0) * 1e6;
      genie_future_destroy(f);
    }
  }
  genie_tensor_destroy(x);
  genie_graph_destroy(g);
  genie_shutdown(ctx);
  genie_config_destroy(cfg);
  return NULL;
}

typedef struct run {
  int errors;
  size_t n;
  double secs;
  bu_stats_t lat;
} run_t;

/* nclients threads x submits each against the server on `port`. */
static run_t run_clients(int32_t port, int nclients, int submits) {
  pthread_t th[64];
  client_t cl[64];
  run_t r = {0, 0, 0, {0}};
  double *all = bu_malloc(sizeof(double) * (size_t)nclients * (size_t)submits);
  const double t0 = bu_now_s();
  int i, j;
  for (i = 0; i < nclients; ++i) {
    cl[i].port = port;
    cl[i].submits = submits;
    cl[i].errors = 0;
    cl[i].lat_us = bu_malloc(sizeof(double) * (size_t)submits);
    pthread_create(&th[i], NULL, client_main, &cl[i]);
  }
  for (i = 0; i < nclients; ++i) pthread_join(th[i], NULL);
  r.secs = bu_now_s() - t0;
  for (i = 0; i < nclients; ++i) {
    r.errors += cl[i].errors;
    for (j = 0; j < submits; ++j) all[r.n++] = cl[i].lat_us[j];
    free(cl[i].lat_us);
  }
  r.lat = bu_stats(all, r.n);
  free(all);
  return r;
}

int main(int argc, char **argv) {
  const bu_options_t o = bu_parse_args(argc, argv, " (submissions per client; default 1000, --quick 20)");
  const int nclients = o.quick ? 8 : 64;
  const int submits = o.iters ? o.iters : (o.quick ? 20 : 1000);
  bsp_server_t server = bsp_start(0); /* before any thread of this process */
  run_t one, many;
  double one_rate, many_rate;
  FILE *json;

  one = run_clients(server.port, 1, nclients * submits);
  many = run_clients(server.port, nclients, submits);
  one_rate = (double)one.n / one.secs;
  many_rate = (double)many.n / many.secs;
  printf("%d concurrent clients x %d submissions (1 tiny op each) to one server (child process) on loopback\n",
         nclients, submits);
  printf("errors: %d of %zu (one client alone: %d of %zu)\n", many.errors, many.n, one.errors, one.n);
  printf("throughput: %.0f submissions/s over %.2f s; one client alone: %.0f/s over %.2f s; ratio %.2f\n"
         "(connect and teardown included)\n",
         many_rate, many.secs, one_rate, one.secs, many_rate / one_rate);
  printf("latency per submission: p50 %.1f us, p99 %.1f us, max %.1f us (one client alone: p50 %.1f us)\n",
         many.lat.median, many.lat.p99, many.lat.max, one.lat.median);
  json = bu_json_open(o.json_path);
  if (json)
    fprintf(json, "{\"bench\":\"concurrent_clients\",\"clients\":%d,\"submits\":%d,\"errors\":%d,"
                  "\"per_second\":%.1f,\"single_client_per_second\":%.1f,\"p50_us\":%.2f,\"p99_us\":%.2f}\n",
            nclients, submits, many.errors + one.errors, many_rate, one_rate, many.lat.median, many.lat.p99);
  bu_json_close(json, o.json_path);
  bsp_stop(&server);
  return many.errors + one.errors ? 1 : 0;
}
