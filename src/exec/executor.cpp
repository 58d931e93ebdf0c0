#include "exec/executor.hpp"

#include <chrono>
#include <deque>
#include <new>

#include "core/error.hpp"

namespace genie {

namespace {
// A copy of host tensor `t` on the device (the value named `name`).
TensorPtr place_on(DeviceBackend& be, int device, const TensorPtr& t, const std::string& name) {
  if (!t->host_accessible())
    fail(GENIE_ERR_INVALID_ARGUMENT, "value '", name, "' is in the memory of ", t->device().str(),
         ", not of ", be.kind(), ":", device,
         " where the graph runs (tensors move between devices before a run)");
  TensorPtr d = be.make_tensor(device, t->dtype(), t->shape());
  be.copy_from_host(t->bytes(), d->buffer(), 0, t->nbytes(), nullptr);
  return d;
}

// The vectors of one kernel call, kept per thread so that their buffers
// serve node after node. A kernel may run a graph of its own on the same
// thread: each depth of such nesting has its own set (Lease).
struct NodeScratch {
  std::vector<TensorPtr> held;
  std::vector<const TensorData*> in;
  std::vector<TensorPtr> outs;
  std::vector<TensorData*> out_ptrs;

  class Lease {
   public:
    Lease() : set_(take()) {}
    // Emptied (the tensors released) as the call ends; the buffers stay.
    ~Lease() {
      set_.held.clear();
      set_.in.clear();
      set_.outs.clear();
      set_.out_ptrs.clear();
      --depth;
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    NodeScratch* operator->() const { return &set_; }

   private:
    static NodeScratch& take() {
      if (sets.size() <= depth) sets.emplace_back();  // a deque: the others stay where they are
      return sets[depth++];
    }
    NodeScratch& set_;
  };
  static thread_local std::deque<NodeScratch> sets;
  static thread_local size_t depth;
};
thread_local std::deque<NodeScratch> NodeScratch::sets;
thread_local size_t NodeScratch::depth = 0;

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}
}  // namespace

struct Executor::Run {
  std::shared_ptr<const Graph> g;
  DeviceBackend* backend = nullptr;             // where it runs; outlives the run
  int device = 0;
  bool f32 = true;                              // backend->f32_compute()
  std::unique_ptr<Queue> queue;                 // the run's queue on the device
  // Held around kernel calls when the device is not the host: one worker
  // at a time issues on the run's queue.
  std::unique_ptr<std::mutex> issue_mu;
  const Parallel* par = nullptr;                // kernels' intra-op split; nullptr inline
  std::vector<TensorPtr> slots;                 // by value id
  // By node, the producer edges still unfinished, then by value the
  // consumers still to run (kKept for a graph output, input or constant,
  // which the run never frees): one allocation for both.
  std::unique_ptr<std::atomic<int>[]> counts;
  std::atomic<int>& pending(NodeId n) { return counts[static_cast<size_t>(n)]; }
  std::atomic<int>& uses(ValueId v) { return counts[g->nodes().size() + static_cast<size_t>(v)]; }
  bool keep(ValueId v) { return uses(v).load(std::memory_order_relaxed) >= kKept; }
  static constexpr int kKept = 1 << 30;
  std::atomic<int> remaining{0};
  std::atomic<bool> failed{false};
  std::mutex err_mu;
  genie_status_t status = GENIE_OK;
  std::string detail;
  Done done;
  uint64_t start_ns = 0;
  // run_inline: one thread runs the nodes in order, and clock_ns is the
  // clock when the last one ended (the run's start before the first).
  bool inline_run = false;
  bool host = true;  // the device's memory is the host's (no queue to wait for)
  uint64_t clock_ns = 0;
  std::vector<NodeTrace> trace;  // by node; each entry written by the node's worker

