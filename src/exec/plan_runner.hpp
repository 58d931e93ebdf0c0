// Runs a graph by a scheduler plan across the devices of this process.
//
// The plan's nodes are cut into stages (graph/split.hpp: maximal runs of
// consecutive nodes of the plan's order on one device); the stages run one
// after another, each on its device through the executor, and a value a
// stage reads from another device is copied there first through the
// backends (exec/transfer.hpp), once per device. Outputs stay on the device
// that produced them. Nothing blocks: each stage starts from the previous
// one's completion, on an executor worker.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "exec/executor.hpp"
#include "sched/plan.hpp"

namespace genie {

struct PlannedRun {
  std::shared_ptr<const Graph> graph;         // validated with `shapes`
  std::shared_ptr<const sched::Plan> plan;    // of `graph` over `devices`
  std::vector<DeviceRef> devices;             // by topology index
  std::unordered_map<ValueId, Shape> shapes;  // bound shapes of dynamic inputs
  std::vector<TensorPtr> inputs;              // one per graph input, declaration order
  std::vector<int> input_device;              // per input: index into `devices`
};

// Starts `r`; `done` is called exactly once (on an executor worker, or on
// the calling thread when the plan cannot be cut into stages) with the
// outputs in mark order. Per-node traces are those of each stage's run, by
// the parent graph's node ids, their times relative to the first stage's
// start. `stages_run`, when given, receives the device of each stage run.
void run_planned(Executor& exec, PlannedRun r, Executor::Done done,
                 std::shared_ptr<std::vector<int>> stages_run = nullptr);

}  // namespace genie
