// Remote tensor write and read throughput over loopback, 4 KiB ... 1 GiB,
// beside iperf3 on loopback and memcpy of the same size, measured in the
// same run (interleaved rounds: iperf3, then every size). Goals
// (docs/benchmarks.md, "Control path"): >= 0.9 x iperf3 from 1 MiB to
// 1 GiB, >= 0.5 x at 64 KiB.
//
// Writes are timed twice per size: right after the previous size's reads,
// then as a stream of at least 256 MiB right after those writes ("in a
// stream", one direction, as iperf3 sends). On some hosts a write that
// follows a read runs at a fraction of the speed of one that follows a
// write, in any TCP program (docs/benchmarks.md, "A write after a read").
//
// Beside them, the same calls over a plain TCP connection between two
// processes (raw TCP write/read, and Genie's figure per raw one): the
// host's own TCP under the same pattern of calls.
//
// Genie side: a `genie serve` server in a child process
// (genie_server_create) and a remote context; genie_tensor_write/read of
// one resident tensor on "remote:0". Bytes go from the caller's buffer to
// the socket and from the socket into tensor memory without intermediate
// copies.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.h"
#include "raw_tcp.h"
#include "server_process.h"

namespace {

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), len);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// One iperf3 measurement (single stream, `seconds` long) in Gbit/s; < 0 if
// iperf3 is missing or failed.
//
// The iperf3 server is started with posix_spawnp, not fork(): a fork of
// this process write-protects every page it has touched (the 1 GiB transfer
// buffer among them) until the child execs, and each later write to such a
// page takes a fault. The next reads into the buffer then paid a fault per
// 4 KiB page that no program reading tensors pays (it halved reads of 64 MiB
// and more, and not writes, which only read the buffer; the memcpy column
// paid it too). glibc's popen spawns the same way.
double iperf3_gbps(int seconds) {
  const int port = free_port();
  const std::string port_arg = std::to_string(port);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  const char* argv[] = {"iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", port_arg.c_str(), nullptr};
  pid_t srv = -1;
  const int rc = ::posix_spawnp(&srv, "iperf3", &fa, nullptr, const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  ::usleep(300000);  // let the server listen
  char cmd[256];
  // iperf3 takes whole seconds (-t 0 would mean "forever").
  std::snprintf(cmd, sizeof cmd, "iperf3 -c 127.0.0.1 -p %d -t %d -f g 2>/dev/null", port, seconds);
  FILE* p = ::popen(cmd, "r");
  double gbps = -1;
  if (p) {
    char line[512];
    while (std::fgets(line, sizeof line, p)) {
      double v;
      // The receiver summary line: "... <v> Gbits/sec ... receiver"
      if (std::strstr(line, "receiver") && std::sscanf(std::strstr(line, "Bytes") + 5, "%lf", &v) == 1) gbps = v;
    }
    ::pclose(p);
  }
  ::kill(srv, SIGTERM);
  ::waitpid(srv, nullptr, 0);
  return gbps;
}

// The same calls over one plain TCP connection to a child process: a
// write sends a 9-byte request (op, length) and the bytes, and waits for a
// 1-byte reply once the peer has them all in its buffer; a read sends the
// request and receives the bytes. Both ends use the socket buffers of
// Genie's data connections between processes on one host (256 KiB,
// dataplane/tcp/socket_buffers.hpp), which carry its transfers above
// 1 MiB (smaller ones take the client's direct link, whose buffers
// differ). Run in the same order as Genie's calls (each size's writes
// right after the previous size's reads), it tells what of a figure
// belongs to the host's TCP rather than to Genie.
class RawTransfer {
 public:
  explicit RawTransfer(size_t max) {
    fd_ = raw_tcp::fork_peer(&child_, [max](int fd) {
      buffers(fd);
      std::vector<char> mem;  // touched as it fills, like a tensor's memory
      char req[9];
      while (raw_tcp::full_io(fd, req, sizeof req, false)) {
        uint64_t n;
        std::memcpy(&n, req + 1, 8);
        if (n > max) return;
        if (mem.size() < n) mem.resize(n);
        if (req[0] == 'w') {
          char ok = 1;
          if (!raw_tcp::full_io(fd, mem.data(), n, false) || !raw_tcp::full_io(fd, &ok, 1, true)) return;
        } else if (!raw_tcp::full_io(fd, mem.data(), n, true)) {
          return;
        }
      }
    });
    buffers(fd_);
  }
  ~RawTransfer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    ::waitpid(child_, nullptr, 0);
  }
  // The request and the bytes in one sendmsg, as Genie writes a frame.
  void write(char* buf, size_t n) {
    char req[9], ok;
    encode(req, 'w', n);
    for (size_t done = 0; done < sizeof req + n;) {
      iovec v[2];
      int k = 0;
      if (done < sizeof req) v[k++] = {req + done, sizeof req - done};
      const size_t at = done < sizeof req ? 0 : done - sizeof req;
      v[k++] = {buf + at, n - at};
      msghdr m{};
      m.msg_iov = v;
      m.msg_iovlen = static_cast<size_t>(k);
      const ssize_t r = ::sendmsg(fd_, &m, MSG_NOSIGNAL);
      if (r <= 0) lost();
      done += static_cast<size_t>(r);
    }
    if (!raw_tcp::full_io(fd_, &ok, 1, false)) lost();
  }
  void read(char* buf, size_t n) {
    if (!request('r', n) || !raw_tcp::full_io(fd_, buf, n, false)) lost();
  }

 private:
  static void buffers(int fd) {
    const int bytes = 256 << 10;
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
  }
  static void encode(char req[9], char op, uint64_t n) {
    req[0] = op;
    std::memcpy(req + 1, &n, 8);
  }
  bool request(char op, uint64_t n) {
    char req[9];
    encode(req, op, n);
    return raw_tcp::full_io(fd_, req, sizeof req, true);
  }
  [[noreturn]] static void lost() {
    std::fprintf(stderr, "raw tcp transfer: connection lost\n");
    std::exit(1);
  }
  int fd_ = -1;
  pid_t child_ = -1;
};

}  // namespace

