// Multi-node execution on the master: the contract is in multinode.hpp.
#include "server/multinode.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>

#include "control/semantic_tag.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/metrics.hpp"
#include "core/trace.hpp"
#include "exec/overhead.hpp"
#include "exec/plan_runner.hpp"
#include "exec/run_memory.hpp"
#include "graph/split.hpp"
#include "server/master.hpp"

namespace genie {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Submits a graph and waits for its completion until `deadline`, looking at
// `cancelled` at least every `slice`. Returns false when it gave up (the
// completion, if it comes, is dropped).
bool wait_submit(RemoteClient& c, const std::string& json,
                 const std::vector<std::pair<std::string, uint64_t>>& bindings, Clock::time_point deadline,
                 const std::atomic<bool>& cancelled, RemoteResult* out) {
  constexpr auto slice = std::chrono::milliseconds(100);
  auto p = std::make_shared<std::promise<RemoteResult>>();
  std::future<RemoteResult> f = p->get_future();
  // On the client's direct link, this thread reads the completion itself.
  auto s = c.submit(json, bindings, [p](RemoteResult&& r) { p->set_value(std::move(r)); });
  while (f.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    const auto now = Clock::now();
    if (now >= deadline || cancelled.load()) return false;  // a handle dropped: the watcher collects it
    const auto until = std::min(deadline, now + slice);
    if (s) c.collect(*s, until);
    f.wait_until(until);
  }
  *out = f.get();
  return true;
}

}  // namespace

MultiNode::MultiNode(std::string node_id, Config cfg, Executor& exec, ClusterMaster* cluster,
                     std::string self_instance, int64_t stage_timeout_ms, size_t session_max_stages)
    : node_id_(std::move(node_id)),
      cfg_(std::move(cfg)),
      exec_(exec),
      cluster_(cluster),
      self_instance_(std::move(self_instance)),
      stage_timeout_ms_(stage_timeout_ms),
      waits_(session_max_stages) {}

bool MultiNode::alive(const std::string& node) const { return !cluster_ || cluster_->node_alive(node); }

