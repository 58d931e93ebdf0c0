/* Cluster API: state, discovery, events and health, in one process.
 *  - GPU events and health driven through the test NVML library
 *    (GENIE_TEST_NVML_LIBRARY, loaded through GENIE_NVML_LIBRARY) whose
 *    metrics file this test rewrites while the context runs;
 *  - subscriptions: BACKEND_SELECTED on subscribe, unsubscribe from inside a
 *    callback, no callback after unsubscribe returns;
 *  - remote mode against an in-process server: the master in the view, its
 *    loss (NODE_LOST) when it stops;
 *  - an unreachable master fails genie_init clearly; an explicit backend
 *    that is not available fails with UNSUPPORTED naming the probe;
 *  - bad input. */
#include <pthread.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static char g_metrics[256];

static void write_metrics(unsigned util, unsigned temp) {
  char tmp[300];
  FILE *f;
  snprintf(tmp, sizeof tmp, "%s.tmp", g_metrics);
  f = fopen(tmp, "w");
  if (!f) {
    perror("metrics file");
    exit(1);
  }
  fprintf(f, "TestGPU-A %u %u 16384 2048\n", util, temp);
  fclose(f);
  rename(tmp, g_metrics); /* atomic: the monitor never reads half a file */
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Events seen by the main subscriber, counted per type bit. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_count[8];
static char g_last_json[8][2048];
static int g_self_unsub_calls;
static uint64_t g_self_sub;
static genie_context_t *g_ctx;
static int g_late_calls;

static int bit_index(genie_event_type_t t) {
  int i;
  for (i = 0; i < 8; ++i)
    if ((uint32_t)t == (1u << i)) return i;
  return -1;
}

static void on_event(genie_event_type_t type, const char *json, void *user) {
  int i = bit_index(type);
  (void)user;
  if (i < 0) return;
  pthread_mutex_lock(&g_mu);
  ++g_count[i];
  snprintf(g_last_json[i], sizeof g_last_json[i], "%s", json);
  pthread_mutex_unlock(&g_mu);
}

static void on_event_self_unsubscribe(genie_event_type_t type, const char *json, void *user) {
  (void)type;
  (void)json;
  (void)user;
  ++g_self_unsub_calls;
  /* From inside the callback: must neither deadlock nor fail. */
  if (genie_unsubscribe(g_ctx, g_self_sub) != GENIE_OK) fprintf(stderr, "self-unsubscribe failed: %s\n", genie_last_error());
}

static void on_event_late(genie_event_type_t type, const char *json, void *user) {
  (void)type;
  (void)json;
  (void)user;
  pthread_mutex_lock(&g_mu);
  ++g_late_calls;
  pthread_mutex_unlock(&g_mu);
}

static int count_of(genie_event_type_t t) {
  int n;
  pthread_mutex_lock(&g_mu);
  n = g_count[bit_index(t)];
  pthread_mutex_unlock(&g_mu);
  return n;
}

/* Waits up to `secs` for more than `before` events of type t. */
static int wait_event(genie_event_type_t t, int before, double secs) {
  const double end = now_s() + secs;
  while (now_s() < end) {
    if (count_of(t) > before) return 1;
    usleep(5000);
  }
  return 0;
}

static int state_has(genie_context_t *ctx, const char *needle) {
  char *json = NULL;
  int found;
  if (genie_cluster_state(ctx, &json) != GENIE_OK) return 0;
  found = strstr(json, needle) != NULL;
  genie_free(json);
  return found;
}

static int wait_state(genie_context_t *ctx, const char *needle, double secs) {
  const double end = now_s() + secs;
  while (now_s() < end) {
    if (state_has(ctx, needle)) return 1;
    usleep(10000);
  }
  return 0;
}

static genie_config_t *fast_config(void) {
  genie_config_t *cfg = NULL;
  REQUIRE_OK(genie_config_create(&cfg));
  REQUIRE_OK(genie_config_set_use_env(cfg, 0));
  REQUIRE_OK(genie_config_set_gpu_poll_interval_ms(cfg, 20));
  REQUIRE_OK(genie_config_set_health_interval_ms(cfg, 20));
  REQUIRE_OK(genie_config_set_heartbeat_interval_ms(cfg, 50));
  REQUIRE_OK(genie_config_set_heartbeat_timeout_ms(cfg, 300));
  REQUIRE_OK(genie_config_set_timeout_ms(cfg, 5000));
  return cfg;
}

static void test_gpu_events_and_health(void) {
  genie_config_t *cfg = fast_config();
  genie_context_t *ctx = NULL;
  uint64_t sub = 0, late = 0;
  int before;
  char *json = NULL;

  write_metrics(50, 40);
  REQUIRE_OK(genie_init(cfg, &ctx));
  g_ctx = ctx;
  CHECK(state_has(ctx, "\"mode\":\"embedded\""));
  CHECK(state_has(ctx, "\"name\":\"TestGPU-A\""));
  CHECK(state_has(ctx, "\"level\":\"HEALTHY\""));
  CHECK(state_has(ctx, "\"name\":\"discovery\""));
  CHECK(state_has(ctx, "\"name\":\"monitoring\""));
  CHECK(state_has(ctx, "\"selected\":\"tcp\""));

  EXPECT_OK(genie_subscribe(ctx, GENIE_EVENT_ALL, on_event, NULL, &sub));
  CHECK(wait_event(GENIE_EVENT_BACKEND_SELECTED, 0, 5));
  CHECK(strstr(g_last_json[7], "\"backend\":\"tcp\"") != NULL);
  EXPECT_OK(genie_subscribe(ctx, GENIE_EVENT_GPU_UNAVAILABLE | GENIE_EVENT_GPU_AVAILABLE, on_event_self_unsubscribe,
                            NULL, &g_self_sub));

  before = count_of(GENIE_EVENT_GPU_UNAVAILABLE);
  write_metrics(95, 40);
  CHECK(wait_event(GENIE_EVENT_GPU_UNAVAILABLE, before, 5));
  CHECK(strstr(g_last_json[4], "\"utilization\":95") != NULL);
  CHECK(wait_state(ctx, "\"utilization\":95", 5));

  before = count_of(GENIE_EVENT_GPU_AVAILABLE);
  write_metrics(20, 40);
  CHECK(wait_event(GENIE_EVENT_GPU_AVAILABLE, before, 5));
  /* The self-unsubscribing callback ran once, then never again. */
  CHECK(g_self_unsub_calls == 1);
  EXPECT_STATUS(GENIE_ERR_NOT_FOUND, genie_unsubscribe(ctx, g_self_sub));

  before = count_of(GENIE_EVENT_GPU_OVERHEATED);
  {
    int health_before = count_of(GENIE_EVENT_HEALTH_CHANGED);
    write_metrics(20, 91);
    CHECK(wait_event(GENIE_EVENT_GPU_OVERHEATED, before, 5));
    CHECK(strstr(g_last_json[5], "\"temperature_c\":91") != NULL);
    CHECK(wait_event(GENIE_EVENT_HEALTH_CHANGED, health_before, 5));
    CHECK(strstr(g_last_json[6], "\"to\":\"DEGRADED\"") != NULL);
    CHECK(wait_state(ctx, "\"level\":\"DEGRADED\"", 5));
    CHECK(state_has(ctx, "GPU 0 (TestGPU-A) at 91 C"));
    health_before = count_of(GENIE_EVENT_HEALTH_CHANGED);
    write_metrics(20, 40);
    CHECK(wait_event(GENIE_EVENT_HEALTH_CHANGED, health_before, 5));
    CHECK(strstr(g_last_json[6], "\"to\":\"HEALTHY\"") != NULL);
  }

  /* After unsubscribe returns, the callback never runs again. */
  EXPECT_OK(genie_subscribe(ctx, GENIE_EVENT_GPU_UNAVAILABLE | GENIE_EVENT_GPU_AVAILABLE, on_event_late, NULL, &late));
  before = count_of(GENIE_EVENT_GPU_UNAVAILABLE);
  write_metrics(99, 40);
  CHECK(wait_event(GENIE_EVENT_GPU_UNAVAILABLE, before, 5));
  EXPECT_OK(genie_unsubscribe(ctx, late));
  {
    int calls;
    pthread_mutex_lock(&g_mu);
    calls = g_late_calls;
    pthread_mutex_unlock(&g_mu);
    before = count_of(GENIE_EVENT_GPU_AVAILABLE);
    write_metrics(10, 40);
    CHECK(wait_event(GENIE_EVENT_GPU_AVAILABLE, before, 5));
    pthread_mutex_lock(&g_mu);
    CHECK(g_late_calls == calls);
    pthread_mutex_unlock(&g_mu);
  }

  /* Bad input. */
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_subscribe(ctx, GENIE_EVENT_ALL, NULL, NULL, NULL));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_subscribe(ctx, 0, on_event, NULL, NULL));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_subscribe(ctx, 0x100u, on_event, NULL, NULL));
  EXPECT_DETAIL("outside GENIE_EVENT_ALL");
  EXPECT_STATUS(GENIE_ERR_NOT_FOUND, genie_unsubscribe(ctx, 987654321u));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_cluster_state(ctx, NULL));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_cluster_state(NULL, &json));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_subscribe(NULL, GENIE_EVENT_ALL, on_event, NULL, NULL));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_unsubscribe(NULL, sub));

  genie_shutdown(ctx);
  g_ctx = NULL;
  genie_config_destroy(cfg);
}

