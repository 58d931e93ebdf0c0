// The cost model that learns: corrections converge on what a device really
// does, persist in the profile cache, and a cached plan whose runs drift from
// its prediction is planned again with them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "sched/graph_view.hpp"
#include "sched/learned_cost.hpp"
#include "sched/plan.hpp"
#include "sched/reference_graphs.hpp"

namespace genie::sched {
namespace {

using testing::device;
using testing::matmul_relu;

std::string temp_file(const char* tag) {
  return std::string(::testing::TempDir()) + "genie_learned_" + tag + "_" + std::to_string(::getpid()) +
         ".json";
}

TEST(SchedLearnedCost, ConvergesOnADeviceKTimesSlowerThanTheModel) {
  const auto g = matmul_relu(128);
  const std::vector<OpCost> costs = node_costs(*g, nullptr);
  DeviceProfile d = device("", "cpu:0", 100, 10);
  d.learned = std::make_shared<CostLearner>();
  const OpCost& mm = costs[0];
  const OpCost& relu = costs[1];
  ASSERT_EQ(mm.code, OpCode::Matmul);
  const double model = model_seconds(mm, d);
  EXPECT_DOUBLE_EQ(predict_seconds(mm, d), model);  // nothing learned yet

  // The device runs matmul k times slower than modelled, with +-20% noise
  // and an outlier (a preempted run) now and then; relu as modelled.
  const double k = 7.0;
  uint32_t seed = 12345;
  for (int i = 0; i < 40; ++i) {
    seed = seed * 1664525u + 1013904223u;
    const double noise = 0.8 + 0.4 * static_cast<double>(seed >> 8) / static_cast<double>(1u << 24);
    const double outlier = i % 13 == 5 ? 20.0 : 1.0;
    d.learned->observe(mm.code, mm.work(), model, k * model * noise * outlier);
    d.learned->observe(relu.code, relu.work(), model_seconds(relu, d), model_seconds(relu, d));
  }
  EXPECT_NEAR(predict_seconds(mm, d) / (k * model), 1.0, 0.15);
  EXPECT_NEAR(predict_seconds(relu, d) / model_seconds(relu, d), 1.0, 1e-9);
  EXPECT_EQ(d.learned->observations(), 80u);
  EXPECT_EQ(d.learned->cells(), 2u);

  // A matmul of about the same size borrows the cell; a far larger one, or
  // another class, is left as modelled.
  OpCost near = mm;
  near.flops *= 1.5;
  EXPECT_NEAR(d.learned->factor(OpCode::Matmul, near.work()), k, 0.15 * k);
  OpCost far = mm;
  far.flops *= 1e4;
  EXPECT_DOUBLE_EQ(d.learned->factor(OpCode::Matmul, far.work()), 1.0);
  EXPECT_DOUBLE_EQ(d.learned->factor(OpCode::Softmax, mm.work()), 1.0);
}

TEST(SchedLearnedCost, IgnoresNonsense) {
  CostLearner l;
  l.observe(OpCode::Add, 1e6, 0, 1e-3);
  l.observe(OpCode::Add, 1e6, 1e-3, -1);
  l.observe(OpCode::Add, 1e6, 1e-3, std::nan(""));
  l.observe(OpCode::Add, 1e6, std::numeric_limits<double>::infinity(), 1e-3);
  EXPECT_EQ(l.observations(), 0u);
  EXPECT_DOUBLE_EQ(l.factor(OpCode::Add, 1e6), 1.0);
  l.observe(OpCode::Add, 1e6, 1e-9, 1e9);  // clamped to the largest correction
  EXPECT_DOUBLE_EQ(l.factor(OpCode::Add, 1e6), 1.0);  // one observation does not speak yet
  for (uint64_t i = 1; i < CostLearner::kMinObservations; ++i) l.observe(OpCode::Add, 1e6, 1e-9, 1e9);
  EXPECT_NEAR(l.factor(OpCode::Add, 1e6), CostLearner::kMaxFactor, 1e-6);
  EXPECT_FALSE(l.save());  // in memory only
}

TEST(SchedLearnedCost, PersistedCorrectionsLoadBack) {
  const std::string file = temp_file("persist");
  std::remove(file.c_str());
  {
    CostLearner l(file);
    EXPECT_EQ(l.cells(), 0u);  // no file yet
    for (int i = 0; i < 5; ++i) {
      l.observe(OpCode::Matmul, 1e9, 1e-3, 3e-3);
      l.observe(OpCode::Softmax, 1e5, 1e-5, 0.5e-5);
    }
    ASSERT_TRUE(l.save());
  }
  {
    CostLearner back(file);
    EXPECT_EQ(back.cells(), 2u);
    EXPECT_NEAR(back.factor(OpCode::Matmul, 1e9), 3.0, 1e-9);
    EXPECT_NEAR(back.factor(OpCode::Softmax, 1e5), 0.5, 1e-9);
    // Learning goes on from what was loaded.
    back.observe(OpCode::Matmul, 1e9, 1e-3, 3e-3);
    EXPECT_NEAR(back.factor(OpCode::Matmul, 1e9), 3.0, 1e-9);
  }
  // Two users of one file in a process share one learner.
  EXPECT_EQ(CostLearner::shared(file), CostLearner::shared(file));
  EXPECT_EQ(CostLearner::file_for_profile("/c/cpu-00ff.json"), "/c/cpu-00ff.learned.json");

  // A damaged file, or one of another version, starts empty; a damaged
  // cell is skipped.
  {
    std::ofstream(file) << "{\"version\": 1, \"cells\": [";
    EXPECT_EQ(CostLearner(file).cells(), 0u);
    std::ofstream(file)
        << "{\"version\": 99, \"cells\": [{\"op\":\"matmul\",\"bucket\":29,\"factor\":2,\"count\":1}]}";
    EXPECT_EQ(CostLearner(file).cells(), 0u);
    std::ofstream(file)
        << "{\"version\": 1, \"cells\": [{\"op\":\"matmul\",\"bucket\":29,\"factor\":2,\"count\":3},"
           "{\"op\":\"nonsense\",\"bucket\":3,\"factor\":2,\"count\":1},"
           "{\"op\":\"add\",\"bucket\":3,\"factor\":-2,\"count\":1}]}";
    CostLearner partial(file);
    EXPECT_EQ(partial.cells(), 1u);
    EXPECT_NEAR(partial.factor(OpCode::Matmul, 1e9), 2.0, 1e-9);  // 1e9 is in bucket 29
  }
  std::remove(file.c_str());
}

TEST(SchedLearnedCost, OpClassNamesRoundTrip) {
  for (int c = 0; c <= static_cast<int>(OpCode::Pool); ++c) {
    OpCode back;
    ASSERT_TRUE(op_class_from_name(op_class_name(static_cast<OpCode>(c)), &back)) << c;
    EXPECT_EQ(static_cast<int>(back), c);
  }
  OpCode x;
  EXPECT_FALSE(op_class_from_name("nonsense", &x));
}

// Two devices of this process: a fast accelerator and the CPU, each with
// its learner.
Topology two_devices() {
  Topology t;
  t.devices = {device("", "cpu:0", 100, 10), device("", "acc:0", 10000, 1000)};
  for (DeviceProfile& d : t.devices) d.learned = std::make_shared<CostLearner>();
  t.version = 1;
  return t;
}

TEST(SchedLearnedCost, ADriftingPlanIsPlannedAgainWithWhatWasLearned) {
  const auto g = matmul_relu(256);
  Topology topo = two_devices();
  PlanCache cache;
  const Residency none;
  auto plan = cache.get_or_plan(*g, topo, none);
  ASSERT_EQ(plan->node_device[0], 1);  // the model sends the matmul to the accelerator

  // The accelerator turns out 1000x slower at matmul than its figures say
  // (it is shared, throttled, emulated...).
  const std::vector<OpCost> costs = node_costs(*g, nullptr);
  for (int i = 0; i < 5; ++i)
    topo.devices[1].learned->observe(costs[0].code, costs[0].work(), model_seconds(costs[0], topo.devices[1]),
                                     1000 * model_seconds(costs[0], topo.devices[1]));
  const double slow = 500 * plan->predicted_total_s;

  // The cached plan stands until its runs drift: twice off, then once
  // within the ratio, resets the count.
  EXPECT_FALSE(cache.report(*plan, slow));
  EXPECT_FALSE(cache.report(*plan, slow));
  EXPECT_FALSE(cache.report(*plan, plan->predicted_total_s * 1.5));
  EXPECT_EQ(cache.get_or_plan(*g, topo, none), plan);
  for (int i = 1; i < PlanCache::kDriftRuns; ++i) EXPECT_FALSE(cache.report(*plan, slow));
  EXPECT_TRUE(cache.report(*plan, slow));
  EXPECT_EQ(cache.replans(), 1u);
  EXPECT_FALSE(cache.report(*plan, slow));  // no longer cached: ignored

  const uint64_t misses = cache.misses();
  auto again = cache.get_or_plan(*g, topo, none);
  EXPECT_EQ(cache.misses(), misses + 1);
  EXPECT_NE(again, plan);
  EXPECT_EQ(again->node_device[0], 0);  // the matmul now goes to the CPU
  EXPECT_GT(again->predicted_total_s, plan->predicted_total_s);

  // It drifts too (nothing more is learned): dropped once more, then the
  // plan made again predicts what the dropped one did, and stays.
  const double slower = 10 * again->predicted_total_s;
  for (int i = 1; i < PlanCache::kDriftRuns; ++i) EXPECT_FALSE(cache.report(*again, slower));
  EXPECT_TRUE(cache.report(*again, slower));
  auto third = cache.get_or_plan(*g, topo, none);
  EXPECT_EQ(third->predicted_total_s, again->predicted_total_s);
  for (int i = 0; i < 3 * PlanCache::kDriftRuns; ++i) EXPECT_FALSE(cache.report(*third, slower));
  EXPECT_EQ(cache.get_or_plan(*g, topo, none), third);
  EXPECT_EQ(cache.replans(), 2u);
}

TEST(SchedLearnedCost, TheTimeBetweenNodesIsLearnedAndPlanned) {
  const auto g = matmul_relu(64);
  Topology topo;
  topo.devices = {device("", "cpu:0", 100, 10)};
  topo.devices[0].learned = std::make_shared<CostLearner>();
  topo.version = 1;
  const double bare = plan_graph(*g, topo, {}).predicted_total_s;
  // Runs of 2 nodes whose kernels took 1 ms of 1.1 ms: 50 us per node besides.
  for (int i = 0; i < 10; ++i) topo.devices[0].learned->observe_run(2, 1.1e-3, 1.0e-3);
  EXPECT_NEAR(topo.devices[0].learned->gap_s(), 50e-6, 1e-9);
  // Nodes overlapped: nothing besides. A few such runs (fewer than half
  // the window) leave the median where it was; a lasting change moves it.
  for (int i = 0; i < CostLearner::kWindow / 2; ++i) topo.devices[0].learned->observe_run(2, 0.5e-3, 1.0e-3);
  EXPECT_NEAR(topo.devices[0].learned->gap_s(), 50e-6, 1e-9);
  for (int i = 0; i < CostLearner::kWindow / 2 + 1; ++i) topo.devices[0].learned->observe_run(2, 1.04e-3, 1.0e-3);
  EXPECT_NEAR(topo.devices[0].learned->gap_s(), 20e-6, 1e-9);
  const Plan p = plan_graph(*g, topo, {});
  EXPECT_NEAR(p.predicted_total_s - bare, 2 * topo.devices[0].learned->gap_s(), 1e-9);
  EXPECT_DOUBLE_EQ(p.predicted_node_s[0] + p.predicted_node_s[1], bare);  // nodes as before

  const std::string file = temp_file("gap");
  {
    CostLearner l(file);
    for (uint64_t i = 0; i < CostLearner::kMinObservations; ++i) l.observe_run(4, 1e-3, 0.6e-3);
    ASSERT_TRUE(l.save());
  }
  EXPECT_NEAR(CostLearner(file).gap_s(), 100e-6, 1e-12);
  std::remove(file.c_str());
}

TEST(SchedLearnedCost, CorrectionsApplyOnlyWhenEveryDeviceLearns) {
  const auto g = matmul_relu(256);
  Topology topo = two_devices();
  const std::vector<OpCost> costs = node_costs(*g, nullptr);
  for (uint64_t i = 0; i < CostLearner::kMinObservations; ++i)
    topo.devices[1].learned->observe(costs[0].code, costs[0].work(), 1, 1000);
  EXPECT_EQ(plan_graph(*g, topo, {}).node_device[0], 0);
  // Without a learner on the CPU its figures and the accelerator's corrected
  // ones would not compare: the bare model places.
  topo.devices[0].learned.reset();
  EXPECT_EQ(plan_graph(*g, topo, {}).node_device[0], 1);
}

TEST(SchedLearnedCost, EachGraphKeepsItsOwnTimeBetweenNodes) {
  const auto small = matmul_relu(64);
  const auto big = matmul_relu(512);  // the same structure: one signature, sizes apart
  EXPECT_EQ(cost_signature(node_costs(*small, nullptr)), cost_signature(node_costs(*big, nullptr)));
  auto other = std::make_unique<Graph>("chain");
  other->add_input("x", DType::F32, {64, 64});
  other->add_node("relu", "a", {"x"}, {"h"});
  other->add_node("relu", "b", {"h"}, {"y"});
  other->mark_output("y");
  other->validate();
  const uint64_t mm = cost_signature(node_costs(*small, nullptr));
  const uint64_t chain = cost_signature(node_costs(*other, nullptr));
  ASSERT_NE(mm, chain);
  ASSERT_NE(mm, 0u);

  Topology topo;
  topo.devices = {device("", "cpu:0", 100, 10)};
  topo.devices[0].learned = std::make_shared<CostLearner>();
  topo.version = 1;
  CostLearner& l = *topo.devices[0].learned;
  const double bare_mm = plan_graph(*small, topo, {}).predicted_total_s;
  const double bare_chain = plan_graph(*other, topo, {}).predicted_total_s;
  // The chain hands off 100 us per node, the matmul graph 10 us.
  for (int i = 0; i < 10; ++i) {
    l.observe_run(chain, 2, 1.2e-3, 1.0e-3);
    l.observe_run(mm, 2, 1.02e-3, 1.0e-3);
  }
  EXPECT_NEAR(l.gap_s(chain), 100e-6, 1e-9);
  EXPECT_NEAR(l.gap_s(mm), 10e-6, 1e-9);
  EXPECT_GT(l.gap_s(), 10e-6);  // the device's figure: between the two
  EXPECT_LT(l.gap_s(), 100e-6);
  EXPECT_DOUBLE_EQ(l.gap_s(12345), l.gap_s());  // a graph never seen: the device's
  // Each plan adds its own graph's gap after each of its two nodes.
  EXPECT_NEAR(plan_graph(*small, topo, {}).predicted_total_s - bare_mm, 2 * 10e-6, 1e-9);
  EXPECT_NEAR(plan_graph(*other, topo, {}).predicted_total_s - bare_chain, 2 * 100e-6, 1e-9);

  // Kept in the file with the stage overhead; a later process reads both.
  l.observe_stage(300e-6);
  const std::string file = temp_file("graphs");
  {
    CostLearner w(file);
    for (uint64_t i = 0; i < CostLearner::kMinObservations; ++i) {
      w.observe_run(chain, 2, 1.2e-3, 1.0e-3);
      w.observe_stage(300e-6);
    }
    ASSERT_TRUE(w.save());
  }
  CostLearner back(file);
  EXPECT_NEAR(back.gap_s(chain), 100e-6, 1e-12);
  EXPECT_TRUE(back.stage_known());
  EXPECT_NEAR(back.stage_s(), 300e-6, 1e-12);
  std::remove(file.c_str());
}

// A coordinator and a worker node (serial figures of sched_plan_test), each
// device with its learner.
Topology learning_pair() {
  Topology t;
  t.devices = {device("node-a", "cpu:0", 1, 1), device("node-b", "cpu:0", 1, 1)};
  for (DeviceProfile& d : t.devices) d.learned = std::make_shared<CostLearner>();
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

TEST(SchedLearnedCost, AWorkersLearnedStageOverheadReplacesItsLinkFigures) {
  // linear(x, w1) with the weight w1 resident on the worker: one stage
  // there (the weight stays where it lives), one dispatch.
  Graph g("remote");
  g.add_input("x", DType::F32, {1, 256});
  g.value(g.add_input("w1", DType::F32, {256, 256})).role = TensorRole::Weight;
  g.add_node("linear", "fc", {"x", "w1"}, {"y"});
  g.mark_output("y");
  g.validate();
  Topology topo = learning_pair();
  Residency res;
  res.value_device = {{"x", 0}, {"w1", 1}};
  const Plan bare = plan_graph(g, topo, res);
  ASSERT_EQ(bare.node_device[0], 1);
  // Measured stages there cost 2 ms beyond their run and moves: the link's
  // RTT + dispatch (150 us) is replaced by it.
  for (int i = 0; i < 5; ++i) topo.devices[1].learned->observe_stage(2e-3);
  const Plan learned = plan_graph(g, topo, res);
  EXPECT_NEAR(learned.predicted_total_s - bare.predicted_total_s, 2e-3 - 150e-6, 1e-9);
  // The coordinator's own overhead counts for its stages in multi-node
  // plans only: a plan over one node runs as one graph.
  Topology one;
  one.devices = {topo.devices[0]};
  one.version = 1;
  const double before = plan_graph(g, one, {}).predicted_total_s;
  topo.devices[0].learned->observe_stage(1e-3);
  EXPECT_DOUBLE_EQ(plan_graph(g, one, {}).predicted_total_s, before);
  EXPECT_NEAR(plan_graph(g, topo, res).predicted_total_s - learned.predicted_total_s, 0, 1e-12)
      << "no stage of this plan runs on the coordinator";

  // Whole runs took 1.5x the sum of their parts: the coordinator scales the
  // plan's total by it once it has seen enough of them (not its parts).
  const Plan parts = plan_graph(g, topo, res);
  EXPECT_DOUBLE_EQ(parts.predicted_parts_s, parts.predicted_total_s);
  ASSERT_NE(parts.graph_signature, 0u);
  for (uint64_t i = 0; i < CostLearner::kMinObservations; ++i)
    topo.devices[0].learned->observe_total(parts.graph_signature, parts.predicted_parts_s,
                                           1.5 * parts.predicted_parts_s);
  const Plan scaled = plan_graph(g, topo, res);
  EXPECT_NEAR(scaled.predicted_total_s, 1.5 * parts.predicted_total_s, 1e-12);
  EXPECT_DOUBLE_EQ(scaled.predicted_parts_s, parts.predicted_parts_s);
  EXPECT_EQ(scaled.node_device, parts.node_device);
  EXPECT_DOUBLE_EQ(plan_graph(g, one, {}).predicted_total_s, before);  // one node: no whole-run correction
}

TEST(SchedLearnedCost, ALastingSmallDriftIsPlannedAgain) {
  const auto g = matmul_relu(256);
  Topology topo = two_devices();
  PlanCache cache;
  const Residency none;
  auto plan = cache.get_or_plan(*g, topo, none);
  // 1.2x off (within kSettleRatio): kept however long it lasts.
  for (int i = 0; i < 4 * PlanCache::kSettleRuns; ++i)
    EXPECT_FALSE(cache.report(*plan, plan->predicted_total_s * 1.2));
  EXPECT_EQ(cache.replans(), 0u);
  // 1.5x off (within kDriftRatio, beyond kSettleRatio): dropped once the
  // mean has settled there, not before.
  auto fresh = std::make_shared<const Plan>(*plan);
  cache.clear();
  cache.insert(PlanCache::key_of(*g, topo, none), fresh);
  const std::vector<OpCost> costs = node_costs(*g, nullptr);
  for (int i = 1; i < PlanCache::kSettleRuns; ++i)
    EXPECT_FALSE(cache.report(*fresh, fresh->predicted_total_s * 1.5)) << i;
  // What the runs taught meanwhile (the matmul 1.5x slower on the accelerator).
  for (uint64_t i = 0; i < CostLearner::kMinObservations; ++i)
    topo.devices[1].learned->observe(costs[0].code, costs[0].work(), model_seconds(costs[0], topo.devices[1]),
                                     1.5 * model_seconds(costs[0], topo.devices[1]));
  EXPECT_TRUE(cache.report(*fresh, fresh->predicted_total_s * 1.5));
  EXPECT_EQ(cache.replans(), 1u);
  auto again = cache.get_or_plan(*g, topo, none);
  EXPECT_NE(again, fresh);
  EXPECT_GT(again->predicted_total_s, fresh->predicted_total_s);
  // One slow run among many on time moves the mean by little: kept.
  for (int i = 0; i < 2 * PlanCache::kSettleRuns; ++i)
    EXPECT_FALSE(cache.report(*again, again->predicted_total_s * (i == 9 ? 1.9 : 1.0)));
  EXPECT_EQ(cache.replans(), 1u);
}

}  // namespace
}  // namespace genie::sched
