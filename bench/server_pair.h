/* A master and a worker that joined it, both `genie serve` servers started
 * in this process on loopback (genie_server_create), and a client context
 * of the master: the multi-node setup of the benchmarks that plan across
 * nodes. Exits on failure (bench_util.h's bu_check). */
#ifndef GENIE_BENCH_SERVER_PAIR_H
#define GENIE_BENCH_SERVER_PAIR_H

#include "../samples/c/gpt2_decode.h"
#include "bench_util.h"

typedef struct bpair {
  genie_server_t *master, *worker;
  genie_context_t *ctx; /* a client of the master */
} bpair_t;

/* The GPT-2-style decode model (samples/c/gpt2_decode.h) of the multi-node
 * benchmarks: 2 layers, hidden 256, 4 heads, vocabulary 2000, caches from 64
 * tokens; tiny with --quick. */
static inline gd_dims_t bench_decode_dims(int quick) {
  gd_dims_t d;
  d.d = quick ? 32 : 256;
  d.heads = quick ? 2 : 4;
  d.layers = 2;
  d.vocab = quick ? 50 : 2000;
  d.t0 = quick ? 4 : 64;
  return d;
}

/* A config that ignores the environment (GENIE_*). */
static inline genie_config_t *bpair_config(void) {
  genie_config_t *cfg = NULL;
  bu_check(genie_config_create(&cfg), "genie_config_create");
  bu_check(genie_config_set_use_env(cfg, 0), "genie_config_set_use_env");
  return cfg;
}

static inline bpair_t bpair_start(const char *master_id, const char *worker_id) {
  bpair_t p;
  genie_config_t *cfg = bpair_config();
  int32_t port = 0;
  bu_check(genie_config_set_node_id(cfg, master_id), "genie_config_set_node_id");
  bu_check(genie_server_create(cfg, "127.0.0.1", 0, &p.master), "genie_server_create (master)");
  genie_config_destroy(cfg);
  bu_check(genie_server_port(p.master, &port), "genie_server_port");
  cfg = bpair_config();
  bu_check(genie_config_set_node_id(cfg, worker_id), "genie_config_set_node_id");
  bu_check(genie_config_set_master_addr(cfg, "127.0.0.1"), "genie_config_set_master_addr");
  bu_check(genie_config_set_master_port(cfg, port), "genie_config_set_master_port");
  bu_check(genie_server_create(cfg, "127.0.0.1", 0, &p.worker), "genie_server_create (worker joining)");
  genie_config_destroy(cfg);
  cfg = bpair_config();
  bu_check(genie_config_set_master_addr(cfg, "127.0.0.1"), "genie_config_set_master_addr");
  bu_check(genie_config_set_master_port(cfg, port), "genie_config_set_master_port");
  bu_check(genie_init(cfg, &p.ctx), "genie_init");
  genie_config_destroy(cfg);
  return p;
}

/* The context first, then the worker, then the master. */
static inline void bpair_stop(bpair_t *p) {
  genie_shutdown(p->ctx);
  genie_server_destroy(p->worker);
  genie_server_destroy(p->master);
}

#endif
