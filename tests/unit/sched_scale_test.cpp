// The scheduler over many alike nodes (sched/plan.cpp, "Devices alike for
// placement"): from 32 devices on, a decision weighs only the first two
// untouched devices of each class of alike ones. Alike nodes appended after
// the first 31 devices can change nothing of a plan (the best and the
// runner-up among equals are the first in index order), so a plan over 31
// devices (weighed one by one) and one over the same devices and 40 more
// alike nodes (pruned) must be the same plan, decision by decision.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "sched/plan.hpp"
#include "sched/reference_graphs.hpp"

namespace genie::sched {
namespace {

// A coordinator with a CPU, then `n` remote nodes: every third with a GPU
// of its own besides its CPU, node 5 a slower one, every node linked with
// the coordinator (node 7 over a faster link).
Topology cluster(int n) {
  Topology t;
  t.devices.push_back(testing::device("coord", "cpu:0", 100, 10));
  for (int i = 0; i < n; ++i) {
    const std::string id = "n" + std::to_string(i);
    t.devices.push_back(testing::device(id, "cpu:0", i == 5 ? 50 : 100, 10));
    if (i % 3 == 0) t.devices.push_back(testing::device(id, "gpu:0", 100000, 2000, uint64_t{1} << 33));
    t.links.push_back({"coord", id, i == 7 ? 100e9 : 25e9, 5e-6, 1e-6, 3e-6, 1e-7});
  }
  t.version = 1;
  return t;
}

void expect_same_plan(const Plan& a, const Plan& b) {
  ASSERT_EQ(a.node_device, b.node_device);
  EXPECT_EQ(a.order, b.order);
  EXPECT_EQ(a.predicted_total_s, b.predicted_total_s);
  ASSERT_EQ(a.decisions.size(), b.decisions.size());
  for (size_t i = 0; i < a.decisions.size(); ++i) {
    EXPECT_EQ(a.decisions[i].rule, b.decisions[i].rule) << "node " << i;
    EXPECT_EQ(a.decisions[i].runner_up, b.decisions[i].runner_up) << "node " << i;
    EXPECT_EQ(a.decisions[i].finish_s, b.decisions[i].finish_s) << "node " << i;
    EXPECT_EQ(a.decisions[i].runner_up_finish_s, b.decisions[i].runner_up_finish_s) << "node " << i;
  }
  ASSERT_EQ(a.transfers.size(), b.transfers.size());
  for (size_t i = 0; i < a.transfers.size(); ++i) {
    EXPECT_EQ(a.transfers[i].from_device, b.transfers[i].from_device);
    EXPECT_EQ(a.transfers[i].to_device, b.transfers[i].to_device);
  }
}

TEST(SchedScale, AlikeNodesBeyondTheFirstChangeNoDecision) {
  const Topology small = cluster(20);  // 28 devices: weighed one by one
  ASSERT_LT(small.devices.size(), 32u);
  Topology large = cluster(20);
  for (int i = 20; i < 60; ++i) {  // 40 more nodes, alike to nodes 1, 2, 3 ...: pruned
    const std::string id = "n" + std::to_string(i);
    large.devices.push_back(testing::device(id, "cpu:0", 100, 10));
    if (i % 3 == 0) large.devices.push_back(testing::device(id, "gpu:0", 100000, 2000, uint64_t{1} << 33));
    large.links.push_back({"coord", id, 25e9, 5e-6, 1e-6, 3e-6, 1e-7});
  }
  for (const bool decode : {true, false}) {
    testing::Gpt2Options o;
    o.layers = 3;
    o.past = decode ? 16 : 0;
    o.seq = decode ? 1 : 8;
    o.hidden = 512;
    o.heads = 8;
    auto g = testing::gpt2(o);
    const Plan p = plan_graph(*g, small, {});
    // The case that matters: nodes go to the remote GPUs, where alike
    // devices tie (the runner-up of a node on n0's GPU is n3's).
    bool tie = false;
    for (size_t i = 0; i < p.node_device.size(); ++i)
      tie |= p.node_device[i] == 2 && p.decisions[i].runner_up == 6;
    EXPECT_TRUE(tie) << "no node went to n0's GPU with n3's as runner-up: the test does not exercise ties";
    expect_same_plan(p, plan_graph(*g, large, {}));
    // Weights resident on alike nodes (they become touched at once), and
    // on the coordinator.
    Residency r;
    r.value_device["wte"] = 3;  // n1's CPU
    expect_same_plan(plan_graph(*g, small, r), plan_graph(*g, large, r));
  }
}

TEST(SchedScale, AThousandNodesArePlannedAndDuplicatesStillRefused) {
  Topology t = cluster(1000);
  testing::Gpt2Options o;
  auto g = testing::gpt2(o);
  const Plan p = plan_graph(*g, t, {});
  EXPECT_EQ(p.node_device.size(), g->nodes().size());
  t.devices.push_back(t.devices[5]);
  EXPECT_THROW(plan_graph(*g, t, {}), Error);
}

}  // namespace
}  // namespace genie::sched
