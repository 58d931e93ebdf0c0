#include "runtime/context.hpp"

#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <unordered_map>

#include "cluster/entry.hpp"
#include "cluster/types.hpp"
#include "control/client.hpp"
#include "control/semantic_tag.hpp"
#include "control/wire.hpp"
#include "core/error.hpp"
#include "core/host.hpp"
#include "core/log.hpp"
#include "core/node_id.hpp"
#include "exec/backend_loader.hpp"
#include "exec/cpu/backend.hpp"
#include "exec/learn.hpp"
#include "exec/run_trace.hpp"
#include "graph/binding.hpp"
#include "runtime/remote_trace.hpp"

namespace genie {

// ---------------------------------------------------------------------------
// Context
// ---------------------------------------------------------------------------

namespace {

// What genie_tensor_device reports for a tensor the server names
// `server_device`: its own devices as "remote:i" (the index genie_tensor_alloc
// takes), a worker's as "NODE/DEVICE".
std::string client_device_name(const RemoteClient& client, const std::string& server_device) {
  if (server_device.find('/') != std::string::npos) return server_device;
  const std::vector<std::string>& served = client.server_devices();
  for (size_t i = 0; i < served.size(); ++i)
    if (served[i] == server_device) return cat("remote:", i);
  return cat(client.server_node_id(), "/", server_device);
}

}  // namespace

Context::Context(Config cfg, double config_ms) : cfg_(std::move(cfg)) {
  node_id_ = cfg_.node_id.empty() ? generate_node_id() : cfg_.node_id;
  if (cfg_.metrics_port >= 0) {
    // A client serves no clients: beyond loopback only when allowed.
    check(is_loopback(cfg_.metrics_addr) || cfg_.allow_insecure, GENIE_ERR_INVALID_ARGUMENT,
          "refusing to serve metrics on ", cfg_.metrics_addr,
          ": serve them on 127.0.0.1 or allow it explicitly (GENIE_ALLOW_INSECURE=1)");
    metrics_ = metrics::expose(cfg_.metrics_addr, cfg_.metrics_port);
  }
  // A cluster on etcd and no master address: enter through one of its
  // servers (cluster/entry.hpp says which), trying the next if one does not
  // answer.
  std::vector<EntryServer> entries;
  if (cfg_.master_addr.empty() && !cfg_.etcd_endpoints.empty()) {
    entries = entry_servers(cfg_, node_id_);
    cfg_.master_addr = entries[0].host;
    cfg_.master_port = entries[0].port;
    cfg_.reconnect_window_ms = entries[0].lease_ttl_ms;
  }
  // Entry `i` did not answer (`e`): on to the next one, if there is one
  // and the failure was a connection's.
  size_t entry = 0;
  auto next_entry = [&](const Error& e) {
    if (entry + 1 >= entries.size() || (e.code() != GENIE_ERR_CONNECTION && e.code() != GENIE_ERR_TIMEOUT))
      return false;
    log(LogLevel::Info, "context ", node_id_, ": server ", entries[entry].node_id, " at ", cfg_.master_addr,
        ":", cfg_.master_port, " did not answer (", e.detail(), "); trying ", entries[entry + 1].node_id);
    ++entry;
    cfg_.master_addr = entries[entry].host;
    cfg_.master_port = entries[entry].port;
    cfg_.reconnect_window_ms = entries[entry].lease_ttl_ms;
    return true;
  };
  // Phases 2-4: local node, discovery, backend.
  while (true) {
    try {
      cluster_ = std::make_unique<ClusterAgent>(cfg_, node_id_, config_ms);
      break;
    } catch (const Error& e) {
      if (!next_entry(e)) throw;
    }
  }
  if (embedded()) {
    exec_ = std::make_unique<Executor>(cfg_.num_threads);
    local_ = std::make_unique<LocalDevices>(*exec_, node_id_);
    std::string list;
    for (const LocalDevice& d : local_->list()) list += cat(list.empty() ? "" : ", ", d.id.str());
    log(LogLevel::Info, "context ", node_id_, ": embedded mode, role ", role_str(cfg_.role), ", ",
        cfg_.num_threads, " worker threads (0 = all cores), devices ", list);
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    // The selected backend decides the transport of data connections, unless
    // GENIE_TRANSPORT names one (Config::transport).
    cfg_.selected_transport = transport_for_backend(cluster_->selection().backend);
    if (!cfg_.semantics) cfg_.graph_deltas = false;  // blind mode sends every operation in full
    while (true) {
      try {
        client_ = RemoteClient::connect(cfg_, node_id_);
        break;
      } catch (const Error& e) {
        if (!next_entry(e)) throw;
      }
    }
    cluster_->add_phase(
        "master_connection",
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
        cat("session with ", client_->server_node_id(), " at ", cfg_.master_addr, ":", cfg_.master_port));
    log(LogLevel::Info, "context ", node_id_, ": remote mode, server ", client_->server_node_id(), " at ",
        cfg_.master_addr, ":", cfg_.master_port, cfg_.semantics ? "" : ", blind (semantics off)");
  }
  try {
    cluster_->start(client_);  // phase 6: monitoring
  } catch (...) {
    cluster_->stop();
    if (client_) client_->close();
    throw;
  }
}

Context::~Context() { shutdown(); }

void Context::check_live() const {
  check(live_.load(std::memory_order_acquire), GENIE_ERR_SHUTDOWN, "the context has been shut down");
}

bool Context::connected() const {
  if (!live_.load(std::memory_order_acquire)) return false;
  return client_ == nullptr || client_->connected();
}

Context::Placement Context::resolve_device(const char* text) const {
  if (client_ && (text == nullptr || *text == '\0')) {
    // Remote mode computes on the server: that is where tensors belong
    // unless the caller asks for host memory.
    check(!client_->server_devices().empty(), GENIE_ERR_UNSUPPORTED, "server ", client_->server_node_id(),
          " serves no devices");
    return {true, 0, client_->server_devices()[0], "remote:0"};
  }
  Device d = parse_device(text);
  const bool this_node = d.node.empty() || d.node == node_id_;
  if (d.is_cpu() && this_node) {
    if (d.index != 0)
      fail(GENIE_ERR_UNSUPPORTED, "device '", d.str(), "': this node has one CPU device, cpu:0");
    d.node.clear();
    return {false, 0, {}, d.str()};
  }
  if (!client_) {
    if (d.is_remote())
      fail(GENIE_ERR_UNSUPPORTED, "device '", d.str(),
           "': embedded mode has no remote devices (set GENIE_MASTER_ADDR to use a server)");
    if (!this_node)
      fail(GENIE_ERR_UNSUPPORTED, "device '", d.str(), "': node '", d.node,
           "' is not reachable in embedded mode (no master configured)");
    d.node.clear();
    std::string same_kind;
    const std::vector<LocalDevice>& devices = local_->list();
    for (size_t i = 0; i < devices.size(); ++i) {
      if (devices[i].id == d) return {false, static_cast<int>(i), {}, d.str()};
      if (devices[i].id.kind == d.kind) same_kind += cat(same_kind.empty() ? "" : ", ", devices[i].id.str());
    }
    if (!same_kind.empty())
      fail(GENIE_ERR_UNSUPPORTED, "device '", d.str(), "': this process's ", d.kind, " devices are ",
           same_kind);
    const LoadedBackend& b = device_backend(d.kind);
    fail(GENIE_ERR_UNSUPPORTED, "device '", d.str(),
         "': ", b.backend ? cat("the ", d.kind, " backend offers no devices") : b.why_unavailable);
  }
  const std::vector<std::string>& served = client_->server_devices();
  const std::string& server = client_->server_node_id();
  std::string list;
  for (size_t i = 0; i < served.size(); ++i) list += cat(i ? ", " : "", "remote:", i, " = ", served[i]);
  if (d.is_remote()) {
    if (static_cast<size_t>(d.index) >= served.size())
      fail(GENIE_ERR_UNSUPPORTED, "device '", d.str(), "': server ", server, " serves ", served.size(),
           " device(s): ", list);
    return {true, 0, served[static_cast<size_t>(d.index)], d.str()};
  }
  if (this_node)  // a device of this process other than its CPU
    fail(GENIE_ERR_UNSUPPORTED, "device '", d.str(),
         "': a remote-mode context keeps only host memory in this process; devices of server ", server,
         " are ", list);
  if (d.node != server) {
    // A device of another node: the master allocates it on its worker of
    // that name, or says why it cannot (not a worker, unknown device).
    return {true, 0, d.str(), d.str()};
  }
  Device local = d;
  local.node.clear();
  const std::string want = local.str();
  for (size_t i = 0; i < served.size(); ++i)
    if (served[i] == want) return {true, 0, served[i], cat("remote:", i)};
  fail(GENIE_ERR_UNSUPPORTED, "device '", d.str(), "': server ", server, " does not serve ", want,
       "; it serves ", list);
}

TensorRef Context::alloc(DType dtype, Shape shape, const char* device, std::string* canonical) {
  const Placement p = resolve_device(device);
  if (!p.remote) {
    *canonical = p.canonical;
    if (p.local == 0) return TensorRef(std::make_shared<TensorData>(dtype, std::move(shape)));
    const DeviceRef& d = local_->list()[static_cast<size_t>(p.local)].ref;
    TensorPtr t = d.backend->make_tensor(d.index, dtype, shape);
    d.backend->fill_zero(t->buffer(), t->nbytes(), nullptr);
    return TensorRef(std::move(t));
  }
  byte_size(shape, dtype_size(dtype));  // TOO_LARGE here, not after a round trip
  if (!cfg_.semantics) {
    // Blind mode: nothing stays on the server between submissions; the
    // tensor is held here and travels with each submission binding it.
    *canonical = p.canonical;
    return TensorRef(std::make_shared<TensorData>(dtype, std::move(shape)));
  }
  const uint64_t id = client_->tensor_alloc(dtype, shape, p.server_device);
  std::shared_ptr<RemoteTensor> rt;
  try {
    rt = std::make_shared<RemoteTensor>(client_, client_->server_node_id(), id, dtype, std::move(shape),
                                        p.canonical);
  } catch (...) {
    client_->tensor_free(id);
    throw;
  }
  held_.add(rt);
  *canonical = p.canonical;
  return TensorRef(std::move(rt));
}

void Context::tensor_io(const TensorRef& t, const std::function<void()>& io) const {
  if (!t.is_remote()) return io();
  const std::string address = cat(cfg_.master_addr, ":", cfg_.master_port);
  held_.check_not_lost(*t.remote(), address);
  try {
    io();
  } catch (const Error& e) {
    if (e.code() != GENIE_ERR_CONNECTION) throw;
    // A call cut by the loss of the connection of a context that entered
    // through etcd: whether the session comes back (the tensor intact) or
    // not (lost) is known within its short reconnect window (the server's
    // lease TTL); the caller learns which. One round trip tells: it waits
    // for a reconnect in progress and fails once the session is gone (a
    // first one may be cut by the same loss). Other contexts answer at once.
    RemoteClient& c = *t.remote()->client;
    for (int i = 0; i < 2 && cfg_.reconnect_window_ms > 0 && !c.failed(); ++i) {
      try {
        c.server_info_json();
        break;
      } catch (const Error&) {
      }
    }
    held_.check_not_lost(*t.remote(), address, e.detail());
    throw;
  }
}

std::string Context::lost_tensors_json() const {
  JsonPtr o = json_object();
  if (!client_) {
    cJSON_AddNullToObject(o.get(), "server");
    cJSON_AddNullToObject(o.get(), "address");
    cJSON_AddStringToObject(o.get(), "session", "embedded");
    cJSON_AddItemToObject(o.get(), "tensors", json_array().release());
    return json_text(o.get());
  }
  cJSON_AddStringToObject(o.get(), "server", client_->server_node_id().c_str());
  cJSON_AddStringToObject(o.get(), "address", cat(cfg_.master_addr, ":", cfg_.master_port).c_str());
  cJSON_AddStringToObject(o.get(), "session",
                          client_->failed() ? "lost" : client_->connected() ? "connected" : "reconnecting");
  cJSON_AddItemToObject(o.get(), "tensors", json_parse(held_.lost_json(), "the lost tensors").release());
  return json_text(o.get());
}

std::shared_ptr<const SubmitMemo::Prepared> SubmitMemo::find(uint64_t version,
                                                             const std::vector<TensorDesc>& descs,
                                                             const std::vector<size_t>& order) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!prepared_ || version != version_ || order.size() != shapes_.size()) return nullptr;
  for (size_t k = 0; k < order.size(); ++k)
    if (descs[order[k]].shape != shapes_[k]) return nullptr;
  return prepared_;
}

