// Multi-node execution on the master: the contract is in multinode.hpp.
#include "server/multinode.hpp"

#include <algorithm>
#include <chrono>
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

std::string dims(DType dtype, const Shape& shape) {
  std::string s = cat(dtype_name(dtype), "[");
  for (size_t i = 0; i < shape.size(); ++i) append_to(s, i ? ", " : "", shape[i]);
  return s + "]";
}

}  // namespace

namespace {

// A stage driver that runs its stage on the calling thread (the master's
// task thread) and completes before returning.
class BlockingDriver final : public StageDriver {
 public:
  explicit BlockingDriver(std::function<void(const Stage&)> body) : body_(std::move(body)) {}
  void run(size_t, const Stage& st, StageDone done) override {
    try {
      body_(st);
    } catch (const Error& e) {
      done(e.code(), e.detail());
      return;
    } catch (const std::bad_alloc&) {
      done(GENIE_ERR_OUT_OF_MEMORY, "out of memory running a stage of a multi-node graph");
      return;
    } catch (const std::exception& e) {
      done(GENIE_ERR_INTERNAL, cat("internal error running a stage of a multi-node graph: ", e.what()));
      return;
    }
    done(GENIE_OK, {});
  }

 private:
  std::function<void(const Stage&)> body_;
};

}  // namespace

MultiNode::MultiNode(std::string node_id, Config cfg, Executor& exec, ClusterMaster* cluster,
                     std::string self_instance, int64_t stage_timeout_ms, size_t max_stage_waits)
    : node_id_(std::move(node_id)),
      cfg_(std::move(cfg)),
      exec_(exec),
      cluster_(cluster),
      self_instance_(std::move(self_instance)),
      stage_timeout_ms_(stage_timeout_ms),
      max_stage_waits_(std::max<size_t>(max_stage_waits, 1)) {}

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
      RemoteResult r = run_stage(*w->client, node_id, "link_probe", json, {{"v0", one}});
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

void MultiNode::cancel() { cancelled_.store(true); }

