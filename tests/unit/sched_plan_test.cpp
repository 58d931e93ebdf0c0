// Placement, ordering, memory budgets, co-location and explain JSON.
#include <cjson/cJSON.h>
#include <gtest/gtest.h>

#include <set>

#include "graph_test_util.hpp"
#include "sched/plan.hpp"
#include "sched/reference_graphs.hpp"

namespace genie::sched {
namespace {

using genie::testing::fails_with;
using testing::device;
using testing::gpt2;
using testing::Gpt2Options;
using testing::two_nodes;

// Every node exactly once in `order`, every input's producer before it,
// every device index valid, and every input that lives elsewhere moved to
// the node's device by a transfer before it runs.
void check_plan(const Graph& g, const Plan& p, const Topology& t) {
  const size_t n = g.nodes().size();
  ASSERT_EQ(p.order.size(), n);
  ASSERT_EQ(p.node_device.size(), n);
  std::vector<int> pos(n, -1);
  for (size_t i = 0; i < n; ++i) {
    const NodeId id = p.order[i];
    ASSERT_TRUE(id >= 0 && static_cast<size_t>(id) < n);
    ASSERT_EQ(pos[id], -1) << "node " << g.node(id).name << " scheduled twice";
    pos[id] = static_cast<int>(i);
  }
  std::vector<int> value_home(g.values().size(), -1);
  for (NodeId id : p.order)
    for (ValueId o : g.node(id).outputs) value_home[o] = p.node_device[id];
  std::set<std::pair<ValueId, int>> moved;
  for (const Transfer& tr : p.transfers) {
    ASSERT_NE(tr.from_device, tr.to_device);
    ASSERT_TRUE(tr.to_device >= 0 && static_cast<size_t>(tr.to_device) < t.devices.size());
    EXPECT_EQ(tr.value, g.value(tr.value_id).name);
    EXPECT_TRUE(moved.insert({tr.value_id, tr.to_device}).second) << tr.value << " moved twice to one device";
    EXPECT_EQ(p.node_device[tr.consumer], tr.to_device);
  }
  for (NodeId id : p.order) {
    const int d = p.node_device[id];
    ASSERT_TRUE(d >= 0 && static_cast<size_t>(d) < t.devices.size());
    for (ValueId in : g.node(id).inputs) {
      if (in == kNone) continue;
      const NodeId prod = g.value(in).producer;
      if (prod != kNone) {
        EXPECT_LT(pos[prod], pos[id]) << g.node(prod).name << " must run before " << g.node(id).name;
        if (value_home[in] != d) EXPECT_TRUE(moved.count({in, d})) << "no transfer of " << g.value(in).name;
      }
    }
    EXPECT_GE(p.decisions[id].finish_s, p.decisions[id].start_s);
    EXPECT_LE(p.decisions[id].finish_s, p.predicted_total_s);
  }
  for (size_t d = 0; d < t.devices.size(); ++d) EXPECT_LE(p.peak_bytes_per_device[d], t.devices[d].budget());
}

std::unique_ptr<Graph> shaped(const std::string& kind) {
  auto g = std::make_unique<Graph>(kind);
  g->add_input("x", DType::F32, {64, 64});
  if (kind == "chain") {
    std::string prev = "x";
    for (int i = 0; i < 20; ++i) {
      g->add_node(i % 2 ? "relu" : "tanh", "n" + std::to_string(i), {prev}, {"v" + std::to_string(i)});
      prev = "v" + std::to_string(i);
    }
    g->mark_output(prev);
  } else if (kind == "fan_out") {
    for (int i = 0; i < 10; ++i) {
      g->add_node("relu", "n" + std::to_string(i), {"x"}, {"v" + std::to_string(i)});
      g->mark_output("v" + std::to_string(i));
    }
  } else if (kind == "fan_in") {
    std::vector<std::string> ins;
    for (int i = 0; i < 10; ++i) {
      g->add_node("relu", "n" + std::to_string(i), {"x"}, {"v" + std::to_string(i)});
      ins.push_back("v" + std::to_string(i));
    }
    g->add_node("concat", "join", ins, {"out"});
    g->mark_output("out");
  } else {  // diamond
    g->add_node("relu", "top", {"x"}, {"t"});
    g->add_node("matmul", "left", {"t", "t"}, {"l"});
    g->add_node("tanh", "right", {"t"}, {"r"});
    g->add_node("add", "bottom", {"l", "r"}, {"b"});
    g->mark_output("b");
  }
  g->validate();
  return g;
}

TEST(SchedPlan, EveryNodeOnceDependenciesRespected) {
  const Topology topos[] = {
      [] {
        Topology t;
        t.devices = {device("", "cpu:0", 100, 10)};
        return t;
      }(),
      two_nodes()};
  for (const Topology& t : topos)
    for (const char* kind : {"chain", "fan_out", "fan_in", "diamond"}) {
      SCOPED_TRACE(kind);
      auto g = shaped(kind);
      check_plan(*g, plan_graph(*g, t, {}), t);
    }
}

TEST(SchedPlan, RandomDags) {
  const Topology t = two_nodes();
  for (uint32_t seed : {1u, 2u}) {
    auto g = testing::random_dag(seed == 1 ? 10000 : 500, seed);
    SCOPED_TRACE(seed);
    const Plan p = plan_graph(*g, t, {});
    check_plan(*g, p, t);
  }
}

TEST(SchedPlan, Gpt2DecodeIsConsistent) {
  const Topology t = two_nodes();
  auto g = gpt2({});
  const Plan p = plan_graph(*g, t, {});
  check_plan(*g, p, t);
  EXPECT_EQ(p.analysis.stage, Stage::Decode);
  EXPECT_GT(p.predicted_total_s, 0);
}

TEST(SchedPlan, Deterministic) {
  auto g = gpt2({});
  const Plan a = plan_graph(*g, two_nodes(), {}), b = plan_graph(*g, two_nodes(), {});
  EXPECT_EQ(a.node_device, b.node_device);
  EXPECT_EQ(a.order, b.order);
  EXPECT_EQ(a.predicted_total_s, b.predicted_total_s);
  EXPECT_EQ(a.explain_json(*g), b.explain_json(*g));
}

TEST(SchedPlan, HeavyWorkGoesToTheFastDevice) {
  Graph g("mm");
  g.add_input("a", DType::F32, {512, 512});
  g.add_input("b", DType::F32, {512, 512});
  g.add_node("matmul", "mm", {"a", "b"}, {"c"});
  g.mark_output("c");
  g.validate();
  const Topology t = two_nodes();
  const Plan p = plan_graph(g, t, {});
  EXPECT_EQ(p.node_device[0], 2);  // node-b/gpu:0: 268 MFLOP at 10 TFLOP/s
  EXPECT_EQ(p.decisions[0].rule, Rule::MinFinishTime);
  EXPECT_GE(p.decisions[0].runner_up, 0);
  EXPECT_LT(p.decisions[0].finish_s, p.decisions[0].runner_up_finish_s);
}

TEST(SchedPlan, TransferCostKeepsWorkWithItsData) {
  // a is resident on node-a; a cheap op on it is not worth 64 MiB over the network.
  Graph g("local");
  g.add_input("a", DType::F32, {4096, 4096});
  g.add_node("relu", "r", {"a"}, {"b"});
  g.add_node("reduce_sum", "s", {"b"}, {"c"});
  g.mark_output("c");
  g.validate();
  Residency r;
  r.value_device["a"] = 0;
  const Plan p = plan_graph(g, two_nodes(), r);
  EXPECT_EQ(p.node_device[0], 0);
  EXPECT_EQ(p.node_device[1], 0);
  EXPECT_TRUE(p.transfers.empty());
}

TEST(SchedPlan, ResidentWeightsStay) {
  Graph g("w");
  g.add_input("x", DType::F32, {8, 256});
  const ValueId w = g.add_input("w", DType::F32, {256, 256});
  g.value(w).role = TensorRole::Weight;
  g.add_node("linear", "fc", {"x", "w"}, {"y"});
  g.mark_output("y");
  g.validate();
  Residency r;
  r.value_device["w"] = 1;  // node-b/cpu:0, slower than the GPU beside it
  const Plan p = plan_graph(g, two_nodes(), r);
  EXPECT_EQ(p.node_device[0], 1);
  EXPECT_EQ(p.decisions[0].rule, Rule::ResidentWeight);
  EXPECT_EQ(p.decisions[0].pinned_by, w);
  for (const Transfer& tr : p.transfers) EXPECT_NE(tr.value, "w");
}

// A module whose input outweighs its resident weights runs where the input
// is, its weights moved there (pull_modules); without a module path, or with
// weights that outweigh the input, the weights keep their nodes.
TEST(SchedPlan, AModuleRunsWhereItsInputIsWhenTheInputOutweighsItsWeights) {
  for (const bool big_input : {true, false}) {
    for (const bool module : {true, false}) {
      SCOPED_TRACE(std::string(big_input ? "4 MB input, 16 kB weight" : "8 kB input, 1 MB weight") +
                   (module ? ", module" : ", no module"));
      Graph g("enc");
      g.add_input("x", DType::F32, {big_input ? 4096 : 8, 256});
      const ValueId w = g.add_input("w", DType::F32, {big_input ? 16 : 1024, 256});
      g.value(w).role = TensorRole::Weight;
      const NodeId fc = g.add_node("linear", "fc", {"x", "w"}, {"y"});
      g.add_node("relu", "act", {"y"}, {"z"});
      if (module) g.node(fc).ann.module_path = "enc";
      g.mark_output("z");
      g.validate();
      Residency r;
      r.value_device["x"] = 0;  // node-a, where the request arrives
      r.value_device["w"] = 1;  // node-b/cpu:0
      const Plan p = plan_graph(g, two_nodes(), r);
      if (big_input && module) {
        EXPECT_EQ(p.node_device[fc], 0);
        EXPECT_EQ(p.decisions[fc].rule, Rule::MinFinishTime);
        ASSERT_EQ(p.transfers.size(), 1u);
        EXPECT_EQ(p.transfers[0].value, "w");
      } else {
        EXPECT_EQ(p.node_device[fc], 1);
        EXPECT_EQ(p.decisions[fc].rule, Rule::ResidentWeight);
        for (const Transfer& tr : p.transfers) EXPECT_NE(tr.value, "w");
      }
    }
  }
}

TEST(SchedPlan, KvCacheStaysWithItsDecodeAttention) {
  const Topology t = two_nodes();
  for (bool fused : {false, true}) {
    for (bool tagged : {false, true}) {
      SCOPED_TRACE(std::string(fused ? "fused" : "unfused") + (tagged ? ", tagged" : ", inferred"));
      Gpt2Options o;
      o.fused = fused;
      o.tag_kv = tagged;
      o.tag_weights = false;
      auto g = gpt2(o);
      // Step 1: nothing resident. The cache's nodes land together.
      const Plan first = plan_graph(*g, t, {});
      check_plan(*g, first, t);
      ASSERT_EQ(first.analysis.kv_caches.size(), 4u);
      Residency r;
      for (const KvCache& kv : first.analysis.kv_caches) {
        const int d = first.node_device[kv.nodes.front()];
        for (NodeId id : kv.nodes) EXPECT_EQ(first.node_device[id], d) << g->node(id).name;
        // The updated cache (the concat output) is where the next step finds it.
        for (NodeId id : kv.nodes)
          if (g->node(id).op == "concat") r.value_device[g->value(kv.value).name] = first.node_device[id];
      }
      // Step 2: the caches are resident, on the slow CPU of node-a for this
      // test: attention runs there anyway and the cache never moves.
      for (auto& [name, dev] : r.value_device) dev = 0;
      const Plan next = plan_graph(*g, t, r);
      check_plan(*g, next, t);
      for (const KvCache& kv : next.analysis.kv_caches)
        for (NodeId id : kv.nodes) {
          EXPECT_EQ(next.node_device[id], 0) << g->node(id).name;
          EXPECT_EQ(next.decisions[id].rule, Rule::KvCacheColocation);
        }
      for (const Transfer& tr : next.transfers) {
        EXPECT_EQ(tr.value.find("past_"), std::string::npos) << tr.value << " crossed the network";
        EXPECT_TRUE(next.analysis.value_kv[tr.value_id] < 0) << tr.value << " is (derived from) a KV cache";
      }
    }
  }
}

TEST(SchedPlan, TooBigTensorsNeverGoToASmallDevice) {
  Graph g("big");
  g.add_input("a", DType::F32, {1024, 1024});  // 4 MiB each
  g.add_input("b", DType::F32, {1024, 1024});
  g.add_node("matmul", "mm", {"a", "b"}, {"c"});
  g.mark_output("c");
  g.validate();
  Topology t;
  t.devices = {device("n", "cpu:0", 100, 10), device("n", "gpu:0", 100000, 2000, 8u << 20)};  // GPU: 8 MiB
  const Plan p = plan_graph(g, t, {});
  EXPECT_EQ(p.node_device[0], 0);  // 12 MiB do not fit in 8
  EXPECT_EQ(p.decisions[0].rule, Rule::OnlyDevice);
  t.devices[1].mem_budget_bytes = 16u << 20;
  EXPECT_EQ(plan_graph(g, t, {}).node_device[0], 1);
}

TEST(SchedPlan, APlanThatCannotFitFailsClearly) {
  auto g = shaped("chain");  // 16 KiB tensors
  Topology t;
  t.devices = {device("", "cpu:0", 100, 10, 40000)};  // two tensors fit, three do not
  EXPECT_TRUE(fails_with([&] { plan_graph(*g, t, {}); }, GENIE_ERR_OUT_OF_MEMORY, "does not fit"));
  EXPECT_TRUE(fails_with([&] { plan_graph(*g, t, {}); }, GENIE_ERR_OUT_OF_MEMORY, "cpu:0 has"));
  t.devices[0].mem_budget_bytes = 3 * 16384;
  EXPECT_NO_THROW(plan_graph(*g, t, {}));
  // A resident tensor pins its readers: no room there is a failure too.
  Graph w("pinned");
  const ValueId wv = w.add_input("w", DType::F32, {1024, 1024});
  w.value(wv).role = TensorRole::Weight;
  w.add_input("x", DType::F32, {1024, 1024});
  w.add_node("matmul", "mm", {"x", "w"}, {"y"});
  w.mark_output("y");
  w.validate();
  Topology t2 = two_nodes();
  t2.devices[1].mem_budget_bytes = 6u << 20;
  Residency r;
  r.value_device["w"] = 1;
  EXPECT_TRUE(fails_with([&] { plan_graph(w, t2, r); }, GENIE_ERR_OUT_OF_MEMORY, "must run on node-b/cpu:0 with 'w'"));
}

TEST(SchedPlan, PeakMemoryFromLifetimes) {
  // x -> tanh -> relu -> tanh: 16 KiB each; at most the input, the value
  // being read and the one being written are alive: 3 x 16 KiB.
  Graph g("c3");
  g.add_input("x", DType::F32, {64, 64});
  g.add_node("tanh", "a", {"x"}, {"va"});
  g.add_node("relu", "b", {"va"}, {"vb"});
  g.add_node("tanh", "c", {"vb"}, {"vc"});
  g.mark_output("vc");
  g.validate();
  Topology t;
  t.devices = {device("", "cpu:0", 100, 10)};
  EXPECT_EQ(plan_graph(g, t, {}).peak_bytes_per_device[0], 3u * 16384);
}

TEST(SchedPlan, OrderingFreesMemoryEarly) {
  // Two branches that each make a big tensor and reduce it. Declared
  // big, big, reduce, reduce; the memory-aware order reduces the first big
  // tensor before making the second.
  Graph g("branches");
  g.add_input("x", DType::F32, {256, 256});  // 256 KiB
  g.add_node("matmul", "big1", {"x", "x"}, {"b1"});
  g.add_node("matmul", "big2", {"x", "x"}, {"b2"});
  g.add_node("reduce_sum", "red1", {"b1"}, {"r1"});
  g.add_node("reduce_sum", "red2", {"b2"}, {"r2"});
  g.add_node("add", "join", {"r1", "r2"}, {"o"});
  g.mark_output("o");
  g.validate();
  Topology t;
  t.devices = {device("", "cpu:0", 100, 10)};
  const Plan p = plan_graph(g, t, {});
  EXPECT_EQ(p.peak_bytes_per_device[0], 2u * 262144 + 4 + 4);  // x, one big tensor, its sum... and the other's
  std::vector<std::string> names;
  for (NodeId id : p.order) names.push_back(g.node(id).name);
  EXPECT_EQ(names, (std::vector<std::string>{"big1", "red1", "big2", "red2", "join"}));
  // A budget between that peak and the naive order's (3 x 256 KiB) fits.
  t.devices[0].mem_budget_bytes = 2 * 262144 + 64;
  EXPECT_NO_THROW(plan_graph(g, t, {}));
}

// Two one-CPU nodes with round figures: node-a (device 0, the coordinator)
// and node-b (device 1), 1 GFLOP/s and 1 GB/s each; a 1 GB/s link with a
// 100 us RTT, 20 us per request and 50 us per stage dispatch (+ 5 us per
// node of the stage) beyond it.
Topology serial_pair() {
  Topology t;
  t.devices = {device("node-a", "cpu:0", 1, 1), device("node-b", "cpu:0", 1, 1)};
  LinkProfile l;
  l.from_node = "node-a";
  l.to_node = "node-b";
  l.bandwidth_bytes_per_s = 1e9;
  l.rtt_s = 100e-6;
  l.request_s = 20e-6;
  l.dispatch_s = 50e-6;
  l.dispatch_per_node_s = 5e-6;
  t.links = {l};
  t.version = 1;
  return t;
}

// x [1, 256] on node-a; fc = linear(x, w1) with w1 [256, 256] resident on
// node-b; then either relu(fc) (`back` false) or linear(fc, w2) with w2
// resident on node-a (`back` true).
Graph remote_layer(bool back) {
  Graph g("remote_layer");
  g.add_input("x", DType::F32, {1, 256});
  g.value(g.add_input("w1", DType::F32, {256, 256})).role = TensorRole::Weight;
  g.add_node("linear", "fc", {"x", "w1"}, {"y"});
  if (back) {
    g.value(g.add_input("w2", DType::F32, {256, 256})).role = TensorRole::Weight;
    g.add_node("linear", "fc2", {"y", "w2"}, {"z"});
  } else {
    g.add_node("relu", "r", {"y"}, {"z"});
  }
  g.mark_output("z");
  g.validate();
  return g;
}

TEST(SchedPlan, PredictedTotalMirrorsTheRuntime) {
  const Topology t = serial_pair();
  // A linear [1,256] x [256,256]: 131072 FLOP (131.072 us at 1 GFLOP/s),
  // 263168 bytes read + 1024 written (264.192 us at 1 GB/s) + 2 us launch.
  const double linear = 264.192e-6 + 2e-6;
  const double request = 120e-6, dispatch = 150e-6;  // RTT + handling
  const double move_x = 2 * request + 1024 / 1e9;     // TensorAlloc + TensorWrite of 1 KiB
  {
    SCOPED_TRACE("two stages: node-b's linear, then a relu beside it");
    const Graph g = remote_layer(false);
    Residency r;
    r.value_device = {{"x", 0}, {"w1", 1}};
    const Plan p = plan_graph(g, t, r);
    check_plan(g, p, t);
    EXPECT_EQ(p.node_device, (std::vector<int>{1, 1}));
    ASSERT_EQ(p.transfers.size(), 1u);
    EXPECT_EQ(p.transfers[0].value, "x");
    EXPECT_NEAR(p.transfers[0].predicted_s, move_x, 1e-12);
    const double relu = 2048 / 1e9 + 2e-6;  // 256 elements read and written
    // One GraphSubmit to node-b (two nodes in it), x moved there, then both
    // nodes' compute.
    EXPECT_NEAR(p.decisions[0].start_s, dispatch + 5e-6 + move_x, 1e-12);
    EXPECT_NEAR(p.predicted_total_s, dispatch + 2 * 5e-6 + move_x + linear + relu, 1e-12);  // 671.264 us
    EXPECT_NEAR(p.predicted_total_s, 671.264e-6, 1e-12);
  }
  {
    SCOPED_TRACE("three stages: there and back");
    const Graph g = remote_layer(true);
    Residency r;
    r.value_device = {{"x", 0}, {"w1", 1}, {"w2", 0}};
    const Plan p = plan_graph(g, t, r);
    check_plan(g, p, t);
    EXPECT_EQ(p.node_device, (std::vector<int>{1, 0}));
    ASSERT_EQ(p.transfers.size(), 2u);
    const double read_y = request + 1024 / 1e9;  // TensorRead of 1 KiB
    EXPECT_NEAR(p.transfers[1].predicted_s, read_y, 1e-12);
    // The coordinator's own stage has no dispatch round trip.
    EXPECT_NEAR(p.predicted_total_s, dispatch + 5e-6 + move_x + linear + read_y + linear, 1e-12);  // 1049.432 us
    EXPECT_NEAR(p.predicted_total_s, 1049.432e-6, 1e-12);
  }
}

// node-a: a slow CPU (1 GFLOP/s, 1 GB/s), the coordinator; node-b: a fast
// GPU (1 TFLOP/s, 1 TB/s); 10 Gbit/s, 50 us RTT, 10 us per request, 30 us
// per dispatch.
Topology slow_fast() {
  Topology t;
  t.devices = {device("node-a", "cpu:0", 1, 1), device("node-b", "gpu:0", 1000, 1000)};
  LinkProfile l;
  l.from_node = "node-a";
  l.to_node = "node-b";
  l.bandwidth_bytes_per_s = 1.25e9;
  l.rtt_s = 50e-6;
  l.request_s = 10e-6;
  l.dispatch_s = 30e-6;
  t.links = {l};
  t.version = 1;
  return t;
}

// relu(x) then linear(., w) with x and w resident on node-a.
Graph relu_then_local_linear(int64_t n) {
  Graph g("tiny");
  g.add_input("x", DType::F32, {n, n});
  g.value(g.add_input("w", DType::F32, {n, n})).role = TensorRole::Weight;
  g.add_node("relu", "r", {"x"}, {"a"});
  g.add_node("linear", "fc", {"a", "w"}, {"y"});
  g.mark_output("y");
  g.validate();
  return g;
}

TEST(SchedPlan, ATinyOpDoesNotHopToAnotherNode) {
  // relu over 64 KiB: 131 us on node-a. The previous model priced the GPU
  // at RTT/2 + 64 KiB / 1.25 GB/s + ~2 us = 79.6 us and sent it there
  // (then paid the way back for fc). The runtime pays a GraphSubmit
  // (80 us), a TensorAlloc and a TensorWrite (2 x 60 us + 52 us): 254 us.
  const Graph g = relu_then_local_linear(128);
  Residency r;
  r.value_device = {{"x", 0}, {"w", 0}};
  const Topology t = slow_fast();
  const Plan p = plan_graph(g, t, r);
  check_plan(g, p, t);
  EXPECT_EQ(p.node_device, (std::vector<int>{0, 0}));
  EXPECT_TRUE(p.transfers.empty());
  EXPECT_EQ(p.decisions[0].rule, Rule::MinFinishTime);
  EXPECT_EQ(p.decisions[0].runner_up, 1);
  EXPECT_GT(p.decisions[0].runner_up_finish_s, p.decisions[0].finish_s);

  // With a per-request cost of zero, an RTT of zero and the RTT/2 pricing
  // gone, the GPU's speed wins again: the model still offloads when the
  // round trips are cheap.
  Topology free_link = t;
  free_link.links[0].rtt_s = free_link.links[0].request_s = free_link.links[0].dispatch_s = 0;
  free_link.links[0].bandwidth_bytes_per_s = 1e12;
  const Plan q = plan_graph(g, free_link, r);
  EXPECT_EQ(q.node_device[0], 1);
}

TEST(SchedPlan, AStageThatDoesNotPayForTheWayBackIsMerged) {
  // relu over 256 KiB: 526 us on node-a, 412 us on node-b's GPU with its
  // dispatch and the copy of x, so one node at a time it goes there; but fc
  // must run on node-a (its weight) and reading the result back costs
  // 270 us. Merging relu into fc's stage saves ~156 us.
  const Graph g = relu_then_local_linear(256);
  Residency r;
  r.value_device = {{"x", 0}, {"w", 0}};
  const Topology t = slow_fast();
  const Plan p = plan_graph(g, t, r);
  check_plan(g, p, t);
  EXPECT_EQ(p.node_device, (std::vector<int>{0, 0}));
  EXPECT_EQ(p.decisions[0].rule, Rule::StageMerge);
  EXPECT_EQ(p.decisions[0].runner_up, 1);  // where it would have gone alone
  EXPECT_TRUE(p.transfers.empty());
  const double relu_local = 2.0 * 256 * 256 * 4 / 1e9 + 2e-6;
  EXPECT_NEAR(p.decisions[0].finish_s, relu_local, 1e-12);
  EXPECT_NE(p.explain_json(g).find("\"stage_merge\""), std::string::npos);

  // Without fc's way back (relu's output is the graph's), the GPU stays.
  Graph only("only");
  only.add_input("x", DType::F32, {256, 256});
  only.add_node("relu", "r", {"x"}, {"a"});
  only.mark_output("a");
  only.validate();
  Residency rx;
  rx.value_device = {{"x", 0}};
  const Plan o = plan_graph(only, t, rx);
  EXPECT_EQ(o.node_device[0], 1);
  EXPECT_EQ(o.decisions[0].rule, Rule::MinFinishTime);
}

TEST(SchedPlan, CoLocationStillWinsOverFewerStages) {
  // fc's weight is resident on node-b: it runs there although a plan all
  // on node-a would have no cut (see PredictedTotalMirrorsTheRuntime).
  const Graph g = remote_layer(true);
  Residency r;
  r.value_device = {{"x", 0}, {"w1", 1}, {"w2", 0}};
  Topology t = serial_pair();
  t.links[0].dispatch_s = 10;  // absurdly expensive stages change nothing
  const Plan p = plan_graph(g, t, r);
  EXPECT_EQ(p.node_device, (std::vector<int>{1, 0}));
  EXPECT_EQ(p.decisions[0].rule, Rule::ResidentWeight);
  EXPECT_EQ(p.decisions[1].rule, Rule::ResidentWeight);
}

TEST(SchedPlan, ElementwiseOpsRunAtTheVectorRate) {
  Topology t;
  t.devices = {device("", "cpu:0", 100, 1000)};
  Graph g("ew");
  g.add_input("x", DType::F32, {1000, 1000});
  g.add_node("gelu", "g", {"x"}, {"y"});   // 8 FLOP per element: 8 MFLOP
  g.add_node("matmul", "m", {"y", "y"}, {"z"});  // 2 GFLOP
  g.mark_output("z");
  g.validate();
  Plan p = plan_graph(g, t, {});
  EXPECT_NEAR(p.predicted_node_s[0], 8e6 / 100e9 + 2e-6, 1e-12);  // no vector rate: the peak
  t.devices[0].vector_flops = 1e9;
  p = plan_graph(g, t, {});
  EXPECT_NEAR(p.predicted_node_s[0], 8e6 / 1e9 + 2e-6, 1e-12);  // the vector rate
  EXPECT_NEAR(p.predicted_node_s[1], 2e9 / 100e9 + 2e-6, 1e-12);  // GEMM keeps the peak
  t.devices[0].vector_flops = -1;
  EXPECT_TRUE(fails_with([&] { plan_graph(g, t, {}); }, GENIE_ERR_INVALID_ARGUMENT, "vector_flops"));
}

TEST(SchedPlan, BadArguments) {
  auto g = shaped("diamond");
  EXPECT_TRUE(fails_with([&] { plan_graph(*g, Topology{}, {}); }, GENIE_ERR_INVALID_ARGUMENT, "no devices"));
  Topology t = two_nodes();
  t.devices[1].peak_flops = 0;
  EXPECT_TRUE(fails_with([&] { plan_graph(*g, t, {}); }, GENIE_ERR_INVALID_ARGUMENT, "peak_flops"));
  t = two_nodes();
  t.devices.push_back(t.devices[0]);
  EXPECT_TRUE(fails_with([&] { plan_graph(*g, t, {}); }, GENIE_ERR_INVALID_ARGUMENT, "listed twice"));
  Residency r;
  r.value_device["nope"] = 0;
  EXPECT_TRUE(fails_with([&] { plan_graph(*g, two_nodes(), r); }, GENIE_ERR_INVALID_ARGUMENT, "'nope'"));
  r.value_device.clear();
  r.value_device["x"] = 7;
  EXPECT_TRUE(fails_with([&] { plan_graph(*g, two_nodes(), r); }, GENIE_ERR_INVALID_ARGUMENT, "device 7"));
  Graph dyn("dyn");
  const ValueId x = dyn.add_input("x", DType::F32, {-1, 4});
  dyn.add_node("relu", "r", {"x"}, {"y"});
  dyn.mark_output("y");
  std::unordered_map<ValueId, Shape> bound{{x, {3, 4}}};
  dyn.validate(&bound);
  EXPECT_TRUE(fails_with([&] { plan_graph(dyn, two_nodes(), {}); }, GENIE_ERR_INVALID_ARGUMENT, "dynamic shape"));
  const Plan bp = plan_graph(dyn, two_nodes(), {}, &bound);
  EXPECT_EQ(bp.node_cost[0].bytes(), 2u * 12 * 4);
  Graph raw("raw");
  EXPECT_TRUE(fails_with([&] { plan_graph(raw, two_nodes(), {}); }, GENIE_ERR_INVALID_ARGUMENT, "validated"));
}

TEST(SchedPlan, UnreachableNodeIsUnsupported) {
  Graph g("u");
  g.add_input("a", DType::F32, {4, 4});
  g.add_node("relu", "r", {"a"}, {"b"});
  g.mark_output("b");
  g.validate();
  Topology t;  // two nodes, no link between them
  t.devices = {device("n1", "cpu:0", 100, 10, 1000), device("n2", "cpu:0", 100, 10)};
  Residency r;
  r.value_device["a"] = 1;
  t.devices[1].mem_budget_bytes = 64 + 64;  // a and b fit on n2
  EXPECT_EQ(plan_graph(g, t, r).node_device[0], 1);
  t.devices[1].mem_budget_bytes = 64;  // b does not fit on n2; n1 cannot receive a
  EXPECT_TRUE(fails_with([&] { plan_graph(g, t, r); }, GENIE_ERR_UNSUPPORTED, "no link"));
}

TEST(SchedPlan, ExplainJson) {
  auto g = gpt2({});
  const Topology t = two_nodes();
  const Plan p = plan_graph(*g, t, {});
  const std::string json = p.explain_json(*g);
  cJSON* root = cJSON_Parse(json.c_str());
  ASSERT_NE(root, nullptr) << json;
  const cJSON* nodes = cJSON_GetObjectItem(root, "nodes");
  ASSERT_EQ(cJSON_GetArraySize(nodes), static_cast<int>(g->nodes().size()));
  std::set<std::string> seen;
  const cJSON* n;
  cJSON_ArrayForEach(n, nodes) {
    const char* name = cJSON_GetStringValue(cJSON_GetObjectItem(n, "name"));
    ASSERT_NE(name, nullptr);
    seen.insert(name);
    const NodeId id = g->find_node(name);
    ASSERT_NE(id, kNone);
    EXPECT_EQ(cJSON_GetStringValue(cJSON_GetObjectItem(n, "device")), p.device_names[p.node_device[id]]);
    EXPECT_STREQ(cJSON_GetStringValue(cJSON_GetObjectItem(n, "rule")), rule_name(p.decisions[id].rule));
    EXPECT_GT(strlen(cJSON_GetStringValue(cJSON_GetObjectItem(n, "why"))), 5u);
    EXPECT_TRUE(cJSON_IsNumber(cJSON_GetObjectItem(n, "flops")));
    EXPECT_TRUE(cJSON_IsNumber(cJSON_GetObjectItem(n, "predicted_s")));
  }
  EXPECT_EQ(seen.size(), g->nodes().size());
  const cJSON* an = cJSON_GetObjectItem(root, "analysis");
  EXPECT_STREQ(cJSON_GetStringValue(cJSON_GetObjectItem(an, "stage")), "decode");
  EXPECT_STREQ(cJSON_GetStringValue(cJSON_GetObjectItem(an, "stage_source")), "inferred");
  EXPECT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(an, "kv_caches")), 4);
  EXPECT_NE(json.find("\"kind\":\t\"attention\""), std::string::npos);
  EXPECT_NE(json.find("\"detail\":\t\"scale, mask, softmax, dropout\""), std::string::npos);
  EXPECT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(root, "devices")), 3);
  cJSON_Delete(root);
}

}  // namespace
}  // namespace genie::sched