std::string SubmitMemo::json(uint64_t version) {
  std::lock_guard<std::mutex> lk(mu_);
  return prepared_ && version == version_ ? prepared_->json : std::string();
}

void SubmitMemo::keep(uint64_t version, const std::vector<TensorDesc>& descs,
                      const std::vector<size_t>& order, std::shared_ptr<const Prepared> p) {
  std::lock_guard<std::mutex> lk(mu_);
  version_ = version;
  shapes_.clear();
  for (size_t i : order) shapes_.push_back(descs[i].shape);
  prepared_ = std::move(p);
}

std::shared_ptr<FutureState> Context::submit(const Graph& graph, const std::vector<std::string>& names,
                                             const std::vector<TensorRef>& tensors, SubmitMemo* memo,
                                             uint64_t version) {
  std::vector<TensorDesc> descs;
  descs.reserve(tensors.size());
  for (const TensorRef& t : tensors) descs.push_back({t.dtype(), t.shape()});
  const std::vector<size_t> order = bind_inputs(graph, names, descs, nullptr);
  if (client_ && !cfg_.semantics) return submit_blind(graph, tensors, descs, order);
  std::shared_ptr<const SubmitMemo::Prepared> prepared = memo ? memo->find(version, descs, order) : nullptr;
  const bool planned = !client_ && local_->size() > 1;
  const bool prepare = !prepared || (client_ && prepared->json.empty());
  // For validation and planning only: a memo hit needs neither.
  std::unordered_map<ValueId, Shape> shapes;
  if (planned || prepare) shapes = input_shapes(graph, descs, order);
  std::unordered_map<ValueId, Shape> plan_shapes;
  if (planned) plan_shapes = shapes;
  if (prepare) {
    auto snapshot = std::make_shared<Graph>(graph);
    snapshot->validate(&shapes);
    auto p = std::make_shared<SubmitMemo::Prepared>();
    if (client_) {
      // The graph as declared, not as bound: the server binds the tensors'
      // own shapes. A loop whose shapes change every step (a growing KV
      // cache) then sends the same text each time, a delta without patches,
      // which the server does not parse again (server/graph_cache.hpp).
      p->json = memo ? memo->json(version) : std::string();
      if (p->json.empty()) p->json = graph_to_json(graph);
    } else {
      p->costs = sched::node_costs(*snapshot, &shapes);
    }
    p->graph = std::move(snapshot);
    if (memo) memo->keep(version, descs, order, p);
    prepared = std::move(p);
  }
  if (client_) return submit_remote(*prepared, names, tensors, order);
  const std::shared_ptr<const Graph>& snapshot = prepared->graph;

  std::vector<TensorPtr> bound;
  for (size_t i : order) {
    check(!tensors[i].is_remote(), GENIE_ERR_INTERNAL, "a remote tensor reached an embedded context");
    bound.push_back(tensors[i].local());
  }
  auto state = std::make_shared<FutureState>(shared_from_this(), snapshot);
  // Where the run goes, for the cost model's feed: a plan, else device 0.
  auto ran_by = std::make_shared<std::shared_ptr<const sched::Plan>>();

  // A completion callback (on an executor worker) may submit while
  // shutdown() holds run_mu_ and waits for that very worker: once shutdown
  // has begun, refuse instead of blocking on the lock.
  std::shared_lock<std::shared_mutex> lk(run_mu_, std::defer_lock);
  while (!lk.try_lock()) {
    check_live();
    std::this_thread::yield();
  }
  check_live();
  Executor::Done done = [this, state, prepared, ran_by](ExecResult&& r) {
    const Graph& snapshot = *prepared->graph;
    if (observing()) observe_run(snapshot, r, "embedded");
    if (learning_.load(std::memory_order_acquire)) learn(*prepared, r, ran_by->get(), 0);
    FutureResult fr;
    fr.status = r.status;
    fr.detail = std::move(r.detail);
    fr.exec_ns = r.exec_ns;
    for (TensorPtr& t : r.outputs) fr.outputs.emplace_back(std::move(t));
    state->complete(std::move(fr));
  };
  // A tiny graph is microseconds of work, as on a server's loop: handing it
  // to a worker and waiting for that worker's wake-up would cost more than
  // running it here. Its future is complete when the call returns.
  ExecResult ran;
  bool here = false;
  if (planned) {
    // From the first plan on, runs teach the cost learners (the topology,
    // built once, says so; checked without its lock on every later submit).
    if (!learning_.load(std::memory_order_acquire)) local_topology();
    here = local_->submit(snapshot, std::move(plan_shapes), std::move(bound), done, &ran, ran_by.get());
  } else if (Executor::is_tiny(*snapshot, bound)) {
    ran = exec_->run_inline(snapshot, std::move(bound));
    here = true;
  } else {
    exec_->run(snapshot, std::move(bound), std::move(done));
  }
  if (here) {
    lk.unlock();  // shutdown may proceed; the result is this thread's
    done(std::move(ran));
  }
  return state;
}

