/* Tensor semantics through genie.h (genie_tensor_set_semantics): a server in
 * this process, a client context whose data connection runs over the
 * transport named by argv[1]:
 *   loopback  (in-process, has RMA): tensors of 64 KiB and more move by
 *             RMA, whose requests name the tag;
 *   dpdk      (net_ring in this process): framed, the tag on every packet
 *             (skipped where the dpdk plugin or its EAL cannot run).
 * An annotated tensor's writes and reads are counted by the server under
 * its tag (genie_context_server_info, "tagged_bytes"), an unannotated
 * one's under none; bad annotations are refused and change nothing.
 * Needs GENIE_TRANSPORT_PATH to name the build's plugin folder. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>

#include "check.h"

enum { kElems = 1 << 17 }; /* f16: 256 KiB, above the RMA threshold */

static uint16_t g_in[kElems], g_out[kElems];

/* Sum of the byte counts in the "tagged_bytes" object of `json`, and the
 * count under `key` (0 if absent); -1 when there is no such object. */
static long tagged(const char *json, const char *key, long *total) {
  const char *p = strstr(json, "\"tagged_bytes\":{");
  if (p == NULL) return -1;
  p += strlen("\"tagged_bytes\":{");
  long want = 0;
  *total = 0;
  while (*p == '"') {
    const char *end = strchr(p + 1, '"');
    if (end == NULL || end[1] != ':') return -1;
    char *after = NULL;
    const long n = strtol(end + 2, &after, 10);
    if ((size_t)(end - p - 1) == strlen(key) && strncmp(p + 1, key, strlen(key)) == 0) want = n;
    *total += n;
    p = after;
    if (*p == ',') ++p;
  }
  return *p == '}' ? want : -1;
}

static long server_tagged(genie_context_t *ctx, const char *key, long *total) {
  char *json = NULL;
  if (genie_context_server_info(ctx, &json) != GENIE_OK) return -2;
  const long n = tagged(json, key, total);
  if (n < 0) fprintf(stderr, "no tagged_bytes in %s\n", json);
  genie_free(json);
  return n;
}

static void expect_semantics(const genie_tensor_t *t, genie_phase_t phase, genie_tensor_role_t role,
                             int32_t layer) {
  genie_phase_t p = GENIE_PHASE_MAX_ENUM;
  genie_tensor_role_t r = GENIE_TENSOR_ROLE_MAX_ENUM;
  int32_t l = -100;
  EXPECT_OK(genie_tensor_get_semantics(t, &p, &r, &l));
  CHECK(p == phase);
  CHECK(r == role);
  CHECK(l == layer);
}

/* Refused annotations: each names what is wrong and leaves the tensor's. */
static void check_bad_annotations(genie_tensor_t *t) {
  EXPECT_OK(genie_tensor_set_semantics(t, GENIE_PHASE_PREFILL, GENIE_TENSOR_ROLE_WEIGHT, 1));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT,
                genie_tensor_set_semantics(t, (genie_phase_t)99, GENIE_TENSOR_ROLE_WEIGHT, 1));
  EXPECT_DETAIL("not a genie_phase_t");
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT,
                genie_tensor_set_semantics(t, GENIE_PHASE_DECODE, (genie_tensor_role_t)GENIE_NODE_ROLE_SERVER, 1));
  EXPECT_DETAIL("not a genie_tensor_role_t");
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT,
                genie_tensor_set_semantics(t, GENIE_PHASE_DECODE, (genie_tensor_role_t)6, 1));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT,
                genie_tensor_set_semantics(t, GENIE_PHASE_DECODE, GENIE_TENSOR_ROLE_KV_CACHE, -2));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT,
                genie_tensor_set_semantics(t, GENIE_PHASE_DECODE, GENIE_TENSOR_ROLE_KV_CACHE, 65535));
  EXPECT_DETAIL("outside -1..65534");
  expect_semantics(t, GENIE_PHASE_PREFILL, GENIE_TENSOR_ROLE_WEIGHT, 1);
  EXPECT_OK(genie_tensor_set_semantics(t, GENIE_PHASE_UNKNOWN, GENIE_TENSOR_ROLE_UNSPECIFIED, -1));
  expect_semantics(t, GENIE_PHASE_UNKNOWN, GENIE_TENSOR_ROLE_UNSPECIFIED, -1);
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE,
                genie_tensor_set_semantics(NULL, GENIE_PHASE_DECODE, GENIE_TENSOR_ROLE_KV_CACHE, 0));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_tensor_get_semantics(NULL, NULL, NULL, NULL));
  EXPECT_OK(genie_tensor_get_semantics(t, NULL, NULL, NULL));
}

