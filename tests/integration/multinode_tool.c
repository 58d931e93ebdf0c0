/* A client for the multi-node integration test (tests/scripts/
 * multinode_test.sh). It connects to a master with the GENIE_* environment
 * and runs one scenario against a worker named WORKER that joined it:
 *
 *   split WORKER WORKER_PORT
 *       y = relu(x @ w1) @ w2 with w1 resident on WORKER and x, w2 on the
 *       master: the graph runs split across both (the worker runs a part:
 *       its graphs_executed grows; bytes move between the servers), and y
 *       equals the same graph run in-process.
 *   decode WORKER STEPS
 *       a GPT-2-style decoder (2 layers, hidden 32, 2 heads) decoding STEPS
 *       tokens with a KV cache per layer: layer 0's weights and cache on the
 *       master, layer 1's on WORKER. Each step binds the caches the previous
 *       step returned (they stay where they were produced). Asserts that no
 *       KV-cache byte moves between the servers after the first step, that
 *       activations do move (the model really spans both), and that every
 *       step's logits match the same loop run in-process.
 *   direct WORKER_B PORT_B WORKER_C PORT_C
 *       the split graph with w1 on WORKER_B and w2 on WORKER_C: what moves
 *       between the workers moves directly (the master's
 *       direct_transfer_bytes grows, by what one worker's peer_fetch_bytes
 *       and the other's peer_export_bytes grow, and by what they count as
 *       imported under a semantic tag); the result equals in-process
 *       execution.
 *
 *   survive WORKER
 *       a client that lives through the worker's death and return, driven
 *       by lines on stdin (tests/scripts/multinode_test.sh):
 *       at start: w1 on WORKER, the split graph runs across both servers;
 *       prints "ready", waits for a line "dead" (the worker was killed):
 *       the graph bound to w1 fails with CONNECTION naming the worker; the
 *       same graph with every tensor on the master runs there alone (no
 *       multi-node graph, the master lists no live worker) and matches
 *       in-process execution; a new tensor on WORKER is refused with
 *       CONNECTION; prints "ready", waits for "back PORT" (the worker
 *       restarted, serving on PORT): a new tensor on WORKER is accepted and
 *       the split graph runs across both servers again (the restarted
 *       worker executed it); prints "ok survive".
 *
 *   peers B PORT_B C PORT_C
 *       servers of a cluster on etcd (tests/scripts/etcd_peers_test.sh),
 *       entered at another one (GENIE_MASTER_*), which none of them joined:
 *       the split graph with w1 on server B and w2 on server C runs across
 *       them (the entry plans it; B executes a stage: its graphs_executed
 *       grows) and equals in-process execution. Prints "ready", waits for
 *       "dead" (B was killed): the graph bound to w1 fails with CONNECTION
 *       (its time printed); prints "ready", waits for "expired" (B's key
 *       went): the same graph fails with CONNECTION naming B, a new tensor
 *       on B is refused with CONNECTION, and the graph with w1 on the entry
 *       and w2 still on C runs across the two left and matches in-process
 *       execution; prints "ok peers".
 *
 *   lost
 *       a client entering a cluster on etcd (GENIE_ETCD_ENDPOINTS, no
 *       master address): x in host memory, w1 and w2 on its entry server;
 *       the split graph runs there (its output y stays there). Prints
 *       "entered NODE", then "ready", waits for "dead" (NODE was killed):
 *       reading w1 fails with CONNECTION naming w1 and NODE (its time
 *       printed); genie_context_lost_tensors lists w1, w2 and y and not x;
 *       x still reads back; the graph fails naming w1; genie_init again
 *       reaches another server, where the graph runs again and matches
 *       in-process execution; prints "ok lost".
 *
 * Prints "ok" and counters on success. Exit status: 0 on success, 1 when an
 * assertion fails (the reason on stderr), 3 when a Genie call fails, 2 on
 * bad usage. */
#include <genie.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../samples/c/gpt2_decode.h"

