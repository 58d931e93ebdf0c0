// The scheduler's decision over a large cluster (issue 36, "Scale"): a
// topology of 1,000 simulated nodes, each a server registered in a
// membership store with its devices and GPUs (the value a `genie serve`
// registers in etcd, cluster/types.hpp), read back through a member cache
// (cluster/member_cache.hpp) as a server keeps it, and turned into the
// scheduler's topology: one device per registered device, a link from the
// coordinator to each node. The decision is plan_graph of a GPT-2-sized
// decode step (12 layers, hidden 768, 12 heads, vocabulary 50257, batch 1,
// one token over a KV cache of 128), interleaved with the same decision on
// the 3-device topology of sched_decision (two nodes): goal <= 1 ms per
// decision at 1,000 nodes. Also the cost of turning the cache's snapshot
// into a topology.
//
// Simulated nodes, not processes: nothing runs on them. Internal stages are
// not in the C API, so this links the static library. Never a pass/fail on
// a time (BENCHMARKING.md).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.h"
#include "cluster/member_cache.hpp"
#include "cluster/types.hpp"
#include "sched/plan.hpp"
#include "sched/reference_graphs.hpp"

using namespace genie;
using namespace genie::sched;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Node i of a simulated cluster: every fourth has a GPU.
NodeStatus simulated_node(int i) {
  NodeStatus n;
  n.id = "node-" + std::to_string(i);
  n.host = "host-" + std::to_string(i);
  n.role = GENIE_NODE_ROLE_SERVER;
  n.listen = "10." + std::to_string(i / 250) + "." + std::to_string(i % 250) + ".1:5555";
  n.devices = {"cpu:0"};
  if (i % 4 == 0) {
    GpuInfo g;
    g.name = "simulated";
    g.memory_total = 80ull << 30;
    g.device = "cuda:0";
    n.gpus.push_back(g);
    n.devices.push_back("cuda:0");
  }
  return n;
}

// The scheduler's view of the members: this process (the coordinator) and
// every registered server's devices, in id order.
Topology topology_of(const MemberSnapshot& s) {
  Topology t;
  t.devices.push_back({"", "cpu:0", 100e9, 20e9, 20e9, 64ull << 30, 0, 2e-6});
  for (const MemberEntry& m : s.members) {
    const NodeStatus n = node_from_json(json_parse(m.value, "a member").get());
    for (const std::string& d : n.devices) {
      const bool gpu = d.rfind("cuda", 0) == 0;
      t.devices.push_back({n.id, d, gpu ? 50e12 : 100e9, gpu ? 5e12 : 20e9, gpu ? 2e12 : 20e9,
                           gpu ? 80ull << 30 : 64ull << 30, 0, gpu ? 5e-6 : 2e-6});
    }
    t.links.push_back({"", n.id, 12.5e9, 20e-6, 10e-6, 50e-6, 1e-6});
  }
  t.version = static_cast<uint64_t>(s.revision);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const bu_options_t o = bu_parse_args(argc, argv, " (decisions; default 200, --quick 5)");
  const int iters = o.iters ? o.iters : (o.quick ? 5 : 200);
  const int n_nodes = 1000;

  // The membership: 1,000 servers registered under leases, read through a cache.
  std::shared_ptr<MembershipStore> store = make_in_memory_membership();
  const uint64_t lease = store->grant(3600 * 1000);
  for (int i = 0; i < n_nodes; ++i) {
    const NodeStatus n = simulated_node(i);
    store->create(n.id, json_text(node_to_json(n).get()), lease);
  }
  MemberCache cache(store, nullptr);
  bu_check(cache.size() == static_cast<size_t>(n_nodes) ? GENIE_OK : GENIE_ERR_INTERNAL, "the member cache");
  Clock::time_point t0 = Clock::now();
  const Topology big = topology_of(cache.snapshot());
  const double topo_s = seconds_since(t0);
  const Topology small = testing::two_nodes();

  testing::Gpt2Options go;
  go.layers = 12;
  go.hidden = 768;
  go.heads = 12;
  go.vocab = 50257;
  go.batch = 1;
  go.past = 128;
  auto g = testing::gpt2(go);

  plan_graph(*g, big, {});  // warm-up
  plan_graph(*g, small, {});
  std::vector<double> at_scale, at_small, ratio, stage[4];
  size_t devices_used = 0;
  for (int i = 0; i < iters; ++i) {
    PlanTimings pt;
    t0 = Clock::now();
    const Plan p = plan_graph(*g, big, {}, nullptr, &pt);
    at_scale.push_back(seconds_since(t0));
    stage[0].push_back(pt.hash_s);
    stage[1].push_back(pt.analysis_s);
    stage[2].push_back(pt.cost_s);
    stage[3].push_back(pt.placement_s);
    t0 = Clock::now();
    plan_graph(*g, small, {});
    at_small.push_back(seconds_since(t0));
    ratio.push_back(at_scale.back() / at_small.back());
    if (i == 0) {
      std::vector<bool> used(big.devices.size());
      for (int d : p.node_device) used[static_cast<size_t>(d)] = true;
      for (bool u : used) devices_used += u;
    }
  }
  const bu_stats_t s = bu_stats(at_scale.data(), at_scale.size());
  const bu_stats_t s3 = bu_stats(at_small.data(), at_small.size());
  const bu_stats_t r = bu_stats(ratio.data(), ratio.size());
  std::printf(
      "scheduler decision, GPT-2-sized decode step (%zu nodes), %d simulated cluster nodes from a member "
      "cache (%zu devices, %zu links)\n",
      g->nodes().size(), n_nodes, big.devices.size(), big.links.size());
  std::printf("  %-38s p50 %9.1f us   p99 %9.1f us   (n=%d)\n", "plan_graph, 1,000 nodes", s.median * 1e6,
              s.p99 * 1e6, iters);
  std::printf("  %-38s p50 %9.1f us   p99 %9.1f us   (n=%d)\n", "comparison: plan_graph, 3 devices",
              s3.median * 1e6, s3.p99 * 1e6, iters);
  double st[4];
  for (int k = 0; k < 4; ++k) st[k] = bu_stats(stage[k].data(), stage[k].size()).median * 1e6;
  std::printf("  %-38s %.1f / %.1f / %.1f / %.1f us\n", "1,000 nodes: hash / analysis / cost / placement",
              st[0], st[1], st[2], st[3]);
  std::printf("  1,000 nodes / 3 devices (median of %d interleaved pairs): %.1fx; plan uses %zu device(s)\n",
              iters, r.median, devices_used);
  std::printf("  member cache snapshot -> topology: %.2f ms (once per membership change)\n", topo_s * 1e3);
  std::printf("  goal: <= 1 ms per decision at 1,000 nodes: %s\n", s.median <= 1e-3 ? "met" : "MISSED");
  if (FILE* json = bu_json_open(o.json_path)) {
    std::fprintf(
        json,
        "{\"nodes\": %d, \"devices\": %zu, \"graph_nodes\": %zu, \"iters\": %d, \"decision_us\": %.3f, "
        "\"decision_p99_us\": %.3f, \"small_decision_us\": %.3f, \"ratio\": %.3f, \"topology_ms\": %.3f, "
        "\"hash_us\": %.3f, \"analysis_us\": %.3f, \"cost_us\": %.3f, \"placement_us\": %.3f, \"goal_us\": "
        "1000}\n",
        n_nodes, big.devices.size(), g->nodes().size(), iters, s.median * 1e6, s.p99 * 1e6, s3.median * 1e6,
        r.median, topo_s * 1e3, st[0], st[1], st[2], st[3]);
    std::fclose(json);
  }
  return 0;
}
