// Scheduler decision cost and prediction quality (issue 5 benchmarks):
//
//  1. decision latency on a GPT-2-tiny decode step (2 layers, hidden 128,
//     batch 4, KV cache of 16) over 3 devices on 2 nodes: hash, analysis,
//     cost, placement and total, interleaved with Graph::validate of the
//     same graph (shape inference: the cheapest thing a submission already
//     does to a graph);
//  2. pattern matching on a ~500-node transformer graph, interleaved with
//     validate of that graph;
//  3. cached plan lookup (PlanCache::find, 100 plans cached), interleaved
//     with computing its key (plan_hash of the same graph), and beside a
//     full plan (a cache miss);
//  4. prediction error: the plan's predicted time on this machine's
//     calibrated CPU profile vs the measured execution (genie_future_exec_ns)
//     of the same graph in embedded mode.
//
// Internal stages are not in the C API, so this benchmark links the static
// library. Never a pass/fail on a time (BENCHMARKING.md).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.h"
#include "exec/cpu/calibrate.hpp"
#include "sched/analysis.hpp"
#include "sched/plan.hpp"
#include "sched/reference_graphs.hpp"

using namespace genie;
using namespace genie::sched;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Series {
  std::vector<double> v;
  bu_stats_t stats() {
    std::vector<double> c = v;
    return bu_stats(c.data(), c.size());
  }
};

void row(const char* what, Series& s, double scale = 1e6, const char* unit = "us") {
  bu_stats_t st = s.stats();
  std::printf("  %-34s p50 %9.2f %s   p99 %9.2f %s   (n=%zu)\n", what, st.median * scale, unit, st.p99 * scale, unit,
              s.v.size());
}

double median_ratio(const Series& a, const Series& b) {
  std::vector<double> r;
  for (size_t i = 0; i < a.v.size() && i < b.v.size(); ++i) r.push_back(a.v[i] / b.v[i]);
  return bu_stats(r.data(), r.size()).median;
}

// Runs `g` in embedded mode `reps` times; returns the median execution time.
double measured_exec_s(genie_context_t* ctx, const Graph& g, int reps) {
  const std::string json = graph_to_json(g);
  genie_graph_t* cg = nullptr;
  bu_check(genie_graph_from_json(json.c_str(), json.size(), &cg), "genie_graph_from_json");
  std::vector<genie_tensor_t*> tensors;
  std::vector<const char*> names;
  for (ValueId in : g.inputs()) {
    const Value& v = g.value(in);
    genie_tensor_t* t = nullptr;
    bu_check(genie_tensor_alloc(ctx, static_cast<genie_dtype_t>(v.dtype), v.shape.data(), v.shape.size(), "cpu", &t),
             "genie_tensor_alloc");
    tensors.push_back(t);
    names.push_back(v.name.c_str());
  }
  std::vector<double> t;
  for (int r = 0; r < reps + 1; ++r) {
    genie_future_t* f = nullptr;
    bu_check(genie_graph_submit(ctx, cg, names.data(), tensors.data(), tensors.size(), &f), "genie_graph_submit");
    bu_check(genie_future_wait(f, -1), "genie_future_wait");
    uint64_t ns = 0;
    bu_check(genie_future_exec_ns(f, &ns), "genie_future_exec_ns");
    if (r > 0) t.push_back(static_cast<double>(ns) * 1e-9);  // the first run warms up
    genie_future_destroy(f);
  }
  for (genie_tensor_t* x : tensors) genie_tensor_destroy(x);
  genie_graph_destroy(cg);
  return bu_stats(t.data(), t.size()).median;
}

}  // namespace

