#include "exec/local_devices.hpp"

#include "core/error.hpp"
#include "exec/backend_loader.hpp"
#include "exec/plan_runner.hpp"
#include "sched/learned_cost.hpp"
#include "sched/profile_cache.hpp"

namespace genie {

LocalDevices::LocalDevices(Executor& exec, std::string node_id) : exec_(exec), node_id_(std::move(node_id)) {
  devices_.push_back({Device{}, DeviceRef{&exec_.cpu_backend(), 0}});
  for (const std::string& kind : probed_backend_kinds()) {
    const LoadedBackend& b = device_backend(kind);
    if (!b.backend) continue;
    for (size_t i = 0; i < b.backend->devices().size(); ++i)
      devices_.push_back({b.backend->devices()[i].id, DeviceRef{b.backend.get(), static_cast<int>(i)}});
  }
}

int LocalDevices::index_of(const TensorData& t) const {
  if (t.host_accessible()) return 0;
  for (size_t i = 1; i < devices_.size(); ++i)
    if (devices_[i].id == t.device()) return static_cast<int>(i);
  fail(GENIE_ERR_INVALID_ARGUMENT, "a tensor on ", t.device().str(), ", which is not a device of ", node_id_);
}

const sched::Topology& LocalDevices::topology() {
  std::lock_guard<std::mutex> lk(mu_);
  if (topology_) return *topology_;
  auto t = std::make_unique<sched::Topology>();
  sched::CalibrateOptions opts;
  opts.node_id = node_id_;
  for (const Entry& d : devices_) {
    sched::DeviceProfile p = d.ref.backend->calibrate(d.ref.index, opts);
    p.node_id = node_id_;
    p.device = d.id.str();
    t->devices.push_back(std::move(p));
  }
  const std::string dir = sched::profile_cache_dir(opts);
  for (size_t i = 0; i < t->devices.size() && !dir.empty(); ++i) {
    sched::DeviceProfile& p = t->devices[i];
    if (p.learned) continue;
    const Entry& e = devices_[i];
    const DeviceDesc* desc = nullptr;
    for (const DeviceDesc& dd : e.ref.backend->devices())
      if (dd.id == e.id) desc = &dd;
    sched::DeviceIdentity id{e.id.kind, desc ? desc->description : e.id.str(), 0};
    p.learned = sched::CostLearner::shared(sched::CostLearner::file_for_profile(sched::profile_cache_file(dir, id)));
  }
  t->version = 1;
  t->check();
  topology_ = std::move(t);
  return *topology_;
}

LocalDevices::Placed LocalDevices::place(const Graph& g, const std::unordered_map<ValueId, Shape>& shapes,
                                         const std::vector<TensorPtr>& inputs) {
  Placed p;
  p.input_device.reserve(inputs.size());
  sched::Residency res;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int d = index_of(*inputs[i]);
    p.input_device.push_back(d);
    res.value_device[g.value(g.inputs()[i]).name] = d;
  }
  p.plan = plans_.get_or_plan(g, topology(), res, &shapes);
  const int only = p.plan->node_device.empty() ? 0 : p.plan->node_device.front();
  bool one = true;
  for (int d : p.plan->node_device) one &= d == only;
  for (int d : p.input_device) one &= d == only;
  if (one) p.device = only;
  return p;
}

void LocalDevices::run_staged(Placed placed, const std::shared_ptr<const Graph>& g,
                              std::unordered_map<ValueId, Shape> shapes, std::vector<TensorPtr> inputs,
                              Executor::Done done) {
  PlannedRun r;
  r.graph = g;
  r.plan = std::move(placed.plan);
  r.input_device = std::move(placed.input_device);
  for (const Entry& d : devices_) r.devices.push_back(d.ref);
  r.shapes = std::move(shapes);
  r.inputs = std::move(inputs);
  run_planned(exec_, std::move(r), std::move(done));
}

bool LocalDevices::submit(const std::shared_ptr<const Graph>& g, std::unordered_map<ValueId, Shape> shapes,
                          std::vector<TensorPtr> inputs, Executor::Done& done, ExecResult* ran,
                          std::shared_ptr<const sched::Plan>* plan) {
  // A tiny graph on host tensors is microseconds of work, less than moving
  // anything to a device: it runs here, unplanned, as without other devices
  // (what its nodes measure must not move it: a few microseconds of noise
  // would).
  bool on_host = true;
  for (const TensorPtr& t : inputs) on_host &= t->host_accessible();
  if (on_host && Executor::is_tiny(*g, inputs)) {
    if (plan) plan->reset();
    *ran = exec_.run_inline(g, std::move(inputs), devices_[0].ref);
    return true;
  }
  Placed p = place(*g, shapes, inputs);
  if (plan) *plan = p.plan;
  if (p.device >= 0) {
    // Everything on one device: no stages, no copies. On the host CPU
    // (device 0), a tiny graph runs here, as without other devices.
    const DeviceRef& where = devices_[static_cast<size_t>(p.device)].ref;
    if (p.device == 0 && Executor::is_tiny(*g, inputs)) {
      *ran = exec_.run_inline(g, std::move(inputs), where);
      return true;
    }
    exec_.run(g, std::move(inputs), std::move(done), where, Executor::Issue::Here);
    return false;
  }
  run_staged(std::move(p), g, std::move(shapes), std::move(inputs), std::move(done));
  return false;
}

}  // namespace genie
