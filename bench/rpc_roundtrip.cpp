// Small-graph submit round trip to a `genie serve` server on loopback,
// beside a raw C TCP 64-byte ping-pong, the same graph run embedded, and a
// gRPC unary call with the same payload, interleaved (BENCHMARKING.md).
//
// Genie: a 1-node graph (relu over f32[16] = 64 bytes) whose input is a
// resident remote tensor; each call is genie_graph_submit + wait (the output
// stays on the server). The server runs in a child process and so does the
// raw ping-pong's echo side, so both cross between two processes. The raw
// ping-pong runs twice, blocking and polling, and every ratio is taken
// against its best p50 in the run (either variant, any round). The goal
// (docs/benchmarks.md, "Control path") is remote p50 <= 1.5 x (raw p50 +
// embedded p50). "pipelined" keeps 16 submissions in flight and reports
// the time per submission. gRPC's server is a thread of this process.
//
// Pipelined, the client and the server's loop each have a submission's
// work to do; on separate CPUs a submission costs the larger of the two, on
// one CPU their sum. The scheduler decides which (a wake-up places the
// woken thread beside the waker), and keeps it for the phase. So each
// round's pipelined phase is also classed by where the server ran: "one
// CPU" when its busiest thread waited for a CPU (Linux schedstat) for more
// than a quarter of the phase, and the pipelined ratio is reported for
// either class as well, with the CPU time a submission took on each side
// (this process, all its threads; the server process's threads, from
// schedstat): on one CPU their sum is what a submission costs.
//
// Metrics overhead (docs/observability.md): a second server process serves
// its Prometheus metrics (recording on); each round also times the remote
// and pipelined calls against it, right after those against the first, and
// reports the per-round ratios metrics on / off (goal: within 3%). Where
// the library has no Prometheus support the A/B is left out, saying so.
// BENCH_METRICS_AA=1 starts the second server without metrics too: the
// same ratio then shows the noise floor of comparing two server processes.
//
// Tracing overhead (docs/observability.md, "Cost"): each round also times
// the remote and pipelined calls against the first server while this
// process records a trace (genie_trace_start: the client's span of each
// graph, the server's spans returned in each GraphDone and merged), before
// the untraced calls in odd rounds, after them in even ones, and reports
// the per-round ratios tracing on / off. The server-clock estimate a trace
// makes (8 round trips, once per 10 s) is taken by an untimed call first.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "raw_tcp.h"
#include "server_process.h"

#ifdef GENIE_BENCH_GRPC
#include <grpcpp/grpcpp.h>

#include "echo.grpc.pb.h"
#endif

namespace {

constexpr int kPayload = 64;
constexpr int kRawSpinUs = 200;  // as src/core/spin.hpp's kReplySpin

// --- raw TCP ping-pong -----------------------------------------------------

// The echo side runs in a child process (forked before any thread starts).
// With spin_us > 0 both ends poll for the next message for up to that long
// before they block, as Genie's client and server do.
class RawPingPong {
 public:
  explicit RawPingPong(int spin_us) : spin_us_(spin_us) {
    fd_ = raw_tcp::fork_peer(&child_, [spin_us](int fd) {
      char buf[kPayload];
      while (raw_tcp::full_io(fd, buf, kPayload, false, spin_us) &&
             raw_tcp::full_io(fd, buf, kPayload, true)) {
      }
    });
  }
  ~RawPingPong() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    ::waitpid(child_, nullptr, 0);
  }
  void call() {
    if (!raw_tcp::full_io(fd_, buf_, kPayload, true) ||
        !raw_tcp::full_io(fd_, buf_, kPayload, false, spin_us_)) {
      std::fprintf(stderr, "raw ping-pong: connection lost\n");
      std::exit(1);
    }
  }

 private:
  int spin_us_;
  int fd_ = -1;
  pid_t child_ = -1;
  char buf_[kPayload] = {};
};