int main(int argc, char** argv) {
  const bu_options_t o = bu_parse_args(argc, argv, " (pairs; default 2000, --quick 20)");
  const int iters = o.iters ? o.iters : (o.quick ? 20 : 2000);
  FILE* json = bu_json_open(o.json_path);
  if (json) std::fprintf(json, "{\"iters\": %d", iters);

  // --- 1. decision latency ------------------------------------------------
  testing::Gpt2Options go;  // 2 layers, hidden 128, 4 heads, batch 4, one token, KV cache 16
  auto g = testing::gpt2(go);
  const Topology topo = testing::two_nodes();
  Series hash, analysis, cost, placement, total, validate;
  for (int i = 0; i < iters / 10 + 1; ++i) plan_graph(*g, topo, {});  // warm-up
  for (int i = 0; i < iters; ++i) {
    PlanTimings pt;
    Clock::time_point t0 = Clock::now();
    Plan p = plan_graph(*g, topo, {}, nullptr, &pt);
    total.v.push_back(seconds_since(t0));
    hash.v.push_back(pt.hash_s);
    analysis.v.push_back(pt.analysis_s);
    cost.v.push_back(pt.cost_s);
    placement.v.push_back(pt.placement_s);
    t0 = Clock::now();
    g->validate();
    validate.v.push_back(seconds_since(t0));
  }
  std::printf("decision latency: GPT-2-tiny decode step, %zu nodes, %zu values, 3 devices on 2 nodes\n",
              g->nodes().size(), g->values().size());
  row("plan key (plan_hash)", hash);
  row("analysis (stage, patterns, KV)", analysis);
  row("cost (FLOPs, bytes, sizes)", cost);
  row("placement (order, place, memory)", placement);
  row("total plan_graph", total);
  row("comparison: Graph::validate", validate);
  const double dec_ratio = median_ratio(total, validate);
  std::printf("  total / validate (median of %d interleaved pairs): %.2f   goal: total p50 <= 35 us\n\n", iters,
              dec_ratio);
  if (json)
    std::fprintf(json,
                 ", \"decision\": {\"nodes\": %zu, \"hash_us\": %.3f, \"analysis_us\": %.3f, \"cost_us\": %.3f, "
                 "\"placement_us\": %.3f, \"total_us\": %.3f, \"total_p99_us\": %.3f, \"validate_us\": %.3f, "
                 "\"ratio\": %.3f}",
                 g->nodes().size(), hash.stats().median * 1e6, analysis.stats().median * 1e6,
                 cost.stats().median * 1e6, placement.stats().median * 1e6, total.stats().median * 1e6,
                 total.stats().p99 * 1e6, validate.stats().median * 1e6, dec_ratio);

  // --- 2. pattern matching on ~500 nodes ----------------------------------
  testing::Gpt2Options big;
  big.layers = o.quick ? 2 : 19;
  big.past = 0;
  big.seq = 8;
  big.batch = 1;
  auto g500 = testing::gpt2(big);
  Series match, validate500;
  size_t n_patterns = 0;
  for (int i = 0; i < iters / 4 + 1; ++i) {
    Clock::time_point t0 = Clock::now();
    n_patterns = match_patterns(*g500).size();
    match.v.push_back(seconds_since(t0));
    t0 = Clock::now();
    g500->validate();
    validate500.v.push_back(seconds_since(t0));
  }
  std::printf("pattern matching: %zu-node transformer graph (%d layers), %zu patterns found\n", g500->nodes().size(),
              big.layers, n_patterns);
  row("match_patterns", match);
  row("comparison: Graph::validate", validate500);
  const double match_ratio = median_ratio(match, validate500);
  std::printf("  match / validate (median of pairs): %.2f   goal: p50 <= 1 ms\n\n", match_ratio);
  if (json)
    std::fprintf(json, ", \"patterns\": {\"nodes\": %zu, \"match_us\": %.3f, \"match_p99_us\": %.3f, "
                 "\"validate_us\": %.3f, \"ratio\": %.3f}",
                 g500->nodes().size(), match.stats().median * 1e6, match.stats().p99 * 1e6,
                 validate500.stats().median * 1e6, match_ratio);

  // --- 3. cached plan lookup -----------------------------------------------
  PlanCache cache(256);
  auto plan = std::make_shared<const Plan>(plan_graph(*g, topo, {}));
  for (uint64_t k = 0; k < 99; ++k) cache.insert({k * 7919 + 1, 1, 0}, plan);
  const PlanCache::Key key = PlanCache::key_of(*g, topo, {});
  cache.insert(key, plan);
  Series lookup, keying;
  const int batch = 1000;
  for (int i = 0; i < iters; ++i) {
    Clock::time_point t0 = Clock::now();
    for (int k = 0; k < batch; ++k)
      if (!cache.find(key)) return 1;
    lookup.v.push_back(seconds_since(t0) / batch);
    t0 = Clock::now();
    for (int k = 0; k < batch / 10; ++k)
      if (plan_hash(*g) != key.graph_hash) return 1;
    keying.v.push_back(seconds_since(t0) / (batch / 10));
  }
  std::printf("cached plan lookup: 100 plans cached; per lookup (batches of %d)\n", batch);
  row("PlanCache::find", lookup, 1e9, "ns");
  row("comparison: key (plan_hash)", keying, 1e9, "ns");
  row("comparison: full plan (a miss)", total);
  const double lookup_ratio = median_ratio(lookup, keying);
  std::printf("  find / plan_hash (median of pairs): %.3f; hit incl. key %.2f us vs miss %.2f us (%.0fx)   "
              "goal: lookup <= 5 us\n\n",
              lookup_ratio, (lookup.stats().median + keying.stats().median) * 1e6, total.stats().median * 1e6,
              total.stats().median / (lookup.stats().median + keying.stats().median));
  if (json)
    std::fprintf(json, ", \"lookup\": {\"find_ns\": %.2f, \"find_p99_ns\": %.2f, \"key_ns\": %.2f, \"ratio\": %.4f}",
                 lookup.stats().median * 1e9, lookup.stats().p99 * 1e9, keying.stats().median * 1e9, lookup_ratio);

  // --- 4. prediction error on this machine ---------------------------------
  CalibrateOptions co;
  co.node_id = "local";
  Topology local;
  local.devices.push_back(cpu::calibrate_local_cpu(co));
  std::printf("prediction vs measured execution on this CPU (calibrated: GEMM %.1f GFLOP/s, element-wise %.2f "
              "GFLOP/s, %.1f GB/s)\n",
              local.devices[0].peak_flops * 1e-9, local.devices[0].vector_flops * 1e-9,
              local.devices[0].mem_bw_bytes_per_s * 1e-9);
  genie_context_t* ctx = nullptr;
  bu_check(genie_init(nullptr, &ctx), "genie_init");
  struct Case {
    const char* name;
    testing::Gpt2Options opt;
  } cases[3];
  cases[0] = {"gpt2-tiny decode b4", go};
  cases[1] = {"gpt2-tiny prefill b1 s128", go};
  cases[1].opt.batch = 1, cases[1].opt.seq = 128, cases[1].opt.past = 0;
  cases[2] = {"gpt2 d512 prefill b1 s128", cases[1].opt};
  cases[2].opt.hidden = 512, cases[2].opt.heads = 8;
  const int reps = o.quick ? 2 : 15;
  // The executor's own cost per node, which calibration (below the
  // executor) cannot see: a chain of 32 relu over one float, per node.
  Graph chain("chain");
  chain.add_input("x", DType::F32, {1});
  for (int i = 0; i < 32; ++i)
    chain.add_node("relu", "r" + std::to_string(i), {i ? "v" + std::to_string(i - 1) : "x"}, {"v" + std::to_string(i)});
  chain.mark_output("v31");
  chain.validate();
  const double per_node = measured_exec_s(ctx, chain, reps) / 32;
  Topology tuned = local;
  tuned.devices[0].op_overhead_s = per_node;
  std::printf("  (executor overhead per node, measured on a 32-node chain: %.1f us; default model: %.1f us)\n",
              per_node * 1e6, local.devices[0].op_overhead_s * 1e6);
  if (json) std::fprintf(json, ", \"executor_overhead_us\": %.3f, \"prediction\": [", per_node * 1e6);
  for (int c = 0; c < 3; ++c) {
    auto cg = testing::gpt2(cases[c].opt);
    const Plan p = plan_graph(*cg, local, {});
    const Plan pt = plan_graph(*cg, tuned, {});
    const double measured = measured_exec_s(ctx, *cg, reps);
    const double err = (p.predicted_total_s - measured) / measured * 100;
    const double err_t = (pt.predicted_total_s - measured) / measured * 100;
    std::printf("  %-26s measured p50 %9.1f us   predicted %9.1f us (%+6.1f%%)   with measured overhead %9.1f us (%+6.1f%%)\n",
                cases[c].name, measured * 1e6, p.predicted_total_s * 1e6, err, pt.predicted_total_s * 1e6, err_t);
    if (json)
      std::fprintf(json,
                   "%s{\"case\": \"%s\", \"measured_us\": %.3f, \"predicted_us\": %.3f, \"error_pct\": %.2f, "
                   "\"predicted_overhead_us\": %.3f, \"error_overhead_pct\": %.2f}",
                   c ? ", " : "", cases[c].name, measured * 1e6, p.predicted_total_s * 1e6, err,
                   pt.predicted_total_s * 1e6, err_t);
  }
  if (json) std::fprintf(json, "]}\n");
  genie_shutdown(ctx);
  bu_json_close(json, o.json_path);
  return 0;
}