/* GCC 12 at -O3 reports the buffer server_info() returns as possibly
 * pointing at its own local (the address of that local goes to
 * genie_context_server_info as an out-parameter): a false positive. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic ignored "-Wdangling-pointer"
#endif

#define CALL(expr)                                                                           \
  do {                                                                                       \
    genie_status_t st_ = (expr);                                                             \
    if (st_ != GENIE_OK) {                                                                   \
      fprintf(stderr, "multinode_tool: %s: %s: %s\n", #expr, genie_status_str(st_),          \
              genie_last_error());                                                           \
      exit(3);                                                                               \
    }                                                                                        \
  } while (0)

#define EXPECT(cond, ...)                                 \
  do {                                                    \
    if (!(cond)) {                                        \
      fprintf(stderr, "multinode_tool: FAILED: " __VA_ARGS__); \
      fprintf(stderr, "\n");                              \
      exit(1);                                            \
    }                                                     \
  } while (0)

/* --- small helpers ---------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform in [-0.5, 0.5) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (float)((rng_state >> 40) & 0xffffff) / 16777216.0f - 0.5f;
}

static float *random_floats(size_t n, float scale) {
  float *v = malloc(n * sizeof *v);
  for (size_t i = 0; i < n; ++i) v[i] = frand() * scale;
  return v;
}

static genie_context_t *connect_master(void) {
  genie_context_t *ctx = NULL;
  CALL(genie_init(NULL, &ctx));
  EXPECT(genie_context_is_embedded(ctx) == 0, "GENIE_MASTER_ADDR is not set");
  return ctx;
}

static genie_context_t *embedded(void) {
  genie_config_t *cfg = NULL;
  genie_context_t *ctx = NULL;
  CALL(genie_config_create(&cfg));
  CALL(genie_config_set_use_env(cfg, 0));
  CALL(genie_init(cfg, &ctx));
  genie_config_destroy(cfg);
  return ctx;
}

static genie_tensor_t *tensor(genie_context_t *ctx, const char *device, const int64_t *shape, size_t ndim,
                              const float *data) {
  genie_tensor_t *t = NULL;
  size_t n = 1;
  for (size_t i = 0; i < ndim; ++i) n *= (size_t)shape[i];
  CALL(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, shape, ndim, device, &t));
  if (data) CALL(genie_tensor_write(t, 0, data, n * sizeof(float)));
  return t;
}

/* A number from the server's info JSON (cJSON, unformatted): "key":value
 * after `within` (or from the start). -1 when absent. */
static double info_number(const char *json, const char *within, const char *key) {
  const char *p = json;
  if (within) {
    p = strstr(json, within);
    if (!p) return -1;
  }
  char pat[128];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *end = within ? strchr(p, '}') : NULL;
  const char *q = strstr(p, pat);
  if (!q || (end && q > end)) return -1;
  return strtod(q + strlen(pat), NULL);
}

static char *server_info(genie_context_t *ctx) {
  char *json = NULL;
  CALL(genie_context_server_info(ctx, &json));
  return json;
}

/* A client session on the worker serving at 127.0.0.1:port itself (the
 * GENIE_MASTER_* of the environment point at the master: not read here). */
static genie_context_t *connect_worker(int port) {
  genie_config_t *cfg = NULL;
  genie_context_t *wctx = NULL;
  CALL(genie_config_create(&cfg));
  CALL(genie_config_set_use_env(cfg, 0));
  CALL(genie_config_set_master_addr(cfg, "127.0.0.1"));
  CALL(genie_config_set_master_port(cfg, port));
  CALL(genie_init(cfg, &wctx));
  genie_config_destroy(cfg);
  return wctx;
}

static double max_abs_diff(const float *a, const float *b, size_t n, double *scale) {
  double d = 0, s = 0;
  for (size_t i = 0; i < n; ++i) {
    d = fmax(d, fabs((double)a[i] - (double)b[i]));
    s = fmax(s, fabs((double)b[i]));
  }
  *scale = s;
  return d;
}

static void run_and_read(genie_context_t *ctx, genie_graph_t *g, const char *const *names, genie_tensor_t **in,
                         size_t n_in, float *out, size_t out_bytes) {
  genie_future_t *f = NULL;
  genie_tensor_t *y = NULL;
  CALL(genie_graph_submit(ctx, g, names, in, n_in, &f));
  CALL(genie_future_wait(f, -1));
  CALL(genie_future_output(f, 0, &y));
  CALL(genie_tensor_read(y, 0, out, out_bytes));
  genie_tensor_destroy(y);
  genie_future_destroy(f);
}

/* --- split ------------------------------------------------------------------ */

/* x[M,K] @ w1[K,N] -> relu -> @ w2[N,P]: the graph the split tests run. */
enum { M = 8, K = 64, N = 64, P = 16 };
static genie_graph_t *split_graph(void) {
  const int64_t xs[2] = {M, K}, w1s[2] = {K, N}, w2s[2] = {N, P};
  genie_graph_t *g = NULL;
  CALL(genie_graph_create("split", &g));
  CALL(genie_graph_add_input(g, "x", GENIE_DTYPE_F32, xs, 2));
  CALL(genie_graph_add_input(g, "w1", GENIE_DTYPE_F32, w1s, 2));
  CALL(genie_graph_add_input(g, "w2", GENIE_DTYPE_F32, w2s, 2));
  const char *mm1_in[2] = {"x", "w1"}, *mm1_out[1] = {"h"};
  const char *act_in[1] = {"h"}, *act_out[1] = {"a"};
  const char *mm2_in[2] = {"a", "w2"}, *mm2_out[1] = {"y"};
  CALL(genie_graph_add_node(g, "matmul", "mm1", mm1_in, 2, mm1_out, 1));
  CALL(genie_graph_add_node(g, "relu", "act", act_in, 1, act_out, 1));
  CALL(genie_graph_add_node(g, "matmul", "mm2", mm2_in, 2, mm2_out, 1));
  CALL(genie_graph_set_role(g, "w1", GENIE_TENSOR_ROLE_WEIGHT));
  CALL(genie_graph_set_role(g, "w2", GENIE_TENSOR_ROLE_WEIGHT));
  CALL(genie_graph_mark_output(g, "y"));
  return g;
}