// --- gRPC unary ------------------------------------------------------------

#ifdef GENIE_BENCH_GRPC
class EchoService final : public genie::bench::Echo::Service {
  grpc::Status Call(grpc::ServerContext*, const genie::bench::EchoMessage* req,
                    genie::bench::EchoMessage* reply) override {
    reply->set_payload(req->payload());
    return grpc::Status::OK;
  }
};

class GrpcUnary {
 public:
  GrpcUnary() {
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(&service_);
    server_ = b.BuildAndStart();
    if (!server_ || port == 0) {
      std::fprintf(stderr, "grpc: cannot start the server\n");
      std::exit(1);
    }
    stub_ = genie::bench::Echo::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
    req_.set_payload(std::string(kPayload, 'x'));
  }
  ~GrpcUnary() { server_->Shutdown(); }
  void call() {
    grpc::ClientContext ctx;
    genie::bench::EchoMessage reply;
    const grpc::Status s = stub_->Call(&ctx, req_, &reply);
    if (!s.ok() || reply.payload().size() != kPayload) {
      std::fprintf(stderr, "grpc: call failed: %s\n", s.error_message().c_str());
      std::exit(1);
    }
  }

 private:
  EchoService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<genie::bench::Echo::Stub> stub_;
  genie::bench::EchoMessage req_;
};
#endif

// --- Genie remote submit ---------------------------------------------------

// port > 0: a remote context on that server, the input resident there;
// port == 0: an embedded context, the input on "cpu".
class GenieSubmit {
 public:
  explicit GenieSubmit(int32_t port) {
    genie_config_t* cfg = nullptr;
    bu_check(genie_config_create(&cfg), "genie_config_create");
    bu_check(genie_config_set_use_env(cfg, 0), "genie_config_set_use_env");
    if (port > 0) {
      bu_check(genie_config_set_master_addr(cfg, "127.0.0.1"), "genie_config_set_master_addr");
      bu_check(genie_config_set_master_port(cfg, port), "genie_config_set_master_port");
    } else {
      bu_check(genie_config_set_num_threads(cfg, 1), "genie_config_set_num_threads");
    }
    bu_check(genie_init(cfg, &ctx_), port > 0 ? "genie_init (remote)" : "genie_init (embedded)");
    genie_config_destroy(cfg);

    const int64_t shape[1] = {kPayload / 4};
    const char* in[1] = {"x"};
    const char* out[1] = {"y"};
    bu_check(genie_graph_create("tiny", &graph_), "genie_graph_create");
    bu_check(genie_graph_add_input(graph_, "x", GENIE_DTYPE_F32, shape, 1), "add_input");
    bu_check(genie_graph_add_node(graph_, "relu", "r", in, 1, out, 1), "add_node");
    bu_check(genie_graph_mark_output(graph_, "y"), "mark_output");
    bu_check(genie_tensor_alloc(ctx_, GENIE_DTYPE_F32, shape, 1, port > 0 ? "remote:0" : "cpu", &x_),
             "genie_tensor_alloc");
    float data[kPayload / 4] = {0};
    bu_check(genie_tensor_write(x_, 0, data, sizeof data), "genie_tensor_write");
  }
  ~GenieSubmit() {
    genie_tensor_destroy(x_);
    genie_graph_destroy(graph_);
    genie_shutdown(ctx_);
  }
  genie_future_t* submit() {
    const char* names[1] = {"x"};
    genie_future_t* f = nullptr;
    bu_check(genie_graph_submit(ctx_, graph_, names, &x_, 1, &f), "genie_graph_submit");
    return f;
  }
  void call() {
    genie_future_t* f = submit();
    bu_check(genie_future_wait(f, -1), "genie_future_wait");
    genie_future_destroy(f);
  }
  // `depth` submissions in flight, then all waited: time per submission.
  void call_pipelined(int depth) {
    std::vector<genie_future_t*> fs;
    for (int i = 0; i < depth; ++i) fs.push_back(submit());
    for (genie_future_t* f : fs) {
      bu_check(genie_future_wait(f, -1), "genie_future_wait");
      genie_future_destroy(f);
    }
  }

