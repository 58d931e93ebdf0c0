#include "server/master.hpp"

#include <unistd.h>
#include <uv.h>

#include <algorithm>

#include "control/client.hpp"
#include "control/loop_thread.hpp"
#include "control/tls.hpp"
#include "control/wire.hpp"
#include "control/wire_codec.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "genie.pb.h"

namespace genie {

namespace {
// A master tracks at most this many nodes: heartbeats from more are refused
// rather than growing its memory without bound.
constexpr size_t kMaxNodes = 4096;
// One node's status, as sent and as kept: larger heartbeats are refused.
constexpr size_t kMaxNodeStatusBytes = 16 << 10;
// The view every heartbeat reply carries: at most this many bytes (and half
// the message limit), nodes past it left out, so that a reply never passes
// the frame limit and its cost per heartbeat is bounded.
constexpr size_t kMaxViewBytes = 4 << 20;
// The view is built at most this often; replies in between share it.
constexpr auto kViewRefresh = std::chrono::milliseconds(200);
}  // namespace

struct ClusterMaster::Tick {
  uv_timer_t timer{};
  ClusterMaster* self = nullptr;
  void (ClusterMaster::*fn)() = nullptr;
};

ClusterMaster::ClusterMaster(const Config& cfg, std::shared_ptr<MembershipStore> cluster)
    : cfg_(cfg), store_(make_in_memory_membership()), cluster_(std::move(cluster)) {
  const RdmaProbe rdma = probe_rdma();
  backends_json_ =
      json_text(backends_to_json(local_backends(rdma, dpdk_not_probed("EAL not probed by the server"),
                                                probe_ucx_if_used(cfg, rdma.available)))
                    .get());
  char host[256] = {};
  host_ = gethostname(host, sizeof host - 1) == 0 ? host : "localhost";
  gpu_.poll();
  gpus_ = gpu_.gpus();
  gpu_reason_ = gpu_.reason();
  watch_ = store_->watch(1, [this](const MemberEvent& ev) { on_member(ev, false); });
  // One list, then every change after it (listed again when the watch falls behind).
  if (cluster_)
    cluster_cache_ =
        std::make_unique<MemberCache>(cluster_, [this](const MemberEvent& ev) { on_member(ev, true); });
}

ClusterMaster::~ClusterMaster() {
  registration_.reset();
  cluster_cache_.reset();
  store_->unwatch(watch_);
}

void ClusterMaster::register_self(const std::string& host, int port, const std::string& profile) {
  if (!cluster_) return;
  const std::string listen = cat(host, ":", port);
  std::string id;
  {
    std::lock_guard<std::mutex> lk(mu_);
    id = node_id_;
  }
  registration_ = std::make_unique<Registration>(
      cluster_, id,
      [this, listen, profile] {
        std::lock_guard<std::mutex> lk(mu_);
        NodeStatus s = self_status();
        s.role = GENIE_NODE_ROLE_SERVER;
        s.listen = listen;
        s.devices = {"cpu:0"};
        s.last_heartbeat_ms = 0;  // the lease says it lives; a changing value would be rewritten each renewal
        JsonPtr j = node_to_json(s);
        cJSON_AddItemToObject(j.get(), "backends",
                              json_parse(backends_json_, "this server's backends").release());
        cJSON_AddNumberToObject(j.get(), "lease_ttl_ms", static_cast<double>(cfg_.etcd_lease_ttl_ms));
        if (!profile.empty())
          cJSON_AddItemToObject(j.get(), "profile", json_parse(profile, "this server's profile").release());
        return json_text(j.get());
      },
      cfg_.etcd_lease_ttl_ms);
}

void ClusterMaster::publish(const NodeStatus& n) {
  const std::string json = json_text(node_to_json(n).get());
  uint64_t lease = 0;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = members_.find(n.id);
    if (it != members_.end() && it->second.status.alive) lease = it->second.lease;
  }
  if (lease != 0) {
    try {
      store_->renew(lease);
    } catch (const Error& e) {
      if (e.code() != GENIE_ERR_NOT_FOUND) throw;
      lease = 0;
    }
  }
  if (lease == 0) lease = store_->grant(cfg_.heartbeat_timeout_ms);
  store_->put(n.id, json, lease);
  std::lock_guard<std::mutex> lk(mu_);
  if (auto it = members_.find(n.id); it != members_.end()) it->second.lease = lease;
}

