#include "exec/learn.hpp"

#include <cmath>

namespace genie {

void learn_from_run(const std::vector<sched::OpCost>& costs, const ExecResult& r, const sched::Topology& topo,
                    const std::vector<int>* node_device, int device,
                    const std::vector<sched::OpCost>* graph_costs, const std::vector<NodeId>* graph_nodes) {
  if (r.status != GENIE_OK || r.trace.size() != costs.size()) return;
  if (node_device && node_device->size() != costs.size()) return;
  if (graph_nodes && graph_nodes->size() != costs.size()) return;
  const uint64_t graph = sched::cost_signature(graph_costs ? *graph_costs : costs);
  double nodes_s = 0;
  size_t ran = 0;
  for (size_t i = 0; i < costs.size(); ++i) {
    const NodeTrace& t = r.trace[i];
    if (t.node != static_cast<NodeId>(i) || t.end_ns < t.start_ns) continue;  // did not run
    const int d = node_device ? (*node_device)[i] : device;
    if (d < 0 || static_cast<size_t>(d) >= topo.devices.size()) continue;
    const sched::DeviceProfile& p = topo.devices[static_cast<size_t>(d)];
    if (!p.learned) continue;
    const double s = static_cast<double>(t.end_ns - t.start_ns) * 1e-9;
    const double model = sched::model_seconds(costs[i], p);
    p.learned->observe(costs[i].code, costs[i].work(), model, s);
    p.learned->observe_node(graph, graph_nodes ? static_cast<size_t>((*graph_nodes)[i]) : i, model, s);
    nodes_s += s;
    ++ran;
  }
  // What the run spent besides its kernels, when it ran on one device (a
  // planned run's stages also wait for transfers).
  if (!node_device && device >= 0 && static_cast<size_t>(device) < topo.devices.size() && ran == costs.size())
    if (const auto& l = topo.devices[static_cast<size_t>(device)].learned)
      l->observe_run(graph, ran, static_cast<double>(r.exec_ns) * 1e-9, nodes_s);
}

void learn_from_stage(const std::vector<sched::OpCost>& costs, double run_s, const sched::DeviceProfile& device) {
  if (!device.learned || costs.empty() || !(run_s > 0) || !std::isfinite(run_s)) return;
  std::vector<double> predicted(costs.size());
  double total = 0;
  for (size_t i = 0; i < costs.size(); ++i) total += predicted[i] = sched::predict_seconds(costs[i], device);
  if (!(total > 0)) return;
  for (size_t i = 0; i < costs.size(); ++i)
    device.learned->observe(costs[i].code, costs[i].work(), sched::model_seconds(costs[i], device),
                            run_s * predicted[i] / total);
}

void save_learned(const sched::Topology& topo) {
  for (const sched::DeviceProfile& p : topo.devices)
    if (p.learned) p.learned->save();
}

}  // namespace genie