static void test_config_and_discovery(void) {
  genie_config_t *cfg = NULL;
  genie_context_t *ctx = NULL;
  char *json = NULL;
  REQUIRE_OK(genie_config_create(&cfg));
  REQUIRE_OK(genie_config_set_use_env(cfg, 0));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_heartbeat_interval_ms(cfg, 0));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_heartbeat_timeout_ms(cfg, -5));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_gpu_poll_interval_ms(cfg, 9));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_config_set_health_interval_ms(cfg, 86400001));
  EXPECT_STATUS(GENIE_ERR_INVALID_HANDLE, genie_config_set_dpdk_probe(NULL, 1));
  /* A timeout below the interval would mark every node lost. */
  REQUIRE_OK(genie_config_set_heartbeat_interval_ms(cfg, 1000));
  REQUIRE_OK(genie_config_set_heartbeat_timeout_ms(cfg, 500));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_init(cfg, &ctx));
  EXPECT_DETAIL("below the heartbeat interval");
  REQUIRE_OK(genie_config_set_heartbeat_timeout_ms(cfg, 5000));

  /* An explicit backend that is not there fails clearly. */
  REQUIRE_OK(genie_config_set_backend(cfg, GENIE_BACKEND_RDMA));
  EXPECT_STATUS(GENIE_ERR_UNSUPPORTED, genie_init(cfg, &ctx));
  EXPECT_DETAIL("backend rdma was requested but is not available");
  EXPECT_DETAIL("transport not built");
  CHECK(ctx == NULL);
  REQUIRE_OK(genie_config_set_backend(cfg, GENIE_BACKEND_AUTO));

  /* Discovery without a host: every probe reported, tcp selected. */
  REQUIRE_OK(genie_config_set_dpdk_probe(cfg, 0));
  EXPECT_OK(genie_discover(cfg, NULL, 0, &json));
  if (json) {
    CHECK(strstr(json, "\"rdma\":{\"available\":") != NULL);
    CHECK(strstr(json, "\"dpdk\":{") != NULL);
    CHECK(strstr(json, "\"available\":false,\"probed\":false,\"eal_initialised\":false") != NULL);
    CHECK(strstr(json, "\"selected\":\"tcp\"") != NULL);
    CHECK(strstr(json, "\"tcp\":null") != NULL);
    genie_free(json);
    json = NULL;
  }
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_discover(cfg, "127.0.0.1", 0, &json));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_discover(cfg, "", 80, &json));
  EXPECT_STATUS(GENIE_ERR_INVALID_ARGUMENT, genie_discover(cfg, NULL, 0, NULL));
  CHECK(json == NULL);
  genie_config_destroy(cfg);
}

