// The context behind genie_context_t: configuration, node identity, and
// either the executor that runs graphs in-process (embedded mode) or the
// client of a `genie serve` process (remote mode): the embedded/remote
// switch. Tensor references are in tensor_ref.hpp, futures in future.hpp.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cluster/agent.hpp"
#include "core/config.hpp"
#include "core/device.hpp"
#include "core/metrics.hpp"
#include "core/tensor_data.hpp"
#include "exec/backend.hpp"
#include "exec/executor.hpp"
#include "exec/local_devices.hpp"
#include "genie.h"
#include "graph/binding.hpp"
#include "graph/graph.hpp"
#include "runtime/future.hpp"
#include "runtime/held_tensors.hpp"
#include "runtime/tensor_ref.hpp"
#include "sched/plan.hpp"

namespace genie {

class RemoteClient;

// What a submission derives from a graph: the snapshot validated with the
// bound shapes and, in remote mode, the graph's JSON as declared (the same
// for any shapes bound). A graph handle keeps the last
// one, so that submitting an unchanged graph again with the same shapes (the
// usual loop) skips the copy, the validation and the encoding. `version`
// names the graph's state: the handle bumps it whenever the graph may
// change. Thread-safe (a built graph may be submitted from several threads).
class SubmitMemo {
 public:
  struct Prepared {
    std::shared_ptr<const Graph> graph;
    std::string json;                  // remote mode only
    std::vector<sched::OpCost> costs;  // embedded mode only: each node's, what runs teach the cost model
  };

  // The Prepared kept for this version with the graph's inputs bound to
  // these shapes (input k to descs[order[k]], as bind_inputs orders them),
  // or null.
  std::shared_ptr<const Prepared> find(uint64_t version, const std::vector<TensorDesc>& descs,
                                       const std::vector<size_t>& order);
  void keep(uint64_t version, const std::vector<TensorDesc>& descs, const std::vector<size_t>& order,
            std::shared_ptr<const Prepared> p);
  // The JSON kept for this version whatever the shapes (remote mode: the
  // graph as declared), or empty.
  std::string json(uint64_t version);

 private:
  std::mutex mu_;
  uint64_t version_ = 0;
  std::vector<Shape> shapes_;  // of each graph input, in order
  std::shared_ptr<const Prepared> prepared_;
};

class Context : public std::enable_shared_from_this<Context> {
 public:
  // Runs the init phases (docs/cluster.md): local node, discovery, backend,
  // connection to the master (remote mode), monitoring; `config_ms` is how
  // long the caller took for the config phase. Throws CONNECTION / TIMEOUT
  // / AUTH / VERSION_MISMATCH / PROTOCOL naming the master's address,
  // UNSUPPORTED for an explicit backend that is not available.
  explicit Context(Config cfg, double config_ms = 0);
  ~Context();

  const Config& config() const { return cfg_; }
  const std::string& node_id() const { return node_id_; }
  bool embedded() const { return cfg_.master_addr.empty(); }
  // The server connection (remote mode), else null.
  const std::shared_ptr<RemoteClient>& client() const { return client_; }

  // Whether calls reach where graphs run: always in embedded mode; in remote
  // mode while the server connection is up (not lost, reconnecting or given
  // up). False once shutdown() has begun.
  bool connected() const;

  // Throws Error(SHUTDOWN) once shutdown() has begun.
  void check_live() const;

  // Allocates a zero-filled tensor on the device named by `device` (see
  // genie_tensor_alloc); `canonical` receives the device's canonical name.
  // Throws PARSE / UNSUPPORTED with the reason, or the server's error.
  TensorRef alloc(DType dtype, Shape shape, const char* device, std::string* canonical);

  // Validates bindings, snapshots the graph and starts it. With a memo,
  // reuses (and keeps) the snapshot of `graph` at `version`.
  std::shared_ptr<FutureState> submit(const Graph& graph, const std::vector<std::string>& names,
                                      const std::vector<TensorRef>& tensors, SubmitMemo* memo = nullptr,
                                      uint64_t version = 0);

