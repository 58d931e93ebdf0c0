// The cluster layer's decisions without a network: health levels, node
// status JSON from untrusted peers, and the event bus's unsubscribe
// guarantees. (Backend selection: dataplane_select_test.)
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "cluster/events.hpp"
#include "cluster/health.hpp"
#include "cluster/types.hpp"
#include "core/error.hpp"

namespace genie {
namespace {

TEST(ClusterHealth, WorstFindingWinsAndEveryFindingIsAReason) {
  HealthInputs in;
  in.memory_available_fraction = 0.5;
  EXPECT_EQ(evaluate_health(in).level, Health::Healthy);
  GpuInfo hot;
  hot.name = "G";
  hot.temperature_c = 90;
  hot.overheated = true;
  in.gpus = {hot};
  HealthReport r = evaluate_health(in);
  EXPECT_EQ(r.level, Health::Degraded);
  ASSERT_EQ(r.reasons.size(), 1u);
  in.remote = true;
  in.session_failed = true;
  EXPECT_EQ(evaluate_health(in).level, Health::Unhealthy);
  in.master_lost = true;
  r = evaluate_health(in);
  EXPECT_EQ(r.level, Health::Critical);
  EXPECT_EQ(r.reasons.size(), 2u);
  HealthInputs mem;
  mem.memory_available_fraction = 0.04;
  EXPECT_EQ(evaluate_health(mem).level, Health::Unhealthy);
  mem.memory_available_fraction = 0.01;
  EXPECT_EQ(evaluate_health(mem).level, Health::Critical);
}

TEST(ClusterJson, NodeStatusRoundTripsAndBadInputIsAProtocolError) {
  NodeStatus n;
  n.id = "node-1";
  n.host = "h";
  n.role = GENIE_NODE_ROLE_WORKER;
  n.alive = false;
  n.last_heartbeat_ms = 1234567;
  GpuInfo g;
  g.index = 1;
  g.name = "G";
  g.utilization = 95;
  g.available = false;
  n.gpus = {g};
  n.health = Health::Degraded;
  n.health_reasons = {"why"};
  n.listen = "10.0.0.2:5556";
  n.devices = {"cpu:0"};
  const std::string text = json_text(node_to_json(n).get());
  const NodeStatus back = node_from_json(json_parse(text, "test").get());
  EXPECT_EQ(json_text(node_to_json(back).get()), text);
  EXPECT_EQ(back.listen, "10.0.0.2:5556");
  EXPECT_EQ(back.devices, std::vector<std::string>{"cpu:0"});
  for (const char* bad : {"[]", "{}", "{\"id\":5}", "{\"id\":\"bad id\"}", "{\"id\":\"a\",\"gpus\":{}}",
                          "{\"id\":\"a\",\"gpus\":[1]}", "{\"id\":\"a\",\"last_heartbeat_ms\":\"x\"}",
                          "{\"id\":\"a\",\"devices\":\"cpu:0\"}", "{\"id\":\"a\",\"devices\":[1]}"}) {
    try {
      node_from_json(json_parse(bad, "test").get());
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_TRUE(e.code() == GENIE_ERR_PROTOCOL || e.code() == GENIE_ERR_INVALID_ARGUMENT) << bad;
    }
  }
}

std::atomic<int> g_calls{0};
void slow_cb(genie_event_type_t, const char*, void*) {
  ++g_calls;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

TEST(ClusterEvents, UnsubscribeWaitsForADeliveryInProgress) {
  EventBus bus;
  const uint64_t id = bus.subscribe(GENIE_EVENT_ALL, slow_cb, nullptr);
  std::thread t([&] { bus.publish(GENIE_EVENT_NODE_LOST, "{}"); });
  while (g_calls.load() == 0) std::this_thread::yield();
  bus.unsubscribe(id);  // the callback is still sleeping: waits for it
  const int after = g_calls.load();
  t.join();
  EXPECT_EQ(bus.publish(GENIE_EVENT_NODE_LOST, "{}"), 0u);
  EXPECT_EQ(g_calls.load(), after);
  EXPECT_THROW(bus.unsubscribe(id), Error);
  EXPECT_THROW(bus.subscribe(0, slow_cb, nullptr), Error);
  EXPECT_THROW(bus.subscribe(GENIE_EVENT_NODE_LOST, nullptr, nullptr), Error);
}

TEST(ClusterEvents, MaskSelectsEvents) {
  EventBus bus;
  g_calls = 0;
  bus.subscribe(GENIE_EVENT_GPU_AVAILABLE, slow_cb, nullptr);
  EXPECT_EQ(bus.publish(GENIE_EVENT_NODE_LOST, "{}"), 0u);
  EXPECT_EQ(bus.publish(GENIE_EVENT_GPU_AVAILABLE, "{}"), 1u);
  EXPECT_EQ(g_calls.load(), 1);
}

}  // namespace
}  // namespace genie