int main(int argc, char** argv) {
  const bu_options_t o = bu_parse_args(argc, argv, " (rounds; default 5, --quick 1)");
  const int rounds = o.iters ? o.iters : (o.quick ? 1 : 5);
  std::vector<size_t> sizes;
  for (size_t s = 4096; s <= (o.quick ? (size_t{1} << 20) : (size_t{1} << 30)); s *= 4) sizes.push_back(s);

  RawTransfer raw(sizes.back());       // forked first: no thread yet, no large buffer touched
  bsp_server_t server = bsp_start(0);  // before this process starts a thread
  genie_config_t* cfg = nullptr;
  genie_context_t* ctx = nullptr;
  bu_check(genie_config_create(&cfg), "genie_config_create");
  bu_check(genie_config_set_use_env(cfg, 0), "genie_config_set_use_env");
  bu_check(genie_config_set_master_addr(cfg, "127.0.0.1"), "set_master_addr");
  bu_check(genie_config_set_master_port(cfg, server.port), "set_master_port");
  bu_check(genie_config_set_timeout_ms(cfg, 120000), "set_timeout_ms");
  bu_check(genie_init(cfg, &ctx), "genie_init (remote)");
  genie_config_destroy(cfg);

  const size_t max = sizes.back();
  std::vector<char> buf(max, 1), copy(max, 2);
  genie_tensor_t* t = nullptr;
  const int64_t shape[1] = {static_cast<int64_t>(max)};
  bu_check(genie_tensor_alloc(ctx, GENIE_DTYPE_BOOL, shape, 1, "remote:0", &t), "genie_tensor_alloc");

  // Per size and round, in this order: Genie writes right after the
  // previous size's reads ("after a read"), more writes right after those
  // ("in a stream": one direction only, as iperf3 sends), Genie reads; then
  // the same three over plain TCP; then memcpy.
  enum Col { kWriteAfterRead, kWriteStream, kRead, kCols };
  const char* const col_name[kCols] = {"write after a read", "write in a stream", "read"};
  const size_t ns = sizes.size();
  std::vector<std::vector<double>> genie(ns * kCols), raw_tcp(ns * kCols), per_iperf(ns * kCols),
      per_raw(ns * kCols), m_gbps(ns);
  std::vector<double> iperf;
  auto timed = [](size_t n, int reps, auto&& call) {
    const double t0 = bu_now_s();
    for (int k = 0; k < reps; ++k) call();
    return 8.0 * static_cast<double>(n) * reps / (bu_now_s() - t0) / 1e9;
  };
  for (int r = 0; r < rounds; ++r) {
    // A busy machine may start the iperf3 server too late for its client.
    double ip = -1;
    for (int attempt = 0; attempt < 3 && ip < 0; ++attempt) ip = iperf3_gbps(o.quick ? 1 : 2);
    if (ip > 0) iperf.push_back(ip);
    for (size_t i = 0; i < ns; ++i) {
      const size_t n = sizes[i];
      // Enough repetitions for ~50 ms per size, at least 1.
      const int reps = static_cast<int>(std::max<size_t>(1, (size_t{64} << 20) / n));
      double g[kCols], w[kCols];
      auto gw = [&] { bu_check(genie_tensor_write(t, 0, buf.data(), n), "genie_tensor_write"); };
      auto gr = [&] { bu_check(genie_tensor_read(t, 0, buf.data(), n), "genie_tensor_read"); };
      auto pw = [&] { raw.write(buf.data(), n); };
      // The stream runs for at least 256 MiB and two calls: iperf3's figure
      // is a steady state too (2 s).
      const int stream_reps = static_cast<int>(std::max<size_t>(2, (size_t{256} << 20) / n));
      g[kWriteAfterRead] = timed(n, reps, gw);
      g[kWriteStream] = timed(n, stream_reps, gw);
      g[kRead] = timed(n, reps, gr);
      w[kWriteAfterRead] = timed(n, reps, pw);
      w[kWriteStream] = timed(n, stream_reps, pw);
      w[kRead] = timed(n, reps, [&] { raw.read(buf.data(), n); });
      for (int c = 0; c < kCols; ++c) {
        genie[i * kCols + c].push_back(g[c]);
        raw_tcp[i * kCols + c].push_back(w[c]);
        per_raw[i * kCols + c].push_back(g[c] / w[c]);
        if (ip > 0) per_iperf[i * kCols + c].push_back(g[c] / ip);
      }
      // The memory limit: one copy of the same size (a transfer makes two,
      // through the kernel, on the same memory bus).
      m_gbps[i].push_back(timed(n, reps, [&] {
        std::memcpy(copy.data(), buf.data(), n);
        asm volatile("" : : "r"(copy.data()) : "memory");  // keep the copy
      }));
    }
  }
  auto median = [](std::vector<double>& v) { return v.empty() ? 0.0 : bu_stats(v.data(), v.size()).median; };
  auto label = [](size_t n) {
    char b[32];
    if (n >= (size_t{1} << 30))
      std::snprintf(b, sizeof b, "%zu GiB", n >> 30);
    else if (n >= (size_t{1} << 20))
      std::snprintf(b, sizeof b, "%zu MiB", n >> 20);
    else
      std::snprintf(b, sizeof b, "%zu KiB", n >> 10);
    return std::string(b);
  };

  std::printf("remote tensor write/read on loopback vs iperf3 (one stream), %d interleaved rounds\n", rounds);
  if (iperf.empty()) {
    std::printf("iperf3: not installed or failed three times (Debian iperf3); ratios omitted\n\n");
  } else {
    const bu_stats_t s = bu_stats(iperf.data(), iperf.size());
    std::printf("iperf3: median %.1f Gbit/s (min %.1f, max %.1f)\n\n", s.median, s.min, s.max);
  }
  std::printf("Genie, Gbit/s median (min), and median of per-round ratios to iperf3; memcpy Gbit/s\n");
  std::printf("%8s", "size");
  for (const char* c : col_name) std::printf("  %19s", c);
  std::printf("  %8s %8s %8s  %8s\n", "/iperf3", "/iperf3", "/iperf3", "memcpy");
  for (size_t i = 0; i < ns; ++i) {
    std::printf("%8s", label(sizes[i]).c_str());
    for (int c = 0; c < kCols; ++c) {
      const bu_stats_t s = bu_stats(genie[i * kCols + c].data(), genie[i * kCols + c].size());
      std::printf("  %10.2f (%6.2f)", s.median, s.min);
    }
    for (int c = 0; c < kCols; ++c)
      if (iperf.empty())
        std::printf(" %8s", "-");
      else
        std::printf(" %8.2f", median(per_iperf[i * kCols + c]));
    std::printf("  %8.2f\n", median(m_gbps[i]));
  }
  std::printf(
      "\nplain TCP, the same calls in the same order (the host's own TCP), Gbit/s median; Genie / plain\n");
  std::printf("%8s", "size");
  for (const char* c : col_name) std::printf("  %19s", c);
  std::printf("  %8s %8s %8s\n", "Genie/", "Genie/", "Genie/");
  for (size_t i = 0; i < ns; ++i) {
    std::printf("%8s", label(sizes[i]).c_str());
    for (int c = 0; c < kCols; ++c) std::printf("  %19.2f", median(raw_tcp[i * kCols + c]));
    for (int c = 0; c < kCols; ++c) std::printf(" %8.2f", median(per_raw[i * kCols + c]));
    std::printf("\n");
  }
  if (!iperf.empty()) {
    // The goals (docs/benchmarks.md, "Control path"): the smallest ratio
    // to iperf3 from 1 MiB to 1 GiB, and the ratios at 64 KiB.
    double lo[kCols] = {1e9, 1e9, 1e9}, at64[kCols] = {0, 0, 0};
    for (size_t i = 0; i < ns; ++i)
      for (int c = 0; c < kCols; ++c) {
        const double v = median(per_iperf[i * kCols + c]);
        if (sizes[i] >= (size_t{1} << 20)) lo[c] = std::min(lo[c], v);
        if (sizes[i] == (size_t{64} << 10)) at64[c] = v;
      }
    std::printf(
        "\nsmallest ratio to iperf3 from 1 MiB up (goal >= 0.9): write in a stream %.2f, read %.2f, "
        "write after a read %.2f\n",
        lo[kWriteStream], lo[kRead], lo[kWriteAfterRead]);
    if (at64[kRead] > 0)
      std::printf("at 64 KiB (goal >= 0.5): write in a stream %.2f, read %.2f, write after a read %.2f\n",
                  at64[kWriteStream], at64[kRead], at64[kWriteAfterRead]);
  }
  FILE* json = bu_json_open(o.json_path);
  if (json) {
    std::fprintf(json, "{\"bench\":\"tensor_throughput\",\"rounds\":%d,\"iperf3_gbps\":%.3f,\"rows\":[",
                 rounds, iperf.empty() ? 0.0 : bu_stats(iperf.data(), iperf.size()).median);
    const char* const key[kCols] = {"write_after_read", "write_stream", "read"};
    for (size_t i = 0; i < ns; ++i) {
      // write_gbps and read_gbps as before the stream column (bench/ab_builds.py
      // compares builds on either side of it).
      std::fprintf(json, "%s{\"bytes\":%zu,\"memcpy_gbps\":%.3f,\"write_gbps\":%.3f,\"read_gbps\":%.3f",
                   i ? "," : "", sizes[i], median(m_gbps[i]), median(genie[i * kCols + kWriteAfterRead]),
                   median(genie[i * kCols + kRead]));
      for (int c = 0; c < kCols; ++c)
        std::fprintf(json, ",\"%s\":{\"gbps\":%.3f,\"per_iperf3\":%.4f,\"raw_gbps\":%.3f,\"per_raw\":%.4f}",
                     key[c], median(genie[i * kCols + c]), median(per_iperf[i * kCols + c]),
                     median(raw_tcp[i * kCols + c]), median(per_raw[i * kCols + c]));
      std::fprintf(json, "}");
    }
  }
  if (json) std::fprintf(json, "]}\n");
  bu_json_close(json, o.json_path);
  genie_tensor_destroy(t);
  genie_shutdown(ctx);
  bsp_stop(&server);
  return 0;
}
