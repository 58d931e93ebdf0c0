// The plan runner: a scheduler plan's stages (graph/split.hpp: maximal runs
// of consecutive nodes of the plan's order on one device) run one after
// another, each through the driver of its device. Drivers:
//   - the devices of this process (run_planned below): an embedded
//     context's and a server's own devices (exec/local_devices.hpp); a value
//     a stage reads from another device is copied there first through the
//     backends (exec/transfer.hpp), once per device;
//   - on a master, its workers and its own CPU (server/multinode.cpp).
// Outputs stay on the device that produced them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "exec/executor.hpp"
#include "graph/split.hpp"
#include "sched/plan.hpp"

namespace genie {

using StageDone = std::function<void(genie_status_t status, std::string detail)>;

// Where the stages placed on a device run.
class StageDriver {
 public:
  virtual ~StageDriver() = default;
  // Runs `st` (stage `index` of its run): brings its inputs (st.inputs) to
  // its device, runs its graph there, and keeps its outputs (st.outputs)
  // there, in the holdings the drivers of one run share. Calls `done`
  // exactly once, from any thread, possibly before returning (a driver
  // that blocks). Throws nothing: failures go to `done`.
  virtual void run(size_t index, const Stage& st, StageDone done) = 0;
};

// Runs stages[0], stages[1], ... each through drivers[stage.device] (none
// null); each stage starts from the previous one's completion, on the
// thread that completed it, and a chain of drivers that complete on the
// calling thread runs as a loop, not a recursion. `done` is called exactly
// once: after the last stage with GENIE_OK, or with the first failure
// (later stages do not run). `stages` and `drivers` must outlive the run.
void run_stages(const std::vector<Stage>& stages, const std::vector<StageDriver*>& drivers, StageDone done);

struct PlannedRun {
  std::shared_ptr<const Graph> graph;         // validated with `shapes`
  std::shared_ptr<const sched::Plan> plan;    // of `graph` over `devices`
  std::vector<DeviceRef> devices;             // by topology index
  std::unordered_map<ValueId, Shape> shapes;  // bound shapes of dynamic inputs
  std::vector<TensorPtr> inputs;              // one per graph input, declaration order
  std::vector<int> input_device;              // per input: index into `devices`
};

// Starts `r` over the devices of this process; `done` is called exactly once
// (on an executor worker, or on the calling thread when the plan cannot be
// cut into stages) with the outputs in mark order. Nothing blocks. Per-node
// traces are those of each stage's run, by the parent graph's node ids,
// their times relative to the first stage's start. `stages_run`, when
// given, receives the device of each stage run.
void run_planned(Executor& exec, PlannedRun r, Executor::Done done,
                 std::shared_ptr<std::vector<int>> stages_run = nullptr);

}  // namespace genie
