// UCX put throughput through Genie's transport (dataplane "ucx":
// Channel::put into a peer's registered region, each put done once the
// bytes are in the peer's memory) beside UCX's own `ucx_perftest -t
// ucp_put_bw` over the same UCX transport (UCX_TLS, default tcp on lo:
// no RDMA device here), interleaved pairs: perftest, Genie, perftest, Genie ...
// Goal: Genie >= 90% of ucx_perftest for messages >= 1 MiB.
//
// Genie side: two libuv loops on their own threads in this process (a
// listener on one, a channel from the other), a registered source buffer
// and a registered destination whose descriptor (packed rkey) goes
// through encode/decode as it would over the control plane; `window`
// puts in flight, as ucx_perftest keeps its window of outstanding puts.
// ucx_perftest: a server and a client process on 127.0.0.1.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "dataplane/loop_hooks.hpp"
#include "dataplane/registry.hpp"

namespace dp = genie::dataplane;

namespace {

// A libuv loop on its own thread; run(f) runs f there and returns its value.
class Loop {
 public:
  Loop() {
    uv_loop_init(&loop_);
    uv_async_init(&loop_, &async_, [](uv_async_t* a) { static_cast<Loop*>(a->data)->drain(); });
    async_.data = this;
    thread_ = std::thread([this] { uv_run(&loop_, UV_RUN_DEFAULT); });
  }
  ~Loop() {
    post([this] {
      dp::run_close_hooks(&loop_);
      uv_close(reinterpret_cast<uv_handle_t*>(&async_), nullptr);
    });
    thread_.join();
    dp::clear_close_hooks(&loop_);
    uv_loop_close(&loop_);
  }
  uv_loop_t* loop() { return &loop_; }
  void post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      tasks_.push_back(std::move(fn));
    }
    uv_async_send(&async_);
  }
  template <class F>
  auto run(F f) -> decltype(f()) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto fut = task.get_future();
    post([&task] { task(); });
    return fut.get();
  }

 private:
  void drain() {
    std::deque<std::function<void()>> t;
    {
      std::lock_guard<std::mutex> lk(mu_);
      t.swap(tasks_);
    }
    for (auto& fn : t) fn();
  }
  uv_loop_t loop_{};
  uv_async_t async_{};
  std::thread thread_;
  std::mutex mu_;
  std::deque<std::function<void()>> tasks_;
};

// Genie: `iters` puts of `size` bytes with `window` in flight; MB/s (1e6).
double genie_put_mbs(dp::Transport& t, size_t size, int iters, int window) {
  Loop server, client;
  std::vector<char> src(size, 1), dst(size, 0);
  auto local = t.register_memory(src.data(), size, dp::MemoryKind::Host);
  auto remote = t.register_memory(dst.data(), size, dp::MemoryKind::Host);
  const dp::MemoryDescriptor rd = dp::MemoryDescriptor::decode(remote->descriptor().encode());
  std::shared_ptr<dp::Channel> accepted;
  auto l = server.run([&] {
    return t.listen(server.loop(), "127.0.0.1:0", {}, [&](dp::Listener& li) { accepted = li.accept({}); });
  });
  const std::string addr = server.run([&] { return l->address(); });
  std::promise<genie_status_t> up;
  auto ch = client.run([&] {
    return t.connect(client.loop(), addr, {}, {}, [&](genie_status_t st, const std::string&) { up.set_value(st); });
  });
  if (up.get_future().get() != GENIE_OK) {
    std::fprintf(stderr, "bench_ucx_put: cannot connect over ucx\n");
    std::exit(1);
  }
  std::promise<double> result;
  struct State {
    int issued = 0, done = 0, iters = 0, window = 0;
    double t0 = 0;
    bool failed = false;
  };
  auto st = std::make_shared<State>();
  st->iters = iters;
  st->window = window;
  std::function<void()> issue;
  issue = [&] {
    while (st->issued < st->iters && st->issued - st->done < st->window) {
      ++st->issued;
      ch->put(local, 0, rd, 0, size, [&](genie_status_t s, const std::string& why) {
        if (s != GENIE_OK && !st->failed) {
          st->failed = true;
          std::fprintf(stderr, "bench_ucx_put: put failed: %s\n", why.c_str());
        }
        if (++st->done == st->iters) {
          result.set_value(st->failed ? -1 : size * static_cast<double>(st->iters) / (bu_now_s() - st->t0) / 1e6);
        } else {
          issue();
        }
      });
    }
  };
  client.run([&] {
    st->t0 = bu_now_s();
    issue();
    return 0;
  });
  const double mbs = result.get_future().get();
  client.run([&] {
    ch->close();
    return 0;
  });
  server.run([&] {
    l->close();
    if (accepted) accepted->close();
    return 0;
  });
  return mbs;
}

