/*
 * genie_linkemu — a point-to-point link emulator over two TUN devices, for
 * benchmarks across emulated datacenter links (bench/links/run.sh). This
 * kernel has no netem, so the delay is added here, in user space: every IP
 * packet the kernel routes into one TUN device is read, held for the
 * one-way delay, and written into the other, in order. The rate limit is
 * the kernel's (tc tbf on each TUN device, set by run.sh); --rate adds a
 * serialisation delay here as well (a packet leaves no earlier than the
 * previous one plus its size at the rate), off by default.
 *
 *   genie_linkemu --ns-a NS --dev-a NAME --ns-b NS --dev-b NAME
 *                 --delay-us N [--rate-mbit N] [--seconds N] [--queue N]
 *
 * Each device is created in its network namespace (/var/run/netns/NS, as
 * `ip netns add` makes them) and exists while this runs; run.sh gives them
 * addresses. Bounded: it exits by itself after --seconds (default 600), on
 * SIGINT/SIGTERM, or when either device goes away. A queue of --queue
 * packets per direction (default 4096) drops beyond it, as a switch buffer
 * would. Prints the packets and bytes carried, dropped, and the largest
 * lateness of a release (how far behind the wanted delay it ran) on exit.
 * Between releases it sleeps in ppoll (nanosecond timer), not spinning.
 * Root only (CAP_SYS_ADMIN for setns, CAP_NET_ADMIN for TUN).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define SLOT_BYTES 16384 /* above the largest MTU run.sh sets (9000) */

typedef struct pkt {
  uint64_t release_ns;
  uint32_t len;
} pkt_t;

typedef struct dir {
  int in, out;
  pkt_t *q;
  uint8_t *data;
  uint32_t head, count, cap;
  uint64_t last_tx_ns; /* --rate: when the previous packet finished serialising */
  uint64_t packets, bytes, drops, max_late_ns;
} dir_t;

static volatile sig_atomic_t g_stop = 0;
static void on_signal(int sig) {
  (void)sig;
  g_stop = 1;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what) {
  fprintf(stderr, "genie_linkemu: %s: %s\n", what, strerror(errno));
  exit(1);
}

/* A TUN device named `name` in network namespace `ns`. */
static int open_tun(const char *ns, const char *name) {
  char path[512];
  struct ifreq ifr;
  int nsfd, fd;
  snprintf(path, sizeof path, "/var/run/netns/%s", ns);
  nsfd = open(path, O_RDONLY | O_CLOEXEC);
  if (nsfd < 0) die(path);
  if (setns(nsfd, CLONE_NEWNET) != 0) die("setns");
  close(nsfd);
  fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) die("/dev/net/tun");
  memset(&ifr, 0, sizeof ifr);
  ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
  snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
  if (ioctl(fd, TUNSETIFF, &ifr) != 0) die("TUNSETIFF");
  return fd;
}

static long arg_long(const char *flag, const char *v, long lo, long hi) {
  char *end = NULL;
  long x;
  errno = 0;
  x = strtol(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi) {
    fprintf(stderr, "genie_linkemu: %s needs an integer in %ld..%ld, got '%s'\n", flag, lo, hi, v);
    exit(2);
  }
  return x;
}

/* Reads every packet waiting on d->in into the queue. Returns -1 when the
 * device is gone. */
static int take(dir_t *d, uint64_t delay_ns, uint64_t ns_per_kbit) {
  for (;;) {
    uint8_t scratch[SLOT_BYTES];
    const int full = d->count == d->cap;
    const uint32_t slot = (d->head + d->count) % d->cap;
    uint8_t *buf = full ? scratch : d->data + (size_t)slot * SLOT_BYTES;
    const ssize_t n = read(d->in, buf, SLOT_BYTES);
    uint64_t t;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) return 0;
      return -1;
    }
    if (n == 0) return -1;
    if (full) {
      ++d->drops;
      continue;
    }
    t = now_ns();
    if (ns_per_kbit) {
      const uint64_t start = d->last_tx_ns > t ? d->last_tx_ns : t;
      d->last_tx_ns = start + (uint64_t)n * 8 * ns_per_kbit / 1000;
      t = d->last_tx_ns;
    }
    d->q[slot].release_ns = t + delay_ns;
    d->q[slot].len = (uint32_t)n;
    ++d->count;
  }
}

/* Writes every packet whose time has come; returns the next release time
 * (0: queue empty). */
static uint64_t give(dir_t *d) {
  while (d->count) {
    pkt_t *p = &d->q[d->head];
    const uint64_t t = now_ns();
    if (p->release_ns > t) return p->release_ns;
    if (t - p->release_ns > d->max_late_ns) d->max_late_ns = t - p->release_ns;
    if (write(d->out, d->data + (size_t)d->head * SLOT_BYTES, p->len) < 0 && errno == EAGAIN) return t;
    ++d->packets;
    d->bytes += p->len;
    d->head = (d->head + 1) % d->cap;
    --d->count;
  }
  return 0;
}

