// What a server needs from the multi-node orchestration of its node
// (docs/multinode.md): the runtime layer's MultiNode implements it, and a
// server gets one through ServerOptions::orchestrator. A server without one
// runs every graph on its own executor and refuses WorkerRegister.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "control/client.hpp"
#include "control/remote_tensor.hpp"
#include "core/config.hpp"
#include "core/tensor_data.hpp"
#include "graph/graph.hpp"
#include "sched/plan.hpp"

namespace genie {

class Executor;

// A tensor bound to (or produced by) a multi-node graph: on this server or on
// a worker. Exactly one is set (explain() also takes neither: an input not
// resident anywhere yet).
struct Held {
  TensorPtr local;
  RemoteTensorPtr remote;

  DType dtype() const { return local ? local->dtype() : remote->dtype; }
  const Shape& shape() const { return local ? local->shape() : remote->shape; }
};

struct MultiResult {
  genie_status_t status = GENIE_OK;
  std::string detail;
  std::vector<Held> outputs;  // per graph output, mark order
  uint64_t exec_ns = 0;
};

class Orchestrator {
 public:
  struct Stats {
    uint32_t workers = 0;
    uint64_t multinode_graphs = 0;
    uint64_t transfer_bytes = 0;
    std::map<std::string, uint64_t> transfer_bytes_by_role;
    // Of transfer_bytes, those moved between two workers directly (never
    // through this server).
    uint64_t direct_transfer_bytes = 0;
    uint64_t plan_hits = 0, plan_misses = 0;
    // The last graph run: predicted completion of its plan, and measured
    // time of its stages (transfers included, planning excluded).
    uint64_t last_predicted_ns = 0, last_measured_ns = 0;
  };

  virtual ~Orchestrator() = default;

  // Blocking: connects to the worker at host:port, measures the link and
  // adds it, replacing a worker of the same node id. `registered_by` names
  // the worker's own session on this server. Throws the connection's errors.
  virtual void join(const std::string& node_id, const std::string& host, int port,
                    std::vector<sched::DeviceProfile> devices, const void* registered_by) = 0;
  // The worker registered by this session, if any, leaves; returns its
  // client (closed by whoever drops the last reference: it may block).
  virtual std::shared_ptr<RemoteClient> leave(const void* registered_by) = 0;
  // The session on a worker work may be placed on. Throws CONNECTION for a
  // worker lost or gone, UNSUPPORTED for a node that never was one.
  virtual std::shared_ptr<RemoteClient> client_of(const std::string& node_id) const = 0;
  // Workers registered and not marked lost.
  virtual bool has_workers() const = 0;
  // Closes every worker session (blocking).
  virtual void close_all() = 0;
  // The server is stopping (any thread, does not block): graphs in flight
  // stop waiting for their workers and fail with SHUTDOWN, and no new one
  // starts, so that stopping takes a bounded time whatever the workers do.
  virtual void cancel() = 0;
  // Plans and runs a graph validated with `shapes`; inputs per graph input
  // in declaration order. Never throws: failures come back in the result.
  virtual MultiResult run(const std::shared_ptr<const Graph>& g, const std::vector<Held>& inputs,
                          const std::unordered_map<ValueId, Shape>& shapes) = 0;
  // The plan run() would follow, as sched::Plan::explain_json. Throws.
  virtual std::string explain(const Graph& g, const std::vector<Held>& inputs,
                              const std::unordered_map<ValueId, Shape>& shapes) = 0;
  virtual Stats stats() const = 0;
};

// Hooks of the cluster layer (ServerOptions::node_alive, measure_rtt),
// either may be empty, and what the orchestrator needs of its server:
// `self_instance`, the server's own instance (Welcome.server_instance), so
// that a worker whose Welcome carries it (this server, reached through its
// own address or a relay) is refused; `stage_timeout_ms`, how long a stage
// sent to a worker may take (ServerOptions::stage_timeout_ms).
struct OrchestratorHooks {
  std::function<bool(const std::string& node)> alive;
  std::function<double(const std::string& host, int port)> rtt;
  std::string self_instance;
  int64_t stage_timeout_ms = 600000;
};

// Makes the orchestrator of a server: its node id, the configuration of its
// client sessions on workers (auth token, timeout), its executor and the
// cluster layer's hooks.
using OrchestratorFactory = std::function<std::unique_ptr<Orchestrator>(
    const std::string& node_id, const Config& cfg, Executor& exec, OrchestratorHooks hooks)>;

}  // namespace genie
