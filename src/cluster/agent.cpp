#include "cluster/agent.hpp"

#include <unistd.h>

#include <algorithm>
#include <future>

#include "control/client.hpp"
#include "control/loop_thread.hpp"
#include "control/tls.hpp"
#include "control/wire_codec.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "genie.pb.h"

namespace genie {

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string host_name() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "localhost";
  return host;
}

}  // namespace

// A repeating uv_timer_t; freed by its close callback.
struct ClusterAgent::Tick {
  uv_timer_t timer{};
  ClusterAgent* self = nullptr;
  void (ClusterAgent::*fn)() = nullptr;
};

// ---------------------------------------------------------------------------
// Init phases
// ---------------------------------------------------------------------------

ClusterAgent::ClusterAgent(const Config& cfg, std::string node_id, double config_ms) : cfg_(cfg) {
  self_.id = std::move(node_id);
  add_phase("config", config_ms,
            cfg_.master_addr.empty() ? "embedded mode (no master)"
                                     : cat("master ", cfg_.master_addr, ":", cfg_.master_port));
  // --- local node: identity and local GPUs ---
  auto t0 = Clock::now();
  self_.host = host_name();
  self_.role = cfg_.role;
  self_.alive = true;
  gpu_.poll();
  self_.gpus = gpu_.gpus();
  self_.gpu_reason = gpu_.reason();
  add_phase("local_node", ms_since(t0),
            cat("node ", self_.id, " on ", self_.host, ", role ", role_str(cfg_.role), ", ",
                self_.gpus.size(), " GPU(s)", self_.gpu_reason.empty() ? "" : " (" + self_.gpu_reason + ")"));

  // --- network discovery ---
  t0 = Clock::now();
  rdma_ = probe_rdma();
  const bool want_dpdk = cfg_.backend == GENIE_BACKEND_DPDK || cfg_.backend == GENIE_BACKEND_DPDK_GPUDEV;
  dpdk_ = want_dpdk ? probe_dpdk(std::min<int64_t>(cfg_.timeout_ms, 10000))
                    : dpdk_not_probed(
                          "EAL not probed at init (about 0.5 s in a child process: `genie discover` "
                          "runs it); GENIE_TRANSPORT=dpdk uses the dpdk transport plugin regardless");
  ucx_ = probe_ucx_if_used(cfg_, rdma_.available);
  local_backends_ = local_backends(rdma_, dpdk_, ucx_);
  const bool remote = !cfg_.master_addr.empty();
  if (remote) {
    tcp_ = probe_tcp(cfg_.master_addr, cfg_.master_port, cfg_.timeout_ms, 1, probe_tls(cfg_));
    if (!tcp_.reachable)
      fail(tcp_.status, "master ", cfg_.master_addr, ":", cfg_.master_port, " unreachable: ", tcp_.reason);
    rtt_us_ = tcp_.rtt_p50_us;
    master_id_ = tcp_.server_node_id;
  }
  add_phase("discovery", ms_since(t0),
            cat("rdma: ", rdma_.reason, "; ucx: ", ucx_.reason, "; dpdk: ", dpdk_.reason,
                remote ? cat("; tcp: ", tcp_.reason, ", rtt ", static_cast<int64_t>(tcp_.rtt_p50_us), " us")
                       : std::string("; no master (embedded mode)")));

  // --- backend ---
  t0 = Clock::now();
  selection_ =
      select_backend(cfg_.backend, local_backends_,
                     remote && tcp_.has_backends ? &tcp_.server_backends : nullptr, tcp_.server_node_id);
  self_.backend = backend_str(selection_.backend);
  add_phase("backend", ms_since(t0), cat(backend_str(selection_.backend), ": ", selection_.reason));
}

ClusterAgent::~ClusterAgent() { stop(); }

void ClusterAgent::add_phase(const std::string& name, double ms, const std::string& detail) {
  log(LogLevel::Info, "init ", self_.id, ": phase ", name, " (", ms, " ms): ", detail);
  std::lock_guard<std::mutex> lk(mu_);
  phases_.push_back({name, ms, detail});
}