void MultiNode::join(const std::string& node_id, const std::string& host, int port,
                     std::vector<sched::DeviceProfile> devices, const void* registered_by) {
  check(!devices.empty(), GENIE_ERR_INVALID_ARGUMENT, "worker ", node_id, " registered no devices");
  check(node_id != node_id_ && !node_id.empty(), GENIE_ERR_INVALID_ARGUMENT, "worker node id '", node_id,
        "' is empty or this master's own");
  {
    // A node id belongs to the session that registered it while that
    // session lives and the cluster layer holds it alive: another session
    // claiming it is refused, so a worker cannot be replaced under its
    // users. A restarted worker registers again once its old session has
    // closed or been marked lost.
    std::lock_guard<std::mutex> lk(mu_);
    auto it = workers_.find(node_id);
    check(it == workers_.end() || it->second->registered_by == registered_by || !alive(node_id),
          GENIE_ERR_AUTH, "worker node id '", node_id, "' is registered by another live session (from ",
          it == workers_.end() ? "" : it->second->host,
          "); it can be registered again once that session has ended or the cluster layer holds it lost");
  }
  Config c = cfg_;
  c.master_addr = host;
  c.master_port = port;
  c.role = GENIE_NODE_ROLE_SERVER;
  // Every call to the worker (the tensor moves between a graph's stages
  // among them) is answered by the stage deadline or fails naming it.
  c.timeout_ms = std::min<int64_t>(c.timeout_ms, stage_timeout_ms_);
  auto w = std::make_shared<Worker>();
  w->node_id = node_id;
  w->host = host;
  w->port = port;
  w->registered_by = registered_by;
  w->client = RemoteClient::connect(c, node_id_);
  // Identity from the handshake, not from addresses: the server that
  // answered at host:port (directly, through a relay or under any name) is
  // this one when its Welcome carries this server's instance. Placing a
  // stage there would make this master wait for itself.
  check(self_instance_.empty() || w->client->server_instance() != self_instance_, GENIE_ERR_INVALID_ARGUMENT,
        "worker '", node_id, "' at ", host, ":", port, " is this master (", node_id_,
        ") itself: the server answering there is this one (its handshake says so), and a master never "
        "places work on itself through the worker path");
  // The server answering there is the node that registered, by its own
  // handshake: an address that now serves another node is not taken for it.
  check(w->client->server_node_id() == node_id, GENIE_ERR_AUTH, "worker '", node_id, "' at ", host, ":", port,
        " answers as node '", w->client->server_node_id(), "': a node's address must serve that node");
  // The link, measured once: the RTT the cluster layer measures with its
  // Probe (the figure genie_discover and the cluster state report), else
  // the best of a few ServerInfo round trips; and one write.
  double rtt = cluster_ ? cluster_->measure_rtt(host, port) : 0;
  w->rtt_source = "probe";
  if (!(rtt > 0)) {
    w->rtt_source = "server_info";
    rtt = 1e9;
    for (int i = 0; i < 5; ++i) {
      const auto t0 = Clock::now();
      w->client->server_info_json();
      rtt = std::min(rtt, seconds_since(t0));
    }
  }
  const size_t probe = size_t{1} << 20;
  const std::string dev0 = devices.front().device.empty() ? "cpu:0" : devices.front().device;
  const uint64_t id = w->client->tensor_alloc(DType::F32, {static_cast<int64_t>(probe / 4)}, dev0);
  std::vector<std::byte> bytes(probe);
  const auto t0 = Clock::now();
  w->client->tensor_write(id, 0, bytes.data(), bytes.size());
  const double write_s = std::max(seconds_since(t0) - rtt, 1e-6);
  w->client->tensor_free(id);
  // Request and dispatch handling beyond the RTT: the best of a few
  // TensorAlloc round trips, and of a few GraphSubmits of a one-node graph
  // (what running the smallest stage there costs besides its compute).
  double alloc_s = 1e9, submit_s = 1e9;
  uint64_t one = 0;
  for (int i = 0; i < 3; ++i) {
    const auto ta = Clock::now();
    const uint64_t t = w->client->tensor_alloc(DType::F32, {1}, dev0);
    alloc_s = std::min(alloc_s, seconds_since(ta));
    if (i == 0)
      one = t;
    else
      w->client->tensor_free(t);
  }
  // A one-node graph and a 16-node chain (relu over one float): the stage's
  // fixed dispatch cost and its cost per node.
  constexpr int kChain = 16;
  double chain_s = 1e9;
  for (int nodes : {1, kChain}) {
    Graph probe_graph("link_probe");
    probe_graph.add_input("v0", DType::F32, {1});
    for (int i = 0; i < nodes; ++i)
      probe_graph.add_node("relu", cat("r", i), {cat("v", i)}, {cat("v", i + 1)});
    probe_graph.mark_output(cat("v", nodes));
    const std::string json = graph_to_json(probe_graph);
    double& best = nodes == 1 ? submit_s : chain_s;
    for (int i = 0; i < 4; ++i) {
      const auto ts = Clock::now();
      RemoteResult r = run_probe(*w->client, node_id, json, {{"v0", one}});
      const double dt = seconds_since(ts);
      check(r.status == GENIE_OK, r.status, "worker ", node_id, " failed the link probe graph: ", r.detail);
      for (const RemoteOutput& o : r.outputs) w->client->tensor_free(o.tensor_id);
      if (i > 0) best = std::min(best, dt);  // the first warms up the worker's executor and caches
    }
  }
  w->client->tensor_free(one);
  w->request_s = std::max(alloc_s - rtt, 0.0);
  w->dispatch_s = std::max(submit_s - rtt, 0.0);
  w->dispatch_per_node_s = std::max((chain_s - submit_s) / (kChain - 1) - devices.front().op_overhead_s, 0.0);
  w->rtt_s = rtt;
  w->bandwidth_bytes_per_s = static_cast<double>(probe) / write_s;
  for (auto& d : devices) d.node_id = node_id;
  w->devices = std::move(devices);
  const std::string src = w->rtt_source;
  [[maybe_unused]] const double w_request = w->request_s, w_dispatch = w->dispatch_s,
                                w_per_node = w->dispatch_per_node_s;
  std::shared_ptr<const Worker> old;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto& slot = workers_[node_id];
    old = std::move(slot);
    slot = std::move(w);
    left_.erase(node_id);
    std::erase_if(direct_refused_,
                  [&](const auto& pair) { return pair.first == node_id || pair.second == node_id; });
    ++version_;
  }
  log(LogLevel::Info, "master ", node_id_, ": worker ", node_id, " joined from ", host, ":", port, " (rtt ",
      static_cast<int64_t>(rtt * 1e6), " us by ", src, ", ",
      static_cast<int64_t>(static_cast<double>(probe) / write_s / 1e6), " MB/s)");
}