const std::vector<Context::LocalDevice>& Context::local_devices() const {
  static const std::vector<LocalDevice> none;
  return local_ ? local_->list() : none;
}

int Context::device_of(const TensorData& t) const {
  check(local_ != nullptr, GENIE_ERR_INTERNAL, "device_of in remote mode");
  return local_->index_of(t);
}

const sched::Topology& Context::local_topology() {
  if (local_) {
    const sched::Topology& t = local_->topology();
    learning_.store(true, std::memory_order_release);
    return t;
  }
  // Remote mode: plans over this process alone are still explained
  // against its CPU.
  std::lock_guard<std::mutex> lk(topo_mu_);
  if (topology_) return *topology_;
  auto t = std::make_unique<sched::Topology>();
  sched::CalibrateOptions opts;
  opts.node_id = node_id_;
  t->devices.push_back(cpu::CpuBackend().calibrate(0, opts));
  t->version = 1;
  t->check();
  topology_ = std::move(t);
  return *topology_;
}

void Context::learn(const SubmitMemo::Prepared& p, const ExecResult& r, const sched::Plan* plan, int device) {
  const sched::Topology& topo = local_topology();  // built before learning_ is set
  learn_from_run(p.costs, r, topo, plan ? &plan->node_device : nullptr, device);
  if (plan && r.status == GENIE_OK) local_->report(*plan, static_cast<double>(r.exec_ns) * 1e-9);
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  int64_t last = learned_saved_ns_.load(std::memory_order_relaxed);
  if (now - last >= kLearnedSaveNs && learned_saved_ns_.compare_exchange_strong(last, now))
    save_learned(topo);
}