LoopThread* ClusterAgent::loop() const { return client_ ? client_->loop_thread() : own_loop_.get(); }

ClusterAgent::Tick* ClusterAgent::every(uint64_t ms, void (ClusterAgent::*fn)()) {
  auto* t = new Tick;
  t->self = this;
  t->fn = fn;
  uv_timer_init(loop()->loop(), &t->timer);
  t->timer.data = t;
  uv_timer_start(
      &t->timer,
      [](uv_timer_t* h) {
        auto* tick = static_cast<Tick*>(h->data);
        try {  // nothing may unwind through libuv
          (tick->self->*tick->fn)();
        } catch (const std::exception& e) {
          log(LogLevel::Error, "cluster: timer threw: ", e.what());
        }
      },
      ms, ms);
  ticks_.push_back(t);
  return t;
}

void ClusterAgent::close_ticks() {
  stopped_ = true;
  for (Tick* t : ticks_)
    uv_close(reinterpret_cast<uv_handle_t*>(&t->timer),
             [](uv_handle_t* h) { delete static_cast<Tick*>(h->data); });
  ticks_.clear();
  if (close_hook_) {
    loop()->remove_close_hook(close_hook_);
    close_hook_ = 0;
  }
}

void ClusterAgent::start(std::shared_ptr<RemoteClient> client) {
  const auto t0 = Clock::now();
  client_ = std::move(client);
  if (!client_) own_loop_ = std::make_unique<LoopThread>();
  {
    std::lock_guard<std::mutex> lk(mu_);
    last_ok_ = Clock::now();
    HealthInputs in;
    in.gpus = self_.gpus;
    in.remote = client_ != nullptr;
    in.master = master_name();
    in.memory_available_fraction = memory_available_fraction();
    health_ = evaluate_health(in);
    self_.health = health_.level;
    self_.health_reasons = health_.reasons;
  }
  auto first = std::make_shared<std::promise<void>>();
  auto first_reply = first->get_future();
  const bool remote = client_ != nullptr;
  loop()->post([this, first, remote] {
    close_hook_ = loop()->add_close_hook([this] { close_ticks(); });
    started_ = true;
    every(static_cast<uint64_t>(cfg_.gpu_poll_interval_ms), &ClusterAgent::gpu_tick);
    every(static_cast<uint64_t>(cfg_.health_interval_ms), &ClusterAgent::health_tick);
    if (!remote) {
      first->set_value();
      return;
    }
    every(static_cast<uint64_t>(cfg_.heartbeat_interval_ms), &ClusterAgent::heartbeat_tick);
    // The first heartbeat now, so the view is there when genie_init returns.
    wire::Heartbeat hb;
    {
      std::lock_guard<std::mutex> lk(mu_);
      self_.last_heartbeat_ms = unix_ms();
      hb.set_node_json(json_text(node_to_json(self_).get()));
      ++counters_.heartbeats_sent;
    }
    hb_inflight_ = true;
    client_->heartbeat_async(wire::encode_msg(hb), [this, first](genie_status_t st, std::string&& reply) {
      hb_inflight_ = false;
      on_heartbeat_reply(st, std::move(reply));
      first->set_value();
    });
  });
  if (first_reply.wait_for(std::chrono::milliseconds(cfg_.timeout_ms) + std::chrono::seconds(1)) !=
      std::future_status::ready) {
    fail(GENIE_ERR_TIMEOUT, "no first heartbeat reply from master ", master_name(), " within ",
         cfg_.timeout_ms, " ms");
  }
  std::string detail;
  {
    std::lock_guard<std::mutex> lk(mu_);
    detail = cat("GPU poll every ", cfg_.gpu_poll_interval_ms, " ms, health every ", cfg_.health_interval_ms,
                 " ms",
                 remote ? cat(", heartbeat every ", cfg_.heartbeat_interval_ms, " ms (timeout ",
                              cfg_.heartbeat_timeout_ms, " ms); ", view_.size(), " other node(s) in the view")
                        : std::string());
  }
  add_phase("monitoring", ms_since(t0), detail);
}

