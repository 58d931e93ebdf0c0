// Semantic tags of the values a master moves between nodes: a master and a
// worker (NodeServer) in one process whose links to each other run over
// the dpdk transport on an in-process net_ring port (ServerOptions::
// link_transport). A graph annotated decode / layer 3 over two KV-cache
// inputs, one on each node, makes the master move one of them across; the
// worker receives (or answers) it with the tag semantic_tag() derives --
// decode/kv_cache/3 -- on its dpdk channel (ServerInfo.tagged_bytes).
// The dpdk engine reads its configuration once per process: ctest runs
// each case alone.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "control/client.hpp"
#include "dataplane/registry.hpp"
#include "dataplane_testing.hpp"
#include "graph/graph.hpp"
#include "server/node_server.hpp"

namespace genie {
namespace {

Config node_config(const std::string& id) {
  Config c;
  c.node_id = id;
  c.timeout_ms = 10000;
  c.session_grace_ms = 0;
  c.num_threads = 1;
  c.serve_transports = {"dpdk"};
  c.transport = "dpdk";
  return c;
}

uint64_t tagged(const ServerStats& st, const std::string& key) {
  auto it = st.tagged_bytes().find(key);
  return it == st.tagged_bytes().end() ? 0 : it->second;
}

TEST(MultinodeDpdkTags, ValuesMovedToAndFromAWorkerCarryTheirGraphTags) {
  dataplane::testing::use_build_plugins();
  dataplane::testing::use_dpdk_ring();
  const dataplane::TransportLookup got = dataplane::lookup_transport("dpdk");
  if (!got.transport) GTEST_SKIP() << "dpdk is not available here: " << got.reason;

  NodeServer master(node_config("tags-master"), "127.0.0.1", 0);
  Config wc = node_config("tags-worker");
  wc.master_addr = "127.0.0.1";
  wc.master_port = master.port();
  NodeServer worker(wc, "127.0.0.1", 0);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (master.stats().workers() < 1 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(master.stats().workers(), 1u) << "the worker did not join";

  Config cc;
  cc.master_addr = "127.0.0.1";
  cc.master_port = master.port();
  cc.timeout_ms = 10000;
  auto client = RemoteClient::connect(cc, "tags-client");
  const int64_t n = 1 << 16;  // 256 kB of f32 each
  std::vector<float> a(n, 1.5f), b(n, 2.0f), out(n, 0.f);
  const uint64_t ia = client->tensor_alloc(DType::F32, {n}, "cpu:0");
  const uint64_t ib = client->tensor_alloc(DType::F32, {n}, "tags-worker/cpu:0");
  client->tensor_write(ia, 0, a.data(), a.size() * sizeof(float));
  client->tensor_write(ib, 0, b.data(), b.size() * sizeof(float));
  // The client's own writes are untagged: nothing counted yet.
  EXPECT_EQ(worker.stats().tagged_bytes_size(), 0);

  Graph g("kv-update");
  const ValueId va = g.add_input("a", DType::F32, {n});
  const ValueId vb = g.add_input("b", DType::F32, {n});
  g.value(va).role = TensorRole::KvCache;
  g.value(vb).role = TensorRole::KvCache;
  const NodeId add = g.add_node("add", "upd", {"a", "b"}, {"y"});
  g.node(add).ann.phase = Phase::Decode;
  g.node(add).ann.layer = 3;
  g.mark_output("y");
  g.validate();
  std::promise<RemoteResult> done;
  client->submit(graph_to_json(g), {{"a", ia}, {"b", ib}},
                 [&](RemoteResult&& r) { done.set_value(std::move(r)); });
  RemoteResult r = done.get_future().get();
  ASSERT_EQ(r.status, GENIE_OK) << r.detail;
  ASSERT_EQ(r.outputs.size(), 1u);
  client->tensor_read(r.outputs[0].tensor_id, 0, out.data(), out.size() * sizeof(float));
  EXPECT_EQ(out[0], 3.5f);
  EXPECT_EQ(out[n - 1], 3.5f);

  // One of the inputs crossed between the nodes, with its tag, whichever
  // way the planner chose.
  const ServerStats ws = worker.stats();
  const uint64_t bytes = tagged(ws, "write decode/kv_cache/3") + tagged(ws, "read decode/kv_cache/3");
  EXPECT_EQ(bytes, static_cast<uint64_t>(n) * sizeof(float)) << client->server_info_json();
  EXPECT_GT(master.stats().server_transfer_bytes(), 0u);
}

}  // namespace
}  // namespace genie