std::shared_ptr<FutureState> Context::submit_remote(const SubmitMemo::Prepared& prepared,
                                                    const std::vector<std::string>& names,
                                                    const std::vector<TensorRef>& tensors,
                                                    const std::vector<size_t>& order) {
  const Graph& snapshot = *prepared.graph;
  std::vector<std::pair<std::string, uint64_t>> bindings;
  // Held until the graph completes, so no input is freed under it (whatever
  // the caller destroys meanwhile).
  std::vector<TensorRef> inputs;
  // Named after the input each is bound to; one lost with the server fails
  // the submission naming it (runtime/held_tensors.hpp), before any upload.
  const std::string address = cat(cfg_.master_addr, ":", cfg_.master_port);
  for (size_t i : order) {
    if (!tensors[i].is_remote()) continue;
    held_.rename(*tensors[i].remote(), names[i]);
    held_.check_not_lost(*tensors[i].remote(), address);
  }
  // Small host tensors go inside the submission, and outputs the graph
  // annotates as what the caller reads come back inside its completion,
  // where the server takes them (docs/protocol.md, "Small tensors inside a
  // submission"): a step of a decode loop is then one round trip.
  SubmitExtras extras;
  const bool inline_ok = client_->inline_tensors();
  size_t inline_bytes = 0;
  for (size_t i : order) {
    TensorRef t = tensors[i];
    if (!t.is_remote() && inline_ok && t.local()->host_accessible() && t.nbytes() <= wire::kMaxInlineTensorBytes &&
        inline_bytes + t.nbytes() <= wire::kMaxInlineBytes) {
      inline_bytes += t.nbytes();
      extras.inputs.push_back({names[i], t.dtype(), t.shape(), t.local()->bytes(), t.nbytes()});
      inputs.push_back(std::move(t));
      continue;
    }
    if (!t.is_remote()) {
      // Host memory bound in remote mode: copied to the server for this
      // submission only (allocate on "remote:0" to keep it resident there),
      // a transfer of the graph's input, tagged as the graph annotates it
      // (a tensor's own semantics tag only its own writes and reads).
      std::string dev;
      TensorRef up = alloc(t.dtype(), t.shape(), nullptr, &dev);
      up.write(0, t.local()->bytes(), t.nbytes(), semantic_tag(snapshot, snapshot.find_value(names[i])));
      t = std::move(up);
    }
    check(t.remote()->client == client_, GENIE_ERR_INVALID_ARGUMENT, "tensor bound to '", names[i],
          "' lives on another server connection");
    t.remote()->drop_cached();  // the graph may change what it binds
    bindings.emplace_back(names[i], t.remote()->id);
    inputs.push_back(std::move(t));
  }
  const size_t n_outputs = snapshot.outputs().size();
  if (inline_ok)
    for (size_t k = 0; k < n_outputs; ++k)
      if (snapshot.value(snapshot.outputs()[k]).role == TensorRole::Output)
        extras.return_outputs.push_back(static_cast<uint32_t>(k));
  auto state = std::make_shared<FutureState>(shared_from_this(), prepared.graph);
  {
    // Not run_mu_: shutdown holds that while the loop thread delivers the
    // last completions, and a callback submitting again must get SHUTDOWN,
    // not wait for it.
    std::lock_guard<std::mutex> il(inflight_mu_);
    check_live();
    ++inflight_;
  }
  std::weak_ptr<RemoteClient> weak_client = client_;
  const RemoteTrace traced = remote_trace_begin(*client_);
  auto done = [state, inputs = std::move(inputs), weak_client, n_outputs, traced,
               graph = prepared.graph](RemoteResult&& r) mutable {
    // On the client's loop thread.
    if (traced.submit_ns != 0) remote_trace_end(*graph, traced, r);
    FutureResult fr;
    fr.status = r.status;
    fr.detail = std::move(r.detail);
    fr.exec_ns = r.exec_ns;
    try {
      // Dtypes and shapes were validated by the client: only memory can fail.
      if (auto client = weak_client.lock()) {
        for (RemoteOutput& o : r.outputs) {
          auto t = std::make_shared<RemoteTensor>(client, client->server_node_id(), o.tensor_id, o.dtype,
                                                  std::move(o.shape), client_device_name(*client, o.device));
          if (o.has_data) t->set_cached(std::move(o.data));
          fr.outputs.emplace_back(std::move(t));
        }
      }
    } catch (const std::exception& e) {
      // The future completes whatever happens; outputs already wrapped are
      // freed on the server as they go.
      fr.status = GENIE_ERR_OUT_OF_MEMORY;
      fr.detail = cat("cannot record the graph's outputs: ", e.what());
      fr.outputs.clear();
    }
    if (fr.status == GENIE_OK && fr.outputs.size() != n_outputs) {
      fr.status = GENIE_ERR_PROTOCOL;
      fr.detail = cat("the server reported ", fr.outputs.size(), " outputs for a graph with ", n_outputs);
      fr.outputs.clear();
    }
    inputs.clear();
    std::shared_ptr<Context> ctx = state->ctx();
    // Named after the graph's outputs (runtime/held_tensors.hpp).
    const std::vector<ValueId>& outs = graph->outputs();
    for (size_t i = 0; i < fr.outputs.size() && i < outs.size(); ++i)
      if (fr.outputs[i].is_remote()) ctx->held_.add(fr.outputs[i].remote(), graph->value(outs[i]).name);
    state->complete(std::move(fr));
    ctx->remote_graph_done();
  };
  std::shared_ptr<RemoteClient::Submission> direct;
  try {
    direct = client_->submit(prepared.json, std::move(bindings), std::move(done), traced.clock.known, extras);
  } catch (...) {
    remote_graph_done();
    throw;
  }
  if (direct) {
    // On the client's direct link: whoever waits for the future reads its
    // completion there; once nobody can, the client's watcher does.
    state->set_direct(weak_client, std::move(direct));
  }
  return state;
}

