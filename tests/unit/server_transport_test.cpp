// The transport of a session's data connection: chosen by the client among
// the data transports the server's Welcome offers, from GENIE_TRANSPORT
// (Config::transport, demanded) or the selected backend
// (Config::selected_transport, with a fallback to TCP). A server and a
// client in one process, so that the loopback plugin can carry the data.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "control/client.hpp"
#include "core/error.hpp"
#include "dataplane_testing.hpp"
#include "graph/graph.hpp"
#include "server/server.hpp"
#include "server_testing.hpp"

namespace genie {
namespace {

std::unique_ptr<Server> start_server(std::vector<std::string> data_transports) {
  return start_server_offering("transport-server", std::move(data_transports));
}

Config client_config(int port) {
  Config c;
  c.master_addr = "127.0.0.1";
  c.master_port = port;
  c.timeout_ms = 5000;
  return c;
}

// Writes a tensor and reads it back: the bytes go over the data connection.
void round_trip(RemoteClient& c) {
  std::vector<float> in(1 << 18), out(in.size(), 0.f);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i) * 0.5f;
  const uint64_t id = c.tensor_alloc(DType::F32, {static_cast<int64_t>(in.size())}, "cpu:0");
  c.tensor_write(id, 0, in.data(), in.size() * sizeof(float));
  c.tensor_read(id, 0, out.data(), out.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(in.data(), out.data(), in.size() * sizeof(float)), 0);
}

uint64_t data_connections(const Server& s, const std::string& transport) {
  const ServerStats st = s.stats();
  auto it = st.data_connections().find(transport);
  return it == st.data_connections().end() ? 0 : it->second;
}

class ControlTransport : public ::testing::Test {
 protected:
  void SetUp() override { dataplane::testing::use_build_plugins(); }
};

TEST_F(ControlTransport, DataConnectionRunsOverTheDemandedTransport) {
  auto server = start_server({"loopback"});
  const ServerStats offered = server->stats();
  ASSERT_EQ(offered.data_transports_size(), 2);
  EXPECT_EQ(offered.data_transports(0), "tcp");
  EXPECT_EQ(offered.data_transports(1), "loopback");

  Config cfg = client_config(server->port());
  cfg.transport = "loopback";
  auto c = RemoteClient::connect(cfg, "client-loopback");
  EXPECT_EQ(c->data_transport(), "loopback");
  round_trip(*c);
  EXPECT_EQ(data_connections(*server, "loopback"), 1u);
  EXPECT_EQ(data_connections(*server, "tcp"), 0u);
  // The server info JSON names both sides' view.
  const std::string json = c->server_info_json();
  EXPECT_NE(json.find("\"data_connections\":{\"loopback\":1}"), std::string::npos) << json;
  EXPECT_NE(json.find("\"data_transport\":\"loopback\""), std::string::npos) << json;

  // A client without a choice stays on TCP.
  auto plain = RemoteClient::connect(client_config(server->port()), "client-tcp");
  EXPECT_EQ(plain->data_transport(), "tcp");
  round_trip(*plain);
  EXPECT_EQ(data_connections(*server, "tcp"), 1u);
  EXPECT_EQ(data_connections(*server, "loopback"), 1u);
}

TEST_F(ControlTransport, DemandedTransportTheServerDoesNotOfferIsUnsupported) {
  auto server = start_server({});
  Config cfg = client_config(server->port());
  cfg.transport = "loopback";
  try {
    RemoteClient::connect(cfg, "client-a");
    FAIL() << "connected without the demanded transport";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_UNSUPPORTED);
    EXPECT_NE(e.detail().find("'loopback'"), std::string::npos) << e.detail();
    EXPECT_NE(e.detail().find("does not offer it"), std::string::npos) << e.detail();
  }
  EXPECT_EQ(data_connections(*server, "tcp"), 0u);
}