void ClusterMaster::on_member(const MemberEvent& ev, bool from_cluster) {
  std::lock_guard<std::mutex> lk(mu_);
  if (ev.id == node_id_) return;  // this server: first in every view
  auto it = members_.find(ev.id);
  if (ev.kind == MemberEvent::Kind::Delete) {
    if (it == members_.end() || !it->second.status.alive) return;
    const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - it->second.last_seen)
                            .count();
    it->second.status.alive = false;
    it->second.json.clear();
    view_.clear();
    if (from_cluster && it->second.in_cluster && follow_) follow_(ev.id, {});
    if (from_cluster)
      log(LogLevel::Info, "cluster: node ", ev.id, " lost: it left ", cluster_->describe(),
          " (its lease expired or it stopped)");
    else
      log(LogLevel::Info, "cluster: node ", ev.id, " lost: no heartbeat for ", silent, " ms");
    return;
  }
  NodeStatus n = node_from_json(json_parse(ev.value, "a member's status").get());
  if (it == members_.end()) {
    if (members_.size() >= kMaxNodes) {
      log(LogLevel::Error, "cluster: node ", ev.id, " not tracked: this master already tracks ", kMaxNodes,
          " nodes");
      return;
    }
    log(LogLevel::Info, "cluster: node ", n.id, " (", role_str(n.role), ", ", n.host, " at ",
        n.address.empty() ? n.listen : n.address, ") joined");
    it = members_.emplace(ev.id, Member{}).first;
  } else if (!it->second.status.alive) {
    log(LogLevel::Info, "cluster: node ", ev.id, " recovered");
  }
  n.alive = true;
  const bool server = from_cluster && n.role == GENIE_NODE_ROLE_SERVER;
  it->second.status = std::move(n);
  it->second.json = ev.value;
  it->second.last_seen = std::chrono::steady_clock::now();
  if (from_cluster) {
    const bool was = it->second.in_cluster;
    it->second.in_cluster = server;
    it->second.registered = server ? ev.value : std::string();
    if (follow_ && (server || was)) follow_(ev.id, it->second.registered);
  }
  view_.clear();
}

void ClusterMaster::follow_servers(ServerFn fn) {
  std::lock_guard<std::mutex> lk(mu_);
  follow_ = std::move(fn);
  if (!follow_) return;
  for (const auto& [id, m] : members_)
    if (m.in_cluster && m.status.alive && id != node_id_) follow_(id, m.registered);
}

void ClusterMaster::answer_probe(wire::ProbeReply& r) {
  std::lock_guard<std::mutex> lk(mu_);
  r.set_node_id(node_id_);
  r.set_protocol_version(wire::kProtocolVersion);
  r.set_abi_version(GENIE_ABI_VERSION);
  r.set_backends_json(backends_json_);
}

void ClusterMaster::answer_heartbeat(const std::string& peer, const std::string& session_node,
                                     const wire::Heartbeat& hb, wire::HeartbeatReply& reply) {
  check(hb.node_json().size() <= kMaxNodeStatusBytes, GENIE_ERR_TOO_LARGE, "a node status of ",
        hb.node_json().size(), " bytes (at most ", kMaxNodeStatusBytes, ")");
  JsonPtr j = json_parse(hb.node_json(), "the heartbeat's node status");
  NodeStatus n = node_from_json(j.get());
  check(n.id == session_node, GENIE_ERR_INVALID_ARGUMENT, "heartbeat for node '", n.id,
        "' on the session of node '", session_node, "': a node heartbeats for itself only");
  n.address = peer;
  n.alive = true;
  n.last_heartbeat_ms = unix_ms();
  {
    std::lock_guard<std::mutex> lk(mu_);
    check(members_.count(n.id) || members_.size() < kMaxNodes, GENIE_ERR_TOO_LARGE,
          "this master already tracks ", kMaxNodes, " nodes");
  }
  // Through the store: its watch (on_member) updates the view.
  publish(n);
  std::lock_guard<std::mutex> lk(mu_);
  metrics::add(metrics::Id::Heartbeats);
  reply.set_master_node_id(node_id_);
  reply.set_nodes_json(view());
  reply.set_backends_json(backends_json_);
}