  void record_error(genie_status_t s, const std::string& d) {
    std::lock_guard<std::mutex> lk(err_mu);
    if (status == GENIE_OK) {
      status = s;
      detail = d;
    }
    failed.store(true, std::memory_order_release);
  }
};

Executor::Executor(int num_threads) : pool_(num_threads) {}

Executor::~Executor() { wait_idle(); }

void Executor::wait_idle() {
  std::unique_lock<std::mutex> lk(idle_mu_);
  idle_cv_.wait(lk, [this] { return in_flight_ == 0; });
}

void Executor::prepare(Run& run, std::shared_ptr<const Graph> graph, std::vector<TensorPtr> inputs,
                       const Parallel* par, DeviceRef device) {
  run.backend = device.backend ? device.backend : &cpu_;
  run.device = device.index;
  run.backend->check_device(run.device);
  run.f32 = run.backend->f32_compute();
  run.queue = run.backend->create_queue(run.device);
  run.host = run.backend->devices()[static_cast<size_t>(run.device)].memory != MemoryKind::Device;
  if (!run.host) run.issue_mu = std::make_unique<std::mutex>();
  run.par = par;
  const Graph& g = *graph;
  const size_t nv = g.values().size();
  const size_t nn = g.nodes().size();
  run.g = std::move(graph);
  run.slots.resize(nv);
  run.counts = std::make_unique<std::atomic<int>[]>(nn + nv);
  for (size_t n = 0; n < nn; ++n)
    run.pending(static_cast<NodeId>(n))
        .store(g.producer_edges(static_cast<NodeId>(n)), std::memory_order_relaxed);
  for (size_t v = 0; v < nv; ++v) {
    const auto id = static_cast<ValueId>(v);
    run.uses(id).store(g.value(id).kind == ValueKind::NodeOutput ? g.readers(id) : Run::kKept,
                       std::memory_order_relaxed);
  }
  for (ValueId o : g.outputs()) run.uses(o).store(Run::kKept, std::memory_order_relaxed);
  run.trace.resize(nn);

  check(inputs.size() == g.inputs().size(), GENIE_ERR_INTERNAL, "executor: ", inputs.size(),
        " tensors bound for ", g.inputs().size(), " graph inputs");
  for (size_t i = 0; i < inputs.size(); ++i)
    run.slots[static_cast<size_t>(g.inputs()[i])] = std::move(inputs[i]);
  for (size_t v = 0; v < nv; ++v) {
    const Value& val = g.value(static_cast<ValueId>(v));
    if (val.kind == ValueKind::Constant) run.slots[v] = val.constant;
  }
  // Inputs and constants must be where the kernels can read them.
  const Device& here = run.backend->devices()[static_cast<size_t>(run.device)].id;
  for (size_t v = 0; v < nv; ++v) {
    TensorPtr& t = run.slots[v];
    if (!t || (run.host ? t->host_accessible() : t->device() == here)) continue;
    t = place_on(*run.backend, run.device, t, g.value(static_cast<ValueId>(v)).name);
  }
  run.remaining.store(static_cast<int>(nn), std::memory_order_relaxed);
  run.start_ns = now_ns();
  run.clock_ns = run.start_ns;
}

void Executor::run(std::shared_ptr<const Graph> graph, std::vector<TensorPtr> inputs, Done done,
                   DeviceRef device, Issue issue) {
  auto run = std::make_shared<Run>();
  prepare(*run, std::move(graph), std::move(inputs), &par_, device);
  run->done = std::move(done);
  {
    std::lock_guard<std::mutex> lk(idle_mu_);
    ++in_flight_;
  }
  const Graph& g = *run->g;
  if (g.nodes().empty()) {
    pool_.post([this, run] { finish(run); });
    return;
  }
  if (issue == Issue::Here && run->issue_mu) {
    // Issued in order here (one queue: no concurrency is lost); a worker
    // waits for the queue.
    for (NodeId n : g.topo_order()) run_node(*run, n);
    pool_.post([this, run] { finish(run); });
    return;
  }
  // Roots in topological order, so a chain starts at its head. Read before
  // the first schedule(): a worker may start decrementing at once.
  std::vector<NodeId> roots;
  for (NodeId n : g.topo_order())
    if (run->pending(n).load(std::memory_order_relaxed) == 0) roots.push_back(n);
  for (NodeId n : roots) schedule(run, n);
}

ExecResult Executor::run_inline(std::shared_ptr<const Graph> graph, std::vector<TensorPtr> inputs,
                                DeviceRef device) {
  // One thread runs it all: no allocation for the run itself, and each
  // node starts when the one before it ended (one clock read per node).
  Run run;
  run.inline_run = true;
  prepare(run, std::move(graph), std::move(inputs), nullptr, device);
  for (NodeId n : run.g->topo_order()) run_node(run, n);
  return collect(run);
}

bool Executor::is_tiny(const Graph& g, const std::vector<TensorPtr>& inputs) {
  if (g.has_custom_ops()) return false;  // its kernel may take any time
  // Elements per value: graph inputs as bound, everything else as inferred.
  const auto elements = [&](ValueId v) -> int64_t {
    if (v == kNone) return 0;
    const Value& val = g.value(v);
    if (val.kind == ValueKind::Input) {
      for (size_t i = 0; i < inputs.size() && i < g.inputs().size(); ++i)
        if (g.inputs()[i] == v) return inputs[i] ? inputs[i]->numel() : 0;
      return 0;
    }
    return numel(val.shape);
  };
  int64_t total = 0;
  for (const Node& nd : g.nodes()) {
    if (nd.op == "matmul" || nd.op == "linear" || nd.op == "conv2d" || nd.op == "attention") return false;
    for (ValueId v : nd.inputs) total += elements(v);
    for (ValueId v : nd.outputs) total += elements(v);
    if (total > kTinyElements) return false;
  }
  return true;
}

void Executor::schedule(const std::shared_ptr<Run>& run, NodeId node) {
  pool_.post([this, run, node] { execute_node(run, node); });
}

void Executor::run_node(Run& run, NodeId node) {
  const Graph& g = *run.g;
  const Node& nd = g.node(node);
  NodeTrace& tr = run.trace[static_cast<size_t>(node)];
  tr.node = node;
  tr.worker = ThreadPool::current_worker();
  tr.start_ns = (run.inline_run ? run.clock_ns : now_ns()) - run.start_ns;
  if (!run.failed.load(std::memory_order_acquire)) {
    try {
      DeviceBackend& be = *run.backend;
      KernelFn fn = be.find_kernel(nd.op);
      check(fn != nullptr, GENIE_ERR_UNSUPPORTED, "no ", be.kind(), " kernel for op '", nd.op, "'");
      std::unique_lock<std::mutex> issuing;
      if (run.issue_mu) issuing = std::unique_lock<std::mutex>(*run.issue_mu);
      const NodeScratch::Lease lease;
      std::vector<TensorPtr>& held = lease->held;  // keeps converted inputs alive for the call
      std::vector<const TensorData*>& in = lease->in;
      for (ValueId v : nd.inputs) {
        if (v == kNone) {
          in.push_back(nullptr);
          continue;
        }
        TensorPtr t = run.slots[static_cast<size_t>(v)];
        check(t != nullptr, GENIE_ERR_INTERNAL, "value '", g.value(v).name, "' missing at execution");
        if (run.f32 && is_reduced_float(t->dtype())) {
          TensorPtr f = be.make_tensor(run.device, DType::F32, t->shape());
          be.convert(*t, *f, run.queue.get());
          t = std::move(f);
        }
        in.push_back(t.get());
        held.push_back(std::move(t));
      }
      // A reshape or flatten only renames the bytes: unless its result
      // leaves the run (where it must not alias anything), share them.
      if ((nd.op == "reshape" || nd.op == "flatten") && held.size() == 1 && in.size() == 1 &&
          nd.outputs.size() == 1 && !run.keep(nd.outputs[0])) {
        const Value& val = g.value(nd.outputs[0]);
        const TensorPtr& src = held[0];
        if (val.dtype == src->dtype() && numel(val.shape) == src->numel()) {
          const Buffer& b = src->buffer();
          run.slots[static_cast<size_t>(nd.outputs[0])] = std::make_shared<TensorData>(
              val.dtype, val.shape, Buffer(b.data(), b.size(), b.memory(), b.device(), [src](std::byte*) {}),
              false);
          fn = nullptr;
        }
      }
      std::vector<TensorPtr>& outs = lease->outs;
      std::vector<TensorData*>& out_ptrs = lease->out_ptrs;
      if (fn != nullptr) {
        for (ValueId v : nd.outputs) {
          const Value& val = g.value(v);
          outs.push_back(be.make_tensor(run.device, run.f32 && is_reduced_float(val.dtype) ? DType::F32 : val.dtype,
                                        val.shape));
          out_ptrs.push_back(outs.back().get());
        }
      }
      if (fn != nullptr) fn(KernelArgs{nd.op, nd.attrs, in, out_ptrs, run.par, run.queue.get()});
      for (size_t i = 0; i < outs.size(); ++i) {
        const Value& val = g.value(nd.outputs[i]);
        TensorPtr& slot = run.slots[static_cast<size_t>(nd.outputs[i])];
        if (outs[i]->dtype() == val.dtype) {
          slot = std::move(outs[i]);
          continue;
        }
        slot = be.make_tensor(run.device, val.dtype, val.shape);
        be.convert(*outs[i], *slot, run.queue.get());
      }
    } catch (const Error& e) {
      run.record_error(e.code(), cat("node '", nd.name, "' (", nd.op, "): ", e.detail()));
    } catch (const std::bad_alloc&) {
      run.record_error(GENIE_ERR_OUT_OF_MEMORY, cat("node '", nd.name, "' (", nd.op, "): out of memory"));
    } catch (const std::exception& e) {
      run.record_error(GENIE_ERR_INTERNAL, cat("node '", nd.name, "' (", nd.op, "): ", e.what()));
    }
  }
  const uint64_t end = now_ns();
  if (run.inline_run) run.clock_ns = end;  // the next node's start
  tr.end_ns = end - run.start_ns;
  // Free intermediates whose last consumer this was, and outputs nobody reads.
  for (ValueId v : nd.inputs) {
    if (v == kNone || run.keep(v)) continue;
    if (run.uses(v).fetch_sub(1, std::memory_order_acq_rel) == 1) run.slots[static_cast<size_t>(v)].reset();
  }
  for (ValueId v : nd.outputs)
    if (!run.keep(v) && run.uses(v).load() == 0) run.slots[static_cast<size_t>(v)].reset();
}

void Executor::execute_node(const std::shared_ptr<Run>& run, NodeId first) {
  NodeId node = first;
  while (node != kNone) {
    run_node(*run, node);
    // Continue with the first successor that became ready; post the others.
    NodeId next = kNone;
    for (NodeId s : run->g->consumers(node)) {
      if (run->pending(s).fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
      if (next == kNone)
        next = s;
      else
        schedule(run, s);
    }
    if (run->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      finish(run);
      return;
    }
    node = next;
  }
}

ExecResult Executor::collect(Run& run) {
  ExecResult r;
  try {
    run.queue->synchronize();  // before any buffer of the run is read or freed
  } catch (const Error& e) {
    run.record_error(e.code(), cat("synchronising ", run.backend->kind(), ":", run.device, ": ", e.detail()));
  }
  // Inline on the host, the last node's end is the run's end.
  r.exec_ns = (run.inline_run && run.host ? run.clock_ns : now_ns()) - run.start_ns;
  {
    std::lock_guard<std::mutex> lk(run.err_mu);
    r.status = run.status;
    r.detail = run.detail;
  }
  if (r.status == GENIE_OK) {
    try {
      for (ValueId o : run.g->outputs()) {
        TensorPtr t = run.slots[static_cast<size_t>(o)];
        // An output that is a graph input or constant is copied, so that the
        // caller's output handle never aliases an input tensor.
        if (run.g->value(o).kind != ValueKind::NodeOutput) {
          TensorPtr c = run.backend->make_tensor(run.device, t->dtype(), t->shape());
          run.backend->copy_device(t->buffer(), 0, c->buffer(), 0, t->nbytes(), nullptr);
          t = std::move(c);
        }
        r.outputs.push_back(std::move(t));
      }
    } catch (const Error& e) {
      r.status = e.code();
      r.detail = e.detail();
      r.outputs.clear();
    } catch (const std::bad_alloc&) {
      r.status = GENIE_ERR_OUT_OF_MEMORY;
      r.detail = "out of memory copying graph outputs";
      r.outputs.clear();
    }
  }
  run.slots.clear();
  r.trace = std::move(run.trace);
  return r;
}

void Executor::finish(const std::shared_ptr<Run>& run) {
  ExecResult r = collect(*run);
  Done done = std::move(run->done);
  done(std::move(r));
  {
    std::lock_guard<std::mutex> lk(idle_mu_);
    --in_flight_;
  }
  idle_cv_.notify_all();
}

}  // namespace genie
