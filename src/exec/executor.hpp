// Executes validated graphs on one device of this process: the CPU by
// default, or any device of a device backend (exec/backend.hpp), reached
// only through that backend's interface (kernels, memory, queues).
//
// Independent nodes run in parallel on the worker pool; a node becomes ready
// when its last producer finishes. Intermediate values are freed as soon as
// their last consumer has run. Node outputs take their storage from the
// executor's BufferPool, so a buffer freed by one node is reused by a later
// node or a later run (no allocation, page faults or zero-fill per call),
// and a reshape or flatten whose result is not a graph output shares its
// input's bytes instead of copying them. Within a node, the large kernels
// (elementwise maps, gelu, softmax, norms, attention, layout copies) split
// their rows over workers that are idle (Parallel): a chain of nodes uses
// every thread, with the same bits as one thread. f16/bf16 values are stored as such and
// computed in f32 (converted around each kernel call). A tiny graph can also
// run on the calling thread (run_inline), where handing it to a worker and
// back would cost more than the work itself.
//
// On a device whose memory host code cannot reach, graph inputs and
// constants in host memory are copied to the device first, a run's kernels
// are issued on one queue of the device (one thread at a time: a worker, or
// the caller that asks for Issue::Here), and the run completes after that
// queue is synchronised. Inputs in another device's
// memory are refused: moving tensors between devices is the caller's job
// (exec/plan_runner.hpp).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/tensor_data.hpp"
#include "exec/backend.hpp"
#include "exec/buffer_pool.hpp"
#include "exec/cpu/backend.hpp"
#include "exec/parallel.hpp"
#include "exec/thread_pool.hpp"
#include "graph/graph.hpp"
#include "genie.h"

namespace genie {

// When and where one node ran (relative to the start of the run).
struct NodeTrace {
  NodeId node = kNone;
  int worker = -1;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
};

struct ExecResult {
  genie_status_t status = GENIE_OK;
  std::string detail;
  std::vector<TensorPtr> outputs;  // one per graph output, in mark order
  uint64_t exec_ns = 0;
  std::vector<NodeTrace> trace;  // one per node, by node id
};

class Executor {
 public:
  using Done = std::function<void(ExecResult&&)>;

  explicit Executor(int num_threads);
  // Waits for every run in flight.
  ~Executor();

  // Starts executing `graph` (validated, with shapes resolved for `inputs`:
  // one tensor per graph input, in declaration order). `done` is called
  // exactly once, on a worker thread, after the last node has finished.
  // Never throws for execution errors: they arrive in ExecResult. `device`:
  // where the graph runs (backend nullptr: this executor's CPU backend);
  // its outputs live there. With Issue::Here, a run on a device whose memory
  // host code cannot reach has its kernels issued on the calling thread
  // before run() returns (they only queue work, as a CUDA launch does) and
  // only the wait for its queue goes to a worker: the worker's wake-up
  // (tens of microseconds on a VM) then overlaps the device's work instead
  // of delaying its start. For callers whose thread is theirs to block for
  // that long (an embedded submit), not an event loop's. Runs on the host
  // ignore it.
  enum class Issue { OnWorker, Here };
  void run(std::shared_ptr<const Graph> graph, std::vector<TensorPtr> inputs, Done done, DeviceRef device = {},
           Issue issue = Issue::OnWorker);

  // Executes `graph` on the calling thread, nodes in topological order, and
  // returns its result: the same kernels, freeing and error handling as
  // run(), without the pool. Meant for graphs that pass is_tiny.
  ExecResult run_inline(std::shared_ptr<const Graph> graph, std::vector<TensorPtr> inputs, DeviceRef device = {});

  // A cheap bound on a run's work, for callers choosing run_inline: true when
  // every node is a built-in op other than matmul, linear, conv2d or
  // attention and the elements of every node's inputs and outputs, summed
  // over the nodes, are at most kTinyElements. Inputs count with their bound
  // shapes (`inputs` as for run()). Such a graph runs in microseconds; a
  // custom op's kernel may take any time, so it never counts as tiny.
  static constexpr int64_t kTinyElements = 64 * 1024;
  static bool is_tiny(const Graph& graph, const std::vector<TensorPtr>& inputs);

  // Blocks until no run is in flight.
  void wait_idle();

  // Where node outputs on the CPU come from (allocation counts, idle bytes;
  // trim()): the CPU backend's pool.
  BufferPool& buffers() { return cpu_.buffers(); }
  // This executor's CPU backend (device cpu:0).
  cpu::CpuBackend& cpu_backend() { return cpu_; }

  // How the pool's kernels split their work (counts of splits and chunks).
  // run_inline never splits.
  const Parallel& parallel() const { return par_; }

 private:
  struct Run;
  // Sets `run` up for `graph` on `device` (inputs bound, placed where its
  // kernels read them); `par` nullptr for an inline run.
  void prepare(Run& run, std::shared_ptr<const Graph> graph, std::vector<TensorPtr> inputs,
               const Parallel* par, DeviceRef device);
  // Runs one node's kernel (unless the run already failed), records its
  // trace and frees the values this node was the last to need.
  static void run_node(Run& run, NodeId node);
  // The run's result; drops its values.
  static ExecResult collect(Run& run);
  void schedule(const std::shared_ptr<Run>& run, NodeId node);
  void execute_node(const std::shared_ptr<Run>& run, NodeId node);
  void finish(const std::shared_ptr<Run>& run);

  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
  int in_flight_ = 0;
  cpu::CpuBackend cpu_;
  // Splits kernels over pool_ (only its address is taken here); destroyed
  // after pool_, whose workers may still be inside a kernel until joined.
  Parallel par_{&pool_};
  // Last, so it is destroyed first: its workers are joined while the members
  // they touch on their way out still exist.
  ThreadPool pool_;
};

}  // namespace genie
