// The executor's half of the cost model that learns (sched/learned_cost.hpp):
// each node's measured time, reported to the learner of the device that ran
// it, against what the uncorrected model predicts for it there.
#pragma once

#include <vector>

#include "exec/executor.hpp"
#include "sched/plan.hpp"

namespace genie {

// Reports every node of the completed run `r` (of a graph whose node costs,
// by node id, are `costs`) to the learner of the device that ran it:
// topo.devices[(*node_device)[node]], or topo.devices[device] when
// node_device is null. A failed run, a run whose trace does not cover the
// graph, and devices without a learner teach nothing. Any thread.
void learn_from_run(const std::vector<sched::OpCost>& costs, const ExecResult& r, const sched::Topology& topo,
                    const std::vector<int>* node_device, int device);

// Saves the learners of `topo`'s devices that changed (CostLearner::save).
void save_learned(const sched::Topology& topo);

}  // namespace genie