void ClusterAgent::stop() {
  LoopThread* l = loop();
  if (!l) return;
  bus_.clear();
  if (l->on_loop_thread()) {
    log(LogLevel::Error, "cluster: stop() called on the loop thread (from an event callback?)");
    return;
  }
  std::promise<void> done;
  auto f = done.get_future();
  if (l->post([this, &done] {
        if (!stopped_) close_ticks();
        done.set_value();
      }))
    f.wait();
  if (own_loop_) {
    own_loop_->stop();
  }
}

// ---------------------------------------------------------------------------
// Heartbeats (loop thread)
// ---------------------------------------------------------------------------

std::string ClusterAgent::master_name() const {
  return cat(master_id_.empty() ? "?" : master_id_, " at ", cfg_.master_addr, ":", cfg_.master_port);
}

NodeStatus ClusterAgent::master_node() const {
  auto it = view_.find(master_id_);
  if (it != view_.end()) return it->second;
  NodeStatus n;
  n.id = master_id_;
  n.host = cfg_.master_addr;
  n.address = cat(cfg_.master_addr, ":", cfg_.master_port);
  n.role = GENIE_NODE_ROLE_SERVER;
  return n;
}

std::string ClusterAgent::node_event(uint32_t type, const NodeStatus& n, const std::string& reason) const {
  JsonPtr o = json_object();
  cJSON_AddStringToObject(o.get(), "type", event_name(type));
  cJSON_AddNumberToObject(o.get(), "time_ms", static_cast<double>(unix_ms()));
  cJSON_AddItemToObject(o.get(), "node", node_to_json(n).release());
  cJSON_AddStringToObject(o.get(), "reason", reason.c_str());
  return json_text(o.get());
}

void ClusterAgent::publish(std::vector<Pending>& events) {
  for (Pending& e : events) {
    const size_t n = bus_.publish(e.type, e.json);
    std::lock_guard<std::mutex> lk(mu_);
    ++counters_.events_published;
    counters_.callbacks_run += n;
  }
  events.clear();
}

void ClusterAgent::check_master_lost(std::vector<Pending>& out) {
  const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last_ok_).count();
  if (master_lost_ || silent <= cfg_.heartbeat_timeout_ms) return;
  master_lost_ = true;
  NodeStatus m = master_node();
  m.alive = false;
  view_[m.id] = m;
  const std::string why = cat("no answer from master ", master_name(), " for ", silent, " ms (timeout ",
                              cfg_.heartbeat_timeout_ms, " ms)");
  log(LogLevel::Warn, "cluster: ", why);
  out.push_back({GENIE_EVENT_NODE_LOST, node_event(GENIE_EVENT_NODE_LOST, m, why)});
}

void ClusterAgent::heartbeat_tick() {
  if (stopped_) return;
  std::vector<Pending> events;
  const bool session_up = client_->connected();
  if (session_up && !hb_inflight_) {
    wire::Heartbeat hb;
    {
      std::lock_guard<std::mutex> lk(mu_);
      hb.set_node_json(json_text(node_to_json(self_).get()));
      ++counters_.heartbeats_sent;
    }
    hb_inflight_ = true;
    client_->heartbeat_async(wire::encode_msg(hb), [this](genie_status_t st, std::string&& reply) {
      hb_inflight_ = false;
      on_heartbeat_reply(st, std::move(reply));
    });
  } else if (!session_up && !probe_inflight_) {
    // No session to heartbeat on: is the master there at all?
    struct Work {
      uv_work_t req{};
      ClusterAgent* self;
      std::string host;
      int port;
      int64_t timeout_ms;
      std::shared_ptr<const dataplane::tcp::TlsContext> tls;
      TcpProbe result;
    };
    auto* w = new Work;
    w->req.data = w;
    w->self = this;
    w->host = cfg_.master_addr;
    w->port = cfg_.master_port;
    w->timeout_ms = std::min(cfg_.heartbeat_interval_ms, cfg_.timeout_ms);
    w->tls = probe_tls(cfg_);
    probe_inflight_ = true;
    {
      std::lock_guard<std::mutex> lk(mu_);
      ++counters_.probes_sent;
    }
    const int rc = uv_queue_work(
        loop()->loop(), &w->req,
        [](uv_work_t* r) {
          auto* work = static_cast<Work*>(r->data);
          work->result = probe_tcp(work->host, work->port, work->timeout_ms, 1, work->tls);
        },
        [](uv_work_t* r, int status) {
          std::unique_ptr<Work> work(static_cast<Work*>(r->data));
          work->self->probe_inflight_ = false;
          if (status == 0 && !work->self->stopped_) work->self->on_probe_result(work->result);
        });
    if (rc != 0) {
      probe_inflight_ = false;
      delete w;
    }
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    check_master_lost(events);
  }
  publish(events);
}