static void write_and_read(genie_tensor_t *t) {
  EXPECT_OK(genie_tensor_write(t, 0, g_in, sizeof g_in));
  memset(g_out, 0, sizeof g_out);
  EXPECT_OK(genie_tensor_read(t, 0, g_out, sizeof g_out));
  CHECK(memcmp(g_in, g_out, sizeof g_in) == 0);
}

/* A host tensor annotated prefill / weight / 1 bound to a graph input the
 * graph annotates decode / KV cache / 5: the upload for the submission is
 * the graph's transfer, counted under the graph's tag. A graph's output
 * starts unannotated; its annotation is the tensor's, seen through every
 * handle genie_future_output gives for it. */
static void check_graph_transfers(genie_context_t *ctx) {
  const int64_t shape[1] = {kElems / 2}; /* f32: the same 256 KiB */
  const char *in[2] = {"a", "a"}, *out[1] = {"s"}, *names[1] = {"a"};
  genie_graph_t *g = NULL;
  genie_tensor_t *a = NULL, *s1 = NULL, *s2 = NULL;
  genie_future_t *f = NULL;
  REQUIRE_OK(genie_graph_create("double", &g));
  REQUIRE_OK(genie_graph_add_input(g, "a", GENIE_DTYPE_F32, shape, 1));
  REQUIRE_OK(genie_graph_add_node(g, "add", "dbl", in, 2, out, 1));
  REQUIRE_OK(genie_graph_mark_output(g, "s"));
  REQUIRE_OK(genie_graph_set_role(g, "a", GENIE_TENSOR_ROLE_KV_CACHE));
  REQUIRE_OK(genie_graph_set_phase(g, "dbl", GENIE_PHASE_DECODE));
  REQUIRE_OK(genie_graph_set_layer(g, "dbl", 5));
  REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F32, shape, 1, "cpu", &a));
  EXPECT_OK(genie_tensor_write(a, 0, g_in, sizeof g_in));
  EXPECT_OK(genie_tensor_set_semantics(a, GENIE_PHASE_PREFILL, GENIE_TENSOR_ROLE_WEIGHT, 1));
  REQUIRE_OK(genie_graph_submit(ctx, g, names, &a, 1, &f));
  long total = 0;
  CHECK(server_tagged(ctx, "write decode/kv_cache/5", &total) == (long)sizeof g_in);
  CHECK(server_tagged(ctx, "write prefill/weight/1", &total) == 0);
  EXPECT_OK(genie_future_wait(f, 20000));
  REQUIRE_OK(genie_future_output(f, 0, &s1));
  REQUIRE_OK(genie_future_output(f, 0, &s2));
  expect_semantics(s1, GENIE_PHASE_UNKNOWN, GENIE_TENSOR_ROLE_UNSPECIFIED, -1);
  EXPECT_OK(genie_tensor_set_semantics(s1, GENIE_PHASE_FORWARD, GENIE_TENSOR_ROLE_ACTIVATION, 0));
  expect_semantics(s2, GENIE_PHASE_FORWARD, GENIE_TENSOR_ROLE_ACTIVATION, 0);
  genie_tensor_destroy(s1);
  genie_tensor_destroy(s2);
  genie_tensor_destroy(a);
  genie_future_destroy(f);
  genie_graph_destroy(g);
}

static void use_dpdk_ring(void) {
  int cpu = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    while (cpu < CPU_SETSIZE - 1 && !CPU_ISSET(cpu, &set)) ++cpu;
  char eal[256];
  snprintf(eal, sizeof eal,
           "-l %d --no-huge -m 256 --no-shconf --no-pci --no-telemetry --log-level=*:warning --vdev=net_ring0",
           cpu);
  setenv("GENIE_DPDK_EAL", eal, 0);
  setenv("GENIE_DPDK_MTU", "1500", 1);
}

