// Choosing the data plane (dataplane/select.hpp) without a network:
// backends on both ends, the UCX and RDMA probes' word, and the transport
// of a client's data connections.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "dataplane/select.hpp"
#include "dataplane_testing.hpp"

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

TEST(DataplaneSelect, AutoPrefersGpudevThenRdmaThenDpdkOnBothEnds) {
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

TEST(DataplaneSelect, ExplicitBackendFailsNamingTheProbeAndTheEnd) {
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

// Every backend's transport is a row of the table, and auto's order is the
// documented one.
TEST(DataplaneSelect, TheTableNamesEachBackendsTransportAndAutosOrder) {
  EXPECT_STREQ(transport_for_backend(GENIE_BACKEND_TCP), "tcp");
  EXPECT_STREQ(transport_for_backend(GENIE_BACKEND_RDMA), "ucx");
  EXPECT_STREQ(transport_for_backend(GENIE_BACKEND_UCX), "ucx");
  EXPECT_STREQ(transport_for_backend(GENIE_BACKEND_DPDK), "dpdk");
  EXPECT_STREQ(transport_for_backend(GENIE_BACKEND_DPDK_GPUDEV), "dpdk_gpudev");
  std::vector<genie_backend_t> order;
  int last = 0;
  for (const BackendInfo& b : backend_table())
    if (b.auto_rank > 0) {
      EXPECT_GT(b.auto_rank, last) << "the table is in auto's order";
      last = b.auto_rank;
      order.push_back(b.backend);
    }
  EXPECT_EQ(order, (std::vector<genie_backend_t>{GENIE_BACKEND_DPDK_GPUDEV, GENIE_BACKEND_RDMA, GENIE_BACKEND_DPDK,
                                                 GENIE_BACKEND_TCP}));
}

// The transport of a client's data connections: demanded, selected, offered.
TEST(DataplaneSelect, DataConnectionsTakeTheTransportBothEndsCanUse) {
  dataplane::testing::use_build_plugins();
  const std::vector<DataTransport> offers = {{"tcp", ""}, {"loopback", "127.0.0.1:7001"}};
  // Nothing selected: tcp at the server's address.
  DataTransport t = choose_data_transport("", "", false, offers, "srv:7000");
  EXPECT_EQ(t.transport, "tcp");
  EXPECT_EQ(t.address, "srv:7000");
  // Demanded, offered, and its plugin loads: it, at the address offered.
  t = choose_data_transport("loopback", "", false, offers, "srv:7000");
  EXPECT_EQ(t.transport, "loopback");
  EXPECT_EQ(t.address, "127.0.0.1:7001");
  // Selected (by the backend) but not offered: tcp.
  t = choose_data_transport("", "dpdk", false, offers, "srv:7000");
  EXPECT_EQ(t.transport, "tcp");
  // Demanded but not offered: refused, naming what the server offers.
  try {
    choose_data_transport("dpdk", "", false, offers, "srv:7000");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_UNSUPPORTED);
    EXPECT_NE(e.detail().find("it offers tcp, loopback"), std::string::npos) << e.detail();
  }
  // With TLS only tcp encrypts: a selected transport yields, a demanded one fails.
  EXPECT_EQ(choose_data_transport("", "loopback", true, offers, "srv:7000").transport, "tcp");
  try {
    choose_data_transport("loopback", "", true, offers, "srv:7000");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_UNSUPPORTED);
    EXPECT_NE(e.detail().find("TLS"), std::string::npos) << e.detail();
  }
}

}  // namespace
}  // namespace genie