void ClusterAgent::on_heartbeat_reply(genie_status_t st, std::string&& reply) {
  if (stopped_) return;
  std::vector<Pending> events;
  if (st != GENIE_OK) {
    std::lock_guard<std::mutex> lk(mu_);
    ++counters_.heartbeat_failures;
    log(LogLevel::Debug, "cluster: heartbeat failed: ", reply);
    return;
  }
  wire::HeartbeatReply r;
  JsonPtr nodes;
  try {
    r = wire::parse_msg<wire::HeartbeatReply>(reply, wire::MsgType::HeartbeatReply);
    nodes = json_parse(r.nodes_json(), "the master's node list");
    check(cJSON_IsArray(nodes.get()), GENIE_ERR_PROTOCOL, "the master's node list is not an array");
  } catch (const Error& e) {
    std::lock_guard<std::mutex> lk(mu_);
    ++counters_.heartbeat_failures;
    log(LogLevel::Warn, "cluster: bad heartbeat reply: ", e.detail());
    return;
  }
  std::vector<NodeStatus> list;
  const cJSON* n;
  cJSON_ArrayForEach(n, nodes.get()) {
    try {
      list.push_back(node_from_json(n));
    } catch (const Error& e) {
      log(LogLevel::Warn, "cluster: master sent a bad node status: ", e.detail());
    }
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++counters_.heartbeat_replies;
    last_ok_ = Clock::now();
    self_.last_heartbeat_ms = unix_ms();
    const bool was_lost = master_lost_;
    master_lost_ = false;
    const std::string old_master = master_id_;
    master_id_ = r.master_node_id().substr(0, 255);
    std::map<std::string, bool> seen;
    for (NodeStatus& node : list) {
      if (node.id == self_.id) continue;
      seen[node.id] = true;
      auto it = view_.find(node.id);
      if (it == view_.end()) {
        if (node.alive)
          events.push_back(
              {GENIE_EVENT_NODE_JOINED, node_event(GENIE_EVENT_NODE_JOINED, node, "reported by the master")});
        view_[node.id] = node;
        continue;
      }
      const bool before = it->second.alive;
      it->second = node;
      if (!before && node.alive)
        events.push_back(
            {GENIE_EVENT_NODE_RECOVERED,
             node_event(GENIE_EVENT_NODE_RECOVERED, node,
                        node.id == master_id_ && was_lost ? "the master answers heartbeats again"
                                                          : "heartbeats again (reported by the master)")});
      else if (before && !node.alive)
        events.push_back(
            {GENIE_EVENT_NODE_LOST,
             node_event(GENIE_EVENT_NODE_LOST, node, "silent past the timeout (reported by the master)")});
    }
    for (auto& [id, node] : view_) {
      if (seen.count(id) || !node.alive) continue;
      node.alive = false;
      events.push_back({GENIE_EVENT_NODE_LOST,
                        node_event(GENIE_EVENT_NODE_LOST, node,
                                   id == old_master ? "replaced by master " + master_id_
                                                    : "no longer tracked by master " + master_id_)});
    }
    if (!r.backends_json().empty()) {
      try {
        const JsonPtr b = json_parse(r.backends_json(), "the master's backends");
        tcp_.server_backends = backends_from_json(b.get());
        tcp_.has_backends = true;
      } catch (const Error&) {
      }
    }
  }
  publish(events);
}

