/*
 * genie_linkemu — a link emulator over TUN devices, for benchmarks across
 * emulated datacenter links (bench/links/run.sh). This kernel has no netem,
 * so the delay is added here, in user space: every IP packet the kernel
 * routes into one TUN device is read, held for the one-way delay, and
 * written into the device it is for, in order. The rate limit is the
 * kernel's (tc tbf on each TUN device, set by run.sh: each namespace's
 * sending is limited, as a NIC's is); --rate adds a serialisation delay here
 * as well, per receiving device (a packet leaves no earlier than the
 * previous one for that device plus its size at the rate, as a switch's
 * egress port would), off by default.
 *
 * Two modes:
 *   point to point: --ns-a NS --dev-a NAME --ns-b NS --dev-b NAME
 *     what one device reads goes to the other;
 *   hub: --port NS,NAME,ADDR (two to eight times)
 *     a star of devices, one per namespace, as hosts on one switch: a
 *     packet read from any device goes to the device whose ADDR (IPv4) is
 *     its destination address; one for no port is dropped (counted).
 * and for both: --delay-us N [--rate-mbit N] [--seconds N] [--queue N]
 *
 * Each device is created in its network namespace (/var/run/netns/NS, as
 * `ip netns add` makes them) and exists while this runs; run.sh gives them
 * addresses. Bounded: it exits by itself after --seconds (default 600), on
 * SIGINT/SIGTERM, or when a device goes away. A queue of --queue packets
 * per receiving device (default 4096) drops beyond it, as a switch buffer
 * would. Prints the packets and bytes delivered to each device, dropped,
 * and the largest lateness of a release (how far behind the wanted delay it
 * ran) on exit. Between releases it sleeps in ppoll (nanosecond timer), not
 * spinning. Root only (CAP_SYS_ADMIN for setns, CAP_NET_ADMIN for TUN).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
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
#define MAX_PORTS 8

typedef struct pkt {
  uint64_t release_ns;
  uint32_t len;
} pkt_t;

/* One device and the queue of packets on their way to it. */
typedef struct port {
  const char *ns, *dev;
  uint32_t addr; /* hub mode: its IPv4 address, network order */
  int fd;
  pkt_t *q;
  uint8_t *data;
  uint32_t head, count, cap;
  uint64_t last_tx_ns; /* --rate: when the previous packet for it finished serialising */
  uint64_t packets, bytes, drops, max_late_ns;
} port_t;

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

