// The cluster layer's decisions without a network: backend selection on
// both ends, health levels, node status JSON from untrusted peers, and the
// event bus's unsubscribe guarantees.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "cluster/discovery.hpp"
#include "cluster/events.hpp"
#include "cluster/health.hpp"
#include "cluster/types.hpp"
#include "core/error.hpp"

namespace genie {
namespace {

// Every backend, with the given ones usable (probe ok, transport built).
std::vector<BackendAvail> ends(std::initializer_list<genie_backend_t> usable) {
  std::vector<BackendAvail> v;
  for (genie_backend_t b : {GENIE_BACKEND_TCP, GENIE_BACKEND_RDMA, GENIE_BACKEND_DPDK, GENIE_BACKEND_DPDK_GPUDEV}) {
    bool on = b == GENIE_BACKEND_TCP;
    for (genie_backend_t u : usable) on = on || u == b;
    v.push_back({b, on, on ? "found" : "nothing found", on});
  }
  return v;
}

TEST(ClusterSelect, AutoPrefersGpudevThenRdmaThenDpdkOnBothEnds) {
  const auto all = ends({GENIE_BACKEND_RDMA, GENIE_BACKEND_DPDK, GENIE_BACKEND_DPDK_GPUDEV});
  EXPECT_EQ(select_backend(GENIE_BACKEND_AUTO, all, &all, "s").backend, GENIE_BACKEND_DPDK_GPUDEV);
  const auto no_gpudev = ends({GENIE_BACKEND_RDMA, GENIE_BACKEND_DPDK});
  EXPECT_EQ(select_backend(GENIE_BACKEND_AUTO, all, &no_gpudev, "s").backend, GENIE_BACKEND_RDMA);
  const auto dpdk = ends({GENIE_BACKEND_DPDK});
  const Selection s = select_backend(GENIE_BACKEND_AUTO, all, &dpdk, "s");
  EXPECT_EQ(s.backend, GENIE_BACKEND_DPDK);
  EXPECT_NE(s.reason.find("rdma (server s: probe: nothing found"), std::string::npos) << s.reason;
  // The other end decides too: nothing in common falls back to TCP.
  const auto none = ends({});
  const Selection t = select_backend(GENIE_BACKEND_AUTO, all, &none, "s");
  EXPECT_EQ(t.backend, GENIE_BACKEND_TCP);
  EXPECT_NE(t.reason.find("auto: tcp"), std::string::npos);
  // Without a remote end (embedded), this end alone.
  EXPECT_EQ(select_backend(GENIE_BACKEND_AUTO, dpdk, nullptr, "").backend, GENIE_BACKEND_DPDK);
}

TEST(ClusterSelect, ExplicitBackendFailsNamingTheProbeAndTheEnd) {
  const auto local = ends({GENIE_BACKEND_RDMA});
  const auto remote = ends({});
  EXPECT_EQ(select_backend(GENIE_BACKEND_RDMA, local, &local, "s").backend, GENIE_BACKEND_RDMA);
  EXPECT_EQ(select_backend(GENIE_BACKEND_TCP, remote, &remote, "s").backend, GENIE_BACKEND_TCP);
  try {
    select_backend(GENIE_BACKEND_RDMA, local, &remote, "srv-1");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_UNSUPPORTED);
    EXPECT_NE(e.detail().find("server srv-1: probe: nothing found"), std::string::npos) << e.detail();
    EXPECT_EQ(e.detail().find("this node"), std::string::npos) << e.detail();
  }
  // The real local probes of this build: no transport but TCP.
  const auto real = local_backends(RdmaProbe{}, dpdk_not_probed("not probed"));
  try {
    select_backend(GENIE_BACKEND_DPDK_GPUDEV, real, nullptr, "");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_UNSUPPORTED);
    EXPECT_NE(e.detail().find("not probed"), std::string::npos) << e.detail();
    EXPECT_NE(e.detail().find("transport not built"), std::string::npos) << e.detail();
  }
}

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