TEST_F(ControlTransport, SelectedTransportFallsBackToTcp) {
  auto server = start_server({});
  Config cfg = client_config(server->port());
  cfg.selected_transport = "loopback";  // the backend's, not demanded
  auto c = RemoteClient::connect(cfg, "client-a");
  EXPECT_EQ(c->data_transport(), "tcp");
  round_trip(*c);
  EXPECT_EQ(data_connections(*server, "tcp"), 1u);
}

TEST_F(ControlTransport, ServerWithoutAPluginStartsOnTcp) {
  // A transport whose plugin (or its libraries) is missing is left out.
  auto server = start_server({"nosuch", "loopback"});
  const ServerStats st = server->stats();
  ASSERT_EQ(st.data_transports_size(), 2);
  EXPECT_EQ(st.data_transports(0), "tcp");
  EXPECT_EQ(st.data_transports(1), "loopback");
  Config cfg = client_config(server->port());
  cfg.transport = "nosuch";
  try {
    RemoteClient::connect(cfg, "client-a");
    FAIL() << "connected over a transport nobody has";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_UNSUPPORTED);
    EXPECT_NE(e.detail().find("'nosuch'"), std::string::npos) << e.detail();
  }
}

TEST_F(ControlTransport, EverySessionOpensItsDataConnectionOverTheTransport) {
  auto server = start_server({"loopback"});
  Config cfg = client_config(server->port());
  cfg.transport = "loopback";
  auto c = RemoteClient::connect(cfg, "client-a");
  round_trip(*c);
  c.reset();
  auto again = RemoteClient::connect(cfg, "client-b");
  round_trip(*again);
  EXPECT_EQ(data_connections(*server, "loopback"), 2u);
}

uint64_t tagged(const Server& s, const std::string& key) {
  const ServerStats st = s.stats();
  auto it = st.tagged_bytes().find(key);
  return it == st.tagged_bytes().end() ? 0 : it->second;
}

// Loopback has RMA: transfers of 64 KiB and more go by RMA, and their
// request names the tag (no frame moves the bytes), so the server counts
// them under it; an untagged RMA transfer counts nothing.
TEST_F(ControlTransport, RmaTransfersCountUnderTheTagTheirRequestNames) {
  auto server = start_server({"loopback"});
  Config cfg = client_config(server->port());
  cfg.transport = "loopback";
  auto c = RemoteClient::connect(cfg, "client-rma");
  dataplane::SemanticTag tag;
  tag.dtype = static_cast<uint8_t>(static_cast<int32_t>(DType::F32) + 1);
  tag.phase = static_cast<uint8_t>(Phase::Decode);
  tag.role = static_cast<uint8_t>(TensorRole::Weight);
  tag.layer = 12;
  const size_t n = size_t{1} << 18;  // 1 MiB of floats: by RMA
  std::vector<float> in(n), out(n, 0.f);
  for (size_t i = 0; i < n; ++i) in[i] = static_cast<float>(i);
  const uint64_t id = c->tensor_alloc(DType::F32, {static_cast<int64_t>(n)}, "cpu:0");
  c->tensor_write(id, 0, in.data(), n * sizeof(float), tag);
  c->tensor_read(id, 0, out.data(), n * sizeof(float), tag);
  EXPECT_EQ(std::memcmp(in.data(), out.data(), n * sizeof(float)), 0);
  EXPECT_EQ(tagged(*server, "write decode/weight/12"), n * sizeof(float));
  EXPECT_EQ(tagged(*server, "read decode/weight/12"), n * sizeof(float));
  c->tensor_write(id, 0, in.data(), n * sizeof(float));
  c->tensor_read(id, 0, out.data(), n * sizeof(float));
  EXPECT_EQ(server->stats().tagged_bytes_size(), 2) << "untagged RMA transfers count nothing";
  EXPECT_EQ(tagged(*server, "write decode/weight/12"), n * sizeof(float));
}

}  // namespace
}  // namespace genie
