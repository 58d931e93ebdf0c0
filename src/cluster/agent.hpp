// The cluster side of a context (genie_init): init phases, discovery and
// backend selection, then monitoring on the context's loop thread:
// heartbeats to the master (remote mode), GPU polls, health checks; the
// cluster view and the events derived from it.
//
// Remote mode runs on the RemoteClient's loop thread; embedded mode starts
// a loop thread of its own (cheap: one thread, no sockets). Each heartbeat
// interval the agent sends its node status on the session's control
// connection and takes the master's view from the reply; when the session
// is not connected it probes the master instead (a sessionless Probe, on
// libuv's thread pool), so that a master that comes back is noticed even
// after the session is gone. The master is marked lost when nothing
// answered for the heartbeat timeout (checked every interval: NODE_LOST
// comes within timeout + one interval).
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cluster/discovery.hpp"
#include "cluster/events.hpp"
#include "cluster/gpu_monitor.hpp"
#include "cluster/health.hpp"
#include "cluster/types.hpp"
#include "core/config.hpp"

namespace genie {

class LoopThread;
class RemoteClient;

struct InitPhase {
  std::string name;
  double ms = 0;
  std::string detail;
};

class ClusterAgent {
 public:
  // Runs the phases "local_node", "discovery" and "backend" (logged at
  // INFO). Throws CONNECTION / TIMEOUT / PROTOCOL when the master cannot be
  // reached within the timeout (naming its address and why), UNSUPPORTED
  // when an explicitly requested backend is not available.
  // `config_ms`: how long the config phase took (recorded first).
  ClusterAgent(const Config& cfg, std::string node_id, double config_ms);
  ~ClusterAgent();
  ClusterAgent(const ClusterAgent&) = delete;
  ClusterAgent& operator=(const ClusterAgent&) = delete;

  // Records a phase run by the caller (config, master_connection).
  void add_phase(const std::string& name, double ms, const std::string& detail);
  // Phase "monitoring": starts the timers on `client`'s loop thread (or on
  // an own loop when client is null) and, in remote mode, waits for the
  // first heartbeat reply (at most the timeout) so the view is there when
  // genie_init returns.
  void start(std::shared_ptr<RemoteClient> client);
  // Ends timers and subscriptions. Not on the loop thread. Idempotent.
  void stop();

  std::string state_json();
  uint64_t subscribe(uint32_t mask, genie_event_fn fn, void* user);
  void unsubscribe(uint64_t id);
  const Selection& selection() const { return selection_; }

 private:
  struct Tick;
  using Clock = std::chrono::steady_clock;
  struct Pending {
    uint32_t type;
    std::string json;
  };

  LoopThread* loop() const;
  Tick* every(uint64_t ms, void (ClusterAgent::*fn)());
  void close_ticks();
  void heartbeat_tick();
  void gpu_tick();
  void health_tick();
  void on_heartbeat_reply(genie_status_t st, std::string&& reply);
  void on_probe_result(const TcpProbe& p);
  void check_master_lost(std::vector<Pending>& out);
  void publish(std::vector<Pending>& events);
  std::string node_event(uint32_t type, const NodeStatus& n, const std::string& reason) const;
  std::string master_name() const;
  NodeStatus master_node() const;  // with mu_ held

  const Config cfg_;
  GpuMonitor gpu_;  // loop thread after construction
  EventBus bus_;
  Selection selection_;

  mutable std::mutex mu_;
  NodeStatus self_;
  std::vector<InitPhase> phases_;
  RdmaProbe rdma_;
  UcxProbe ucx_;
  DpdkProbe dpdk_;
  TcpProbe tcp_;
  std::vector<BackendAvail> local_backends_;
  std::map<std::string, NodeStatus> view_;  // other nodes, from the master
  std::string master_id_;
  bool master_lost_ = false;
  Clock::time_point last_ok_;
  double rtt_us_ = 0;
  HealthReport health_;
  struct Counters {
    uint64_t heartbeats_sent = 0, heartbeat_replies = 0, heartbeat_failures = 0, probes_sent = 0,
             probe_replies = 0, gpu_polls = 0, health_checks = 0, events_published = 0, callbacks_run = 0;
  } counters_;

  // Loop thread only.
  std::shared_ptr<RemoteClient> client_;
  std::unique_ptr<LoopThread> own_loop_;
  std::vector<Tick*> ticks_;
  uint64_t close_hook_ = 0;
  bool hb_inflight_ = false;
  bool probe_inflight_ = false;
  bool stopped_ = false;
  bool started_ = false;
};

}  // namespace genie
