// Direct transfers between two servers (src/server/transfers.cpp):
// export tickets, fetches by ticket, and a server importing a tensor from
// its peer, with two real servers on 127.0.0.1 and RemoteClient sessions.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "control/client.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "graph/graph.hpp"
#include "server/server.hpp"

namespace genie {
namespace {

constexpr const char* kToken = "transfer-test-token-5f2a9c41d07e";

std::unique_ptr<Server> start_server(const std::string& node, const std::string& token = kToken) {
  ServerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.num_threads = 1;
  o.node_id = node;
  o.auth_token = token;
  o.client_timeout_ms = 5000;
  return std::make_unique<Server>(o);
}

std::shared_ptr<RemoteClient> session(const Server& s, genie_node_role_t role, const std::string& node,
                                      const std::string& token = kToken) {
  Config c;
  c.master_addr = "127.0.0.1";
  c.master_port = s.port();
  c.auth_token = token;
  c.role = role;
  c.timeout_ms = 5000;
  return RemoteClient::connect(c, node);
}

// A tensor of n floats 0, 1, 2, ... on the client's server.
uint64_t filled(RemoteClient& c, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0f);
  const uint64_t id = c.tensor_alloc(DType::F32, {n}, "cpu:0");
  c.tensor_write(id, 0, v.data(), v.size() * sizeof(float));
  return id;
}

genie_status_t status_of(const std::function<void()>& f, std::string* detail = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (detail) *detail = e.detail();
    return e.code();
  }
  return GENIE_OK;
}

class ControlTransfer : public ::testing::Test {
 protected:
  void SetUp() override { set_log_level(std::getenv("GENIE_TEST_LOG") ? LogLevel::Debug : LogLevel::Error); }
};

TEST_F(ControlTransfer, ATicketFetchesTheTensorOnceAndOnlyWhole) {
  auto a = start_server("node-a");
  auto owner = session(*a, GENIE_NODE_ROLE_CLIENT, "owner");
  auto other = session(*a, GENIE_NODE_ROLE_SERVER, "other");
  const uint64_t id = filled(*owner, 1000);

  const std::string ticket = owner->tensor_export(id);
  EXPECT_EQ(ticket.size(), 32u);
  EXPECT_NE(owner->tensor_export(id), ticket) << "every export hands out a new ticket";
  std::vector<float> got(1000, -1.0f);
  other->tensor_fetch(ticket, got.data(), got.size() * sizeof(float));
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], static_cast<float>(i)) << "element " << i;
  EXPECT_EQ(a->stats().peer_export_bytes(), 4000u);

  std::string detail;
  EXPECT_EQ(status_of([&] { other->tensor_fetch(ticket, got.data(), 4000); }, &detail), GENIE_ERR_NOT_FOUND)
      << "a ticket is good for one fetch";
  EXPECT_NE(detail.find("ticket"), std::string::npos) << detail;

  const std::string t2 = owner->tensor_export(id);
  EXPECT_EQ(status_of([&] { other->tensor_fetch(t2, got.data(), 400); }), GENIE_ERR_SIZE_MISMATCH);
  EXPECT_EQ(status_of([&] { other->tensor_fetch(t2, got.data(), 4000); }), GENIE_ERR_NOT_FOUND)
      << "a refused fetch uses the ticket up too";

  EXPECT_EQ(status_of([&] { other->tensor_fetch(std::string(32, 'x'), got.data(), 4000); }),
            GENIE_ERR_NOT_FOUND)
      << "an invented ticket names nothing";
  EXPECT_EQ(status_of([&] { owner->tensor_export(id + 100); }), GENIE_ERR_NOT_FOUND);
  EXPECT_EQ(status_of([&] { other->tensor_export(id); }), GENIE_ERR_NOT_FOUND)
      << "a session exports only its own tensors";

  const std::string t3 = owner->tensor_export(id);
  owner->tensor_free(id);
  owner->server_info_json();  // the free has reached the server
  EXPECT_EQ(status_of([&] { other->tensor_fetch(t3, got.data(), 4000); }, &detail), GENIE_ERR_NOT_FOUND)
      << "a ticket does not keep a freed tensor";
  EXPECT_NE(detail.find("freed"), std::string::npos) << detail;
}

TEST_F(ControlTransfer, AServerImportsFromItsPeerWithoutTheAskerRelaying) {
  auto a = start_server("node-a");
  auto b = start_server("node-b");
  auto on_a = session(*a, GENIE_NODE_ROLE_SERVER, "master");
  auto on_b = session(*b, GENIE_NODE_ROLE_SERVER, "master");
  constexpr int64_t n = 1 << 18;  // 1 MiB
  const uint64_t src = filled(*on_a, n);
  const uint64_t dst = on_b->tensor_alloc(DType::F32, {n}, "cpu:0");

  on_b->tensor_import(dst, "127.0.0.1", a->port(), on_a->tensor_export(src), "node-a");
  std::vector<float> got(static_cast<size_t>(n), -1.0f);
  on_b->tensor_read(dst, 0, got.data(), got.size() * sizeof(float));
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], static_cast<float>(i)) << "element " << i;
  EXPECT_EQ(b->stats().peer_fetch_bytes(), static_cast<uint64_t>(n) * 4);
  EXPECT_EQ(a->stats().peer_export_bytes(), static_cast<uint64_t>(n) * 4);

  // A second import reuses B's session on A.
  const uint32_t sessions_on_a = a->stats().sessions();
  on_b->tensor_import(dst, "127.0.0.1", a->port(), on_a->tensor_export(src), "node-a");
  EXPECT_EQ(a->stats().sessions(), sessions_on_a);

  std::string detail;
  EXPECT_EQ(
      status_of([&] { on_b->tensor_import(dst, "127.0.0.1", a->port(), std::string(32, 'x'), "node-a"); },
                &detail),
      GENIE_ERR_NOT_FOUND);
  EXPECT_NE(detail.find("from node-a"), std::string::npos) << detail;
  const uint64_t small = on_b->tensor_alloc(DType::F32, {4}, "cpu:0");
  EXPECT_EQ(
      status_of([&] { on_b->tensor_import(small, "127.0.0.1", a->port(), on_a->tensor_export(src), "a"); }),
      GENIE_ERR_SIZE_MISMATCH);
  EXPECT_EQ(
      status_of([&] { on_b->tensor_import(dst + 100, "127.0.0.1", a->port(), std::string(32, 'x'), "a"); }),
      GENIE_ERR_NOT_FOUND);
  EXPECT_EQ(status_of([&] { on_b->tensor_import(dst, "127.0.0.1", 0, std::string(32, 'x'), "a"); }),
            GENIE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(status_of([&] { on_b->tensor_import(dst, "127.0.0.1", a->port(), "short", "a"); }),
            GENIE_ERR_INVALID_ARGUMENT);
}