/* --port NS,NAME,ADDR: splits `v` (kept: argv) into the port's fields. */
static int parse_port(char *v, port_t *p) {
  char *c1 = strchr(v, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
  unsigned a, b, c, d;
  char extra;
  if (!c1 || !c2 || c1 == v || c2 == c1 + 1) return -1;
  *c1 = *c2 = '\0';
  if (sscanf(c2 + 1, "%u.%u.%u.%u%c", &a, &b, &c, &d, &extra) != 4 || a > 255 || b > 255 || c > 255 ||
      d > 255)
    return -1;
  p->ns = v;
  p->dev = c1 + 1;
  p->addr = htonl((a << 24) | (b << 16) | (c << 8) | d);
  return 0;
}

/* The port a packet read from port `from` goes to, or -1 (dropped). */
static int route(const port_t *ports, int n, int hub, int from, const uint8_t *pkt, ssize_t len) {
  uint32_t dst;
  int i;
  if (!hub) return 1 - from;
  if (len < 20 || (pkt[0] >> 4) != 4) return -1; /* IPv4 only (run.sh gives no IPv6 addresses) */
  memcpy(&dst, pkt + 16, 4);
  for (i = 0; i < n; ++i)
    if (ports[i].addr == dst && i != from) return i;
  return -1;
}

/* Reads every packet waiting on port `from` into the queues of the ports
 * they are for. Returns -1 when the device is gone. */
static int take(port_t *ports, int n, int hub, int from, uint64_t delay_ns, uint64_t ns_per_kbit,
                uint64_t *unroutable) {
  for (;;) {
    uint8_t buf[SLOT_BYTES];
    const ssize_t len = read(ports[from].fd, buf, SLOT_BYTES);
    port_t *to;
    uint32_t slot;
    uint64_t t;
    int dst;
    if (len < 0) {
      if (errno == EAGAIN || errno == EINTR) return 0;
      return -1;
    }
    if (len == 0) return -1;
    dst = route(ports, n, hub, from, buf, len);
    if (dst < 0) {
      ++*unroutable;
      continue;
    }
    to = &ports[dst];
    if (to->count == to->cap) {
      ++to->drops;
      continue;
    }
    slot = (to->head + to->count) % to->cap;
    memcpy(to->data + (size_t)slot * SLOT_BYTES, buf, (size_t)len);
    t = now_ns();
    if (ns_per_kbit) {
      const uint64_t start = to->last_tx_ns > t ? to->last_tx_ns : t;
      to->last_tx_ns = start + (uint64_t)len * 8 * ns_per_kbit / 1000;
      t = to->last_tx_ns;
    }
    to->q[slot].release_ns = t + delay_ns;
    to->q[slot].len = (uint32_t)len;
    ++to->count;
  }
}

/* Writes every packet for port p whose time has come; returns the next
 * release time (0: queue empty). */
static uint64_t give(port_t *p) {
  while (p->count) {
    pkt_t *k = &p->q[p->head];
    const uint64_t t = now_ns();
    if (k->release_ns > t) return k->release_ns;
    if (t - k->release_ns > p->max_late_ns) p->max_late_ns = t - k->release_ns;
    if (write(p->fd, p->data + (size_t)p->head * SLOT_BYTES, k->len) < 0 && errno == EAGAIN) return t;
    ++p->packets;
    p->bytes += k->len;
    p->head = (p->head + 1) % p->cap;
    --p->count;
  }
  return 0;
}

static void usage(const char *argv0) {
  fprintf(stderr,
          "usage: %s --ns-a NS --dev-a NAME --ns-b NS --dev-b NAME --delay-us N [--rate-mbit N] "
          "[--seconds N] [--queue N]\n"
          "       %s --port NS,NAME,ADDR --port NS,NAME,ADDR [--port ...] --delay-us N [--rate-mbit N] "
          "[--seconds N] [--queue N]\n",
          argv0, argv0);
}

int main(int argc, char **argv) {
  port_t ports[MAX_PORTS];
  struct pollfd pfd[MAX_PORTS];
  long delay_us = -1, rate_mbit = 0, seconds = 600, queue = 4096;
  uint64_t ns_per_kbit = 0, deadline, unroutable = 0;
  int n = 0, hub = 0, pair = 0, i;
  memset(ports, 0, sizeof ports);
  for (i = 1; i + 1 < argc; i += 2) {
    const char *f = argv[i];
    char *v = argv[i + 1];
    if (!strcmp(f, "--ns-a"))
      ports[0].ns = v, pair |= 1;
    else if (!strcmp(f, "--dev-a"))
      ports[0].dev = v, pair |= 2;
    else if (!strcmp(f, "--ns-b"))
      ports[1].ns = v, pair |= 4;
    else if (!strcmp(f, "--dev-b"))
      ports[1].dev = v, pair |= 8;
    else if (!strcmp(f, "--port")) {
      if (n == MAX_PORTS || parse_port(v, &ports[n]) != 0) {
        fprintf(stderr, "genie_linkemu: --port needs NS,NAME,A.B.C.D (at most %d), got '%s'\n", MAX_PORTS, v);
        return 2;
      }
      ++n, hub = 1;
    } else if (!strcmp(f, "--delay-us"))
      delay_us = arg_long(f, v, 0, 1000000);
    else if (!strcmp(f, "--rate-mbit")) rate_mbit = arg_long(f, v, 0, 1000000);
    else if (!strcmp(f, "--seconds")) seconds = arg_long(f, v, 1, 86400);
    else if (!strcmp(f, "--queue")) queue = arg_long(f, v, 16, 65536);
    else break;
  }
  if (!hub && pair == 15) n = 2;
  if (i != argc || delay_us < 0 || (hub && (pair || n < 2)) || (!hub && pair != 15)) {
    usage(argv[0]);
    return 2;
  }
  if (rate_mbit) ns_per_kbit = (uint64_t)(1000000 / rate_mbit); /* ns to send 1000 bits */
  for (i = 0; i < n; ++i) {
    ports[i].fd = open_tun(ports[i].ns, ports[i].dev);
    ports[i].cap = (uint32_t)queue;
    ports[i].q = calloc((size_t)queue, sizeof(pkt_t));
    ports[i].data = malloc((size_t)queue * SLOT_BYTES);
    if (!ports[i].q || !ports[i].data) die("queue");
    pfd[i].fd = ports[i].fd;
    pfd[i].events = POLLIN;
  }
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  printf("genie_linkemu: %s of %d devices:", hub ? "hub" : "point to point", n);
  for (i = 0; i < n; ++i) printf(" %s/%s", ports[i].ns, ports[i].dev);
  printf("; one-way delay %ld us, rate %s%ld Mbit/s, for at most %ld s\n", delay_us,
         rate_mbit ? "" : "unlimited here (tc) ", rate_mbit, seconds);
  fflush(stdout);
  deadline = now_ns() + (uint64_t)seconds * 1000000000ull;
  while (!g_stop && now_ns() < deadline) {
    uint64_t next = 0, t;
    for (i = 0; i < n; ++i)
      if (take(ports, n, hub, i, (uint64_t)delay_us * 1000, ns_per_kbit, &unroutable) < 0) g_stop = 1;
    for (i = 0; i < n; ++i) {
      const uint64_t r = give(&ports[i]);
      if (r && (!next || r < next)) next = r;
    }
    for (i = 0; i < n; ++i) pfd[i].revents = 0;
    if (next == 0) {
      /* Nothing in flight: sleep until a packet arrives. */
      if (poll(pfd, (nfds_t)n, 100) < 0 && errno != EINTR) die("poll");
      continue;
    }
    t = now_ns();
    if (next > t) {
      /* Sleep until the next release or a new packet (ppoll's timer has
       * nanosecond resolution). Not a spin: on a machine with few cores the
       * client and servers need the CPU more than this loop does. */
      struct timespec ts;
      ts.tv_sec = (time_t)((next - t) / 1000000000ull);
      ts.tv_nsec = (long)((next - t) % 1000000000ull);
      if (ppoll(pfd, (nfds_t)n, &ts, NULL) < 0 && errno != EINTR) die("ppoll");
    }
  }
  for (i = 0; i < n; ++i)
    printf("genie_linkemu: to %s/%s: %llu packets, %llu bytes, %llu dropped, latest release %.1f us late\n",
           ports[i].ns, ports[i].dev, (unsigned long long)ports[i].packets,
           (unsigned long long)ports[i].bytes, (unsigned long long)ports[i].drops,
           (double)ports[i].max_late_ns / 1000.0);
  if (hub) printf("genie_linkemu: %llu packets for no port dropped\n", (unsigned long long)unroutable);
  for (i = 0; i < n; ++i) {
    free(ports[i].q);
    free(ports[i].data);
    close(ports[i].fd);
  }
  return 0;
}
