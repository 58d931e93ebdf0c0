// Semantic tags end to end through the control plane: a RemoteClient and a
// Server in one process, the session's data connection over the dpdk
// transport on an in-process net_ring port. A tensor written and read with
// its tag (decode / KV cache / layer 3) reaches the server with that tag --
// the server counts payload bytes by the tag its dpdk channel received
// (ServerInfo.tagged_bytes) -- and a read is answered with its request's
// tag. Over TCP, which ignores tags, the same calls work and count nothing.
//
// The dpdk engine reads its configuration once per process: ctest runs
// each case alone.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "control/client.hpp"
#include "dataplane/registry.hpp"
#include "dataplane_testing.hpp"
#include "server/server.hpp"
#include "server_testing.hpp"

namespace genie {
namespace {

using dataplane::SemanticTag;

Config client_config(int port, const std::string& transport) {
  Config c;
  c.master_addr = "127.0.0.1";
  c.master_port = port;
  c.timeout_ms = 10000;
  c.transport = transport;
  return c;
}

SemanticTag decode_kv_layer3() {
  SemanticTag t;
  t.dtype = static_cast<uint8_t>(static_cast<int32_t>(DType::F16) + 1);
  t.phase = static_cast<uint8_t>(Phase::Decode);
  t.role = static_cast<uint8_t>(TensorRole::KvCache);
  t.layer = 3;
  return t;
}

uint64_t tagged(const Server& s, const std::string& key) {
  const ServerStats st = s.stats();
  auto it = st.tagged_bytes().find(key);
  return it == st.tagged_bytes().end() ? 0 : it->second;
}

// Writes `n` bytes tagged and `n` untagged, reads both back tagged as given;
// the bytes come back exactly.
void write_and_read(RemoteClient& c, size_t n, const SemanticTag& tag) {
  const std::vector<uint8_t> in = dataplane::testing::pattern(n, 3);
  std::vector<uint8_t> out(n, 0);
  const uint64_t id = c.tensor_alloc(DType::Bool, {static_cast<int64_t>(n)}, "cpu:0");
  c.tensor_write(id, 0, in.data(), n, tag);
  c.tensor_read(id, 0, out.data(), n, tag);
  EXPECT_EQ(std::memcmp(in.data(), out.data(), n), 0);
  const uint64_t plain = c.tensor_alloc(DType::Bool, {static_cast<int64_t>(n)}, "cpu:0");
  c.tensor_write(plain, 0, in.data(), n);
  std::fill(out.begin(), out.end(), 0);
  c.tensor_read(plain, 0, out.data(), n);
  EXPECT_EQ(std::memcmp(in.data(), out.data(), n), 0);
}

TEST(ControlDpdkTags, TaggedTensorWriteAndReadArriveWithTheirTag) {
  dataplane::testing::use_build_plugins();
  dataplane::testing::use_dpdk_ring();
  ::setenv("GENIE_DPDK_MTU", "1500", 1);  // a 300 kB tensor is about 210 packets
  const dataplane::TransportLookup got = dataplane::lookup_transport("dpdk");
  if (!got.transport) GTEST_SKIP() << "dpdk is not available here: " << got.reason;

  auto server = start_server_offering("tag-server", {"dpdk"});
  auto c = RemoteClient::connect(client_config(server->port(), "dpdk"), "tag-client");
  ASSERT_EQ(c->data_transport(), "dpdk");
  const size_t n = 300000;
  write_and_read(*c, n, decode_kv_layer3());
  EXPECT_EQ(tagged(*server, "write decode/kv_cache/3"), n);
  EXPECT_EQ(tagged(*server, "read decode/kv_cache/3"), n);
  // The untagged write and read are not counted under any tag.
  EXPECT_EQ(server->stats().tagged_bytes_size(), 2) << c->server_info_json();
  // Statistics name it too.
  EXPECT_NE(c->server_info_json().find("\"write decode/kv_cache/3\""), std::string::npos);
}

TEST(ControlDpdkTags, TcpIgnoresTags) {
  auto server = start_server_offering("tag-server", {});
  auto c = RemoteClient::connect(client_config(server->port(), ""), "tag-client");
  ASSERT_EQ(c->data_transport(), "tcp");
  write_and_read(*c, 300000, decode_kv_layer3());
  EXPECT_EQ(server->stats().tagged_bytes_size(), 0);
}

}  // namespace
}  // namespace genie