  // This process's devices (embedded mode): cpu:0 first, then every device
  // of every device backend that loaded (exec/backend_loader.hpp), in the
  // order of probed_backend_kinds(). Fixed for the context's life.
  // (exec/local_devices.hpp); none in remote mode.
  using LocalDevice = LocalDevices::Entry;
  const std::vector<LocalDevice>& local_devices() const;
  // The scheduler's view of them, each calibrated by its backend on first
  // use (then cached); device i of the topology is local_devices()[i]. In
  // remote mode, this process's CPU (plans over it are still explained).
  const sched::Topology& local_topology();
  // The index in local_devices() (and the topology) of the device holding
  // `t`: 0 for host memory. Throws INVALID_ARGUMENT for another device.
  int device_of(const TensorData& t) const;

  // ServerInfo as JSON (remote mode); throws UNSUPPORTED in embedded mode.
  std::string server_info_json();

  // Tensors lost with the server (runtime/held_tensors.hpp). tensor_io runs
  // `io` (a write or read of `t`) and, when `t` is a server tensor whose
  // session is gone for good, before or because of the call, throws
  // CONNECTION naming the tensor and the server instead. In a context that
  // entered through etcd, a call cut by a lost connection waits (at most
  // the reconnect window, the server's lease TTL) to learn whether the
  // session comes back.
  void tensor_io(const TensorRef& t, const std::function<void()>& io) const;
  // genie_context_lost_tensors: {"server", "address", "session"
  // ("connected", "reconnecting", "lost"; "embedded"), "tensors": [...]}.
  std::string lost_tensors_json() const;

  // Discovery, state, events (genie_cluster_state, genie_subscribe).
  ClusterAgent& cluster() { return *cluster_; }

  // Lets graphs in flight finish (remote mode: for at most the timeout),
  // says goodbye to the server, then refuses further work.
  void shutdown();

 private:
  // Where a device string puts a tensor.
  struct Placement {
    bool remote = false;
    int local = 0;              // index into local_devices() (embedded placement)
    std::string server_device;  // the server's own name for it ("cpu:0")
    std::string canonical;      // what genie_tensor_device reports
  };
  Placement resolve_device(const char* text) const;
  std::shared_ptr<FutureState> submit_remote(const SubmitMemo::Prepared& prepared,
                                             const std::vector<std::string>& names,
                                             const std::vector<TensorRef>& tensors,
                                             const std::vector<size_t>& order);
  void remote_graph_done();
  // Blind mode (Config::semantics false, runtime/blind.cpp): runs the graph
  // one operation per remote call on this thread; the returned future is
  // complete.
  std::shared_ptr<FutureState> submit_blind(const Graph& graph, const std::vector<TensorRef>& tensors,
                                            const std::vector<TensorDesc>& descs,
                                            const std::vector<size_t>& order);
  FutureResult run_blind(const Graph& graph, const std::vector<TensorRef>& tensors,
                         const std::vector<size_t>& order, const std::unordered_map<ValueId, Shape>& shapes);

  Config cfg_;
  std::string node_id_;
  std::atomic<bool> live_{true};
  mutable std::shared_mutex run_mu_;     // shared: embedded submit; exclusive: shutdown
  std::unique_ptr<Executor> exec_;       // embedded mode
  std::unique_ptr<LocalDevices> local_;  // embedded mode: cpu:0, then the backends' devices
  std::mutex topo_mu_;
  std::unique_ptr<sched::Topology> topology_;  // remote mode: this CPU, built on first use
  // Set once the topology is built (local_topology()): from then on, every
  // embedded run teaches its devices' cost learners (exec/learn.hpp), saved
  // at most every kLearnedSaveNs and at shutdown.
  std::atomic<bool> learning_{false};
  static constexpr int64_t kLearnedSaveNs = 10'000'000'000;
  std::atomic<int64_t> learned_saved_ns_{0};
  // Teaches the learners what run `r` of `p` measured; `plan` (null: the
  // whole run on device `device`) says where each node ran.
  void learn(const SubmitMemo::Prepared& p, const ExecResult& r, const sched::Plan* plan, int device);
  std::shared_ptr<RemoteClient> client_;       // remote mode
  HeldTensors held_;                           // remote mode: this context's tensors on its server
  // Stopped by shutdown() before the client closes; destroyed after it
  // (its loop-thread callbacks may run until the client's loop stops).
  std::unique_ptr<ClusterAgent> cluster_;
  std::shared_ptr<metrics::Exposure> metrics_;  // cfg_.metrics_port >= 0
  // Remote graphs submitted and not yet completed, so shutdown can let them
  // finish before saying goodbye.
  std::mutex inflight_mu_;
  std::condition_variable inflight_cv_;
  size_t inflight_ = 0;
};

}  // namespace genie
