// The Gloo side of bench/replay_vs_gloo.py: all-reduce (ring) or all-gather
// of float32 among N local processes over Gloo's TCP transport on
// 127.0.0.1, timed like `genie replay` times a collective (the slowest
// rank's time, per iteration). Prints one JSON line:
//   {"op": ..., "ranks": N, "bytes": B, "iters": K, "time_us": [...]}
// where bytes is per rank (all-gather: each rank's input).
//
// usage: gloo_collectives_peer allreduce|allgather BYTES ITERS [RANKS]
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

void max_fn(void* c, const void* a, const void* b, size_t n) {
  auto* o = static_cast<double*>(c);
  auto* x = static_cast<const double*>(a);
  auto* y = static_cast<const double*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = std::max(x[i], y[i]);
}

int run_rank(int rank, int size, const std::string& dir, bool allreduce, size_t bytes, int iters, int pipe_fd) {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(dir);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  ctx->connectFullMesh(store, dev);
  const size_t n = bytes / sizeof(float);
  std::vector<float> in(n, static_cast<float>(rank + 1)), out(allreduce ? n : n * size);
  std::vector<double> times;
  for (int it = -2; it < iters; ++it) {  // two warm-up rounds
    gloo::BarrierOptions b(ctx);
    gloo::barrier(b);
    const auto t0 = std::chrono::steady_clock::now();
    if (allreduce) {
      gloo::AllreduceOptions o(ctx);
      o.setInput(in.data(), n);
      o.setOutput(out.data(), n);
      o.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      o.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      gloo::allreduce(o);
    } else {
      gloo::AllgatherOptions o(ctx);
      o.setInput(in.data(), n);
      o.setOutput(out.data(), n * size);
      gloo::allgather(o);
    }
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    gloo::AllreduceOptions m(ctx);  // the slowest rank's time
    m.setInput(&us, 1);
    m.setOutput(&us, 1);
    m.setReduceFunction(&max_fn);
    gloo::allreduce(m);
    if (it >= 0) times.push_back(us);
  }
  // The result is checked, as `genie replay` checks its own.
  const float want = allreduce ? size * (size + 1) / 2.0f : 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const float w = allreduce ? want : static_cast<float>(i / n + 1);
    if (out[i] != w) {
      std::fprintf(stderr, "gloo: rank %d: wrong element %zu: %g, want %g\n", rank, i, out[i], w);
      return 1;
    }
  }
  if (rank == 0) {
    std::string s = "{\"op\": \"" + std::string(allreduce ? "allreduce" : "allgather") + "\", \"ranks\": " +
                    std::to_string(size) + ", \"bytes\": " + std::to_string(bytes) + ", \"iters\": " +
                    std::to_string(iters) + ", \"time_us\": [";
    for (size_t i = 0; i < times.size(); ++i) s += (i ? ", " : "") + std::to_string(times[i]);
    s += "]}\n";
    if (write(pipe_fd, s.data(), s.size()) < 0) return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || (std::strcmp(argv[1], "allreduce") != 0 && std::strcmp(argv[1], "allgather") != 0)) {
    std::fprintf(stderr, "usage: %s allreduce|allgather BYTES ITERS [RANKS]\n", argv[0]);
    return 2;
  }
  const bool allreduce = std::strcmp(argv[1], "allreduce") == 0;
  const size_t bytes = std::strtoull(argv[2], nullptr, 10) / 4 * 4;
  const int iters = std::atoi(argv[3]);
  const int size = argc > 4 ? std::atoi(argv[4]) : 4;
  if (bytes == 0 || iters < 1 || size < 2) return 2;
  char dir[] = "/tmp/gloo-bench-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  std::vector<pid_t> pids;
  for (int r = 0; r < size; ++r) {
    const pid_t p = fork();
    if (p == 0) {
      int rc = 1;
      try {
        rc = run_rank(r, size, dir, allreduce, bytes, iters, STDOUT_FILENO);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "gloo: rank %d: %s\n", r, e.what());
      }
      _exit(rc);
    }
    pids.push_back(p);
  }
  int failed = 0;
  for (pid_t p : pids) {
    int st = 0;
    waitpid(p, &st, 0);
    failed |= !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  std::string cmd = std::string("rm -rf ") + dir;
  if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "gloo: could not remove %s\n", dir);
  return failed;
}