std::shared_ptr<RemoteClient> MultiNode::leave(const void* registered_by, const std::string& why) {
  std::lock_guard<std::mutex> lk(mu_);
  for (auto it = workers_.begin(); it != workers_.end(); ++it) {
    if (it->second->registered_by != registered_by) continue;
    auto c = it->second->client;
    log(LogLevel::Info, "master ", node_id_, ": worker ", it->first, " left");
    left_[it->first] = why;
    workers_.erase(it);
    ++version_;
    return c;
  }
  return nullptr;
}

std::shared_ptr<RemoteClient> MultiNode::client_of(const std::string& node_id) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = workers_.find(node_id);
  if (it != workers_.end()) {
    check(alive(node_id), GENIE_ERR_CONNECTION, "worker '", node_id,
          "' is lost: the cluster layer heard no heartbeat from it within the timeout; work goes there again "
          "once it heartbeats or registers again");
    return it->second->client;
  }
  auto gone = left_.find(node_id);
  check(gone == left_.end(), GENIE_ERR_CONNECTION, "worker '", node_id, "' is gone (", gone->second,
        "); it is used again once it registers again (genie serve --join)");
  std::string known;
  for (const auto& [id, w] : workers_) known += cat(known.empty() ? "" : ", ", id);
  fail(GENIE_ERR_UNSUPPORTED, "node '", node_id, "' is neither this server (", node_id_,
       ") nor one of its workers (", known.empty() ? "none joined" : known, ")");
}

bool MultiNode::has_workers() const {
  std::lock_guard<std::mutex> lk(mu_);
  for (const auto& [id, w] : workers_)
    if (alive(id)) return true;
  return false;
}

std::vector<std::string> MultiNode::worker_names() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::string> v;
  for (const auto& [id, w] : workers_) v.push_back(id);
  return v;
}

void MultiNode::cancel() {
  cancelled_.store(true);
  waits_.stop();
}

RemoteResult MultiNode::run_probe(RemoteClient& c, const std::string& node, const std::string& json,
                                  const std::vector<std::pair<std::string, uint64_t>>& bindings) {
  check(!cancelled_.load(), GENIE_ERR_SHUTDOWN, "the server is stopping");
  RemoteResult r;
  const auto deadline = Clock::now() + std::chrono::milliseconds(stage_timeout_ms_);
  if (wait_submit(c, json, bindings, deadline, cancelled_, &r)) return r;
  check(!cancelled_.load(), GENIE_ERR_SHUTDOWN, "the server stopped while worker ", node, " joined");
  fail(GENIE_ERR_TIMEOUT, "worker ", node, " did not finish the link probe graph within ", stage_timeout_ms_,
       " ms (the stage deadline)");
}