double ClusterMaster::measure_rtt(const std::string& host, int port) const {
  const TcpProbe p = probe_tcp(host, port, std::min<int64_t>(cfg_.timeout_ms, 5000), 5, probe_tls(cfg_));
  if (!p.reachable || p.rtt_p50_us <= 0) {
    log(LogLevel::Info, "cluster: no probe RTT to ", host, ":", port, " (", p.reason, ")");
    return 0;
  }
  return p.rtt_p50_us * 1e-6;
}

const std::string& ClusterMaster::view() {
  const auto now = std::chrono::steady_clock::now();
  if (!view_.empty() && now - view_built_ < kViewRefresh) return view_;
  const size_t cap = std::min<size_t>(kMaxViewBytes, static_cast<size_t>(cfg_.max_message_bytes) / 2);
  std::string v = "[";
  v += json_text(node_to_json(self_status()).get());
  size_t left_out = 0;
  // Alive nodes first: if the view is full, lost ones are left out first.
  for (bool alive : {true, false}) {
    for (auto& [id, m] : members_) {
      if (m.status.alive != alive) continue;
      if (m.json.empty()) m.json = json_text(node_to_json(m.status).get());
      if (v.size() + 1 + m.json.size() + 1 > cap) {
        ++left_out;
        continue;
      }
      v += ',';
      v += m.json;
    }
  }
  v += ']';
  if (left_out > 0 && !view_truncated_)
    log(LogLevel::Warn, "cluster: the view passes ", cap, " bytes: ", left_out, " of ", members_.size(),
        " nodes left out of heartbeat replies");
  view_truncated_ = left_out > 0;
  view_ = std::move(v);
  view_built_ = now;
  return view_;
}

void ClusterMaster::set_node_id(const std::string& id) {
  std::lock_guard<std::mutex> lk(mu_);
  node_id_ = id;
}

size_t ClusterMaster::alive_nodes() const {
  std::lock_guard<std::mutex> lk(mu_);
  size_t n = 0;
  for (const auto& [id, m] : members_) n += m.status.alive;
  return n;
}

std::vector<metrics::Family> ClusterMaster::metric_families() const {
  std::lock_guard<std::mutex> lk(mu_);
  metrics::Family nodes{
      "genie_cluster_nodes", "Cluster nodes this master tracks, by state (alive, lost).", false, {}};
  size_t alive = 0;
  for (const auto& [id, m] : members_) alive += m.status.alive;
  nodes.samples.push_back({{{"state", "alive"}}, double(alive)});
  nodes.samples.push_back({{{"state", "lost"}}, double(members_.size() - alive)});
  std::vector<metrics::Family> out{std::move(nodes)};
  if (gpus_.empty()) return out;
  metrics::Family util{"genie_gpu_utilization_ratio",
                       "GPU utilisation (0..1) at the last NVML poll, by GPU index.",
                       false,
                       {}};
  metrics::Family used{"genie_gpu_memory_used_bytes", "GPU memory in use at the last NVML poll.", false, {}};
  metrics::Family total{"genie_gpu_memory_total_bytes", "GPU memory in all.", false, {}};
  metrics::Family temp{"genie_gpu_temperature_celsius", "GPU temperature at the last NVML poll.", false, {}};
  for (const GpuInfo& g : gpus_) {
    const std::vector<std::pair<std::string, std::string>> l{{"gpu", std::to_string(g.index)}};
    util.samples.push_back({l, g.utilization / 100.0});
    used.samples.push_back({l, double(g.memory_used)});
    total.samples.push_back({l, double(g.memory_total)});
    temp.samples.push_back({l, double(g.temperature_c)});
  }
  for (metrics::Family* f : {&util, &used, &total, &temp}) out.push_back(std::move(*f));
  return out;
}

