// The shared state behind a genie_future_t: the outcome of one submission,
// whichever mode ran it, its waiters and its completion callback.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "control/client.hpp"
#include "genie.h"
#include "graph/graph.hpp"
#include "runtime/tensor_ref.hpp"

namespace genie {

class Context;

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
  // `graph`: the graph submitted, whose marked outputs name the results.
  FutureState(std::shared_ptr<Context> ctx, std::shared_ptr<const Graph> graph)
      : ctx_(std::move(ctx)), graph_(std::move(graph)) {}

  // Called once, by an executor worker (embedded) or the client's loop
  // thread (remote), or the thread that read the completion off the
  // client's direct link. Runs the callback (if any) outside the lock.
  void complete(FutureResult&& r);

  // A remote submission whose completion a waiter collects itself
  // (RemoteClient::Submission): wait() and poll() collect it with their
  // deadline before waiting; it is handed to the background (watch) once
  // nobody may wait (a callback is set, the handle is destroyed). Set once,
  // before the handle is returned.
  using Deadline = std::chrono::steady_clock::time_point;
  void set_direct(std::weak_ptr<RemoteClient> client, std::shared_ptr<RemoteClient::Submission> s) {
    client_ = std::move(client);
    direct_ = std::move(s);
  }

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
  size_t num_outputs() const { return graph_->outputs().size(); }
  uint64_t exec_ns();
  const std::shared_ptr<Context>& ctx() const { return ctx_; }

 private:
  void require_success();  // with mu_ held

  std::shared_ptr<Context> ctx_;
  std::shared_ptr<const Graph> graph_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::atomic<bool> done_flag_{false};  // done_, readable without mu_ (wait()'s spin)
  bool cb_running_ = false;
  FutureResult result_;
  genie_future_callback_t cb_ = nullptr;
  void* user_ = nullptr;
  genie_future_t* handle_ = nullptr;
  // Collects direct_ (set_direct): used while the client is there.
  void collect(Deadline deadline);
  void watch();
  std::weak_ptr<RemoteClient> client_;
  std::shared_ptr<RemoteClient::Submission> direct_;
};

}  // namespace genie