/* The split graph run on the master with w1 on device dev_w1 and w2 on
 * dev_w2 (NULL: the master's), its result checked against the same graph
 * run in-process. split_end() frees it all. */
struct split_run {
  float *x, *w1, *w2;
  genie_graph_t *g;
  genie_context_t *ctx, *emb;
  genie_tensor_t *in[3], *ein[3];
};
static const char *split_names[3] = {"x", "w1", "w2"};

static void split_begin(struct split_run *r, const char *dev_w1, const char *dev_w2) {
  const int64_t xs[2] = {M, K}, w1s[2] = {K, N}, w2s[2] = {N, P};
  r->x = random_floats(M * K, 1);
  r->w1 = random_floats(K * N, 0.25f);
  r->w2 = random_floats(N * P, 0.25f);
  r->g = split_graph();
  r->ctx = connect_master();
  r->in[0] = tensor(r->ctx, NULL, xs, 2, r->x);
  r->in[1] = tensor(r->ctx, dev_w1, w1s, 2, r->w1);
  r->in[2] = tensor(r->ctx, dev_w2, w2s, 2, r->w2);
  if (dev_w1)
    EXPECT(strcmp(genie_tensor_device(r->in[1]), dev_w1) == 0, "w1 reports device '%s', not '%s'",
           genie_tensor_device(r->in[1]), dev_w1);
  float got[M * P], want[M * P];
  run_and_read(r->ctx, r->g, split_names, r->in, 3, got, sizeof got);
  r->emb = embedded();
  r->ein[0] = tensor(r->emb, NULL, xs, 2, r->x);
  r->ein[1] = tensor(r->emb, NULL, w1s, 2, r->w1);
  r->ein[2] = tensor(r->emb, NULL, w2s, 2, r->w2);
  run_and_read(r->emb, r->g, split_names, r->ein, 3, want, sizeof want);
  double scale;
  const double diff = max_abs_diff(got, want, M * P, &scale);
  EXPECT(scale > 0 && diff <= 1e-5 * scale, "split result differs from in-process: max |diff| %g (scale %g)", diff,
         scale);
}

static void split_end(struct split_run *r) {
  for (int i = 0; i < 3; ++i) {
    genie_tensor_destroy(r->in[i]);
    genie_tensor_destroy(r->ein[i]);
  }
  genie_shutdown(r->ctx);
  genie_shutdown(r->emb);
  genie_graph_destroy(r->g);
  free(r->x);
  free(r->w1);
  free(r->w2);
}

static int cmd_split(const char *worker, int worker_port) {
  char dev[300];
  snprintf(dev, sizeof dev, "%s/cpu:0", worker);
  struct split_run r;
  split_begin(&r, dev, NULL);
  genie_context_t *ctx = r.ctx;
  genie_graph_t *g = r.g;
  genie_tensor_t **in = r.in;
  const char **names = split_names;

  /* Remote mode plans on the master, over its workers' devices too. */
  char *plan = NULL;
  CALL(genie_plan_explain(ctx, g, &plan));
  EXPECT(strstr(plan, dev) != NULL, "the master's plan does not list %s: %.400s", dev, plan);
  EXPECT(strstr(plan, "resident_weight") == NULL, "an unbound plan pins a node to a resident weight: %.400s", plan);
  genie_free(plan);
  /* Bound to the tensors, the plan is the submission's: mm1 stays with w1 on
   * the worker. */
  CALL(genie_plan_explain_bound(ctx, g, names, in, 3, &plan));
  EXPECT(strstr(plan, "resident_weight") != NULL, "the bound plan keeps no node with the worker's weight: %.600s",
         plan);
  genie_free(plan);

  char *info = server_info(ctx);
  const double moved = info_number(info, NULL, "server_transfer_bytes");
  const double graphs = info_number(info, NULL, "multinode_graphs");
  const double workers = info_number(info, NULL, "workers");
  EXPECT(workers >= 1, "the master reports %g workers: %s", workers, info);
  EXPECT(graphs >= 1, "the master ran no multi-node graph: %s", info);
  EXPECT(moved > 0, "no byte moved between the servers, so the graph did not span them: %s", info);

  /* The worker ran its part: ask it directly. */
  genie_context_t *wctx = connect_worker(worker_port);
  char *winfo = server_info(wctx);
  EXPECT(info_number(winfo, NULL, "graphs_executed") >= 1, "the worker executed no graph: %s", winfo);
  printf("ok split: %.0f bytes moved between servers; master %s\n", moved, info);
  genie_free(winfo);
  genie_free(info);
  genie_shutdown(wctx);
  split_end(&r);
  return 0;
}