uint64_t tagged(const Server& s, const std::string& key) {
  const ServerStats st = s.stats();
  auto it = st.tagged_bytes().find(key);
  return it == st.tagged_bytes().end() ? 0 : it->second;
}

uint64_t tagged_total(const Server& s) {
  uint64_t n = 0;
  const ServerStats st = s.stats();
  for (const auto& [key, bytes] : st.tagged_bytes()) n += bytes;
  return n;
}

// The tag of the value moved travels in TensorImport and TensorFetch, so
// both servers count the bytes under it even over TCP (which drops frame
// tags); an import without a tag counts nothing.
TEST_F(ControlTransfer, AnImportCarriesTheTagOfTheValueMoved) {
  auto a = start_server("node-a");
  auto b = start_server("node-b");
  auto on_a = session(*a, GENIE_NODE_ROLE_SERVER, "master");
  auto on_b = session(*b, GENIE_NODE_ROLE_SERVER, "master");
  constexpr int64_t n = 50000;
  const uint64_t src = filled(*on_a, n);
  const uint64_t dst = on_b->tensor_alloc(DType::F32, {n}, "cpu:0");
  dataplane::SemanticTag tag;
  tag.dtype = static_cast<uint8_t>(static_cast<int32_t>(DType::F32) + 1);
  tag.phase = static_cast<uint8_t>(Phase::Prefill);
  tag.role = static_cast<uint8_t>(TensorRole::KvCache);
  tag.layer = 7;

  on_b->tensor_import(dst, "127.0.0.1", a->port(), on_a->tensor_export(src), "node-a", tag);
  std::vector<float> got(static_cast<size_t>(n), -1.0f);
  on_b->tensor_read(dst, 0, got.data(), got.size() * sizeof(float));
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], static_cast<float>(i)) << "element " << i;
  EXPECT_EQ(tagged(*b, "import prefill/kv_cache/7"), static_cast<uint64_t>(n) * 4);
  EXPECT_EQ(tagged(*a, "read prefill/kv_cache/7"), static_cast<uint64_t>(n) * 4);

  on_b->tensor_import(dst, "127.0.0.1", a->port(), on_a->tensor_export(src), "node-a");
  EXPECT_EQ(tagged_total(*b), static_cast<uint64_t>(n) * 4) << "an untagged import counts nothing";
  EXPECT_EQ(tagged_total(*a), static_cast<uint64_t>(n) * 4);
}

TEST_F(ControlTransfer, OnlyAServerSessionMakesTheServerDial) {
  auto a = start_server("node-a");
  auto b = start_server("node-b");
  auto on_a = session(*a, GENIE_NODE_ROLE_SERVER, "master");
  auto user = session(*b, GENIE_NODE_ROLE_CLIENT, "user");
  const uint64_t src = filled(*on_a, 16);
  const uint64_t dst = user->tensor_alloc(DType::F32, {16}, "cpu:0");
  std::string detail;
  EXPECT_EQ(
      status_of([&] { user->tensor_import(dst, "127.0.0.1", a->port(), on_a->tensor_export(src), "a"); },
                &detail),
      GENIE_ERR_UNSUPPORTED);
  EXPECT_NE(detail.find("only a server's session"), std::string::npos) << detail;
  EXPECT_EQ(b->stats().peer_fetch_bytes(), 0u);
}

TEST_F(ControlTransfer, UnreachableOrForeignPeersAreClearErrors) {
  auto b = start_server("node-b");
  auto on_b = session(*b, GENIE_NODE_ROLE_SERVER, "master");
  const uint64_t dst = on_b->tensor_alloc(DType::F32, {16}, "cpu:0");
  // A port nothing listens on: a server's own port once it has stopped.
  int dead_port = 0;
  {
    auto gone = start_server("gone");
    dead_port = gone->port();
  }
  EXPECT_EQ(
      status_of([&] { on_b->tensor_import(dst, "127.0.0.1", dead_port, std::string(32, 'x'), "gone"); }),
      GENIE_ERR_CONNECTION);
  // A peer with another auth token refuses B's session.
  auto c = start_server("node-c", "another-token-0123456");
  EXPECT_EQ(
      status_of([&] { on_b->tensor_import(dst, "127.0.0.1", c->port(), std::string(32, 'x'), "node-c"); }),
      GENIE_ERR_AUTH);
  // B still serves.
  float one = 1.0f;
  on_b->tensor_write(dst, 0, &one, sizeof one);
}

}  // namespace
}  // namespace genie