void Context::remote_graph_done() {
  {
    std::lock_guard<std::mutex> lk(inflight_mu_);
    --inflight_;
  }
  inflight_cv_.notify_all();
}

std::string Context::server_info_json() {
  check_live();
  check(client_ != nullptr, GENIE_ERR_UNSUPPORTED,
        "embedded mode has no server (set GENIE_MASTER_ADDR to connect to one)");
  return client_->server_info_json();
}

void Context::shutdown() {
  std::unique_lock<std::shared_mutex> lk(run_mu_);
  {
    std::lock_guard<std::mutex> il(inflight_mu_);  // remote submissions check liveness under it
    if (!live_.exchange(false)) return;
  }
  if (cluster_) cluster_->stop();  // no event after this; timers gone from the loop
  exec_.reset();                   // waits for graphs in flight; their futures complete normally
  if (learning_.load(std::memory_order_acquire)) save_learned(local_topology());
  if (client_) {
    client_->drain();  // completions owed on the direct link that nobody waits for
    const auto grace = std::chrono::milliseconds(cfg_.timeout_ms);
    std::unique_lock<std::mutex> il(inflight_mu_);
    if (!inflight_cv_.wait_for(il, grace, [this] { return inflight_ == 0; }))
      log(LogLevel::Warn, "context ", node_id_, ": ", inflight_,
          " graph(s) still running on the server after ", cfg_.timeout_ms,
          " ms; their futures fail with GENIE_ERR_SHUTDOWN");
    il.unlock();
    // Fails what is left with SHUTDOWN and says goodbye: the server frees
    // the session's tensors at once.
    client_->close();
  }
  log(LogLevel::Info, "context ", node_id_, ": shut down");
}

}  // namespace genie