/* --- direct --------------------------------------------------------------- */

/* A number from the server info of the worker at 127.0.0.1:port. */
static double worker_number(int port, const char *key) {
  genie_context_t *wctx = connect_worker(port);
  char *winfo = server_info(wctx);
  const double v = info_number(winfo, NULL, key);
  genie_free(winfo);
  genie_shutdown(wctx);
  return v;
}

/* The bytes the worker at 127.0.0.1:port counted in "tagged_bytes" under
 * keys starting with `prefix` ("import "). */
static double worker_tagged(int port, const char *prefix) {
  genie_context_t *wctx = connect_worker(port);
  char *winfo = server_info(wctx);
  double sum = 0;
  const char *p = strstr(winfo, "\"tagged_bytes\":{");
  if (p) p += strlen("\"tagged_bytes\":{");
  while (p && *p == '"') {
    const char *end = strchr(p + 1, '"');
    if (!end) break;
    char *after = NULL;
    const double n = strtod(end + 2, &after);
    if (strncmp(p + 1, prefix, strlen(prefix)) == 0) sum += n;
    p = after + (*after == ',');
  }
  genie_free(winfo);
  genie_shutdown(wctx);
  return sum;
}

/* Bytes the two workers fetched from a peer and sent to one, and the bytes
 * they imported with a semantic tag, so far. */
static void peer_bytes(int pb, int pc, double *fetched, double *exported, double *tagged) {
  *fetched = worker_number(pb, "peer_fetch_bytes") + worker_number(pc, "peer_fetch_bytes");
  *exported = worker_number(pb, "peer_export_bytes") + worker_number(pc, "peer_export_bytes");
  *tagged = worker_tagged(pb, "import ") + worker_tagged(pc, "import ");
}

/* The split graph with w1 on worker B and w2 on worker C: mm1 runs with w1
 * on B, mm2 with w2 on C or B, and whatever moves between the two workers
 * (the activation, or w2) goes from one to the other directly, not through
 * the master: the bytes the master counts as moved directly are the bytes
 * one worker fetched and the other sent. */
static int cmd_direct(const char *wb, int wb_port, const char *wc, int wc_port) {
  char devb[300], devc[300];
  snprintf(devb, sizeof devb, "%s/cpu:0", wb);
  snprintf(devc, sizeof devc, "%s/cpu:0", wc);
  double fetched0, exported0, tagged0;
  peer_bytes(wb_port, wc_port, &fetched0, &exported0, &tagged0);
  genie_context_t *ctx = connect_master();
  char *info = server_info(ctx);
  const double direct0 = info_number(info, NULL, "direct_transfer_bytes");
  genie_free(info);
  genie_shutdown(ctx);

  struct split_run r;
  split_begin(&r, devb, devc);
  info = server_info(r.ctx);
  const double direct = info_number(info, NULL, "direct_transfer_bytes") - direct0;
  EXPECT(direct > 0, "no byte moved between the two workers directly: %s", info);
  double fetched, exported, tagged;
  peer_bytes(wb_port, wc_port, &fetched, &exported, &tagged);
  fetched -= fetched0;
  exported -= exported0;
  tagged -= tagged0;
  EXPECT(fetched == direct && exported == direct,
         "the master moved %g bytes between %s and %s directly, but they fetched %g and sent %g bytes", direct, wb,
         wc, fetched, exported);
  /* Every value moved goes with its graph tag (an input, a weight, an
   * activation at least), named by the master's TensorImport. */
  EXPECT(tagged == direct, "the workers imported %g bytes directly but counted %g under a semantic tag", direct,
         tagged);
  printf("ok direct: %.0f bytes moved between %s and %s without the master\n", direct, wb, wc);
  genie_free(info);
  split_end(&r);
  return 0;
}

/* --- survive --------------------------------------------------------------------- */


static void wait_line(const char *want, char *line, size_t n) {
  printf("ready\n");
  fflush(stdout);
  EXPECT(fgets(line, (int)n, stdin) != NULL, "stdin closed while waiting for '%s'", want);
  EXPECT(strncmp(line, want, strlen(want)) == 0, "expected '%s' on stdin, got '%s'", want, line);
}

/* The split graph g run in-process on x, w1 and w2 (its tensors in ein,
 * its result in want[M * P]): the reference a scenario compares with. */
