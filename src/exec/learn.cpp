#include "exec/learn.hpp"

namespace genie {

void learn_from_run(const std::vector<sched::OpCost>& costs, const ExecResult& r, const sched::Topology& topo,
                    const std::vector<int>* node_device, int device) {
  if (r.status != GENIE_OK || r.trace.size() != costs.size()) return;
  if (node_device && node_device->size() != costs.size()) return;
  for (size_t i = 0; i < costs.size(); ++i) {
    const NodeTrace& t = r.trace[i];
    if (t.node != static_cast<NodeId>(i) || t.end_ns < t.start_ns) continue;  // did not run
    const int d = node_device ? (*node_device)[i] : device;
    if (d < 0 || static_cast<size_t>(d) >= topo.devices.size()) continue;
    const sched::DeviceProfile& p = topo.devices[static_cast<size_t>(d)];
    if (!p.learned) continue;
    p.learned->observe(costs[i].code, costs[i].work(), sched::model_seconds(costs[i], p),
                       static_cast<double>(t.end_ns - t.start_ns) * 1e-9);
  }
}

void save_learned(const sched::Topology& topo) {
  for (const sched::DeviceProfile& p : topo.devices)
    if (p.learned) p.learned->save();
}

}  // namespace genie