/* A TCP port nothing listens on. */
static int closed_port(void) {
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  int port, s = socket(AF_INET, SOCK_STREAM, 0);
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 || getsockname(s, (struct sockaddr *)&a, &len) != 0) exit(1);
  port = ntohs(a.sin_port);
  close(s);
  return port;
}

static void test_remote(void) {
  genie_config_t *scfg = fast_config(), *cfg = fast_config();
  genie_server_t *server = NULL;
  genie_context_t *ctx = NULL;
  int32_t port = 0;
  char *json = NULL;
  double t0;
  int lost;

  REQUIRE_OK(genie_config_set_node_id(scfg, "master-under-test"));
  REQUIRE_OK(genie_server_create(scfg, "127.0.0.1", 0, &server));
  REQUIRE_OK(genie_server_port(server, &port));

  /* Discovery of the server: reachable, its backends, an RTT. */
  REQUIRE_OK(genie_config_set_dpdk_probe(cfg, 0));
  EXPECT_OK(genie_discover(cfg, "127.0.0.1", port, &json));
  if (json) {
    CHECK(strstr(json, "\"reachable\":true") != NULL);
    CHECK(strstr(json, "\"server_node_id\":\"master-under-test\"") != NULL);
    CHECK(strstr(json, "\"server\":[") != NULL);
    CHECK(strstr(json, "\"rounds\":5") != NULL);
    genie_free(json);
    json = NULL;
  }

  REQUIRE_OK(genie_config_set_master_addr(cfg, "127.0.0.1"));
  REQUIRE_OK(genie_config_set_master_port(cfg, port));
  REQUIRE_OK(genie_config_set_node_id(cfg, "client-under-test"));
  REQUIRE_OK(genie_init(cfg, &ctx));
  /* The first heartbeat is answered before genie_init returns. */
  CHECK(state_has(ctx, "\"mode\":\"remote\""));
  CHECK(state_has(ctx, "\"id\":\"master-under-test\""));
  CHECK(state_has(ctx, "\"role\":\"server\""));
  CHECK(state_has(ctx, "\"name\":\"master_connection\""));
  CHECK(state_has(ctx, "\"session\":\"connected\""));
  CHECK(wait_state(ctx, "\"heartbeat_replies\":3", 5));
  EXPECT_OK(genie_subscribe(ctx, GENIE_EVENT_NODE_LOST | GENIE_EVENT_NODE_JOINED, on_event, NULL, NULL));
  lost = count_of(GENIE_EVENT_NODE_LOST);
  t0 = now_s();
  genie_server_destroy(server);
  CHECK(wait_event(GENIE_EVENT_NODE_LOST, lost, 10));
  printf("NODE_LOST %.0f ms after the server stopped (timeout 300 ms, interval 50 ms)\n", (now_s() - t0) * 1e3);
  CHECK(strstr(g_last_json[1], "\"id\":\"master-under-test\"") != NULL);
  CHECK(wait_state(ctx, "\"level\":\"CRITICAL\"", 5));
  genie_shutdown(ctx);
  ctx = NULL;

  /* An unreachable master: a clear error, no context. */
  REQUIRE_OK(genie_config_set_master_port(cfg, closed_port()));
  t0 = now_s();
  EXPECT_STATUS(GENIE_ERR_CONNECTION, genie_init(cfg, &ctx));
  EXPECT_DETAIL("unreachable");
  CHECK(ctx == NULL);
  CHECK(now_s() - t0 < 5.0);
  genie_config_destroy(cfg);
  genie_config_destroy(scfg);
}

int main(void) {
  const char *lib = getenv("GENIE_TEST_NVML_LIBRARY");
  if (!lib || !*lib) {
    printf("skip: GENIE_TEST_NVML_LIBRARY is not set (run through ctest)\n");
    return 77;
  }
  snprintf(g_metrics, sizeof g_metrics, "/tmp/genie-cluster-test-%d.metrics", (int)getpid());
  setenv("GENIE_NVML_LIBRARY", lib, 1);
  setenv("GENIE_TEST_NVML_FILE", g_metrics, 1);
  write_metrics(50, 40);
  test_config_and_discovery();
  test_gpu_events_and_health();
  test_remote();
  unlink(g_metrics);
  return test_summary("cluster_test");
}