static genie_context_t *embedded_reference(genie_graph_t *g, const float *x, const float *w1, const float *w2,
                                           genie_tensor_t *ein[3], float *want) {
  const int64_t xs[2] = {M, K}, w1s[2] = {K, N}, w2s[2] = {N, P};
  genie_context_t *emb = embedded();
  ein[0] = tensor(emb, NULL, xs, 2, x);
  ein[1] = tensor(emb, NULL, w1s, 2, w1);
  ein[2] = tensor(emb, NULL, w2s, 2, w2);
  run_and_read(emb, g, split_names, ein, 3, want, (size_t)(M * P) * sizeof(float));
  return emb;
}

/* Frees what embedded_reference made, the graph and the inputs' values. */
static void reference_end(genie_context_t *emb, genie_tensor_t *ein[3], genie_graph_t *g, float *x, float *w1,
                          float *w2) {
  for (int i = 0; i < 3; ++i) genie_tensor_destroy(ein[i]);
  genie_shutdown(emb);
  genie_graph_destroy(g);
  free(x);
  free(w1);
  free(w2);
}

static int cmd_survive(const char *worker) {
  const int64_t xs[2] = {M, K}, w1s[2] = {K, N}, w2s[2] = {N, P};
  float *x = random_floats(M * K, 1), *w1 = random_floats(K * N, 0.25f), *w2 = random_floats(N * P, 0.25f);
  genie_graph_t *g = split_graph();
  const char *names[3] = {"x", "w1", "w2"};
  char dev[300], line[256];
  snprintf(dev, sizeof dev, "%s/cpu:0", worker);
  float got[M * P], want[M * P];
  double scale;

  genie_tensor_t *ein[3];
  genie_context_t *emb = embedded_reference(g, x, w1, w2, ein, want);

  genie_context_t *ctx = connect_master();
  genie_tensor_t *x_m = tensor(ctx, NULL, xs, 2, x), *w1_m = tensor(ctx, NULL, w1s, 2, w1),
                 *w2_m = tensor(ctx, NULL, w2s, 2, w2);
  genie_tensor_t *w1_w = tensor(ctx, dev, w1s, 2, w1);
  genie_tensor_t *split_in[3] = {x_m, w1_w, w2_m}, *master_in[3] = {x_m, w1_m, w2_m};
  run_and_read(ctx, g, names, split_in, 3, got, sizeof got);
  EXPECT(max_abs_diff(got, want, M * P, &scale) <= 1e-5 * scale, "split result differs before the kill");
  char *info = server_info(ctx);
  const double graphs0 = info_number(info, NULL, "multinode_graphs");
  EXPECT(graphs0 >= 1 && info_number(info, NULL, "workers") >= 1, "the graph did not span the worker: %s", info);
  genie_free(info);

  /* 2. The worker is dead. */
  wait_line("dead", line, sizeof line);
  genie_future_t *f = NULL;
  genie_status_t st = genie_graph_submit(ctx, g, names, split_in, 3, &f);
  if (st == GENIE_OK) st = genie_future_wait(f, -1);
  EXPECT(st == GENIE_ERR_CONNECTION, "a graph bound to a tensor of the dead worker gave %s, not CONNECTION: %s",
         genie_status_str(st), genie_last_error());
  EXPECT(strstr(genie_last_error(), worker) != NULL, "the error does not name the worker: %s", genie_last_error());
  printf("tensor on the dead worker: %s: %s\n", genie_status_str(st), genie_last_error());
  genie_future_destroy(f);
  run_and_read(ctx, g, names, master_in, 3, got, sizeof got);
  EXPECT(max_abs_diff(got, want, M * P, &scale) <= 1e-5 * scale, "master-only result differs from in-process");
  info = server_info(ctx);
  EXPECT(info_number(info, NULL, "multinode_graphs") == graphs0,
         "the graph after the worker died was planned across nodes: %s", info);
  EXPECT(info_number(info, NULL, "workers") == 0, "the master still lists a live worker: %s", info);
  genie_free(info);
  genie_tensor_t *t = NULL;
  st = genie_tensor_alloc(ctx, GENIE_DTYPE_F32, w1s, 2, dev, &t);
  EXPECT(st == GENIE_ERR_CONNECTION && strstr(genie_last_error(), worker) != NULL,
         "a tensor on the dead worker gave %s: %s", genie_status_str(st), genie_last_error());
  printf("device on the dead worker: %s: %s\n", genie_status_str(st), genie_last_error());

  /* 3. The worker is back. */
  wait_line("back ", line, sizeof line);
  const int port = atoi(line + 5);
  genie_tensor_t *w1_w2 = tensor(ctx, dev, w1s, 2, w1);
  split_in[1] = w1_w2;
  run_and_read(ctx, g, names, split_in, 3, got, sizeof got);
  EXPECT(max_abs_diff(got, want, M * P, &scale) <= 1e-5 * scale, "split result differs after the restart");
  info = server_info(ctx);
  EXPECT(info_number(info, NULL, "multinode_graphs") > graphs0, "the restarted worker got no work: %s", info);
  genie_free(info);
  genie_context_t *wctx = connect_worker(port);
  char *winfo = server_info(wctx);
  EXPECT(info_number(winfo, NULL, "graphs_executed") >= 1, "the restarted worker executed no graph: %s", winfo);
  genie_free(winfo);
  genie_shutdown(wctx);
  printf("ok survive\n");
  genie_tensor_destroy(w1_w);
  genie_tensor_destroy(w1_w2);
  genie_tensor_destroy(x_m);
  genie_tensor_destroy(w1_m);
  genie_tensor_destroy(w2_m);
  genie_shutdown(ctx);
  reference_end(emb, ein, g, x, w1, w2);
  return 0;
}

