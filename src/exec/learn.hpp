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
// node_device is null: its class's cell and the node's own, kept under the
// graph whose costs are `graph_costs` (the planned graph: a stage of a
// multi-node plan reports under its whole graph's, its node i as
// (*graph_nodes)[i]; null: `costs` and i). A run on one device also teaches
// that device's time between nodes for that graph. A failed run, a run
// whose trace does not cover the graph, and devices without a learner teach
// nothing. Any thread.
void learn_from_run(const std::vector<sched::OpCost>& costs, const ExecResult& r, const sched::Topology& topo,
                    const std::vector<int>* node_device, int device,
                    const std::vector<sched::OpCost>* graph_costs = nullptr,
                    const std::vector<NodeId>* graph_nodes = nullptr);

// A run whose nodes' times are not known, only the whole run's: a stage
// `costs` that a worker's executor ran in `run_s` (what it reports with the
// stage's result). Shares run_s among the nodes in proportion to what
// `device` predicts for each (its learner's corrections included) and
// reports each share to that learner: a device k times slower than predicted
// on such stages moves every cell of the stage towards k. Nothing without a
// learner, nodes or a positive time. Any thread.
void learn_from_stage(const std::vector<sched::OpCost>& costs, double run_s, const sched::DeviceProfile& device);

// Saves the learners of `topo`'s devices that changed (CostLearner::save).
void save_learned(const sched::Topology& topo);

}  // namespace genie