RemoteResult MultiNode::run_stage(RemoteClient& c, const std::string& node, const std::string& graph,
                                  const std::string& json,
                                  const std::vector<std::pair<std::string, uint64_t>>& bindings) {
  check(!cancelled_.load(), GENIE_ERR_SHUTDOWN, "the server is stopping");
  // A thread of the task pool waits from here until the worker answers or
  // the deadline passes: at most max_stage_waits_ of them at once.
  struct Slot {
    std::atomic<size_t>& n;
    ~Slot() { n.fetch_sub(1); }
  };
  const size_t waiting = stage_waits_.fetch_add(1);
  Slot slot{stage_waits_};
  check(waiting < max_stage_waits_, GENIE_ERR_OUT_OF_MEMORY, "graph '", graph, "': its stage for worker ", node,
        " was not sent: ", waiting, " stages already wait on workers on master ", node_id_, ", the most at once (",
        max_stage_waits_, ", so that graphs waiting on workers never take every thread from the others); "
        "it can be submitted again once one of them completes or reaches its deadline");
  RemoteResult r;
  const auto deadline = Clock::now() + std::chrono::milliseconds(stage_timeout_ms_);
  if (wait_submit(c, json, bindings, deadline, cancelled_, &r)) return r;
  check(!cancelled_.load(), GENIE_ERR_SHUTDOWN, "the server stopped while graph '", graph,
        "' waited for worker ", node);
  fail(GENIE_ERR_TIMEOUT, "worker ", node, " did not finish its stage of graph '", graph, "' within ",
       stage_timeout_ms_, " ms (the stage deadline)");
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
  if (!have_local_) {
    sched::CalibrateOptions o;
    local_ = exec_.cpu_backend().calibrate(0, o);
    local_.op_overhead_s = measure_node_overhead(exec_);
    local_.node_id.clear();  // this process
    have_local_ = true;
  }
  return local_;
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

MultiResult MultiNode::run(const std::shared_ptr<const Graph>& gp, const std::vector<Held>& inputs,
                           const std::unordered_map<ValueId, Shape>& shapes, const Charge& charge) {
  MultiResult result;
  const auto t0 = Clock::now();
  // The charges of the copies read back from workers: released when the
  // graph ends, after the copies (declared before them).
  std::vector<std::shared_ptr<void>> charges;
  try {
    check(!cancelled_.load(), GENIE_ERR_SHUTDOWN, "the server is stopping");
    const Graph& g = *gp;
    const Planned pl = plan(g, inputs, shapes);
    const sched::Plan& plan = *pl.plan;
    std::vector<Stage> stages = split_stages(g, plan.node_device, plan.order, &shapes);
    {
      std::lock_guard<std::mutex> lk(mu_);
      ++multinode_graphs_;
    }
    const auto started = Clock::now();

    // Where each value is: its home (where it was produced or bound: "" =
    // here) and the copies made for other nodes.
    struct Holding {
      std::string home;
      TensorPtr local;
      std::map<std::string, RemoteTensorPtr> at;
    };
    std::unordered_map<ValueId, Holding> held;
    for (size_t k = 0; k < inputs.size(); ++k) {
      Holding& h = held[g.inputs()[k]];
      if (inputs[k].local) {
        h.local = inputs[k].local;
      } else {
        h.home = inputs[k].remote->node;
        h.at[h.home] = inputs[k].remote;
      }
    }
    const auto is_kv = [&](ValueId v) {
      const size_t i = static_cast<size_t>(v);
      return i < plan.analysis.value_kv.size() && plan.analysis.value_kv[i] >= 0;
    };
    // What a transport that carries tags (dpdk) puts on the value's packets.
    const auto tag_of = [&](ValueId v) { return semantic_tag(g, v, is_kv(v)); };
    const auto role_of = [&](ValueId v) -> std::string {
      if (is_kv(v)) return "kv_cache";
      const Value& val = g.value(v);
      switch (val.kind) {
        case ValueKind::Constant: return "constant";
        case ValueKind::NodeOutput: return "activation";
        case ValueKind::Input: return val.role == TensorRole::Unspecified ? "input" : role_name(val.role);
      }
      return "input";
    };
    // Counts a move of `v` (and traces it: from `t0`, by the transport of
    // `over`, between nodes `from` and `to`; "" is this server).
    const auto moved = [&](ValueId v, uint64_t bytes, bool direct, RemoteClient& over,
                           const std::string& from, const std::string& to, uint64_t t0) {
      count(role_of(v), bytes, direct);
      if (!trace::on()) return;
      const dataplane::SemanticTag tag = tag_of(v);
      trace::transfer(
          {g.value(v).name, direct ? "direct (worker to worker)" : over.data_transport(), role_of(v),
           phase_name(Phase(tag.phase)), from.empty() ? "master" : from, to.empty() ? "master" : to, bytes},
          t0, trace::now_ns());
    };
    // The value as a tensor of this server (read from a worker if need be).
    const auto here = [&](ValueId v) -> TensorPtr {
      Holding& h = held.at(v);
      if (h.local) return h.local;
      const RemoteTensorPtr& src = h.at.begin()->second;
      // Charged before it is allocated: the worker's tensor, whose dtype
      // and shape the plan checked, copied into this server's memory.
      if (charge)
        charges.push_back(charge(src->nbytes, [&] {
          return cat("graph '", g.name(), "': value '", g.value(v).name, "' (", dims(src->dtype, src->shape),
                     ", ", src->nbytes, " bytes) read back from worker ", src->node);
        }));
      // Read whole before anyone sees it: no zeroing.
      auto t = std::make_shared<TensorData>(src->dtype, src->shape, TensorData::Uninitialized{});
      const uint64_t t0 = trace::on() ? trace::now_ns() : 0;
      src->client->tensor_read(src->id, 0, t->bytes(), t->nbytes(), tag_of(v));
      moved(v, t->nbytes(), false, *src->client, src->node, "", t0);
      h.local = t;
      return t;
    };
    // The value as a tensor of worker `node`, on its device `device`: moved
    // there from another worker directly when it lives on workers only
    // (the relay through this server is the fallback), else written from
    // this server.
    const auto there = [&](ValueId v, const std::string& node, const std::string& device,
                           const std::shared_ptr<RemoteClient>& client) -> uint64_t {
      Holding& h = held.at(v);
      if (auto it = h.at.find(node); it != h.at.end()) return it->second->id;
      if (!h.local) {
        const RemoteTensorPtr& src = h.at.count(h.home) ? h.at.at(h.home) : h.at.begin()->second;
        auto wt =
            std::make_shared<RemoteTensor>(client, node, client->tensor_alloc(src->dtype, src->shape, device),
                                           src->dtype, src->shape, cat(node, "/", device));
        const uint64_t t0 = trace::on() ? trace::now_ns() : 0;
        if (move_direct(*src, *wt, tag_of(v))) {
          moved(v, wt->nbytes, true, *src->client, src->node, node, t0);
          h.at[node] = wt;
          return wt->id;
        }
        TensorPtr t = here(v);
        const uint64_t t1 = trace::on() ? trace::now_ns() : 0;
        client->tensor_write(wt->id, 0, t->bytes(), t->nbytes(), tag_of(v));
        moved(v, t->nbytes(), false, *client, "", node, t1);
        h.at[node] = wt;
        return wt->id;
      }
      TensorPtr t = here(v);
      const uint64_t id = client->tensor_alloc(t->dtype(), t->shape(), device);
      auto wt =
          std::make_shared<RemoteTensor>(client, node, id, t->dtype(), t->shape(), cat(node, "/", device));
      const uint64_t t0 = trace::on() ? trace::now_ns() : 0;
      client->tensor_write(id, 0, t->bytes(), t->nbytes(), tag_of(v));
      moved(v, t->nbytes(), false, *client, "", node, t0);
      h.at[node] = wt;
      return id;
    };

    // The plan runner (exec/plan_runner.hpp) runs the stages through two
    // drivers, both blocking this task thread until their stage is done:
    // this server's CPU, and the workers.
    const auto local_stage = [&](const Stage& st) {
      std::vector<TensorPtr> ins;
      for (ValueId v : st.inputs) ins.push_back(here(v));
      // Its outputs and intermediates, charged as a graph run here is
      // (server/graphs.cpp), until the graph ends: later stages may read
      // its outputs.
      if (charge) {
        const RunMemory need = run_memory(*st.graph);
        charges.push_back(charge(need.peak, [&] {
          return cat(need.describe(*st.graph), ", a stage of graph '", g.name(), "' on master ", node_id_);
        }));
      }
      auto done = std::make_shared<std::promise<ExecResult>>();
      std::future<ExecResult> f = done->get_future();
      exec_.run(st.graph, std::move(ins), [done](ExecResult&& r) { done->set_value(std::move(r)); });
      ExecResult r = f.get();
      if (r.status != GENIE_OK) throw Error(r.status, std::move(r.detail));
      for (size_t i = 0; i < st.outputs.size(); ++i) {
        Holding& h = held[st.outputs[i]];
        h.home.clear();
        h.local = std::move(r.outputs[i]);
      }
    };
    const auto worker_stage = [&](const Stage& st) {
      const std::string& node = pl.device_node.at(static_cast<size_t>(st.device));
      std::shared_ptr<RemoteClient> client = client_of(node);
      check(client != nullptr, GENIE_ERR_CONNECTION, "worker ", node, " left before its part of graph '",
            g.name(), "' ran");
      const std::string& device = pl.topo.devices.at(static_cast<size_t>(st.device)).device;
      std::vector<std::pair<std::string, uint64_t>> bindings;
      for (ValueId v : st.inputs) bindings.emplace_back(g.value(v).name, there(v, node, device, client));
      RemoteResult r = run_stage(*client, node, g.name(), graph_to_json(*st.graph), bindings);
      if (r.status != GENIE_OK) throw Error(r.status, cat("on worker ", node, ": ", r.detail));
      // A worker's word is checked against the plan before anything is
      // kept, allocated or forwarded on it: the outputs the stage graph
      // declares, each of its dtype and shape (so of its byte count; reads
      // then check the bytes that come back against it). A mismatch fails
      // the graph and the worker gets no more work.
      std::string lie;
      if (r.outputs.size() != st.outputs.size()) {
        lie = cat("it returned ", r.outputs.size(), " outputs for a stage of ", st.outputs.size());
      } else {
        for (size_t i = 0; i < st.outputs.size() && lie.empty(); ++i) {
          const Value& want = st.graph->value(st.graph->outputs()[i]);
          const RemoteOutput& o = r.outputs[i];
          if (o.dtype != want.dtype || o.shape != want.shape)
            lie = cat("it returned output '", want.name, "' as ", dims(o.dtype, o.shape),
                      ", but the plan makes it ", dims(want.dtype, want.shape));
        }
      }
      if (!lie.empty()) {
        for (const RemoteOutput& o : r.outputs) client->tensor_free(o.tensor_id);
        drop_unhealthy(node, lie);
        fail(GENIE_ERR_PROTOCOL, "graph '", g.name(), "': worker ", node, " answered against its plan (", lie,
             "); it is marked unhealthy and gets no more work until it "
             "registers again");
      }
      for (size_t i = 0; i < st.outputs.size(); ++i) {
        Holding& h = held[st.outputs[i]];
        h.home = node;
        const RemoteOutput& o = r.outputs[i];
        h.at[node] = std::make_shared<RemoteTensor>(client, node, o.tensor_id, o.dtype, o.shape,
                                                    cat(node, "/", o.device.empty() ? device : o.device));
      }
    };
    BlockingDriver here_driver(local_stage), worker_driver(worker_stage);
    std::vector<StageDriver*> drivers;
    for (const std::string& node : pl.device_node)
      drivers.push_back(node.empty() ? static_cast<StageDriver*>(&here_driver) : &worker_driver);
    genie_status_t stages_status = GENIE_ERR_INTERNAL;
    std::string stages_detail = "the plan runner did not complete";
    run_stages(stages, drivers, [&](genie_status_t status, std::string detail) {
      stages_status = status;
      stages_detail = std::move(detail);
    });
    if (stages_status != GENIE_OK) {
      result.status = stages_status;
      result.detail = std::move(stages_detail);
      return result;
    }
    const double measured_s = seconds_since(started);
    {
      std::lock_guard<std::mutex> lk(mu_);
      last_predicted_ns_ = static_cast<uint64_t>(plan.predicted_total_s * 1e9);
      last_measured_ns_ = static_cast<uint64_t>(measured_s * 1e9);
      if (last_predicted_ns_ > 0)
        metrics::observe(metrics::Id::CostModelRatio, {},
                         double(last_measured_ns_) / double(last_predicted_ns_));
    }
    plans_.report(plan, measured_s);  // re-planned when it keeps drifting
    for (ValueId o : g.outputs()) {
      const Holding& h = held.at(o);
      Held out;
      if (h.home.empty())
        out.local = h.local;
      else
        out.remote = h.at.at(h.home);
      result.outputs.push_back(std::move(out));
    }
  } catch (const Error& e) {
    result.status = e.code();
    result.detail = e.detail();
    result.outputs.clear();
  } catch (const std::bad_alloc&) {
    result.status = GENIE_ERR_OUT_OF_MEMORY;
    result.detail = "out of memory running a multi-node graph";
    result.outputs.clear();
  } catch (const std::exception& e) {
    result.status = GENIE_ERR_INTERNAL;
    result.detail = cat("internal error running a multi-node graph: ", e.what());
    result.outputs.clear();
  }
  result.exec_ns = static_cast<uint64_t>(seconds_since(t0) * 1e9);
  return result;
}

}  // namespace genie