/* --- peers ------------------------------------------------------------------- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmd_peers(const char *b, int b_port, const char *c, int c_port) {
  char devb[300], devc[300], line[256];
  snprintf(devb, sizeof devb, "%s/cpu:0", b);
  snprintf(devc, sizeof devc, "%s/cpu:0", c);
  const double b_graphs0 = worker_number(b_port, "graphs_executed");
  struct split_run r;
  split_begin(&r, devb, devc); /* runs it and compares with in-process */
  char *info = server_info(r.ctx);
  EXPECT(info_number(info, NULL, "workers") >= 2, "the entry server does not place on the other two: %s", info);
  const double graphs0 = info_number(info, NULL, "multinode_graphs");
  EXPECT(graphs0 >= 1, "the entry server planned no graph across servers: %s", info);
  genie_free(info);
  EXPECT(worker_number(b_port, "graphs_executed") > b_graphs0, "server %s ran no stage of the graph", b);
  EXPECT(worker_number(c_port, "graphs_executed") >= 1, "server %s executed nothing", c);
  printf("ok placed: w1 on %s, w2 on %s, entered elsewhere: the result equals in-process execution\n", b, c);

  /* B is dead: its key lives until its lease runs out. */
  wait_line("dead", line, sizeof line);
  genie_future_t *f = NULL;
  const double t0 = now_s();
  genie_status_t st = genie_graph_submit(r.ctx, r.g, split_names, r.in, 3, &f);
  if (st == GENIE_OK) st = genie_future_wait(f, -1);
  EXPECT(st == GENIE_ERR_CONNECTION, "a graph bound to a tensor of the dead %s gave %s, not CONNECTION: %s", b,
         genie_status_str(st), genie_last_error());
  printf("graph needing the dead %s: %s after %.0f ms: %s\n", b, genie_status_str(st), (now_s() - t0) * 1e3,
         genie_last_error());
  genie_future_destroy(f);
  f = NULL;

  /* B's key went: it has left every plan. */
  wait_line("expired", line, sizeof line);
  st = genie_graph_submit(r.ctx, r.g, split_names, r.in, 3, &f);
  if (st == GENIE_OK) st = genie_future_wait(f, -1);
  EXPECT(st == GENIE_ERR_CONNECTION && strstr(genie_last_error(), b) != NULL,
         "a graph bound to a tensor of %s, whose key went, gave %s: %s", b, genie_status_str(st), genie_last_error());
  printf("after its key went: %s: %s\n", genie_status_str(st), genie_last_error());
  genie_future_destroy(f);
  const int64_t w1s[2] = {K, N};
  genie_tensor_t *t = NULL;
  st = genie_tensor_alloc(r.ctx, GENIE_DTYPE_F32, w1s, 2, devb, &t);
  EXPECT(st == GENIE_ERR_CONNECTION && strstr(genie_last_error(), b) != NULL, "a tensor on the dead %s gave %s: %s",
         b, genie_status_str(st), genie_last_error());
  genie_tensor_t *w1_entry = tensor(r.ctx, NULL, w1s, 2, r.w1);
  genie_tensor_t *in[3] = {r.in[0], w1_entry, r.in[2]};
  float got[M * P], want[M * P];
  run_and_read(r.ctx, r.g, split_names, in, 3, got, sizeof got);
  run_and_read(r.emb, r.g, split_names, r.ein, 3, want, sizeof want);
  double scale;
  const double diff = max_abs_diff(got, want, M * P, &scale);
  EXPECT(scale > 0 && diff <= 1e-5 * scale, "after %s died: result differs from in-process: %g (scale %g)", b, diff,
         scale);
  info = server_info(r.ctx);
  EXPECT(info_number(info, NULL, "multinode_graphs") > graphs0, "the next graph was not placed across servers: %s",
         info);
  genie_free(info);
  printf("ok peers: the next graph ran on the entry server and %s and equals in-process execution\n", c);
  genie_tensor_destroy(w1_entry);
  split_end(&r);
  return 0;
}

/* --- lost ---------------------------------------------------------------------- */