std::shared_ptr<RemoteClient> MultiNode::drop_unhealthy(const std::string& node, const std::string& why) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = workers_.find(node);
  if (it == workers_.end()) return nullptr;
  auto c = it->second->client;
  log(LogLevel::Warn, "master ", node_id_, ": worker ", node, " marked unhealthy: ", why);
  left_[node] = cat("marked unhealthy: ", why);
  workers_.erase(it);
  ++version_;
  return c;
}

void MultiNode::close_all() {
  save_learned(true);
  std::map<std::string, std::shared_ptr<const Worker>> all;
  {
    std::lock_guard<std::mutex> lk(mu_);
    all.swap(workers_);
    ++version_;
  }
  for (auto& [id, w] : all) w->client->close();
}

const sched::DeviceProfile& MultiNode::local_profile() {
  std::lock_guard<std::mutex> lk(mu_);
  if (!have_local_.load(std::memory_order_relaxed)) {
    sched::CalibrateOptions o;
    local_ = exec_.cpu_backend().calibrate(0, o);
    local_.op_overhead_s = measure_node_overhead(exec_);
    local_.node_id.clear();  // this process
    have_local_.store(true, std::memory_order_release);
  }
  return local_;
}

const sched::DeviceProfile* MultiNode::local_profile_if_ready() const {
  return have_local_.load(std::memory_order_acquire) ? &local_ : nullptr;
}

std::shared_ptr<sched::CostLearner> MultiNode::worker_learner(const std::string& node, const std::string& device) {
  if (!have_local_.load(std::memory_order_relaxed) || !local_.learned || local_.learned->file().empty())
    return nullptr;
  const std::string kind = device.substr(0, device.find(':'));
  std::shared_ptr<sched::CostLearner>& l = worker_learned_[cat(node, "/", kind)];
  if (l) return l;
  // A file name of the node id's safe characters and a digest of all of
  // them (two ids that differ only in unsafe characters stay apart).
  std::string safe;
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : node) {
    h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    safe += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ? c : '_';
  }
  std::string safe_kind;
  for (char c : kind) safe_kind += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  const std::string& own = local_.learned->file();
  const std::string dir = own.substr(0, own.find_last_of('/') + 1);
  char digest[17];
  std::snprintf(digest, sizeof digest, "%016llx", static_cast<unsigned long long>(h));
  l = sched::CostLearner::shared(cat(dir, "worker-", safe.substr(0, 64), "-", digest, "-", safe_kind,
                                     ".learned.json"));
  return l;
}

void MultiNode::save_learned(bool now) {
  constexpr int64_t kEveryNs = 10'000'000'000;
  const int64_t t = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
  int64_t last = learned_saved_ns_.load(std::memory_order_relaxed);
  if (!now && (t - last < kEveryNs || !learned_saved_ns_.compare_exchange_strong(last, t))) return;
  std::vector<std::shared_ptr<sched::CostLearner>> all;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& [key, l] : worker_learned_) all.push_back(l);
    if (have_local_.load(std::memory_order_relaxed) && local_.learned) all.push_back(local_.learned);
  }
  for (const auto& l : all) l->save();
}

void MultiNode::count(const std::string& role, uint64_t bytes, bool direct) {
  std::lock_guard<std::mutex> lk(mu_);
  transfer_bytes_ += bytes;
  by_role_[role] += bytes;
  if (direct) direct_bytes_ += bytes;
}

bool MultiNode::move_direct(const RemoteTensor& src, const RemoteTensor& dst,
                            const dataplane::SemanticTag& tag) {
  std::string host;
  int port = 0;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = workers_.find(src.node);
    if (it == workers_.end() || direct_refused_.count({src.node, dst.node})) return false;
    host = it->second->host;
    port = it->second->port;
  }
  try {
    const std::string ticket = src.client->tensor_export(src.id);
    dst.client->tensor_import(dst.id, host, port, ticket, src.node, tag);
    return true;
  } catch (const Error& e) {
    // Workers that cannot reach each other (the addresses they registered
    // are the master's view of them) still work through this server.
    if (e.code() != GENIE_ERR_CONNECTION && e.code() != GENIE_ERR_TIMEOUT &&
        e.code() != GENIE_ERR_UNSUPPORTED && e.code() != GENIE_ERR_AUTH)
      throw;
    log(LogLevel::Warn, "master ", node_id_, ": worker ", dst.node, " cannot fetch from worker ", src.node,
        " directly (", e.detail(), "); their tensors go through this master");
    std::lock_guard<std::mutex> lk(mu_);
    direct_refused_.insert({src.node, dst.node});
    return false;
  }
}