namespace genie {
namespace {

// UCX's resource list (ucp_context_print_info) decides ucx and rdma.
TEST(UcxProbe, ParsesResourcesAndTellsRdmaTransportsApart) {
  const std::string here =
      "#      resource 0  :  md 0  dev 0  flags -- self/memory0\n"
      "#      resource 1  :  md 1  dev 1  flags -- tcp/lo\n"
      "#      resource 2  :  md 3  dev 3  flags -- posix/memory\n";
  UcxProbe p;
  p.probed = true;
  parse_ucx_info(here, p);
  EXPECT_TRUE(p.ok);
  EXPECT_EQ(p.resources, (std::vector<std::string>{"self/memory0", "tcp/lo", "posix/memory"}));
  EXPECT_TRUE(p.rdma.empty());
  EXPECT_NE(p.reason.find("tcp/lo"), std::string::npos);

  UcxProbe ib;
  ib.probed = true;
  parse_ucx_info(here + "#      resource 3  :  md 4  dev 4  flags -- rc_mlx5/mlx5_0:1\n", ib);
  EXPECT_EQ(ib.rdma, (std::vector<std::string>{"rc_mlx5/mlx5_0:1"}));

  UcxProbe none;
  parse_ucx_info("!libucp.so.0 not loaded (UCX is not installed)\n", none);
  EXPECT_FALSE(none.ok);
  EXPECT_EQ(none.reason, "libucp.so.0 not loaded (UCX is not installed)");
}

TEST(UcxProbe, RdmaNeedsADeviceThatUcxDrives) {
  RdmaProbe verbs;
  verbs.available = true;
  verbs.reason = "1 RDMA device(s) with an ACTIVE port";
  UcxProbe tcp_only;
  tcp_only.probed = true;
  parse_ucx_info("#      resource 1  :  md 1  dev 1  flags -- tcp/lo\n", tcp_only);
  auto find = [](const std::vector<BackendAvail>& v, genie_backend_t b) {
    for (const BackendAvail& a : v)
      if (a.backend == b) return a;
    return BackendAvail{};
  };
  const auto v = local_backends(verbs, dpdk_not_probed("-"), tcp_only);
  EXPECT_FALSE(find(v, GENIE_BACKEND_RDMA).probe_ok);
  EXPECT_NE(find(v, GENIE_BACKEND_RDMA).probe.find("UCX drives none of them"), std::string::npos);
  EXPECT_TRUE(find(v, GENIE_BACKEND_UCX).probe_ok);
  UcxProbe ib;
  ib.probed = true;
  parse_ucx_info("#      resource 1  :  md 1  dev 1  flags -- tcp/lo\n"
                 "#      resource 2  :  md 2  dev 2  flags -- rc_verbs/mlx5_0:1\n",
                 ib);
  const auto w = local_backends(verbs, dpdk_not_probed("-"), ib);
  EXPECT_TRUE(find(w, GENIE_BACKEND_RDMA).probe_ok);
  EXPECT_NE(find(w, GENIE_BACKEND_RDMA).probe.find("rc_verbs/mlx5_0:1"), std::string::npos);
  // No verbs device: UCX's word does not matter.
  EXPECT_FALSE(find(local_backends(RdmaProbe{}, dpdk_not_probed("-"), ib), GENIE_BACKEND_RDMA).probe_ok);
}

// ucx is chosen only when asked for: auto prefers tcp to UCX over TCP.
TEST(UcxProbe, AutoNeverPicksTheUcxBackend) {
  std::vector<BackendAvail> v = {{GENIE_BACKEND_TCP, true, "", true}, {GENIE_BACKEND_UCX, true, "", true}};
  EXPECT_EQ(select_backend(GENIE_BACKEND_AUTO, v, &v, "s").backend, GENIE_BACKEND_TCP);
  EXPECT_EQ(select_backend(GENIE_BACKEND_UCX, v, &v, "s").backend, GENIE_BACKEND_UCX);
}

}  // namespace
}  // namespace genie