bool ClusterMaster::node_alive(const std::string& node) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = members_.find(node);
  return it == members_.end() || it->second.status.alive;
}

void ClusterMaster::worker_joined(const std::string& node, const std::string& host, int port,
                                  const std::vector<std::string>& devices) {
  NodeStatus st;
  {
    std::lock_guard<std::mutex> lk(mu_);
    workers_.insert(node);
    auto it = members_.find(node);
    if (it == members_.end() && members_.size() >= kMaxNodes) {
      log(LogLevel::Error, "cluster: worker ", node, " not tracked: this master already tracks ", kMaxNodes,
          " nodes");
      return;
    }
    if (it != members_.end()) {
      st = it->second.status;
    } else {
      st.id = node;
      st.host = host;
    }
  }
  st.role = GENIE_NODE_ROLE_WORKER;
  st.listen = cat(host, ":", port);
  // What it registered, so the cluster view lists its devices before its
  // first heartbeat does.
  st.devices = devices;
  st.alive = true;
  st.last_heartbeat_ms = unix_ms();
  publish(st);
}

void ClusterMaster::worker_left(const std::string& node) {
  std::unique_lock<std::mutex> lk(mu_);
  workers_.erase(node);
  auto it = members_.find(node);
  if (it == members_.end() || !it->second.status.alive) return;
  it->second.status.alive = false;
  it->second.json.clear();
  view_.clear();
  log(LogLevel::Info, "cluster: node ", node, " lost: its session with this master closed");
  lk.unlock();
  store_->remove(node);
}

void ClusterMaster::start_worker_heartbeat(const std::shared_ptr<RemoteClient>& link, const std::string& host,
                                           int port) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    listen_ = cat(host, ":", port);
  }
  LoopThread* loop = link->loop_thread();
  std::weak_ptr<RemoteClient> weak = link;
  loop->post([this, loop, weak] {
    link_ = weak;
    link_loop_ = loop;
    link_hook_ = loop->add_close_hook([this] { stop_worker_heartbeat(); });
    link_tick_ = new Tick;
    link_tick_->self = this;
    link_tick_->fn = &ClusterMaster::worker_heartbeat;
    uv_timer_init(loop->loop(), &link_tick_->timer);
    link_tick_->timer.data = link_tick_;
    const auto ms = static_cast<uint64_t>(cfg_.heartbeat_interval_ms);
    // The first one at once: the master's view has this worker's status
    // (GPUs, health) right after it registered.
    uv_timer_start(
        &link_tick_->timer,
        [](uv_timer_t* h) {
          auto* tick = static_cast<Tick*>(h->data);
          try {
            (tick->self->*tick->fn)();
          } catch (const std::exception& e) {
            log(LogLevel::Error, "cluster: worker heartbeat threw: ", e.what());
          }
        },
        0, ms);
  });
}

void ClusterMaster::worker_heartbeat() {
  std::shared_ptr<RemoteClient> link = link_.lock();
  if (!link || hb_inflight_ || !link->connected()) return;
  wire::Heartbeat hb;
  {
    std::lock_guard<std::mutex> lk(mu_);
    hb.set_node_json(json_text(node_to_json(self_status()).get()));
  }
  hb_inflight_ = true;
  link->heartbeat_async(wire::encode_msg(hb), [this](genie_status_t st, std::string&& reply) {
    hb_inflight_ = false;
    if (st != GENIE_OK) log(LogLevel::Debug, "cluster: worker heartbeat to the master failed: ", reply);
  });
}