void ClusterAgent::on_probe_result(const TcpProbe& p) {
  std::vector<Pending> events;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!p.reachable) return;
    ++counters_.probe_replies;
    last_ok_ = Clock::now();
    rtt_us_ = p.rtt_p50_us;
    if (!master_lost_) return;
    master_lost_ = false;
    NodeStatus m = master_node();
    const bool same = p.server_node_id == master_id_;
    if (!same) {
      m = NodeStatus();
      m.id = p.server_node_id;
      m.host = cfg_.master_addr;
      m.role = GENIE_NODE_ROLE_SERVER;
      master_id_ = p.server_node_id;
    }
    m.address = cat(cfg_.master_addr, ":", cfg_.master_port);
    m.alive = true;
    m.last_heartbeat_ms = unix_ms();
    const bool known = view_.count(m.id) != 0;
    view_[m.id] = m;
    const uint32_t type = known ? GENIE_EVENT_NODE_RECOVERED : GENIE_EVENT_NODE_JOINED;
    const std::string why =
        cat("master ", master_name(), " answers probes again",
            client_->failed() ? " (the session is gone: create a new context to use it)" : "");
    log(LogLevel::Info, "cluster: ", why);
    events.push_back({type, node_event(type, m, why)});
  }
  publish(events);
}

// ---------------------------------------------------------------------------
// GPUs and health (loop thread)
// ---------------------------------------------------------------------------

void ClusterAgent::gpu_tick() {
  if (stopped_) return;
  std::vector<GpuEvent> found = gpu_.poll();
  std::vector<Pending> events;
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++counters_.gpu_polls;
    self_.gpus = gpu_.gpus();
    self_.gpu_reason = gpu_.reason();
  }
  for (const GpuEvent& e : found) {
    JsonPtr o = json_object();
    cJSON_AddStringToObject(o.get(), "type", event_name(e.type));
    cJSON_AddNumberToObject(o.get(), "time_ms", static_cast<double>(unix_ms()));
    cJSON_AddStringToObject(o.get(), "node_id", self_.id.c_str());
    cJSON_AddItemToObject(o.get(), "gpu", gpu_to_json(e.gpu).release());
    events.push_back({e.type, json_text(o.get())});
  }
  publish(events);
}

void ClusterAgent::health_tick() {
  if (stopped_) return;
  std::vector<Pending> events;
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++counters_.health_checks;
    HealthInputs in;
    in.gpus = self_.gpus;
    in.gpu_error = gpu_.poll_error();
    in.remote = client_ != nullptr;
    if (client_) {
      in.master_lost = master_lost_;
      in.session_failed = client_->failed();
      in.reconnecting = !in.session_failed && !client_->connected();
      in.master = master_name();
    }
    for (const auto& [id, n] : view_)
      if (!n.alive && id != master_id_) in.lost_peers.push_back(id);
    in.memory_available_fraction = memory_available_fraction();
    HealthReport now = evaluate_health(in);
    if (now.level != health_.level) {
      JsonPtr o = json_object();
      cJSON_AddStringToObject(o.get(), "type", "HEALTH_CHANGED");
      cJSON_AddNumberToObject(o.get(), "time_ms", static_cast<double>(unix_ms()));
      cJSON_AddStringToObject(o.get(), "node_id", self_.id.c_str());
      cJSON_AddStringToObject(o.get(), "from", health_str(health_.level));
      cJSON_AddStringToObject(o.get(), "to", health_str(now.level));
      JsonPtr reasons = json_array();
      for (const std::string& r : now.reasons)
        cJSON_AddItemToArray(reasons.get(), cJSON_CreateString(r.c_str()));
      cJSON_AddItemToObject(o.get(), "reasons", reasons.release());
      log(LogLevel::Info, "cluster: health ", health_str(health_.level), " -> ", health_str(now.level));
      events.push_back({GENIE_EVENT_HEALTH_CHANGED, json_text(o.get())});
    }
    health_ = std::move(now);
    self_.health = health_.level;
    self_.health_reasons = health_.reasons;
  }
  publish(events);
}