 private:
  genie_context_t* ctx_ = nullptr;
  genie_graph_t* graph_ = nullptr;
  genie_tensor_t* x_ = nullptr;
};

// Per thread of process `pid`: nanoseconds run and waited for a CPU
// (/proc/PID/task/TID/schedstat); empty where it cannot be read.
struct ThreadTimes {
  std::vector<std::pair<int, std::pair<uint64_t, uint64_t>>> by_tid;
};
ThreadTimes thread_times(pid_t pid) {
  ThreadTimes t;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return t;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(dir + "/" + e->d_name + "/schedstat");
    uint64_t run = 0, wait = 0;
    if (in >> run >> wait) t.by_tid.push_back({std::atoi(e->d_name), {run, wait}});
  }
  ::closedir(d);
  return t;
}
// CPU time run by all threads between a and b, in nanoseconds.
double run_ns(const ThreadTimes& a, const ThreadTimes& b) {
  double ns = 0;
  for (const auto& [tid, after] : b.by_tid) {
    uint64_t before = 0;
    for (const auto& [tid0, t0] : a.by_tid)
      if (tid == tid0) before = t0.first;
    ns += static_cast<double>(after.first - before);
  }
  return ns;
}
double process_cpu_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

// The share of `wall_ns` the busiest thread between a and b waited for a
// CPU (schedstat); -1 where schedstat gave nothing.
double cpu_wait_share(const ThreadTimes& a, const ThreadTimes& b, double wall_ns) {
  uint64_t best_run = 0, best_wait = 0;
  bool any = false;
  for (const auto& [tid, after] : b.by_tid)
    for (const auto& [tid0, before] : a.by_tid)
      if (tid == tid0 && after.first - before.first >= best_run) {
        best_run = after.first - before.first;
        best_wait = after.second - before.second;
        any = true;
      }
  if (!any || best_run == 0) return -1;
  return static_cast<double>(best_wait) / wall_ns;
}
// Whether that thread waited for a CPU more than a quarter of the time
// (it shared the client's); -1 where schedstat gave nothing.
int shared_cpu(const ThreadTimes& a, const ThreadTimes& b, double wall_ns) {
  const double share = cpu_wait_share(a, b, wall_ns);
  return share < 0 ? -1 : share > 0.25 ? 1 : 0;
}

template <class F>
double time_us(F&& f) {
  const double t0 = bu_now_s();
  f();
  return (bu_now_s() - t0) * 1e6;
}

struct Series {
  const char* name;
  std::vector<double> us;      // every call
  std::vector<double> medians; // per round
};

double median_of(std::vector<double> v) {
  const bu_stats_t s = bu_stats(v.data(), v.size());
  return s.median;
}

}  // namespace