void ClusterMaster::stop_worker_heartbeat() {
  if (link_tick_) {
    uv_close(reinterpret_cast<uv_handle_t*>(&link_tick_->timer),
             [](uv_handle_t* h) { delete static_cast<Tick*>(h->data); });
    link_tick_ = nullptr;
  }
  if (link_loop_ && link_hook_) {
    link_loop_->remove_close_hook(link_hook_);
    link_hook_ = 0;
  }
}

NodeStatus ClusterMaster::self_status() const {
  NodeStatus s;
  s.id = node_id_;
  s.host = host_;
  s.role = listen_.empty() ? GENIE_NODE_ROLE_SERVER : GENIE_NODE_ROLE_WORKER;
  s.listen = listen_;
  if (!listen_.empty()) s.devices = {"cpu:0"};
  s.backend = "tcp";
  s.alive = true;
  s.last_heartbeat_ms = unix_ms();
  s.gpus = gpus_;
  s.gpu_reason = gpu_reason_;
  s.health = health_.level;
  s.health_reasons = health_.reasons;
  return s;
}

void ClusterMaster::every(uint64_t ms, void (ClusterMaster::*fn)()) {
  auto* t = new Tick;
  t->self = this;
  t->fn = fn;
  uv_timer_init(loop_->loop(), &t->timer);
  t->timer.data = t;
  uv_timer_start(
      &t->timer,
      [](uv_timer_t* h) {
        auto* tick = static_cast<Tick*>(h->data);
        try {
          (tick->self->*tick->fn)();
        } catch (const std::exception& e) {
          log(LogLevel::Error, "cluster: timer threw: ", e.what());
        }
      },
      ms, ms);
  ticks_.push_back(t);
}

void ClusterMaster::start(LoopThread& loop) {
  loop_ = &loop;
  close_hook_ = loop.add_close_hook([this] { stop(); });
  health_tick();
  every(static_cast<uint64_t>(cfg_.heartbeat_interval_ms), &ClusterMaster::sweep);
  every(static_cast<uint64_t>(cfg_.gpu_poll_interval_ms), &ClusterMaster::gpu_tick);
  every(static_cast<uint64_t>(cfg_.health_interval_ms), &ClusterMaster::health_tick);
}

void ClusterMaster::stop() {
  for (Tick* t : ticks_)
    uv_close(reinterpret_cast<uv_handle_t*>(&t->timer),
             [](uv_handle_t* h) { delete static_cast<Tick*>(h->data); });
  ticks_.clear();
  if (loop_ && close_hook_) {
    loop_->remove_close_hook(close_hook_);
    close_hook_ = 0;
  }
}

void ClusterMaster::sweep() {
  // Leases past their TTL go; the watch marks their nodes lost.
  store_->expire();
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lk(mu_);
  for (auto it = members_.begin(); it != members_.end();) {
    const auto silent =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - it->second.last_seen).count();
    if (!it->second.status.alive && silent > 10 * cfg_.heartbeat_timeout_ms && !workers_.count(it->first)) {
      log(LogLevel::Info, "cluster: node ", it->first, " forgotten");
      it = members_.erase(it);
      view_.clear();
    } else {
      ++it;
    }
  }
}

void ClusterMaster::gpu_tick() {
  gpu_.poll();
  std::lock_guard<std::mutex> lk(mu_);
  gpus_ = gpu_.gpus();
  gpu_reason_ = gpu_.reason();
}

void ClusterMaster::health_tick() {
  std::lock_guard<std::mutex> lk(mu_);
  HealthInputs in;
  in.gpus = gpus_;
  in.gpu_error = gpu_.poll_error();
  in.memory_available_fraction = memory_available_fraction();
  HealthReport now = evaluate_health(in);
  if (now.level != health_.level)
    log(LogLevel::Info, "cluster: master health ", health_str(health_.level), " -> ", health_str(now.level));
  health_ = std::move(now);
}

}  // namespace genie
