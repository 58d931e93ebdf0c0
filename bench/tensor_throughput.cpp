// Remote tensor write and read throughput over loopback, 4 KiB ... 1 GiB,
// beside iperf3 on loopback and memcpy of the same size, measured in the
// same run (interleaved rounds: iperf3, then every size). Goals
// (docs/benchmarks.md, "Control path"): >= 0.9 x iperf3 from 1 MiB to
// 1 GiB, >= 0.5 x at 64 KiB.
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

  const size_t ns = sizes.size();
  std::vector<std::vector<double>> w_gbps(ns), r_gbps(ns), w_ratio(ns), r_ratio(ns), m_gbps(ns), rw_gbps(ns),
      rr_gbps(ns), w_raw(ns), r_raw(ns);
  std::vector<double> iperf;
  for (int r = 0; r < rounds; ++r) {
    // A busy machine may start the iperf3 server too late for its client.
    double ip = -1;
    for (int attempt = 0; attempt < 3 && ip < 0; ++attempt) ip = iperf3_gbps(o.quick ? 1 : 2);
    if (ip > 0) iperf.push_back(ip);
    for (size_t i = 0; i < ns; ++i) {
      const size_t n = sizes[i];
      // Enough repetitions for ~50 ms per size, at least 1.
      const int reps = static_cast<int>(std::max<size_t>(1, (size_t{64} << 20) / n));
      double t0 = bu_now_s();
      for (int k = 0; k < reps; ++k) bu_check(genie_tensor_write(t, 0, buf.data(), n), "genie_tensor_write");
      const double w = 8.0 * static_cast<double>(n) * reps / (bu_now_s() - t0) / 1e9;
      t0 = bu_now_s();
      for (int k = 0; k < reps; ++k) bu_check(genie_tensor_read(t, 0, buf.data(), n), "genie_tensor_read");
      const double rd = 8.0 * static_cast<double>(n) * reps / (bu_now_s() - t0) / 1e9;
      t0 = bu_now_s();
      for (int k = 0; k < reps; ++k) raw.write(buf.data(), n);
      const double raw_w = 8.0 * static_cast<double>(n) * reps / (bu_now_s() - t0) / 1e9;
      t0 = bu_now_s();
      for (int k = 0; k < reps; ++k) raw.read(buf.data(), n);
      const double raw_r = 8.0 * static_cast<double>(n) * reps / (bu_now_s() - t0) / 1e9;
      rw_gbps[i].push_back(raw_w);
      rr_gbps[i].push_back(raw_r);
      w_raw[i].push_back(w / raw_w);
      r_raw[i].push_back(rd / raw_r);
      // The memory limit: one copy of the same size (a transfer makes two,
      // through the kernel, on the same memory bus).
      t0 = bu_now_s();
      for (int k = 0; k < reps; ++k) {
        std::memcpy(copy.data(), buf.data(), n);
        asm volatile("" : : "r"(copy.data()) : "memory");  // keep the copy
      }
      m_gbps[i].push_back(8.0 * static_cast<double>(n) * reps / (bu_now_s() - t0) / 1e9);
      w_gbps[i].push_back(w);
      r_gbps[i].push_back(rd);
      if (ip > 0) {
        w_ratio[i].push_back(w / ip);
        r_ratio[i].push_back(rd / ip);
      }
    }
  }

  std::printf("remote tensor write/read on loopback vs iperf3 (one stream), %d interleaved rounds\n", rounds);
  if (iperf.empty()) {
    std::printf("iperf3: not installed or failed three times (Debian iperf3); ratios omitted\n\n");
  } else {
    const bu_stats_t s = bu_stats(iperf.data(), iperf.size());
    std::printf("iperf3: median %.1f Gbit/s (min %.1f, max %.1f)\n\n", s.median, s.min, s.max);
  }
  std::printf("%10s  %22s  %22s  %14s  %14s  %14s  %22s  %9s  %9s\n", "size", "write Gbit/s med (min)",
              "read Gbit/s med (min)", "write/iperf3", "read/iperf3", "memcpy Gbit/s",
              "raw TCP write/read Gbit/s", "write/raw", "read/raw");
  FILE* json = bu_json_open(o.json_path);
  if (json) std::fprintf(json, "{\"bench\":\"tensor_throughput\",\"rounds\":%d,\"rows\":[", rounds);
  for (size_t i = 0; i < ns; ++i) {
    const bu_stats_t w = bu_stats(w_gbps[i].data(), w_gbps[i].size());
    const bu_stats_t rd = bu_stats(r_gbps[i].data(), r_gbps[i].size());
    char label[32];
    const size_t n = sizes[i];
    if (n >= (size_t{1} << 30)) std::snprintf(label, sizeof label, "%zu GiB", n >> 30);
    else if (n >= (size_t{1} << 20)) std::snprintf(label, sizeof label, "%zu MiB", n >> 20);
    else std::snprintf(label, sizeof label, "%zu KiB", n >> 10);
    std::printf("%10s  %13.2f (%6.2f)  %13.2f (%6.2f)", label, w.median, w.min, rd.median, rd.min);
    double wr = 0, rr = 0;
    if (!w_ratio[i].empty()) {
      wr = bu_stats(w_ratio[i].data(), w_ratio[i].size()).median;
      rr = bu_stats(r_ratio[i].data(), r_ratio[i].size()).median;
      std::printf("  %14.2f  %14.2f", wr, rr);
    } else {
      std::printf("  %14s  %14s", "-", "-");
    }
    const double mc = bu_stats(m_gbps[i].data(), m_gbps[i].size()).median;
    const double rwm = bu_stats(rw_gbps[i].data(), rw_gbps[i].size()).median;
    const double rrm = bu_stats(rr_gbps[i].data(), rr_gbps[i].size()).median;
    const double wraw = bu_stats(w_raw[i].data(), w_raw[i].size()).median;
    const double rraw = bu_stats(r_raw[i].data(), r_raw[i].size()).median;
    std::printf("  %14.2f  %10.2f / %9.2f  %9.2f  %9.2f\n", mc, rwm, rrm, wraw, rraw);
    if (json)
      std::fprintf(
          json,
          "%s{\"bytes\":%zu,\"write_gbps\":%.3f,\"read_gbps\":%.3f,\"write_ratio\":%.4f,\"read_ratio\":%.4f,"
          "\"memcpy_gbps\":%.3f,\"raw_write_gbps\":%.3f,\"raw_read_gbps\":%.3f,\"write_per_raw\":%.4f,"
          "\"read_per_raw\":%.4f}",
          i ? "," : "", n, w.median, rd.median, wr, rr, mc, rwm, rrm, wraw, rraw);
  }
  if (json) std::fprintf(json, "]}\n");
  bu_json_close(json, o.json_path);
  genie_tensor_destroy(t);
  genie_shutdown(ctx);
  bsp_stop(&server);
  return 0;
}
