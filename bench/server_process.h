/* A `genie serve` server in a child process, for benchmarks whose client and
 * server must not share a process (their threads then compete as they would
 * between two programs). Fork it before the parent starts any thread.
 *
 * bsp_start forks; the child creates the server (genie_server_create, the
 * code behind `genie serve`) on 127.0.0.1 with `num_threads` executor
 * threads (0: the default), reports the bound port through a pipe and runs
 * until the parent calls bsp_stop (or exits). Exits the benchmark on
 * failure. bsp_start_metrics does the same with its Prometheus metrics
 * served on a free loopback port (recording on), for A/B runs. */
#ifndef GENIE_BENCH_SERVER_PROCESS_H
#define GENIE_BENCH_SERVER_PROCESS_H

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"

typedef struct bsp_server {
  pid_t pid;
  int32_t port;
  int stop_fd; /* parent's end: closing it stops the child */
} bsp_server_t;

static inline bsp_server_t bsp_start_metrics(int num_threads, int metrics) {
  bsp_server_t s;
  int port_pipe[2], stop_pipe[2];
  if (pipe(port_pipe) != 0 || pipe(stop_pipe) != 0) {
    perror("server process: pipe");
    exit(1);
  }
  s.pid = fork();
  if (s.pid < 0) {
    perror("server process: fork");
    exit(1);
  }
  if (s.pid == 0) {
    genie_config_t *cfg = NULL;
    genie_server_t *server = NULL;
    int32_t port = 0;
    char c;
    close(port_pipe[0]);
    close(stop_pipe[1]);
    if (genie_config_create(&cfg) != GENIE_OK || genie_config_set_use_env(cfg, 0) != GENIE_OK ||
        (num_threads > 0 && genie_config_set_num_threads(cfg, num_threads) != GENIE_OK) ||
        (metrics && genie_config_set_metrics_port(cfg, 0) != GENIE_OK) ||
        genie_server_create(cfg, "127.0.0.1", 0, &server) != GENIE_OK ||
        genie_server_port(server, &port) != GENIE_OK) {
      fprintf(stderr, "server process: %s\n", genie_last_error());
      _exit(1);
    }
    genie_config_destroy(cfg);
    if (write(port_pipe[1], &port, sizeof port) != (ssize_t)sizeof port) _exit(1);
    while (read(stop_pipe[0], &c, 1) > 0) {
    }
    genie_server_destroy(server);
    _exit(0);
  }
  close(port_pipe[1]);
  close(stop_pipe[0]);
  s.stop_fd = stop_pipe[1];
  if (read(port_pipe[0], &s.port, sizeof s.port) != (ssize_t)sizeof s.port) {
    fprintf(stderr, "server process: did not start\n");
    exit(1);
  }
  close(port_pipe[0]);
  return s;
}

static inline bsp_server_t bsp_start(int num_threads) { return bsp_start_metrics(num_threads, 0); }

static inline void bsp_stop(bsp_server_t *s) {
  close(s->stop_fd);
  waitpid(s->pid, NULL, 0);
}

#endif