// ucx_perftest ucp_put_bw between two processes; MB/s, or < 0 when missing.
double perftest_mbs(size_t size, int iters, int window) {
  std::fflush(stdout);  // the child must not write our buffered lines again
  static int port = 20000 + getpid() % 20000;
  ++port;
  const pid_t srv = fork();
  if (srv == 0) {
    freopen("/dev/null", "w", stdout);
    freopen("/dev/null", "w", stderr);
    const std::string p = std::to_string(port);
    execlp("ucx_perftest", "ucx_perftest", "-p", p.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  usleep(300000);
  char cmd[512];
  std::snprintf(cmd, sizeof cmd,
                "ucx_perftest 127.0.0.1 -p %d -t ucp_put_bw -s %zu -n %d -O %d 2>/dev/null", port, size, iters,
                window);
  FILE* f = popen(cmd, "r");
  double mbs = -1;
  if (f) {
    char line[1024];
    // The "Final:" row: iterations, overhead 50%ile/average/overall
    // (usec), bandwidth average/overall (MB/s, i.e. MiB/s), message rate.
    while (fgets(line, sizeof line, f)) {
      double v[6];
      const char* row = std::strstr(line, "Final:");
      if (!row) continue;
      if (std::sscanf(row + 6, " %lf %lf %lf %lf %lf %lf", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) == 6)
        mbs = v[5] * 1.048576;
    }
    pclose(f);
  }
  kill(srv, SIGKILL);
  waitpid(srv, nullptr, 0);
  return mbs;
}

}  // namespace

int main(int argc, char** argv) {
  bu_options_t o = bu_parse_args(argc, argv, " (pairs per size; default 5)");
  // Both sides over the same UCX transport: TCP on loopback unless the
  // environment names others (on InfiniBand: UCX_TLS=rc,self,sm, say).
  setenv("UCX_TLS", "tcp", 0);
  setenv("UCX_NET_DEVICES", "lo", 0);
  // The plugin sits in the build directory, one up from this program.
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    std::string dir(exe);
    dir = dir.substr(0, dir.rfind('/'));
    setenv("GENIE_TRANSPORT_PATH", (dir + "/..:" + dir).c_str(), 0);
  }
  setenv("UCX_WARN_UNUSED_ENV_VARS", "n", 0);
  dp::TransportLookup t = dp::lookup_transport("ucx");
  if (!t.transport) {
    std::printf("bench_ucx_put: the ucx transport is not available here: %s\n", t.reason.c_str());
    return 0;
  }
  const int pairs = o.quick ? 1 : (o.iters ? o.iters : 5);
  const int window = 16;
  std::vector<size_t> sizes = o.quick ? std::vector<size_t>{4096} : std::vector<size_t>{64 << 10, 1 << 20, 8 << 20};
  FILE* json = bu_json_open(o.json_path);
  std::printf("UCX put bandwidth, UCX_TLS=%s, window %d, %d interleaved pairs per size (MB/s = 1e6 B/s)\n",
              getenv("UCX_TLS"), window, pairs);
  std::printf("%10s %14s %14s %8s %s\n", "size", "genie MB/s", "perftest MB/s", "ratio", "(medians; genie min-max)");
  if (json) std::fprintf(json, "{\"benchmark\":\"ucx_put\",\"rows\":[");
  for (size_t si = 0; si < sizes.size(); ++si) {
    const size_t size = sizes[si];
    const int iters = o.quick ? 8 : static_cast<int>(std::max<size_t>(64, (size_t{2} << 30) / size / 4));
    std::vector<double> g, p, r;
    for (int i = 0; i < pairs; ++i) {
      const double pm = o.quick ? -1 : perftest_mbs(size, iters, window);
      const double gm = genie_put_mbs(*t.transport, size, iters, window);
      g.push_back(gm);
      if (pm > 0) {
        p.push_back(pm);
        r.push_back(gm / pm);
      }
    }
    const bu_stats_t gs = bu_stats(g.data(), g.size());
    const bu_stats_t ps = p.empty() ? bu_stats_t{} : bu_stats(p.data(), p.size());
    const bu_stats_t rs = r.empty() ? bu_stats_t{} : bu_stats(r.data(), r.size());
    std::printf("%10zu %14.0f %14.0f %8.2f (%.0f-%.0f)%s\n", size, gs.median, ps.median, rs.median, gs.min, gs.max,
                p.empty() ? "  ucx_perftest not run" : "");
    if (json)
      std::fprintf(json, "%s{\"bytes\":%zu,\"genie_mbs\":%.1f,\"perftest_mbs\":%.1f,\"ratio\":%.3f}", si ? "," : "",
                   size, gs.median, ps.median, rs.median);
  }
  if (json) {
    std::fprintf(json, "]}\n");
    bu_json_close(json, o.json_path);
  }
  return 0;
}