// ---------------------------------------------------------------------------
// Subscriptions and state (any thread)
// ---------------------------------------------------------------------------

uint64_t ClusterAgent::subscribe(uint32_t mask, genie_event_fn fn, void* user) {
  const uint64_t id = bus_.subscribe(mask, fn, user);
  if (mask & GENIE_EVENT_BACKEND_SELECTED) {
    JsonPtr o = json_object();
    cJSON_AddStringToObject(o.get(), "type", "BACKEND_SELECTED");
    cJSON_AddNumberToObject(o.get(), "time_ms", static_cast<double>(unix_ms()));
    cJSON_AddStringToObject(o.get(), "requested", backend_str(selection_.requested));
    cJSON_AddStringToObject(o.get(), "backend", backend_str(selection_.backend));
    cJSON_AddStringToObject(o.get(), "reason", selection_.reason.c_str());
    std::string json = json_text(o.get());
    if (LoopThread* l = loop())
      l->post([this, id, json = std::move(json)] {
        const size_t n = bus_.publish_to(id, GENIE_EVENT_BACKEND_SELECTED, json);
        std::lock_guard<std::mutex> lk(mu_);
        ++counters_.events_published;
        counters_.callbacks_run += n;
      });
  }
  return id;
}

void ClusterAgent::unsubscribe(uint64_t id) { bus_.unsubscribe(id); }

