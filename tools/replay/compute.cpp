#include "compute.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace genie::replay {

namespace {

void check(genie_status_t st, const char* what) {
  if (st != GENIE_OK) fail(st, "--compute real: ", what, ": ", genie_last_error());
}

}  // namespace

struct RealCompute::Problem {
  genie_graph_t* graph = nullptr;
  genie_tensor_t* in[2] = {nullptr, nullptr};
  ~Problem() {
    genie_tensor_destroy(in[0]);
    genie_tensor_destroy(in[1]);
    genie_graph_destroy(graph);
  }
};

RealCompute::RealCompute() {
  genie_config_t* cfg = nullptr;
  check(genie_config_create(&cfg), "genie_config_create");
  // In-process, whatever the environment says (a GENIE_MASTER meant for
  // other programs must not send a rank's compute elsewhere); one worker,
  // as a rank is one device.
  genie_status_t st = genie_config_set_use_env(cfg, 0);
  if (st == GENIE_OK) st = genie_config_set_num_threads(cfg, 1);
  if (st == GENIE_OK) st = genie_init(cfg, &ctx_);
  genie_config_destroy(cfg);
  check(st, "starting the embedded executor");
  // The rate: a product of side 256, best of three after a warm-up.
  constexpr int64_t kProbe = 256;
  run(kProbe);
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    run(kProbe);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  rate_ = 2.0 * kProbe * kProbe * kProbe / std::max(best, 1e-9);
}

RealCompute::~RealCompute() {
  problems_.clear();
  genie_shutdown(ctx_);
}

int64_t RealCompute::side_for(int64_t num_ops, double micros) const {
  const double flops = num_ops > 0 ? static_cast<double>(num_ops) : micros * 1e-6 * rate_;
  if (flops <= 0) return 0;
  const auto n = static_cast<int64_t>(std::llround(std::cbrt(flops / 2.0)));
  return std::clamp<int64_t>(n, 1, kMaxSide);
}

RealCompute::Problem& RealCompute::problem(int64_t n) {
  std::lock_guard<std::mutex> lk(mu_);
  auto& slot = problems_[n];
  if (slot) return *slot;
  auto p = std::make_unique<Problem>();
  const int64_t shape[2] = {n, n};
  const char* ins[2] = {"a", "b"};
  const char* outs[1] = {"c"};
  check(genie_graph_create("replay_compute", &p->graph), "genie_graph_create");
  check(genie_graph_add_input(p->graph, "a", GENIE_DTYPE_F32, shape, 2), "genie_graph_add_input");
  check(genie_graph_add_input(p->graph, "b", GENIE_DTYPE_F32, shape, 2), "genie_graph_add_input");
  check(genie_graph_add_node(p->graph, "matmul", "mm", ins, 2, outs, 1), "genie_graph_add_node");
  check(genie_graph_mark_output(p->graph, "c"), "genie_graph_mark_output");
  check(genie_graph_validate(p->graph), "genie_graph_validate");
  std::vector<float> v(static_cast<size_t>(n * n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 7) - 3.0f;
  for (genie_tensor_t*& t : p->in) {
    check(genie_tensor_alloc(ctx_, GENIE_DTYPE_F32, shape, 2, nullptr, &t), "genie_tensor_alloc");
    check(genie_tensor_write(t, 0, v.data(), v.size() * sizeof(float)), "genie_tensor_write");
  }
  slot = std::move(p);
  return *slot;
}

void RealCompute::run(int64_t n) {
  Problem& p = problem(n);
  const char* names[2] = {"a", "b"};
  genie_future_t* fut = nullptr;
  check(genie_graph_submit(ctx_, p.graph, names, p.in, 2, &fut), "genie_graph_submit");
  const genie_status_t st = genie_future_wait(fut, -1);
  genie_future_destroy(fut);
  check(st, "a matrix product");
}

}  // namespace genie::replay