/* The "node_id" of the server info of ctx, into out. */
static void server_node(genie_context_t *ctx, char *out, size_t n) {
  char *info = server_info(ctx);
  const char *p = strstr(info, "\"node_id\":\"");
  EXPECT(p != NULL, "no node_id in %s", info);
  p += strlen("\"node_id\":\"");
  size_t i = 0;
  while (p[i] && p[i] != '"' && i + 1 < n) {
    out[i] = p[i];
    ++i;
  }
  out[i] = '\0';
  genie_free(info);
}

static int cmd_lost(void) {
  const int64_t xs[2] = {M, K}, w1s[2] = {K, N}, w2s[2] = {N, P};
  float *x = random_floats(M * K, 1), *w1 = random_floats(K * N, 0.25f), *w2 = random_floats(N * P, 0.25f);
  genie_graph_t *g = split_graph();
  char entry[256], other[256], line[256];
  float got[M * P], want[M * P];
  double scale;

  genie_tensor_t *ein[3];
  genie_context_t *emb = embedded_reference(g, x, w1, w2, ein, want);

  genie_context_t *ctx = connect_master(); /* through etcd */
  server_node(ctx, entry, sizeof entry);
  genie_tensor_t *in[3] = {tensor(ctx, "cpu", xs, 2, x), tensor(ctx, NULL, w1s, 2, w1), tensor(ctx, NULL, w2s, 2, w2)};
  genie_future_t *f = NULL;
  genie_tensor_t *y = NULL;
  CALL(genie_graph_submit(ctx, g, split_names, in, 3, &f));
  CALL(genie_future_wait(f, -1));
  CALL(genie_future_output(f, 0, &y)); /* stays on the server */
  CALL(genie_tensor_read(y, 0, got, sizeof got));
  EXPECT(max_abs_diff(got, want, M * P, &scale) <= 1e-5 * scale, "result differs from in-process");
  char *lost = NULL;
  CALL(genie_context_lost_tensors(ctx, &lost));
  EXPECT(strstr(lost, "\"session\":\"connected\"") && strstr(lost, "\"tensors\":[]"), "lost while alive: %s", lost);
  genie_free(lost);
  printf("entered %s\n", entry);

  wait_line("dead", line, sizeof line);
  const double t0 = now_s();
  genie_status_t st = genie_tensor_read(in[1], 0, got, sizeof(float));
  const double dt = now_s() - t0;
  EXPECT(st == GENIE_ERR_CONNECTION && strstr(genie_last_error(), "'w1'") && strstr(genie_last_error(), entry),
         "reading w1 after %s died gave %s: %s", entry, genie_status_str(st), genie_last_error());
  printf("reading w1 after %s died: %s after %.0f ms: %s\n", entry, genie_status_str(st), dt * 1e3,
         genie_last_error());
  CALL(genie_context_lost_tensors(ctx, &lost));
  EXPECT(strstr(lost, "\"session\":\"lost\"") && strstr(lost, "\"name\":\"w1\"") &&
             strstr(lost, "\"name\":\"w2\"") && strstr(lost, "\"name\":\"y\"") && !strstr(lost, "\"name\":\"x\""),
         "genie_context_lost_tensors: %s", lost);
  printf("lost: %s\n", lost);
  genie_free(lost);
  float xb[M * K];
  CALL(genie_tensor_read(in[0], 0, xb, sizeof xb));
  EXPECT(memcmp(xb, x, sizeof xb) == 0, "the host tensor x changed");
  genie_future_destroy(f);
  f = NULL;
  st = genie_graph_submit(ctx, g, split_names, in, 3, &f);
  EXPECT(st == GENIE_ERR_CONNECTION && strstr(genie_last_error(), "'w1'"), "submitting after %s died gave %s: %s",
         entry, genie_status_str(st), genie_last_error());
  genie_tensor_destroy(y);
  for (int i = 0; i < 3; ++i) genie_tensor_destroy(in[i]);
  genie_shutdown(ctx);

  ctx = connect_master(); /* through etcd again: another server */
  server_node(ctx, other, sizeof other);
  EXPECT(strcmp(other, entry) != 0, "genie_init reached the dead %s again", entry);
  genie_tensor_t *in2[3] = {tensor(ctx, "cpu", xs, 2, x), tensor(ctx, NULL, w1s, 2, w1),
                            tensor(ctx, NULL, w2s, 2, w2)};
  run_and_read(ctx, g, split_names, in2, 3, got, sizeof got);
  EXPECT(max_abs_diff(got, want, M * P, &scale) <= 1e-5 * scale, "result on %s differs from in-process", other);
  printf("ok lost: genie_init again entered %s, the graph matches in-process execution\n", other);
  for (int i = 0; i < 3; ++i) genie_tensor_destroy(in2[i]);
  genie_shutdown(ctx);
  reference_end(emb, ein, g, x, w1, w2);
  return 0;
}

/* --- decode ------------------------------------------------------------------ */

/* The master's counters are cumulative (other scenarios ran before): this
 * run's figures are differences from a baseline taken before step 0. */
