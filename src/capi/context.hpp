// The context behind genie_context_t: configuration, node identity, and
// either the executor that runs graphs in-process (embedded mode) or the
// client of a `genie serve` process (remote mode); the tensors handles name;
// and the shared state behind a genie_future_t.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cluster/agent.hpp"
#include "core/config.hpp"
#include "core/device.hpp"
#include "core/tensor_data.hpp"
#include "exec/executor.hpp"
#include "genie.h"
#include "graph/graph.hpp"

namespace genie {

class Context;
class RemoteClient;

// A tensor held by the server of a remote-mode context. Every handle (and
// every graph in flight) naming it shares one RemoteTensor; the server frees
// the tensor when the last of them lets go.
struct RemoteTensor {
  RemoteTensor(std::shared_ptr<RemoteClient> c, uint64_t tensor_id, DType t, Shape s, std::string dev);
  ~RemoteTensor();  // RemoteClient::tensor_free
  RemoteTensor(const RemoteTensor&) = delete;
  RemoteTensor& operator=(const RemoteTensor&) = delete;

  const std::shared_ptr<RemoteClient> client;
  const uint64_t id;
  const DType dtype;
  const Shape shape;
  const size_t nbytes;
  const std::string device;  // canonical, "remote:0"
};

// What a tensor handle names: host memory (embedded mode, or "cpu" in remote
// mode) or a tensor on the server. Exactly one of the two is set.
class TensorRef {
 public:
  TensorRef() = default;
  explicit TensorRef(TensorPtr local) : local_(std::move(local)) {}
  explicit TensorRef(std::shared_ptr<RemoteTensor> remote) : remote_(std::move(remote)) {}

  bool is_remote() const { return remote_ != nullptr; }
  const TensorPtr& local() const { return local_; }
  const std::shared_ptr<RemoteTensor>& remote() const { return remote_; }
  DType dtype() const { return remote_ ? remote_->dtype : local_->dtype(); }
  const Shape& shape() const { return remote_ ? remote_->shape : local_->shape(); }
  size_t nbytes() const { return remote_ ? remote_->nbytes : local_->nbytes(); }

  // Byte ranges must already be checked against nbytes().
  void write(size_t offset, const void* src, size_t n) const;
  void read(size_t offset, void* dst, size_t n) const;

 private:
  TensorPtr local_;
  std::shared_ptr<RemoteTensor> remote_;
};

// The outcome of one submission, whichever mode ran it.
struct FutureResult {
  genie_status_t status = GENIE_OK;
  std::string detail;
  std::vector<TensorRef> outputs;  // one per graph output, in mark order
  uint64_t exec_ns = 0;
};

// Completion state of one submission, shared by the handle and the executor
// (embedded) or the client's loop thread (remote).
class FutureState {
 public:
  FutureState(std::shared_ptr<Context> ctx, std::vector<std::string> output_names)
      : ctx_(std::move(ctx)), names_(std::move(output_names)) {}

  // Called once, by an executor worker (embedded) or the client's loop
  // thread (remote). Runs the callback (if any) outside the lock.
  void complete(FutureResult&& r);

  genie_status_t wait(int64_t timeout_ms);
  genie_status_t poll();
  // Runs cb at once (on this thread) when already complete. Throws
  // Error(INVALID_ARGUMENT) if a callback is already set.
  void set_callback(genie_future_callback_t cb, void* user, genie_future_t* handle);
  // Detaches the handle: the callback will not run any more; waits for one
  // already running to return.
  void detach();

  // Throw unless complete and successful.
  TensorRef output(size_t index);
  TensorRef output(const std::string& name);
  size_t num_outputs() const { return names_.size(); }
  uint64_t exec_ns();
  const std::shared_ptr<Context>& ctx() const { return ctx_; }

 private:
  void require_success();  // with mu_ held

  std::shared_ptr<Context> ctx_;
  std::vector<std::string> names_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool cb_running_ = false;
  FutureResult result_;
  genie_future_callback_t cb_ = nullptr;
  void* user_ = nullptr;
  genie_future_t* handle_ = nullptr;
};

// What a submission derives from a graph: the snapshot validated with the
// bound shapes and, in remote mode, its JSON. A graph handle keeps the last
// one, so that submitting an unchanged graph again with the same shapes (the
// usual loop) skips the copy, the validation and the encoding. `version`
// names the graph's state: the handle bumps it whenever the graph may
// change. Thread-safe (a built graph may be submitted from several threads).
class SubmitMemo {
 public:
  struct Prepared {
    std::shared_ptr<const Graph> graph;
    std::string json;  // remote mode only
  };

  // The Prepared kept for this version and these shapes, or null.
  std::shared_ptr<const Prepared> find(uint64_t version, const std::unordered_map<ValueId, Shape>& shapes);
  void keep(uint64_t version, std::unordered_map<ValueId, Shape> shapes, std::shared_ptr<const Prepared> p);

 private:
  std::mutex mu_;
  uint64_t version_ = 0;
  std::unordered_map<ValueId, Shape> shapes_;
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

  // ServerInfo as JSON (remote mode); throws UNSUPPORTED in embedded mode.
  std::string server_info_json();

  // Discovery, state, events (genie_cluster_state, genie_subscribe).
  ClusterAgent& cluster() { return *cluster_; }

  // Lets graphs in flight finish (remote mode: for at most the timeout),
  // says goodbye to the server, then refuses further work.
  void shutdown();

 private:
  // Where a device string puts a tensor.
  struct Placement {
    bool remote = false;
    std::string server_device;  // the server's own name for it ("cpu:0")
    std::string canonical;      // what genie_tensor_device reports
  };
  Placement resolve_device(const char* text) const;
  std::shared_ptr<FutureState> submit_remote(const SubmitMemo::Prepared& prepared,
                                             const std::vector<std::string>& names,
                                             const std::vector<TensorRef>& tensors,
                                             const std::vector<size_t>& order);
  void remote_graph_done();

  Config cfg_;
  std::string node_id_;
  std::atomic<bool> live_{true};
  mutable std::shared_mutex run_mu_;      // shared: embedded submit; exclusive: shutdown
  std::unique_ptr<Executor> exec_;        // embedded mode
  std::shared_ptr<RemoteClient> client_;  // remote mode
  // Stopped by shutdown() before the client closes; destroyed after it
  // (its loop-thread callbacks may run until the client's loop stops).
  std::unique_ptr<ClusterAgent> cluster_;
  // Remote graphs submitted and not yet completed, so shutdown can let them
  // finish before saying goodbye.
  std::mutex inflight_mu_;
  std::condition_variable inflight_cv_;
  size_t inflight_ = 0;
};

}  // namespace genie
