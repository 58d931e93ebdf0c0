// The executor's feed of the cost model (exec/learn.hpp): node times and
// whole-stage times reach the learner of the device that ran them.
#include <gtest/gtest.h>

#include "exec/learn.hpp"
#include "sched/reference_graphs.hpp"

namespace genie {
namespace {

using namespace sched;
using testing::device;
using testing::matmul_relu;

TEST(ExecLearn, AStageTimeTeachesTheWorkersDeviceInProportion) {
  const auto g = matmul_relu(128);
  const std::vector<OpCost> costs = node_costs(*g, nullptr);
  DeviceProfile d = device("node-b", "cpu:0", 100, 10);
  d.learned = std::make_shared<CostLearner>();
  const double modelled = model_seconds(costs[0], d) + model_seconds(costs[1], d);
  // The worker reports each stage 3x as long as modelled: both nodes' cells
  // move to 3, so the stage is predicted at what it takes.
  for (int i = 0; i < 20; ++i) learn_from_stage(costs, 3 * modelled, d);
  EXPECT_NEAR((predict_seconds(costs[0], d) + predict_seconds(costs[1], d)) / (3 * modelled), 1.0, 1e-6);
  EXPECT_NEAR(predict_seconds(costs[1], d) / model_seconds(costs[1], d), 3.0, 1e-6);
  const uint64_t seen = d.learned->observations();
  learn_from_stage(costs, 0, d);  // nothing to learn from
  learn_from_stage({}, 1e-3, d);
  EXPECT_EQ(d.learned->observations(), seen);
}

TEST(ExecLearn, ARunTeachesEachNodeAndTheGraphsOwnGap) {
  const auto g = matmul_relu(64);
  const std::vector<OpCost> costs = node_costs(*g, nullptr);
  Topology topo;
  topo.devices = {device("", "cpu:0", 100, 10)};
  topo.devices[0].learned = std::make_shared<CostLearner>();
  // Synthetic trace: the matmul 4x its model, the relu 2x; 50 us between.
  ExecResult r;
  r.trace.resize(2);
  const double mm = 4 * model_seconds(costs[0], topo.devices[0]);
  const double relu = 2 * model_seconds(costs[1], topo.devices[0]);
  r.trace[0] = {0, 0, 1000, 1000 + static_cast<uint64_t>(mm * 1e9)};
  r.trace[1] = {1, 0, 2000, 2000 + static_cast<uint64_t>(relu * 1e9)};
  r.exec_ns = static_cast<uint64_t>((mm + relu + 100e-6) * 1e9);
  for (int i = 0; i < 10; ++i) learn_from_run(costs, r, topo, nullptr, 0);
  const CostLearner& l = *topo.devices[0].learned;
  EXPECT_NEAR(l.factor(costs[0].code, costs[0].work()), 4, 0.01);
  EXPECT_NEAR(l.factor(costs[1].code, costs[1].work()), 2, 0.01);
  EXPECT_NEAR(l.gap_s(cost_signature(costs)), 50e-6, 1e-8);
  // A stage of a larger graph keeps its gap under that graph's signature.
  std::vector<OpCost> whole = costs;
  whole.push_back(costs[1]);
  learn_from_run(costs, r, topo, nullptr, 0, &whole);
  EXPECT_NEAR(l.gap_s(cost_signature(whole)), 50e-6, 1e-8);
  // A failed run teaches nothing.
  const uint64_t seen = l.observations();
  r.status = GENIE_ERR_INTERNAL;
  learn_from_run(costs, r, topo, nullptr, 0);
  EXPECT_EQ(l.observations(), seen);
}

}  // namespace
}  // namespace genie