int main(int argc, char **argv) {
  const char *ns_a = NULL, *dev_a = NULL, *ns_b = NULL, *dev_b = NULL;
  long delay_us = -1, rate_mbit = 0, seconds = 600, queue = 4096;
  uint64_t ns_per_kbit = 0, deadline;
  dir_t d[2];
  int fa, fb, i;
  for (i = 1; i + 1 < argc; i += 2) {
    const char *f = argv[i], *v = argv[i + 1];
    if (!strcmp(f, "--ns-a")) ns_a = v;
    else if (!strcmp(f, "--dev-a")) dev_a = v;
    else if (!strcmp(f, "--ns-b")) ns_b = v;
    else if (!strcmp(f, "--dev-b")) dev_b = v;
    else if (!strcmp(f, "--delay-us")) delay_us = arg_long(f, v, 0, 1000000);
    else if (!strcmp(f, "--rate-mbit")) rate_mbit = arg_long(f, v, 0, 1000000);
    else if (!strcmp(f, "--seconds")) seconds = arg_long(f, v, 1, 86400);
    else if (!strcmp(f, "--queue")) queue = arg_long(f, v, 16, 65536);
    else break;
  }
  if (i != argc || !ns_a || !dev_a || !ns_b || !dev_b || delay_us < 0) {
    fprintf(stderr,
            "usage: %s --ns-a NS --dev-a NAME --ns-b NS --dev-b NAME --delay-us N [--rate-mbit N] "
            "[--seconds N] [--queue N]\n",
            argv[0]);
    return 2;
  }
  if (rate_mbit) ns_per_kbit = (uint64_t)(1000000 / rate_mbit); /* ns to send 1000 bits */
  fa = open_tun(ns_a, dev_a);
  fb = open_tun(ns_b, dev_b);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  memset(d, 0, sizeof d);
  for (i = 0; i < 2; ++i) {
    d[i].cap = (uint32_t)queue;
    d[i].q = calloc((size_t)queue, sizeof(pkt_t));
    d[i].data = malloc((size_t)queue * SLOT_BYTES);
    if (!d[i].q || !d[i].data) die("queue");
  }
  d[0].in = fa, d[0].out = fb;
  d[1].in = fb, d[1].out = fa;
  printf("genie_linkemu: %s/%s <-> %s/%s, one-way delay %ld us, rate %s%ld Mbit/s, for at most %ld s\n", ns_a,
         dev_a, ns_b, dev_b, delay_us, rate_mbit ? "" : "unlimited here (tc) ", rate_mbit, seconds);
  fflush(stdout);
  deadline = now_ns() + (uint64_t)seconds * 1000000000ull;
  while (!g_stop && now_ns() < deadline) {
    uint64_t next = 0, t;
    for (i = 0; i < 2; ++i) {
      uint64_t r;
      if (take(&d[i], (uint64_t)delay_us * 1000, ns_per_kbit) < 0) g_stop = 1;
      r = give(&d[i]);
      if (r && (!next || r < next)) next = r;
    }
    if (next == 0) {
      /* Nothing in flight: sleep until a packet arrives. */
      struct pollfd p[2] = {{fa, POLLIN, 0}, {fb, POLLIN, 0}};
      if (poll(p, 2, 100) < 0 && errno != EINTR) die("poll");
      continue;
    }
    t = now_ns();
    if (next > t) {
      /* Sleep until the next release or a new packet (ppoll's timer has
       * nanosecond resolution). Not a spin: on a machine with few cores the
       * client and server need the CPU more than this loop does. */
      struct pollfd p[2] = {{fa, POLLIN, 0}, {fb, POLLIN, 0}};
      struct timespec ts;
      ts.tv_sec = (time_t)((next - t) / 1000000000ull);
      ts.tv_nsec = (long)((next - t) % 1000000000ull);
      if (ppoll(p, 2, &ts, NULL) < 0 && errno != EINTR) die("ppoll");
    }
  }
  for (i = 0; i < 2; ++i)
    printf("genie_linkemu: %s -> %s: %llu packets, %llu bytes, %llu dropped, latest release %.1f us late\n",
           i ? dev_b : dev_a, i ? dev_a : dev_b, (unsigned long long)d[i].packets, (unsigned long long)d[i].bytes,
           (unsigned long long)d[i].drops, (double)d[i].max_late_ns / 1000.0);
  for (i = 0; i < 2; ++i) {
    free(d[i].q);
    free(d[i].data);
  }
  close(fa);
  close(fb);
  return 0;
}
