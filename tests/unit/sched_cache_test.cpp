// Plan hash (the plan-cache key) and the plan cache.
#include <gtest/gtest.h>

#include <thread>

#include "sched/plan.hpp"
#include "sched/reference_graphs.hpp"

namespace genie::sched {
namespace {

using testing::gpt2;
using testing::Gpt2Options;
using testing::two_nodes;

// x [4, 8] -> linear(w [16, 8]) -> gelu -> scaled by a constant.
std::unique_ptr<Graph> small(std::function<void(Graph&)> tweak_before_validate = nullptr, float constant = 2.0f) {
  auto g = std::make_unique<Graph>("small");
  g->add_input("x", DType::F32, {4, 8});
  auto c = std::make_shared<TensorData>(DType::F32, Shape{1});
  c->data<float>()[0] = constant;
  g->add_constant("c", c);  // declared between the inputs: JSON regroups them
  g->add_input("w", DType::F32, {16, 8});
  g->add_node("linear", "fc", {"x", "w"}, {"h"});
  g->add_node("gelu", "act", {"h"}, {"a"});
  g->add_node("mul", "scale", {"a", "c"}, {"y"});
  g->add_node("dropout", "drop", {"y"}, {"o"});
  g->set_attr("drop", "p", 0.25);
  g->mark_output("o");
  if (tweak_before_validate) tweak_before_validate(*g);
  g->validate();
  return g;
}

TEST(SchedPlanHash, GoldenValueStableAcrossProcessesAndMachines) {
  // The stream is fixed little-endian, with no addresses, identities or
  // unordered iteration: this value is the same in every process on every
  // machine. Changing it breaks plan caches across versions: bump
  // "genie.plan/1" when it must change.
  EXPECT_EQ(plan_hash(*small()), 0x790e168dda9def4dull) << std::hex << plan_hash(*small());
}

TEST(SchedPlanHash, StableAcrossRebuildsAndIterations) {
  const uint64_t h = plan_hash(*small());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(plan_hash(*small()), h);
  auto g = small();
  EXPECT_EQ(plan_hash(*g), plan_hash(*g));
  auto copy = std::make_unique<Graph>(*g);
  EXPECT_EQ(plan_hash(*copy), h);
  // Round trip through JSON (a different process would parse it).
  auto parsed = graph_from_json(graph_to_json(*g).c_str(), graph_to_json(*g).size());
  parsed->validate();
  EXPECT_EQ(plan_hash(*parsed), h);
}

TEST(SchedPlanHash, ValuesDoNotCount) {
  const uint64_t h = plan_hash(*small());
  EXPECT_EQ(plan_hash(*small(nullptr, 3.0f)), h);  // constant bytes
  EXPECT_EQ(plan_hash(*small([](Graph& g) { g.set_attr("drop", "p", 0.5); })), h);  // a float attribute
}

TEST(SchedPlanHash, DiffersWhenStructureDiffers) {
  const uint64_t h = plan_hash(*small());
  auto differs = [&](const char* what, std::function<void(Graph&)> tweak) {
    EXPECT_NE(plan_hash(*small(std::move(tweak))), h) << what;
  };
  // shape
  EXPECT_NE(plan_hash(*[] {
    auto g = std::make_unique<Graph>("small");
    g->add_input("x", DType::F32, {4, 8});
    g->add_input("w", DType::F32, {32, 8});  // 16 -> 32
    g->add_node("linear", "fc", {"x", "w"}, {"o"});
    g->mark_output("o");
    g->validate();
    return g;
  }()), plan_hash(*[] {
    auto g = std::make_unique<Graph>("small");
    g->add_input("x", DType::F32, {4, 8});
    g->add_input("w", DType::F32, {16, 8});
    g->add_node("linear", "fc", {"x", "w"}, {"o"});
    g->mark_output("o");
    g->validate();
    return g;
  }()));
  differs("op", [](Graph& g) { g.mutable_nodes()[1].op = "relu"; });
  differs("edge", [](Graph& g) {
    g.mutable_nodes()[2].input_names[0] = "h";  // mul reads the linear output instead of gelu's
  });
  differs("int attribute", [](Graph& g) { g.set_attr("act", "approximate", std::string("tanh")); });
  differs("role", [](Graph& g) { g.value(g.find_value("w")).role = TensorRole::Weight; });
  differs("annotation", [](Graph& g) { g.mutable_nodes()[0].ann.phase = Phase::Decode; });
  differs("extra output", [](Graph& g) { g.mark_output("h"); });
  // dtype
  auto f16 = std::make_unique<Graph>("small");
  f16->add_input("x", DType::F16, {4, 8});
  f16->add_node("relu", "r", {"x"}, {"o"});
  f16->mark_output("o");
  f16->validate();
  auto f32 = std::make_unique<Graph>("small");
  f32->add_input("x", DType::F32, {4, 8});
  f32->add_node("relu", "r", {"x"}, {"o"});
  f32->mark_output("o");
  f32->validate();
  EXPECT_NE(plan_hash(*f16), plan_hash(*f32));
  // Bound shapes of dynamic inputs.
  auto dyn = std::make_unique<Graph>("dyn");
  const ValueId x = dyn->add_input("x", DType::F32, {-1, 8});
  dyn->add_node("relu", "r", {"x"}, {"o"});
  dyn->mark_output("o");
  std::unordered_map<ValueId, Shape> b4{{x, {4, 8}}}, b5{{x, {5, 8}}};
  EXPECT_NE(plan_hash(*dyn, &b4), plan_hash(*dyn, &b5));
  EXPECT_EQ(plan_hash(*dyn, &b4), plan_hash(*dyn, &b4));
}

TEST(SchedPlanCache, RepeatedGraphSkipsPlanning) {
  PlanCache cache;
  const Topology t = two_nodes();
  auto g = gpt2({});
  auto p1 = cache.get_or_plan(*g, t, {});
  auto p2 = cache.get_or_plan(*g, t, {});
  EXPECT_EQ(p1.get(), p2.get());
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(cache.misses(), 1u);
  // A structurally equal graph built again (another decode step) hits.
  auto g2 = gpt2({});
  EXPECT_EQ(cache.get_or_plan(*g2, t, {}).get(), p1.get());
  // Another residency, topology version or shape misses.
  Residency r;
  r.value_device["wte"] = 1;
  EXPECT_NE(cache.get_or_plan(*g, t, r).get(), p1.get());
  Topology t2 = t;
  t2.version = 2;
  EXPECT_NE(cache.get_or_plan(*g, t2, {}).get(), p1.get());
  Gpt2Options o;
  o.past = 17;
  EXPECT_NE(cache.get_or_plan(*gpt2(o), t, {}).get(), p1.get());
  EXPECT_EQ(cache.size(), 4u);
  EXPECT_EQ(cache.hits(), 2u);
}

TEST(SchedPlanCache, ResidencySignatureIgnoresOrder) {
  Residency a, b;
  a.value_device["x"] = 0;
  a.value_device["y"] = 1;
  b.value_device["y"] = 1;
  b.value_device["x"] = 0;
  EXPECT_EQ(a.signature(), b.signature());
  b.value_device["x"] = 1;
  EXPECT_NE(a.signature(), b.signature());
  EXPECT_NE(Residency{}.signature(), a.signature());
}

TEST(SchedPlanCache, LeastRecentlyUsedIsDropped) {
  PlanCache cache(2);
  auto plan = std::make_shared<const Plan>();
  cache.insert({1, 0, 0}, plan);
  cache.insert({2, 0, 0}, plan);
  EXPECT_NE(cache.find({1, 0, 0}), nullptr);  // 1 is now the most recent
  cache.insert({3, 0, 0}, plan);
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.find({2, 0, 0}), nullptr);
  EXPECT_NE(cache.find({1, 0, 0}), nullptr);
  EXPECT_NE(cache.find({3, 0, 0}), nullptr);
  cache.clear();
  EXPECT_EQ(cache.size(), 0u);
}

TEST(SchedPlanCache, ThreadSafe) {
  PlanCache cache(8);
  const Topology t = two_nodes();
  std::vector<std::unique_ptr<Graph>> graphs;
  for (int past : {4, 8, 12}) {
    Gpt2Options o;
    o.past = past;
    graphs.push_back(gpt2(o));
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      for (int k = 0; k < 30; ++k) {
        const Graph& g = *graphs[static_cast<size_t>(k + i) % graphs.size()];
        auto p = cache.get_or_plan(g, t, {});
        ASSERT_EQ(p->node_device.size(), g.nodes().size());
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.hits() + cache.misses(), 120u);
}

}  // namespace
}  // namespace genie::sched
