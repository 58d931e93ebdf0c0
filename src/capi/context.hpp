// The context behind genie_context_t: configuration, node identity and the
// executor that runs graphs in-process (embedded mode); and the shared state
// behind a genie_future_t.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/device.hpp"
#include "core/tensor_data.hpp"
#include "exec/executor.hpp"
#include "graph/graph.hpp"
#include "genie.h"

namespace genie {

class Context;

// Completion state of one submission, shared by the handle and the executor.
class FutureState {
 public:
  FutureState(std::shared_ptr<Context> ctx, std::vector<std::string> output_names)
      : ctx_(std::move(ctx)), names_(std::move(output_names)) {}

  // Called once by the executor. Runs the callback (if any) outside the lock.
  void complete(ExecResult&& r);

  genie_status_t wait(int64_t timeout_ms);
  genie_status_t poll();
  // Runs cb at once (on this thread) when already complete. Throws
  // Error(INVALID_ARGUMENT) if a callback is already set.
  void set_callback(genie_future_callback_t cb, void* user, genie_future_t* handle);
  // Detaches the handle: the callback will not run any more; waits for one
  // already running to return.
  void detach();

  // Throw unless complete and successful.
  TensorPtr output(size_t index);
  TensorPtr output(const std::string& name);
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
  ExecResult result_;
  genie_future_callback_t cb_ = nullptr;
  void* user_ = nullptr;
  genie_future_t* handle_ = nullptr;
};

class Context : public std::enable_shared_from_this<Context> {
 public:
  explicit Context(Config cfg);
  ~Context();

  const Config& config() const { return cfg_; }
  const std::string& node_id() const { return node_id_; }
  bool embedded() const { return cfg_.master_addr.empty(); }

  // Throws Error(SHUTDOWN) once shutdown() has begun.
  void check_live() const;

  // Resolves a device string to one this context can allocate on; throws
  // Error(PARSE / UNSUPPORTED) with the reason.
  Device resolve_device(const char* text) const;

  // Validates bindings, snapshots the graph and starts it.
  std::shared_ptr<FutureState> submit(const Graph& graph, const std::vector<std::string>& names,
                                      const std::vector<TensorPtr>& tensors);

  // Waits for running graphs, then refuses further work.
  void shutdown();

 private:
  Config cfg_;
  std::string node_id_;
  std::atomic<bool> live_{true};
  mutable std::shared_mutex run_mu_;  // shared: submit; exclusive: shutdown
  std::unique_ptr<Executor> exec_;
};

}  // namespace genie
