// A master against workers it should not trust (docs/security.md, "What a
// token holder can do to other tenants"): a registration that points the
// master at itself (directly, or through a TCP relay), workers that never
// finish their stages, a worker that lies about its results, and values
// read back from workers past the master's budget. The master
// and worker are real servers in this process on 127.0.0.1; the worker is
// reached through FrameProxy, which can hold back its GraphDones or rewrite
// them (a worker's word, as the master reads it).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "control/client.hpp"
#include "core/log.hpp"
#include "graph/graph.hpp"
#include "server/multinode.hpp"
#include "server/node_server.hpp"
#include "server/server.hpp"
#include "server_client_testing.hpp"
#include "server_testing.hpp"

namespace genie {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::unique_ptr<Server> start_master(int64_t stage_timeout_ms = 60000, uint64_t memory_budget = 0,
                                     int64_t session_max_stages = 16, int64_t client_timeout_ms = 10000) {
  ServerOptions o;
  o.session_max_stages = session_max_stages;
  o.memory_budget = memory_budget;
  o.port = 0;
  o.num_threads = 2;
  o.node_id = "hw-master";
  o.session_grace_ms = 0;
  o.client_timeout_ms = client_timeout_ms;
  o.stage_timeout_ms = stage_timeout_ms;
  o.multinode = true;
  return std::make_unique<Server>(o);
}

std::unique_ptr<Server> start_worker(const std::string& node_id = "hw-worker") {
  ServerOptions o;
  o.port = 0;
  o.num_threads = 1;
  o.node_id = node_id;
  o.session_grace_ms = 0;
  return std::make_unique<Server>(o);
}

std::shared_ptr<RemoteClient> connect(int port, const std::string& node,
                                      genie_node_role_t role = GENIE_NODE_ROLE_CLIENT) {
  Config c = client_config(port, 10000);
  c.role = role;
  return RemoteClient::connect(c, node);
}

std::vector<sched::DeviceProfile> one_cpu() {
  sched::DeviceProfile d;
  d.device = "cpu:0";
  d.peak_flops = 1e10;
  d.mem_bw_bytes_per_s = 1e10;
  d.mem_capacity_bytes = 1ull << 30;
  d.mem_budget_bytes = 1ull << 30;
  return {d};
}

// y = relu(x), x f32[n].
std::string relu_graph(int64_t n) {
  Graph g("hw-relu");
  g.add_input("x", DType::F32, {n});
  g.add_node("relu", "r", {"x"}, {"y"});
  g.mark_output("y");
  return graph_to_json(g);
}

std::future<RemoteResult> submit(RemoteClient& c, const std::string& json, uint64_t x) {
  auto done = std::make_shared<std::promise<RemoteResult>>();
  std::future<RemoteResult> f = done->get_future();
  auto s = c.submit(json, {{"x", x}}, [done](RemoteResult&& r) { done->set_value(std::move(r)); });
  if (s) c.watch(*s);
  return f;
}

// Another tenant's one-node graph on the master completes (within a
// generous bound: it must not wait for a stalled worker's deadline).
void expect_graph_completes(RemoteClient& c) {
  const uint64_t x = c.tensor_alloc(DType::F32, {4}, "cpu:0");
  auto f = submit(c, relu_graph(4), x);
  ASSERT_EQ(f.wait_for(seconds(30)), std::future_status::ready)
      << "another tenant's graph waits behind the stalled ones";
  const RemoteResult r = f.get();
  EXPECT_EQ(r.status, GENIE_OK) << r.detail;
}

// A tensor of n floats on the worker, written through the master.
uint64_t on_worker(RemoteClient& c, int64_t n) {
  const uint64_t id = c.tensor_alloc(DType::F32, {n}, "hw-worker/cpu:0");
  std::vector<float> v(static_cast<size_t>(n), -1.0f);
  c.tensor_write(id, 0, v.data(), v.size() * sizeof(float));
  return id;
}

// Large enough that the plan runs the stage where x lives rather than move
// x to the master.
constexpr int64_t kN = int64_t{1} << 22;

// A master whose worker "hw-worker" is reached through a FrameProxy, and
// the worker's session on the master that registered it (registered now
// when `join`).
struct ProxiedWorker {
  explicit ProxiedWorker(int64_t stage_timeout_ms, bool join = true, uint64_t master_budget = 0,
                         int64_t session_max_stages = 16, int64_t client_timeout_ms = 10000)
      : worker(start_worker()),
        proxy(worker->port()),
        master(start_master(stage_timeout_ms, master_budget, session_max_stages, client_timeout_ms)),
        registrar(connect(master->port(), "hw-worker", GENIE_NODE_ROLE_WORKER)) {
    if (join) enrol();
  }
  void enrol() { registrar->register_worker("127.0.0.1", proxy.port(), one_cpu()); }
  std::unique_ptr<Server> worker;
  FrameProxy proxy;
  std::unique_ptr<Server> master;
  std::shared_ptr<RemoteClient> registrar;
};

class HostileWorkers : public ::testing::Test {
 protected:
  // What the master logs about its workers is expected here; GENIE_TEST_LOG=1
  // shows it.
  void SetUp() override { set_log_level(std::getenv("GENIE_TEST_LOG") ? LogLevel::Debug : LogLevel::Error); }
};

TEST_F(HostileWorkers, AMasterRefusesToRegisterItselfDirectlyOrThroughARelay) {
  auto master = start_master();
  auto imposter = connect(master->port(), "imposter", GENIE_NODE_ROLE_WORKER);
  std::string detail = expect_error(
      GENIE_ERR_INVALID_ARGUMENT, [&] { imposter->register_worker("127.0.0.1", master->port(), one_cpu()); });
  EXPECT_NE(detail.find("itself"), std::string::npos) << detail;

  // A plain TCP relay on the registrant's own address: the address is the
  // sender's, but the server behind it is the master.
  FrameProxy relay(master->port());
  detail = expect_error(GENIE_ERR_INVALID_ARGUMENT,
                        [&] { imposter->register_worker("127.0.0.1", relay.port(), one_cpu()); });
  EXPECT_NE(detail.find("itself"), std::string::npos) << detail;
  EXPECT_GE(relay.accepted(), 1) << "the master never dialed the relay";
  EXPECT_EQ(master->stats().workers(), 0u);

  // Tenants' graphs still run (on the master itself).
  auto tenant = connect(master->port(), "tenant");
  const uint64_t x = tenant->tensor_alloc(DType::F32, {4}, "cpu:0");
  auto f = submit(*tenant, relu_graph(4), x);
  ASSERT_EQ(f.wait_for(seconds(30)), std::future_status::ready) << "a tenant's graph hangs";
  const RemoteResult r = f.get();
  EXPECT_EQ(r.status, GENIE_OK) << r.detail;
}

// A worker that never finishes its stage holds its own graph only: another
// tenant's graph completes meanwhile, and stopping the master does not wait
// for the worker.
TEST_F(HostileWorkers, AStalledWorkerHoldsOnlyItsGraphAndStopDoesNotWaitForIt) {
  ProxiedWorker pw(/*stage_timeout_ms=*/120000);
  auto& [worker, proxy, master, registrar] = pw;
  ASSERT_EQ(master->stats().workers(), 1u);

  auto a = connect(master->port(), "tenant-a");
  auto b = connect(master->port(), "tenant-b");
  const uint64_t xa = on_worker(*a, kN);
  proxy.hold(wire::MsgType::GraphDone);  // the worker never answers now
  auto fa = submit(*a, relu_graph(kN), xa);
  ASSERT_TRUE(eventually([&] { return proxy.held() > 0; }, 30000)) << "the stage never reached the worker";

  expect_graph_completes(*b);
  EXPECT_NE(fa.wait_for(milliseconds(0)), std::future_status::ready) << "the stalled graph did not wait";

  // Stopping ends the wait at once rather than at the stage deadline.
  const auto t0 = std::chrono::steady_clock::now();
  std::thread stopper([&] {
    master->stop();
    master->wait();
  });
  ASSERT_EQ(fa.wait_for(seconds(30)), std::future_status::ready) << "stop did not end the stalled graph";
  EXPECT_NE(fa.get().status, GENIE_OK);
  stopper.join();
  std::printf("master stopped %lld ms after stop() with a stalled worker stage (deadline 120000 ms)\n",
              static_cast<long long>(ms_since(t0)));
  proxy.release();
}

// The deadline as an operator sets it (genie serve --stage-timeout-ms,
// GENIE_STAGE_TIMEOUT, genie_config_set_stage_timeout_ms): a master made
// from its configuration, as `genie serve` makes one, fails a graph whose
// stage a worker holds, with TIMEOUT naming the worker.
TEST_F(HostileWorkers, AStageFailsAtItsDeadlineNamingTheWorker) {
  auto worker = start_worker();
  FrameProxy proxy(worker->port());
  Config cfg;
  cfg.node_id = "hw-master";
  cfg.num_threads = 2;
  cfg.session_grace_ms = 0;
  cfg.timeout_ms = 10000;
  ::setenv("GENIE_STAGE_TIMEOUT", "1000", 1);
  NodeServer master(cfg, "127.0.0.1", 0);
  ::unsetenv("GENIE_STAGE_TIMEOUT");
  auto registrar = connect(master.port(), "hw-worker", GENIE_NODE_ROLE_WORKER);
  registrar->register_worker("127.0.0.1", proxy.port(), one_cpu());
  auto a = connect(master.port(), "tenant-a");
  const uint64_t xa = on_worker(*a, kN);
  proxy.hold(wire::MsgType::GraphDone);
  const auto t0 = std::chrono::steady_clock::now();
  auto fa = submit(*a, relu_graph(kN), xa);
  ASSERT_EQ(fa.wait_for(seconds(60)), std::future_status::ready) << "no deadline on the stage";
  const RemoteResult r = fa.get();
  EXPECT_EQ(r.status, GENIE_ERR_TIMEOUT) << r.detail;
  EXPECT_NE(r.detail.find("hw-worker"), std::string::npos) << r.detail;
  EXPECT_NE(r.detail.find("1000 ms"), std::string::npos) << "not the configured deadline: " << r.detail;
  std::printf("a stalled stage failed after %lld ms (deadline 1000 ms)\n",
              static_cast<long long>(ms_since(t0)));
  proxy.release();
}

// A worker's GraphDone that says something its plan rules out fails the
// graph naming the worker, and the worker gets no more work.
TEST_F(HostileWorkers, ALyingWorkerFailsTheGraphAndIsDropped) {
  struct Lie {
    const char* what;
    std::function<void(wire::GraphDone&)> edit;
  };
  const std::vector<Lie> lies = {
      {"a small shape",
       [](wire::GraphDone& d) {
         d.mutable_outputs(0)->clear_shape();
         d.mutable_outputs(0)->add_shape(1);
       }},
      {"a huge shape",
       [](wire::GraphDone& d) {
         d.mutable_outputs(0)->clear_shape();
         d.mutable_outputs(0)->add_shape(int64_t{1} << 33);
       }},
      {"another dtype",
       [](wire::GraphDone& d) { d.mutable_outputs(0)->set_dtype(static_cast<int32_t>(DType::I32)); }},
  };
  ProxiedWorker pw(/*stage_timeout_ms=*/60000, /*join=*/false);
  auto& [worker, proxy, master, registrar] = pw;
  auto a = connect(master->port(), "tenant-a");
  for (const Lie& lie : lies) {
    SCOPED_TRACE(lie.what);
    proxy.edit_graph_done(nullptr);
    pw.enrol();  // again after each lie: a lying worker is dropped
    ASSERT_EQ(master->stats().workers(), 1u);
    const uint64_t x = on_worker(*a, kN);
    const int edited = proxy.edited();
    proxy.edit_graph_done(lie.edit);
    auto f = submit(*a, relu_graph(kN), x);
    ASSERT_EQ(f.wait_for(seconds(60)), std::future_status::ready);
    const RemoteResult r = f.get();
    ASSERT_GT(proxy.edited(), edited) << "the stage did not run on the worker";
    EXPECT_EQ(r.status, GENIE_ERR_PROTOCOL) << r.detail;
    EXPECT_NE(r.detail.find("hw-worker"), std::string::npos) << r.detail;
    EXPECT_EQ(master->stats().workers(), 0u) << "the lying worker still gets work";
    a->tensor_free(x);
  }
}

// Bytes the master stages for a client's reads of a worker tensor are
// charged to its budget first: a read larger than the master's budget is
// refused, a smaller one goes.
TEST_F(HostileWorkers, ReadsThroughTheMasterAreChargedToItsBudget) {
  ProxiedWorker pw(/*stage_timeout_ms=*/60000, /*join=*/true, /*master_budget=*/16u << 20);
  auto& [worker, proxy, master, registrar] = pw;
  auto a = connect(master->port(), "tenant-a");
  const int64_t n = int64_t{8} << 20;  // 32 MiB of f32, on the worker
  const uint64_t x = a->tensor_alloc(DType::F32, {n}, "hw-worker/cpu:0");
  std::vector<float> v(static_cast<size_t>(n));
  const std::string detail = expect_error(GENIE_ERR_OUT_OF_MEMORY,
                                          [&] { a->tensor_read(x, 0, v.data(), v.size() * sizeof(float)); });
  EXPECT_NE(detail.find("staging"), std::string::npos) << detail;
  a->tensor_read(x, 0, v.data(), 4u << 20);  // 4 MiB: within the budget
}

// y = x @ w1 on the worker (w1, a weight there), z = y @ w2 on the master
// (w2, a weight here): the master reads y, f32[m, n], back from the worker.
std::string split_graph(int64_t m, int64_t n) {
  Graph g("hw-split");
  g.value(g.add_input("x", DType::F32, {m, 1})).role = TensorRole::Input;
  g.value(g.add_input("w1", DType::F32, {1, n})).role = TensorRole::Weight;
  g.value(g.add_input("w2", DType::F32, {n, 1})).role = TensorRole::Weight;
  g.add_node("matmul", "mm1", {"x", "w1"}, {"y"});
  g.add_node("matmul", "mm2", {"y", "w2"}, {"z"});
  g.mark_output("z");
  return graph_to_json(g);
}

// The intermediate a master reads back from a worker between stages is
// charged to the session and the server's budget first: one larger than the
// budget fails its graph with OUT_OF_MEMORY naming the value, the server
// goes on serving, and a copy that fits is released when its graph ends.
TEST_F(HostileWorkers, ValuesReadBackFromWorkersAreChargedAndReleased) {
  ProxiedWorker pw(/*stage_timeout_ms=*/60000, /*join=*/true, /*master_budget=*/8u << 20);
  auto& [worker, proxy, master, registrar] = pw;
  ASSERT_EQ(master->stats().workers(), 1u);
  auto a = connect(master->port(), "tenant-a");
  const auto run = [&](int64_t m, int64_t n) {
    const uint64_t x = a->tensor_alloc(DType::F32, {m, 1}, "hw-worker/cpu:0");
    const uint64_t w1 = a->tensor_alloc(DType::F32, {1, n}, "hw-worker/cpu:0");
    const uint64_t w2 = a->tensor_alloc(DType::F32, {n, 1}, "cpu:0");
    auto done = std::make_shared<std::promise<RemoteResult>>();
    std::future<RemoteResult> f = done->get_future();
    auto s = a->submit(split_graph(m, n), {{"x", x}, {"w1", w1}, {"w2", w2}},
                       [done](RemoteResult&& r) { done->set_value(std::move(r)); });
    if (s) a->watch(*s);
    EXPECT_EQ(f.wait_for(seconds(60)), std::future_status::ready) << "the graph never completed";
    RemoteResult r = f.get();
    for (const RemoteOutput& o : r.outputs) a->tensor_free(o.tensor_id);
    for (uint64_t t : {x, w1, w2}) a->tensor_free(t);
    return r;
  };
  // y: 16 MiB, past the 8 MiB budget.
  RemoteResult r = run(2048, 2048);
  EXPECT_EQ(r.status, GENIE_ERR_OUT_OF_MEMORY) << r.detail;
  EXPECT_NE(r.detail.find("value 'y'"), std::string::npos) << r.detail;
  EXPECT_NE(r.detail.find("hw-worker"), std::string::npos) << r.detail;
  EXPECT_NE(r.detail.find("memory budget"), std::string::npos) << r.detail;

  // y: 4 MiB, within it; released at the graph's end, so that 6 MiB more
  // fit afterwards.
  r = run(512, 2048);
  EXPECT_EQ(r.status, GENIE_OK) << r.detail;
  EXPECT_GE(master->stats().server_transfer_bytes_by_role().at("activation"), 4u << 20)
      << "y was not read back to the master";
  const uint64_t big = a->tensor_alloc(DType::F32, {int64_t{6} << 18}, "cpu:0");
  a->tensor_free(big);
}

// A multi-node graph's stage on the master is charged as a graph run there
// is: one whose output is past the master's budget fails with
// OUT_OF_MEMORY before it runs, and the server goes on.
TEST_F(HostileWorkers, StagesOnTheMasterAreChargedToItsBudget) {
  ProxiedWorker pw(/*stage_timeout_ms=*/60000, /*join=*/true, /*master_budget=*/8u << 20);
  auto& [worker, proxy, master, registrar] = pw;
  ASSERT_EQ(master->stats().workers(), 1u);
  auto a = connect(master->port(), "tenant-a");
  Graph g("hw-outer");
  g.add_input("x", DType::F32, {2048, 1});
  g.value(g.add_input("w", DType::F32, {1, 2048})).role = TensorRole::Weight;  // here: the stage too
  g.add_node("matmul", "mm", {"x", "w"}, {"y"});                               // y: 16 MiB
  g.mark_output("y");
  const uint64_t x = a->tensor_alloc(DType::F32, {2048, 1}, "cpu:0");
  const uint64_t w = a->tensor_alloc(DType::F32, {1, 2048}, "cpu:0");
  auto done = std::make_shared<std::promise<RemoteResult>>();
  std::future<RemoteResult> f = done->get_future();
  auto s = a->submit(graph_to_json(g), {{"x", x}, {"w", w}},
                     [done](RemoteResult&& r) { done->set_value(std::move(r)); });
  if (s) a->watch(*s);
  ASSERT_EQ(f.wait_for(seconds(60)), std::future_status::ready) << "the graph never completed";
  const RemoteResult r = f.get();
  EXPECT_EQ(r.status, GENIE_ERR_OUT_OF_MEMORY) << r.detail;
  EXPECT_NE(r.detail.find("on master hw-master"), std::string::npos) << r.detail;
  for (const RemoteOutput& o : r.outputs) a->tensor_free(o.tensor_id);
  expect_graph_completes(*a);
}

// y = x @ w, w a weight on the worker (so the stage runs there): tiny.
std::string pinned_graph() {
  Graph g("hw-pinned");
  g.value(g.add_input("x", DType::F32, {4, 1})).role = TensorRole::Input;
  g.value(g.add_input("w", DType::F32, {1, 4})).role = TensorRole::Weight;
  g.add_node("matmul", "mm", {"x", "w"}, {"y"});
  g.mark_output("y");
  return graph_to_json(g);
}

// `n` sessions (hostile-0, ...), each with its tensors on the worker behind
// `proxy`, then each with a graph whose stage that worker never answers
// (the proxy holds its GraphDones from now on): the graphs' completions.
struct Stalled {
  std::vector<std::shared_ptr<RemoteClient>> sessions;
  std::vector<std::future<RemoteResult>> graphs;
};
Stalled stall(const Server& master, FrameProxy& proxy, int n) {
  Stalled st;
  std::vector<std::pair<uint64_t, uint64_t>> bound;
  // Every session's tensors on the worker first (allocations are calls of
  // their own, not what is tested here)...
  for (int i = 0; i < n; ++i) {
    st.sessions.push_back(connect(master.port(), cat("hostile-", i)));
    RemoteClient& c = *st.sessions.back();
    bound.emplace_back(c.tensor_alloc(DType::F32, {4, 1}, "hw-worker/cpu:0"),
                       c.tensor_alloc(DType::F32, {1, 4}, "hw-worker/cpu:0"));
  }
  // ...then every session's graph, to a worker that never answers now.
  proxy.hold(wire::MsgType::GraphDone);
  for (int i = 0; i < n; ++i) {
    RemoteClient& c = *st.sessions[static_cast<size_t>(i)];
    const auto [x, w] = bound[static_cast<size_t>(i)];
    auto done = std::make_shared<std::promise<RemoteResult>>();
    st.graphs.push_back(done->get_future());
    auto s = c.submit(pinned_graph(), {{"x", x}, {"w", w}},
                      [done](RemoteResult&& r) { done->set_value(std::move(r)); });
    if (s) c.watch(*s);
  }
  return st;
}

// Stops the master: every graph still waiting ends.
void stop_ends_every_wait(Server& master, std::vector<std::future<RemoteResult>>& graphs) {
  std::thread stopper([&] {
    master.stop();
    master.wait();
  });
  for (auto& f : graphs)
    if (f.valid())
      EXPECT_EQ(f.wait_for(seconds(30)), std::future_status::ready) << "stop left a graph waiting";
  stopper.join();
}

// Submits pinned_graph() on x and w (where they live, the stage runs).
std::future<RemoteResult> submit_pinned(RemoteClient& c, uint64_t x, uint64_t w) {
  auto done = std::make_shared<std::promise<RemoteResult>>();
  std::future<RemoteResult> f = done->get_future();
  auto s = c.submit(pinned_graph(), {{"x", x}, {"w", w}},
                    [done](RemoteResult&& r) { done->set_value(std::move(r)); });
  if (s) c.watch(*s);
  return f;
}

// More sessions than the master has task threads (16), each with a graph
// whose stage a stalled worker holds: every stage is sent (none waits for a
// thread, none is refused), and meanwhile another tenant's graph on the
// master and another tenant's graph on a healthy worker complete. One
// session past its bound of stages waiting (here 2) is refused the next,
// naming the bound. (Each waiting stage held a task thread before, and a
// cap of 8 of them for all sessions refused the rest whoever sent them.)
TEST_F(HostileWorkers, StagesWaitingOnAStalledWorkerHoldNoThread) {
  ProxiedWorker pw(/*stage_timeout_ms=*/120000, /*join=*/true, /*master_budget=*/0, /*session_max_stages=*/2);
  auto& [worker, proxy, master, registrar] = pw;
  auto healthy = start_worker("hw-healthy");
  auto healthy_registrar = connect(master->port(), "hw-healthy", GENIE_NODE_ROLE_WORKER);
  healthy_registrar->register_worker("127.0.0.1", healthy->port(), one_cpu());
  ASSERT_EQ(master->stats().workers(), 2u);
  auto greedy = connect(master->port(), "greedy");
  const uint64_t gx = greedy->tensor_alloc(DType::F32, {4, 1}, "hw-worker/cpu:0");
  const uint64_t gw = greedy->tensor_alloc(DType::F32, {1, 4}, "hw-worker/cpu:0");

  constexpr int kSessions = 24;
  Stalled st = stall(*master, proxy, kSessions);
  ASSERT_TRUE(eventually([&] { return proxy.held() >= kSessions; }, 20000))
      << proxy.held() << " of " << kSessions << " stages reached the worker";
  for (auto& f : st.graphs) EXPECT_NE(f.wait_for(milliseconds(0)), std::future_status::ready);

  // One session: two stages wait, the third is refused.
  std::vector<std::future<RemoteResult>> mine;
  for (int i = 0; i < 2; ++i) mine.push_back(submit_pinned(*greedy, gx, gw));
  ASSERT_TRUE(eventually([&] { return proxy.held() >= kSessions + 2; }, 20000));
  std::future<RemoteResult> third = submit_pinned(*greedy, gx, gw);
  ASSERT_EQ(third.wait_for(seconds(20)), std::future_status::ready)
      << "a stage past the session's bound waits";
  const RemoteResult r = third.get();
  EXPECT_EQ(r.status, GENIE_ERR_OUT_OF_MEMORY) << r.detail;
  EXPECT_NE(r.detail.find("GENIE_SESSION_MAX_STAGES"), std::string::npos) << r.detail;

  // Another tenant: a graph on the master, and one on the healthy worker.
  auto other = connect(master->port(), "tenant-b");
  expect_graph_completes(*other);
  const uint64_t hx = other->tensor_alloc(DType::F32, {4, 1}, "hw-healthy/cpu:0");
  const uint64_t hw = other->tensor_alloc(DType::F32, {1, 4}, "hw-healthy/cpu:0");
  auto f = submit_pinned(*other, hx, hw);
  ASSERT_EQ(f.wait_for(seconds(30)), std::future_status::ready) << "a graph on a healthy worker waits";
  const RemoteResult ok = f.get();
  EXPECT_EQ(ok.status, GENIE_OK) << ok.detail;
  ASSERT_EQ(ok.outputs.size(), 1u);
  EXPECT_EQ(ok.outputs[0].device, "hw-healthy/cpu:0") << "the graph did not run on the healthy worker";
  EXPECT_GE(master->stats().workers(), 2u);

  for (auto& g : mine) st.graphs.push_back(std::move(g));
  stop_ends_every_wait(*master, st.graphs);
  proxy.release();
}

// Stopping the master ends every stage waiting on a worker at once (each
// graph fails with SHUTDOWN), long before their deadline.
TEST_F(HostileWorkers, StopEndsEveryStageWaitingOnAWorker) {
  ProxiedWorker pw(/*stage_timeout_ms=*/120000);
  auto& [worker, proxy, master, registrar] = pw;
  constexpr int kSessions = 20;
  Stalled st = stall(*master, proxy, kSessions);
  ASSERT_TRUE(eventually([&] { return proxy.held() >= kSessions; }, 20000));
  const auto t0 = std::chrono::steady_clock::now();
  stop_ends_every_wait(*master, st.graphs);
  for (auto& f : st.graphs) {
    const RemoteResult r = f.get();
    EXPECT_NE(r.status, GENIE_OK);
  }
  std::printf("master stopped %lld ms after stop() with %d stages waiting (deadline 120000 ms)\n",
              static_cast<long long>(ms_since(t0)), kSessions);
  proxy.release();
}

// Sessions whose graphs wait on a stalled worker, their stages sent to it
// back to back; another session's tensor calls on that worker go through
// meanwhile (before, the master's task pool started too few threads for
// tasks posted back to back: some stages and the allocation behind them
// waited for a thread held by a stalled stage, until the client's timeout).
TEST_F(HostileWorkers, CallsToAWorkerDoNotWaitBehindItsStalledStages) {
  ProxiedWorker pw(/*stage_timeout_ms=*/120000);
  auto& [worker, proxy, master, registrar] = pw;
  ASSERT_EQ(master->stats().workers(), 1u);
  constexpr int kSessions = 8;
  auto b = connect(master->port(), "tenant-b");
  Stalled st = stall(*master, proxy, kSessions);
  ASSERT_TRUE(eventually([&] { return proxy.held() >= kSessions; }, 20000))
      << "only " << proxy.held() << " of " << kSessions << " stages reached the worker";
  // Each call would fail with TIMEOUT (the client's, 10 s) behind them.
  for (int i = 0; i < 3; ++i) {
    const uint64_t y = b->tensor_alloc(DType::F32, {4}, "hw-worker/cpu:0");
    const float v[4] = {1, 2, 3, float(i)};
    float back[4] = {};
    b->tensor_write(y, 0, v, sizeof v);
    b->tensor_read(y, 0, back, sizeof back);
    EXPECT_EQ(back[3], float(i));
    b->tensor_free(y);
  }
  stop_ends_every_wait(*master, st.graphs);
  proxy.release();
}

// The calls that move a stage's inputs to its worker end by the stage
// deadline too, not only by the master's client timeout (120 s here): a
// worker that never answers the allocation of a value moved there fails the
// graph with TIMEOUT naming the worker and the deadline.
TEST_F(HostileWorkers, MovesBeforeAStageEndByTheStageDeadline) {
  ProxiedWorker pw(/*stage_timeout_ms=*/1000, /*join=*/true, /*master_budget=*/0, /*session_max_stages=*/16,
                   /*client_timeout_ms=*/120000);
  auto& [worker, proxy, master, registrar] = pw;
  ASSERT_EQ(master->stats().workers(), 1u);
  auto a = connect(master->port(), "tenant-a");
  // x on the master, w on the worker: the stage runs where w is, so x is
  // allocated and written there first.
  const uint64_t x = a->tensor_alloc(DType::F32, {4, 1}, "cpu:0");
  const uint64_t w = a->tensor_alloc(DType::F32, {1, 4}, "hw-worker/cpu:0");
  proxy.hold(wire::MsgType::TensorAllocReply);
  const auto t0 = std::chrono::steady_clock::now();
  auto f = submit_pinned(*a, x, w);
  ASSERT_EQ(f.wait_for(seconds(30)), std::future_status::ready) << "the move waits for the client timeout";
  const RemoteResult r = f.get();
  ASSERT_GT(proxy.held(), 0) << "x was not moved to the worker: the plan changed";
  EXPECT_EQ(r.status, GENIE_ERR_TIMEOUT) << r.detail;
  EXPECT_NE(r.detail.find("worker hw-worker"), std::string::npos) << r.detail;
  EXPECT_NE(r.detail.find("1000 ms (the stage deadline)"), std::string::npos) << r.detail;
  std::printf(
      "a move to a stalled worker failed its graph after %lld ms (stage deadline 1000 ms, client "
      "timeout 120000 ms)\n",
      static_cast<long long>(ms_since(t0)));
  proxy.release();
}

}  // namespace
}  // namespace genie
