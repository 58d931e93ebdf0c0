// The devices of this process and the plans made over them: what an
// embedded context and a server share, so that both place a graph across
// their devices the same way (sched::plan_graph over the calibrated
// topology) and run it with the one plan runner (exec/plan_runner.hpp).
//
// Index 0 is the host CPU (the executor's CPU backend); then each device of
// the device backends probed and loaded in this process
// (exec/backend_loader.hpp), such as cuda:N or the test backend's devices.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "exec/executor.hpp"
#include "sched/plan.hpp"

namespace genie {

class LocalDevices {
 public:
  struct Entry {
    Device id;      // "cpu:0", "cuda:1" (no node)
    DeviceRef ref;  // its backend and index there
  };

  // The CPU of `exec` and every device of the backends loaded here; `node_id`
  // names this process in the topology. `exec` must outlive this object.
  LocalDevices(Executor& exec, std::string node_id);
  LocalDevices(const LocalDevices&) = delete;
  LocalDevices& operator=(const LocalDevices&) = delete;

  const std::vector<Entry>& list() const { return devices_; }
  size_t size() const { return devices_.size(); }
  // The index of the device whose memory holds `t` (0: host memory).
  // Throws Error(INVALID_ARGUMENT) for a device not listed here.
  int index_of(const TensorData& t) const;
  // The scheduler's view of the devices, each calibrated by its backend on
  // first use; a device whose backend keeps no cost learner of its own gets
  // one, kept in the profile cache under its kind and description
  // (sched/learned_cost.hpp). Thread-safe.
  const sched::Topology& topology();

  // Where a graph runs: its plan over topology() with each input where it
  // lives, and the one device that holds every input and every node
  // (-1: the plan spans devices, or its inputs must move).
  struct Placed {
    std::shared_ptr<const sched::Plan> plan;
    std::vector<int> input_device;  // per graph input, by topology index
    int device = -1;
  };
  // Plans `g` (validated with `shapes`, the bound shapes of its inputs;
  // `inputs` in declaration order) through the plan cache. Throws planning
  // errors.
  Placed place(const Graph& g, const std::unordered_map<ValueId, Shape>& shapes,
               const std::vector<TensorPtr>& inputs);
  // Runs a placement stage by stage (run_planned): `done` is called once,
  // on an executor worker, with the outputs in mark order, each on the
  // device that produced it.
  void run_staged(Placed placed, const std::shared_ptr<const Graph>& g,
                  std::unordered_map<ValueId, Shape> shapes, std::vector<TensorPtr> inputs,
                  Executor::Done done);
  // place, then run: on its one device without stages (issued on this
  // thread, Executor::Issue::Here), else by stages; false is returned and
  // `done` (moved from) is called once as in run_staged. A tiny graph
  // (Executor::is_tiny) on host tensors, or one the plan puts on the host
  // CPU, runs on this thread: true is returned with `*ran` set and `done`
  // left untouched (the first is not planned: `*plan` is then null).
  // `plan`, when given, receives the plan before anything runs.
  bool submit(const std::shared_ptr<const Graph>& g, std::unordered_map<ValueId, Shape> shapes,
              std::vector<TensorPtr> inputs, Executor::Done& done, ExecResult* ran,
              std::shared_ptr<const sched::Plan>* plan = nullptr);
  // A run of `plan` took `measured_s`: a cached plan far off its prediction
  // is planned again (sched::PlanCache::report).
  void report(const sched::Plan& plan, double measured_s) { plans_.report(plan, measured_s); }

  uint64_t plan_hits() const { return plans_.hits(); }
  uint64_t plan_misses() const { return plans_.misses(); }

 private:
  Executor& exec_;
  const std::string node_id_;
  std::vector<Entry> devices_;
  std::mutex mu_;
  std::unique_ptr<sched::Topology> topology_;  // built on first use
  sched::PlanCache plans_;
};

}  // namespace genie