struct Moved {
  double total, kv, act;
};
static struct Moved moved_now(genie_context_t *ctx) {
  char *info = server_info(ctx);
  const char *roles = "\"server_transfer_bytes_by_role\":";
  struct Moved m = {info_number(info, NULL, "server_transfer_bytes"), info_number(info, roles, "kv_cache"),
                    info_number(info, roles, "activation")};
  if (m.kv < 0) m.kv = 0;
  if (m.act < 0) m.act = 0;
  genie_free(info);
  return m;
}
static struct Moved base, after_first, last;
static void record_transfers(genie_context_t *ctx, int step) {
  last = moved_now(ctx);
  if (step == 0) after_first = last;
}

/* Runs STEPS steps of the model on ctx, layer l's weights and caches on
 * devices[l]; logits[step * vocab ..] receive each step's logits. */
static void decode_loop(genie_context_t *ctx, const gd_model_t *m, const char *const *devices, int steps,
                        float *logits, void (*after_step)(genie_context_t *, int)) {
  gd_session_t s;
  /* Layer 0's caches carry the annotation; layer 1's are found from the
   * graph (persistent inputs appended to and read by attention). */
  gd_session_open(&s, ctx, m, devices, 1u);
  for (int i = 0; i < steps; ++i) {
    gd_step(&s, logits + (size_t)i * (size_t)m->dims.vocab);
    if (after_step) after_step(ctx, i);
  }
  gd_session_close(&s);
}

static int cmd_decode(const char *worker, int steps) {
  const gd_dims_t dims = {32, 2, 2, 50, 3};
  gd_model_t m;
  gd_model_init(&m, dims, 42);
  const size_t V = (size_t)dims.vocab;
  float *got = malloc((size_t)steps * V * sizeof(float));
  float *want = malloc((size_t)steps * V * sizeof(float));
  char dev[300];
  snprintf(dev, sizeof dev, "%s/cpu:0", worker);

  genie_context_t *ctx = connect_master();
  base = moved_now(ctx);
  const char *remote_devices[2] = {NULL, dev};
  decode_loop(ctx, &m, remote_devices, steps, got, record_transfers);
  char *info = server_info(ctx);

  genie_context_t *emb = embedded();
  decode_loop(emb, &m, NULL, steps, want, NULL);
  for (int s = 0; s < steps; ++s) {
    double scale;
    const double diff = max_abs_diff(got + (size_t)s * V, want + (size_t)s * V, V, &scale);
    EXPECT(scale > 0 && diff <= 1e-4 * scale, "step %d: logits differ from in-process: max |diff| %g (scale %g)", s,
           diff, scale);
  }
  EXPECT(last.kv == after_first.kv,
         "KV-cache bytes crossed between the servers after the first step: %.0f in step 0, %.0f in all %d steps; "
         "master: %s",
         after_first.kv - base.kv, last.kv - base.kv, steps, info);
  EXPECT(last.act > base.act, "no activation moved between the servers: the model did not span them; master: %s",
         info);
  /* Only activations cross: no weight and no cache (whatever role the
   * server gave it) ever moved. */
  EXPECT(last.total - base.total == last.act - base.act,
         "bytes other than activations moved between the servers (%.0f of %.0f); master: %s",
         (last.total - base.total) - (last.act - base.act), last.total - base.total, info);
  EXPECT(info_number(info, NULL, "multinode_graphs") >= steps, "fewer multi-node graphs than steps: %s", info);
  printf("ok decode: %d steps; kv_cache bytes moved between servers: %.0f (in step 0: %.0f); activation bytes: %.0f\n",
         steps, last.kv - base.kv, after_first.kv - base.kv, last.act - base.act);
  printf("master %s\n", info);
  genie_free(info);
  genie_shutdown(ctx);
  genie_shutdown(emb);
  free(got);
  free(want);
  gd_model_free(&m);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "split") == 0) return cmd_split(argv[2], atoi(argv[3]));
  if (argc == 4 && strcmp(argv[1], "decode") == 0) return cmd_decode(argv[2], atoi(argv[3]));
  if (argc == 3 && strcmp(argv[1], "survive") == 0) return cmd_survive(argv[2]);
  if (argc == 6 && strcmp(argv[1], "direct") == 0) return cmd_direct(argv[2], atoi(argv[3]), argv[4], atoi(argv[5]));
  if (argc == 2 && strcmp(argv[1], "lost") == 0) return cmd_lost();
  if (argc == 6 && strcmp(argv[1], "peers") == 0) return cmd_peers(argv[2], atoi(argv[3]), argv[4], atoi(argv[5]));
  fprintf(stderr, "usage: multinode_tool split WORKER WORKER_PORT | decode WORKER STEPS | survive WORKER | "
                  "direct WORKER_B PORT_B WORKER_C PORT_C | peers B PORT_B C PORT_C | lost\n");
  return 2;
}