MultiNode::Stats MultiNode::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  Stats s;
  for (const auto& [id, w] : workers_) s.workers += alive(id);
  s.multinode_graphs = multinode_graphs_;
  s.transfer_bytes = transfer_bytes_;
  s.transfer_bytes_by_role = by_role_;
  s.direct_transfer_bytes = direct_bytes_;
  s.plan_hits = plans_.hits();
  s.plan_misses = plans_.misses();
  s.last_predicted_ns = last_predicted_ns_;
  s.last_measured_ns = last_measured_ns_;
  return s;
}

MultiNode::Planned MultiNode::plan(const Graph& g, const std::vector<Held>& inputs,
                                   const std::unordered_map<ValueId, Shape>& shapes) {
  Planned p;
  p.topo.devices.push_back(local_profile());
  p.device_node.push_back("");
  {
    std::lock_guard<std::mutex> lk(mu_);
    // Workers the cluster layer marked lost get no work; a change of that
    // set is a new topology (plans made with or without them differ).
    std::vector<std::string> lost;
    for (const auto& [id, w] : workers_)
      if (!alive(id)) lost.push_back(id);
    if (lost != lost_) {
      lost_ = lost;
      ++version_;
    }
    for (const auto& [id, w] : workers_) {  // by node id: the same topology, the same plan
      if (std::find(lost.begin(), lost.end(), id) != lost.end()) continue;
      for (const auto& d : w->devices) {
        p.topo.devices.push_back(d);
        p.topo.devices.back().learned = worker_learner(id, d.device);
        p.device_node.push_back(id);
      }
      p.topo.links.push_back({"", id, std::max(w->bandwidth_bytes_per_s, 1.0), w->rtt_s, w->request_s,
                              w->dispatch_s, w->dispatch_per_node_s});
    }
    p.topo.version = version_;
  }
  check(inputs.size() == g.inputs().size(), GENIE_ERR_INTERNAL, inputs.size(), " tensors for ",
        g.inputs().size(), " graph inputs");
  sched::Residency res;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const std::string& name = g.value(g.inputs()[k]).name;
    if (inputs[k].local) {
      res.value_device[name] = 0;
      continue;
    }
    if (!inputs[k].remote) continue;  // not resident anywhere yet (plan only)
    const std::string& node = inputs[k].remote->node;
    const auto it = std::find(p.device_node.begin(), p.device_node.end(), node);
    if (it == p.device_node.end()) {
      std::lock_guard<std::mutex> lk(mu_);
      fail(GENIE_ERR_CONNECTION, "input '", name, "' lives on worker ", node,
           workers_.count(node) ? ", which the cluster layer marked lost (no heartbeat within the timeout)"
                                : cat(", which has left (",
                                      left_.count(node) ? left_.at(node) : "its session with this master closed",
                                      ")"),
           ": its tensors cannot be reached; bind tensors of this master or of a live worker");
    }
    res.value_device[name] = static_cast<int>(it - p.device_node.begin());
  }
  p.plan = plans_.get_or_plan(g, p.topo, res, &shapes);
  return p;
}

std::string MultiNode::explain(const Graph& g, const std::vector<Held>& inputs,
                               const std::unordered_map<ValueId, Shape>& shapes) {
  return plan(g, inputs, shapes).plan->explain_json(g);
}

}  // namespace genie
