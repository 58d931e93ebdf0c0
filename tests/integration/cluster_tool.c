/* A cluster node for the multi-process tests (tests/scripts/cluster_test.sh,
 * nvml_real_test.sh). It creates a context with the GENIE_* environment
 * (master address and port, heartbeat interval and timeout, ...) and runs
 * one scenario:
 *
 *   watch SECONDS   subscribe to every event, print "ready", then one line
 *                   per event: "EVENT <ms since ready> <TYPE> <json>", for
 *                   SECONDS seconds (or until SIGTERM)
 *   state           print the cluster state JSON on one line
 *   gpus            print "gpus N" (N GPUs the monitor sees)
 *
 * Exit status: 0 on success, 3 when a Genie call fails (its status name and
 * detail on stdout and stderr), 2 on bad usage. */
#include <genie.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double g_t0;
static volatile sig_atomic_t g_stop;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int failed(const char *what, genie_status_t st) {
  fprintf(stderr, "cluster_tool: %s: %s: %s\n", what, genie_status_str(st), genie_last_error());
  printf("%s %s\n", genie_status_str(st), genie_last_error());
  fflush(stdout);
  return 3;
}

static const char *type_name(genie_event_type_t t) {
  switch (t) {
    case GENIE_EVENT_NODE_JOINED: return "NODE_JOINED";
    case GENIE_EVENT_NODE_LOST: return "NODE_LOST";
    case GENIE_EVENT_NODE_RECOVERED: return "NODE_RECOVERED";
    case GENIE_EVENT_GPU_AVAILABLE: return "GPU_AVAILABLE";
    case GENIE_EVENT_GPU_UNAVAILABLE: return "GPU_UNAVAILABLE";
    case GENIE_EVENT_GPU_OVERHEATED: return "GPU_OVERHEATED";
    case GENIE_EVENT_HEALTH_CHANGED: return "HEALTH_CHANGED";
    case GENIE_EVENT_BACKEND_SELECTED: return "BACKEND_SELECTED";
    default: return "?";
  }
}

static void on_event(genie_event_type_t type, const char *json, void *user) {
  (void)user;
  printf("EVENT %.0f %s %s\n", now_ms() - g_t0, type_name(type), json);
  fflush(stdout);
}

static void on_term(int sig) {
  (void)sig;
  g_stop = 1;
}

int main(int argc, char **argv) {
  genie_context_t *ctx = NULL;
  genie_status_t st;
  int rc = 0;
  if (argc < 2) {
    fprintf(stderr, "usage: cluster_tool watch SECONDS | state | gpus\n");
    return 2;
  }
  st = genie_init(NULL, &ctx);
  if (st != GENIE_OK) return failed("genie_init", st);
  if (!strcmp(argv[1], "watch") && argc == 3) {
    const double secs = atof(argv[2]);
    signal(SIGTERM, on_term);
    g_t0 = now_ms();
    st = genie_subscribe(ctx, GENIE_EVENT_ALL, on_event, NULL, NULL);
    if (st != GENIE_OK) {
      rc = failed("genie_subscribe", st);
    } else {
      printf("ready\n");
      fflush(stdout);
      while (!g_stop && now_ms() - g_t0 < secs * 1e3) usleep(10000);
    }
  } else if (!strcmp(argv[1], "state") || !strcmp(argv[1], "gpus")) {
    char *json = NULL;
    st = genie_cluster_state(ctx, &json);
    if (st != GENIE_OK) {
      rc = failed("genie_cluster_state", st);
    } else if (!strcmp(argv[1], "state")) {
      printf("%s\n", json);
    } else {
      const char *g = strstr(json, "\"gpus\":{\"available\":");
      const char *c = g ? strstr(g, "\"count\":") : NULL;
      printf("gpus %d\n", c ? atoi(c + 8) : -1);
    }
    genie_free(json);
  } else {
    fprintf(stderr, "cluster_tool: unknown scenario '%s'\n", argv[1]);
    rc = 2;
  }
  genie_shutdown(ctx);
  return rc;
}