int main(int argc, char** argv) {
  const bu_options_t o = bu_parse_args(argc, argv, " (rounds; default 9, --quick 2)");
  const int rounds = o.iters ? o.iters : (o.quick ? 2 : 9);
  const int calls = o.quick ? 20 : 400;  // per round and side
  constexpr int kDepth = 16;

  // Child processes first: fork before this process starts any thread.
  // The raw ping-pong twice: blocking on both ends, as a plain program
  // does, and polling for up to 200 us first (Genie's reply spin). Which is
  // faster depends on the host: a blocking wait costs a wake-up, cheap
  // where the two ends share a vCPU and tens of microseconds across vCPUs;
  // polling keeps both ends on their own vCPUs, but where the scheduler
  // has put them on one vCPU each poll yields to the other and it is as
  // slow as blocking. Every ratio is taken against the raw ping-pong at its
  // best in the run: the smallest p50 of either variant over the rounds.
  RawPingPong raw(0);
  RawPingPong raw_poll(kRawSpinUs);
  bsp_server_t server = bsp_start(1);
  const bool metrics_ab = genie_metrics_supported() != 0;
  bsp_server_t metered{};
  if (metrics_ab) metered = bsp_start_metrics(1, std::getenv("BENCH_METRICS_AA") ? 0 : 1);
  // Destroyed before the server processes stop (their clients say goodbye).
  auto genie_remote = std::make_unique<GenieSubmit>(server.port);
  auto genie_metered = metrics_ab ? std::make_unique<GenieSubmit>(metered.port) : nullptr;
  auto genie_embedded = std::make_unique<GenieSubmit>(0);
  GenieSubmit& genie = *genie_remote;
  GenieSubmit& embedded = *genie_embedded;
#ifdef GENIE_BENCH_GRPC
  GrpcUnary grpc_peer;
#endif
  Series s_raw{"raw C TCP ping-pong, 64 B, two processes", {}, {}};
  Series s_raw_poll{"  the same, both ends polling 200 us first", {}, {}};
  Series s_emb{"Genie embedded submit+wait, same graph", {}, {}};
  Series s_genie{"Genie remote submit+wait, 1 tiny op", {}, {}};
  Series s_pipe{"Genie pipelined (16 in flight), per submit", {}, {}};
  Series s_grpc{"gRPC unary, 64 B (server in this process)", {}, {}};

  // Warm-up: connections, allocators, the server's first graph.
  for (int i = 0; i < 50; ++i) {
    raw.call();
    raw_poll.call();
    genie.call();
    embedded.call();
    if (genie_metered) genie_metered->call();
#ifdef GENIE_BENCH_GRPC
    grpc_peer.call();
#endif
  }
  std::vector<double> metrics_sync_ratio, metrics_pipe_ratio;  // per round: on / off
  std::vector<double> trace_sync_ratio, trace_pipe_ratio;      // per round: tracing on / off
  const std::string trace_path = "/tmp/genie_bench_rpc_trace_" + std::to_string(::getpid()) + ".json";
  // Per round: p50s of the raw ping-pongs (blocking, polling), embedded,
  // remote, pipelined and gRPC calls; which CPU class the pipelined phase
  // ran in (-1: unknown).
  std::vector<double> p50_raw, p50_poll, p50_emb, p50_remote, p50_pipe, p50_grpc;
  std::vector<int> pipe_class;
  std::vector<double> client_cpu[2], server_cpu[2];  // per submission (µs), by the same classes
  for (int r = 0; r < rounds; ++r) {
    std::vector<double> a, b, c, d, e, f;
    // The same calls against the server recording metrics: before those
    // against the other in odd rounds, after them in even ones.
    std::vector<double> ms, mp;
    const auto metered_phase = [&] {
      if (!genie_metered) return;
      for (int i = 0; i < calls; ++i) ms.push_back(time_us([&] { genie_metered->call(); }));
      for (int i = 0; i < calls / kDepth; ++i)
        mp.push_back(time_us([&] { genie_metered->call_pipelined(kDepth); }) / kDepth);
    };
    for (int i = 0; i < calls; ++i) a.push_back(time_us([&] { raw.call(); }));
    for (int i = 0; i < calls; ++i) f.push_back(time_us([&] { raw_poll.call(); }));
    for (int i = 0; i < calls; ++i) e.push_back(time_us([&] { embedded.call(); }));
    // The same calls against the first server while this process traces.
    std::vector<double> ts, tp;
    const auto traced_phase = [&] {
      bu_check(genie_trace_start(trace_path.c_str()), "genie_trace_start");
      genie.call();  // untimed: the server-clock estimate
      for (int i = 0; i < calls; ++i) ts.push_back(time_us([&] { genie.call(); }));
      for (int i = 0; i < calls / kDepth; ++i)
        tp.push_back(time_us([&] { genie.call_pipelined(kDepth); }) / kDepth);
      bu_check(genie_trace_stop(), "genie_trace_stop");
    };
    if (r % 2 == 1) metered_phase();
    if (r % 2 == 1) traced_phase();
    for (int i = 0; i < calls; ++i) b.push_back(time_us([&] { genie.call(); }));
    const ThreadTimes before = thread_times(server.pid);
    const double phase_t0 = bu_now_s(), cpu0 = process_cpu_ns();
    for (int i = 0; i < calls / kDepth; ++i)
      c.push_back(time_us([&] { genie.call_pipelined(kDepth); }) / kDepth);
    const double client_ns = process_cpu_ns() - cpu0;
    const ThreadTimes after = thread_times(server.pid);
    const int shared = shared_cpu(before, after, (bu_now_s() - phase_t0) * 1e9);
    if (shared >= 0) {
      const double submissions = (calls / kDepth) * kDepth;
      client_cpu[shared].push_back(client_ns / submissions / 1e3);
      server_cpu[shared].push_back(run_ns(before, after) / submissions / 1e3);
    }
    if (r % 2 == 0) metered_phase();
    if (r % 2 == 0) traced_phase();
    trace_sync_ratio.push_back(median_of(ts) / median_of(b));
    trace_pipe_ratio.push_back(median_of(tp) / median_of(c));
    if (genie_metered) {
      metrics_sync_ratio.push_back(median_of(ms) / median_of(b));
      metrics_pipe_ratio.push_back(median_of(mp) / median_of(c));
    }
#ifdef GENIE_BENCH_GRPC
    for (int i = 0; i < calls; ++i) d.push_back(time_us([&] { grpc_peer.call(); }));
#endif
    p50_raw.push_back(median_of(a));
    p50_poll.push_back(median_of(f));
    p50_emb.push_back(median_of(e));
    p50_remote.push_back(median_of(b));
    p50_pipe.push_back(median_of(c));
    pipe_class.push_back(shared);
    s_raw.us.insert(s_raw.us.end(), a.begin(), a.end());
    s_raw_poll.us.insert(s_raw_poll.us.end(), f.begin(), f.end());
    s_emb.us.insert(s_emb.us.end(), e.begin(), e.end());
    s_genie.us.insert(s_genie.us.end(), b.begin(), b.end());
    s_pipe.us.insert(s_pipe.us.end(), c.begin(), c.end());
    if (!d.empty()) {
      p50_grpc.push_back(median_of(d));
      s_grpc.us.insert(s_grpc.us.end(), d.begin(), d.end());
    }
  }
  const double best_raw = *std::min_element(p50_raw.begin(), p50_raw.end());
  const double best_poll = *std::min_element(p50_poll.begin(), p50_poll.end());
  const double raw_p50 = std::min(best_raw, best_poll);  // the raw ping-pong at its best
  const auto ratios = [&](const std::vector<double>& p50) {
    std::vector<double> r;
    for (double v : p50) r.push_back(v / raw_p50);
    return r;
  };
  std::vector<double> ratio_emb = ratios(p50_emb), ratio_genie = ratios(p50_remote),
                      ratio_pipe = ratios(p50_pipe), ratio_grpc = ratios(p50_grpc), ratio_goal;
  std::vector<double> ratio_pipe_split[2];  // rounds whose pipelined phase ran on separate CPUs, on one
  for (size_t r = 0; r < p50_remote.size(); ++r) {
    ratio_goal.push_back(p50_remote[r] / (raw_p50 + p50_emb[r]));
    if (pipe_class[r] >= 0) ratio_pipe_split[pipe_class[r]].push_back(ratio_pipe[r]);
  }

  // Sustained pipelining: blocks of many bursts (some 0.2 s each, where a
  // round's phase lasts about 3 ms), compared with the raw ping-pong at its
  // best, as every ratio is. Over that long the scheduler's load
  // balancing, not only the wake-up that starts the phase, decides where
  // the server's loop runs; the share of the block it waited for a CPU
  // says how much of it was spent beside the client.
  const int sustained_blocks = o.quick ? 1 : 3;
  const int sustained_bursts = o.quick ? 4 : 2000;
  std::vector<double> ratio_sustained, sustained_us, sustained_wait;
  for (int k = 0; k < sustained_blocks; ++k) {
    std::vector<double> c;
    const ThreadTimes before = thread_times(server.pid);
    const double t0 = bu_now_s();
    for (int i = 0; i < sustained_bursts; ++i)
      c.push_back(time_us([&] { genie.call_pipelined(kDepth); }) / kDepth);
    sustained_wait.push_back(cpu_wait_share(before, thread_times(server.pid), (bu_now_s() - t0) * 1e9));
    sustained_us.push_back(median_of(c));
    ratio_sustained.push_back(median_of(c) / raw_p50);
  }

  std::printf(
      "submit round trip on loopback, Genie server and raw echo in child processes, %d rounds x %d calls\n"
      "each, interleaved per round after a warm-up; ratio = median per-round p50 / the raw ping-pong\n"
      "at its best: %.1f us, the smallest p50 of any round, blocking (%.1f) or polling (%.1f)\n\n",
      rounds, calls, raw_p50, best_raw, best_poll);
  std::printf("%-46s %9s %9s %9s %9s   %s\n", "", "p50 us", "p99 us", "min us", "max us", "x raw (min-max)");
  FILE* json = bu_json_open(o.json_path);
  if (json) std::fprintf(json, "{\"bench\":\"rpc_roundtrip\",\"rounds\":%d,\"calls\":%d,\"series\":[", rounds, calls);
  bool first = true;
  auto row = [&](Series& s, std::vector<double>* ratios) {
    if (s.us.empty()) {
      std::printf("%-46s   (not built: gRPC development files were not found)\n", s.name);
      return;
    }
    const bu_stats_t st = bu_stats(s.us.data(), s.us.size());
    std::printf("%-46s %9.1f %9.1f %9.1f %9.1f", s.name, st.median, st.p99, st.min, st.max);
    double rm = 1, rlo = 1, rhi = 1;
    if (ratios) {
      const bu_stats_t rs = bu_stats(ratios->data(), ratios->size());
      rm = rs.median, rlo = rs.min, rhi = rs.max;
      std::printf("   %.2f (%.2f-%.2f)", rm, rlo, rhi);
    }
    std::printf("\n");
    if (json) {
      std::fprintf(json, "%s{\"name\":", first ? "" : ",");
      bu_json_str(json, s.name);
      std::fprintf(json, ",\"p50_us\":%.3f,\"p99_us\":%.3f,\"ratio_to_raw\":%.4f}", st.median, st.p99, rm);
      first = false;
    }
  };
  row(s_raw, nullptr);
  row(s_raw_poll, nullptr);
  row(s_emb, &ratio_emb);
  row(s_genie, &ratio_genie);
  row(s_pipe, &ratio_pipe);
  row(s_grpc, ratio_grpc.empty() ? nullptr : &ratio_grpc);
  const bu_stats_t goal = bu_stats(ratio_goal.data(), ratio_goal.size());
  std::printf("\nremote submit+wait / (raw ping-pong + embedded submit+wait): %.2f (%.2f-%.2f), goal <= 1.5\n",
              goal.median, goal.min, goal.max);
  const bu_stats_t pipe = bu_stats(ratio_pipe.data(), ratio_pipe.size());
  std::printf("pipelined per submit / raw ping-pong: %.2f (%.2f-%.2f), goal <= 1.2\n", pipe.median, pipe.min,
              pipe.max);
  for (int k = 0; k < 2; ++k) {
    std::vector<double>& v = ratio_pipe_split[k];
    std::printf("  rounds whose pipelined phase ran %s: %zu of %d",
                k ? "on one CPU (client and server loop)" : "on separate CPUs", v.size(), rounds);
    if (!v.empty()) {
      const bu_stats_t st = bu_stats(v.data(), v.size());
      const double cc = median_of(client_cpu[k]), sc = median_of(server_cpu[k]);
      std::printf(", ratio %.2f (%.2f-%.2f); CPU per submission: client %.1f us + server %.1f us = %.1f us",
                  st.median, st.min, st.max, cc, sc, cc + sc);
    }
    std::printf("\n");
  }
  std::printf(
      "sustained pipelining, %d blocks of %d x 16 submissions, against the raw ping-pong at its best "
      "(%.1f us):\n",
      sustained_blocks, sustained_bursts, raw_p50);
  for (size_t k = 0; k < ratio_sustained.size(); ++k)
    std::printf(
        "  block %zu: %.2f us per submit, %.2f x raw; the server loop waited for a CPU %.0f%% of it\n", k + 1,
        sustained_us[k], ratio_sustained[k], 100 * sustained_wait[k]);
  const double sustained = median_of(ratio_sustained);
  std::printf("  median: %.2f x raw, goal <= 1.2\n", sustained);
  double metrics_sync = 0, metrics_pipe = 0;
  if (metrics_sync_ratio.empty()) {
    std::printf("metrics on / off: not measured (this library has no Prometheus support)\n");
  } else {
    const bu_stats_t ms = bu_stats(metrics_sync_ratio.data(), metrics_sync_ratio.size());
    const bu_stats_t mp = bu_stats(metrics_pipe_ratio.data(), metrics_pipe_ratio.size());
    metrics_sync = ms.median, metrics_pipe = mp.median;
    std::printf("%s\n", std::getenv("BENCH_METRICS_AA")
                            ? "A/A control, BENCH_METRICS_AA (two servers without metrics, same round):"
                            : "metrics on / off (a server recording Prometheus metrics against one that does "
                              "not, same round):");
    std::printf("  submit+wait p50 %.3f (%.3f-%.3f), pipelined per submit %.3f (%.3f-%.3f), goal within 1.03\n",
                ms.median, ms.min, ms.max, mp.median, mp.min, mp.max);
  }
  std::remove(trace_path.c_str());
  const bu_stats_t ts = bu_stats(trace_sync_ratio.data(), trace_sync_ratio.size());
  const bu_stats_t tp = bu_stats(trace_pipe_ratio.data(), trace_pipe_ratio.size());
  std::printf(
      "tracing on / off (this process recording a trace with the server's spans merged, against the same\n"
      "server untraced, same round):\n"
      "  submit+wait p50 %.3f (%.3f-%.3f), pipelined per submit %.3f (%.3f-%.3f)\n",
      ts.median, ts.min, ts.max, tp.median, tp.min, tp.max);
  if (json)
    std::fprintf(json,
                 "],\"goal_ratio\":%.4f,\"pipelined_ratio\":%.4f,\"pipelined_rounds_one_cpu\":%zu,"
                 "\"sustained_pipelined_ratio\":%.4f,\"metrics_on_off_sync\":%.4f,"
                 "\"metrics_on_off_pipelined\":%.4f,\"trace_on_off_sync\":%.4f,"
                 "\"trace_on_off_pipelined\":%.4f}\n",
                 goal.median, pipe.median, ratio_pipe_split[1].size(), sustained, metrics_sync, metrics_pipe,
                 ts.median, tp.median);
  bu_json_close(json, o.json_path);
  genie_remote.reset();
  genie_embedded.reset();
  genie_metered.reset();
  // In reverse order of start: the later child holds the earlier one's
  // stop pipe (inherited at fork), which ends only when both are closed.
  if (metrics_ab) bsp_stop(&metered);
  bsp_stop(&server);
  return 0;
}