int main(int argc, char **argv) {
  const char *transport = argc > 1 ? argv[1] : "loopback";
  if (getenv("GENIE_TRANSPORT_PATH") == NULL) {
    fprintf(stderr, "GENIE_TRANSPORT_PATH must name the folder of the transport plugins\n");
    return 1;
  }
  if (strcmp(transport, "dpdk") == 0) use_dpdk_ring();
  setenv("GENIE_SERVE_TRANSPORTS", transport, 1);
  setenv("GENIE_TRANSPORT", transport, 1);
  for (uint32_t i = 0; i < kElems; ++i) g_in[i] = (uint16_t)(i * 2654435761u >> 7);

  genie_config_t *scfg = NULL;
  genie_server_t *srv = NULL;
  int32_t port = 0;
  REQUIRE_OK(genie_config_create(&scfg));
  REQUIRE_OK(genie_config_set_node_id(scfg, "sem-server"));
  REQUIRE_OK(genie_config_set_num_threads(scfg, 1));
  REQUIRE_OK(genie_server_create(scfg, NULL, 0, &srv));
  genie_config_destroy(scfg);
  REQUIRE_OK(genie_server_port(srv, &port));

  genie_config_t *cfg = NULL;
  genie_context_t *ctx = NULL;
  REQUIRE_OK(genie_config_create(&cfg));
  REQUIRE_OK(genie_config_set_master_addr(cfg, "127.0.0.1"));
  REQUIRE_OK(genie_config_set_master_port(cfg, port));
  REQUIRE_OK(genie_config_set_timeout_ms(cfg, 20000));
  const genie_status_t st = genie_init(cfg, &ctx);
  genie_config_destroy(cfg);
  if (st == GENIE_ERR_UNSUPPORTED && strcmp(transport, "loopback") != 0) {
    printf("SKIP: the server offers no %s data connection here: %s\n", transport, genie_last_error());
    genie_server_destroy(srv);
    return 77;
  }
  REQUIRE_OK(st);

  const int64_t shape[1] = {kElems};
  genie_tensor_t *kv = NULL, *plain = NULL;
  REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F16, shape, 1, "remote:0", &kv));
  REQUIRE_OK(genie_tensor_alloc(ctx, GENIE_DTYPE_F16, shape, 1, "remote:0", &plain));
  expect_semantics(kv, GENIE_PHASE_UNKNOWN, GENIE_TENSOR_ROLE_UNSPECIFIED, -1);
  check_bad_annotations(kv);

  EXPECT_OK(genie_tensor_set_semantics(kv, GENIE_PHASE_DECODE, GENIE_TENSOR_ROLE_KV_CACHE, 3));
  expect_semantics(kv, GENIE_PHASE_DECODE, GENIE_TENSOR_ROLE_KV_CACHE, 3);
  write_and_read(kv);
  write_and_read(plain);
  long total = 0;
  CHECK(server_tagged(ctx, "write decode/kv_cache/3", &total) == (long)sizeof g_in);
  CHECK(server_tagged(ctx, "read decode/kv_cache/3", &total) == (long)sizeof g_in);
  CHECK(total == 2 * (long)sizeof g_in); /* the unannotated tensor counted nothing */

  /* A new annotation tags what follows; clearing it makes the tensor untagged. */
  EXPECT_OK(genie_tensor_set_semantics(kv, GENIE_PHASE_PREFILL, GENIE_TENSOR_ROLE_WEIGHT, -1));
  EXPECT_OK(genie_tensor_write(kv, 0, g_in, sizeof g_in));
  CHECK(server_tagged(ctx, "write prefill/weight/-", &total) == (long)sizeof g_in);
  EXPECT_OK(genie_tensor_set_semantics(kv, GENIE_PHASE_UNKNOWN, GENIE_TENSOR_ROLE_UNSPECIFIED, -1));
  write_and_read(kv);
  CHECK(server_tagged(ctx, "write decode/kv_cache/3", &total) == (long)sizeof g_in);
  CHECK(total == 3 * (long)sizeof g_in);

  check_graph_transfers(ctx);
  genie_tensor_destroy(kv);
  genie_tensor_destroy(plain);
  genie_shutdown(ctx);
  genie_server_destroy(srv);
  return test_summary(strcmp(transport, "dpdk") == 0 ? "tensor_semantics (dpdk)" : "tensor_semantics (loopback)");
}