std::string ClusterAgent::state_json() {
  std::lock_guard<std::mutex> lk(mu_);
  const bool remote = !cfg_.master_addr.empty();
  JsonPtr o = json_object();
  cJSON_AddStringToObject(o.get(), "mode", remote ? "remote" : "embedded");
  cJSON_AddItemToObject(o.get(), "node", node_to_json(self_).release());
  JsonPtr nodes = json_array();
  cJSON_AddItemToArray(nodes.get(), node_to_json(self_).release());
  for (const auto& [id, n] : view_) cJSON_AddItemToArray(nodes.get(), node_to_json(n).release());
  cJSON_AddItemToObject(o.get(), "nodes", nodes.release());
  if (remote) {
    JsonPtr m = json_object();
    cJSON_AddStringToObject(m.get(), "address", cat(cfg_.master_addr, ":", cfg_.master_port).c_str());
    cJSON_AddStringToObject(m.get(), "node_id", master_id_.c_str());
    cJSON_AddStringToObject(m.get(), "status", master_lost_ ? "lost" : "alive");
    const char* session = !client_               ? "none"
                          : client_->connected() ? "connected"
                          : client_->failed()    ? "failed"
                                                 : "reconnecting";
    cJSON_AddStringToObject(m.get(), "session", session);
    cJSON_AddNumberToObject(m.get(), "rtt_us", rtt_us_);
    cJSON_AddNumberToObject(
        m.get(), "last_answer_ms_ago",
        static_cast<double>(
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last_ok_).count()));
    cJSON_AddItemToObject(o.get(), "master", m.release());
  } else {
    cJSON_AddNullToObject(o.get(), "master");
  }
  cJSON_AddItemToObject(o.get(), "backend", selection_to_json(selection_).release());
  JsonPtr d = json_object();
  cJSON_AddItemToObject(d.get(), "rdma", rdma_to_json(rdma_).release());
  cJSON_AddItemToObject(d.get(), "ucx", ucx_to_json(ucx_).release());
  cJSON_AddItemToObject(d.get(), "dpdk", dpdk_to_json(dpdk_).release());
  cJSON_AddItemToObject(d.get(), "dpdk_gpudev", gpudev_to_json(dpdk_).release());
  JsonPtr g = json_object();
  cJSON_AddBoolToObject(g.get(), "available", !self_.gpus.empty());
  cJSON_AddNumberToObject(g.get(), "count", static_cast<double>(self_.gpus.size()));
  cJSON_AddStringToObject(g.get(), "reason",
                          self_.gpu_reason.empty() ? cat(self_.gpus.size(), " GPU(s) via NVML").c_str()
                                                   : self_.gpu_reason.c_str());
  cJSON_AddStringToObject(g.get(), "library", gpu_.library().c_str());
  cJSON_AddItemToObject(d.get(), "gpus", g.release());
  if (remote) cJSON_AddItemToObject(d.get(), "tcp", tcp_to_json(tcp_).release());
  JsonPtr b = json_object();
  cJSON_AddItemToObject(b.get(), "local", backends_to_json(local_backends_).release());
  if (remote && tcp_.has_backends)
    cJSON_AddItemToObject(b.get(), "server", backends_to_json(tcp_.server_backends).release());
  cJSON_AddItemToObject(d.get(), "backends", b.release());
  cJSON_AddItemToObject(o.get(), "discovery", d.release());
  JsonPtr phases = json_array();
  double total = 0;
  for (const InitPhase& p : phases_) {
    JsonPtr pj = json_object();
    cJSON_AddStringToObject(pj.get(), "name", p.name.c_str());
    cJSON_AddNumberToObject(pj.get(), "duration_ms", p.ms);
    cJSON_AddStringToObject(pj.get(), "detail", p.detail.c_str());
    cJSON_AddItemToArray(phases.get(), pj.release());
    total += p.ms;
  }
  cJSON_AddItemToObject(o.get(), "init_phases", phases.release());
  cJSON_AddNumberToObject(o.get(), "init_ms", total);
  JsonPtr h = json_object();
  cJSON_AddStringToObject(h.get(), "level", health_str(health_.level));
  JsonPtr reasons = json_array();
  for (const std::string& r : health_.reasons)
    cJSON_AddItemToArray(reasons.get(), cJSON_CreateString(r.c_str()));
  cJSON_AddItemToObject(h.get(), "reasons", reasons.release());
  cJSON_AddItemToObject(o.get(), "health", h.release());
  JsonPtr iv = json_object();
  cJSON_AddNumberToObject(iv.get(), "heartbeat_interval_ms", static_cast<double>(cfg_.heartbeat_interval_ms));
  cJSON_AddNumberToObject(iv.get(), "heartbeat_timeout_ms", static_cast<double>(cfg_.heartbeat_timeout_ms));
  cJSON_AddNumberToObject(iv.get(), "gpu_poll_interval_ms", static_cast<double>(cfg_.gpu_poll_interval_ms));
  cJSON_AddNumberToObject(iv.get(), "health_interval_ms", static_cast<double>(cfg_.health_interval_ms));
  cJSON_AddItemToObject(o.get(), "intervals", iv.release());
  JsonPtr c = json_object();
  const Counters& k = counters_;
  cJSON_AddNumberToObject(c.get(), "heartbeats_sent", static_cast<double>(k.heartbeats_sent));
  cJSON_AddNumberToObject(c.get(), "heartbeat_replies", static_cast<double>(k.heartbeat_replies));
  cJSON_AddNumberToObject(c.get(), "heartbeat_failures", static_cast<double>(k.heartbeat_failures));
  cJSON_AddNumberToObject(c.get(), "probes_sent", static_cast<double>(k.probes_sent));
  cJSON_AddNumberToObject(c.get(), "probe_replies", static_cast<double>(k.probe_replies));
  cJSON_AddNumberToObject(c.get(), "gpu_polls", static_cast<double>(k.gpu_polls));
  cJSON_AddNumberToObject(c.get(), "health_checks", static_cast<double>(k.health_checks));
  cJSON_AddNumberToObject(c.get(), "events_published", static_cast<double>(k.events_published));
  cJSON_AddNumberToObject(c.get(), "callbacks_run", static_cast<double>(k.callbacks_run));
  cJSON_AddNumberToObject(c.get(), "subscriptions", static_cast<double>(bus_.size()));
  cJSON_AddItemToObject(o.get(), "counters", c.release());
  return json_text(o.get());
}

}  // namespace genie
