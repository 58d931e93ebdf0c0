// The devices a server offers beyond its CPU (docs/cuda.md): those of the
// device backends loaded in this process (exec/backend_loader.hpp), such as
// a GPU server's cuda:N. Tensors allocated there live in device memory;
// writes and reads stage through host memory; a graph bound to tensors on
// one of them runs there, and one bound to tensors on several is placed
// across the CPU and them as in embedded mode (exec/local_devices.hpp).
#include <cstring>

#include "server/impl.hpp"

namespace genie {

void Server::Impl::find_devices() {
  local = std::make_unique<LocalDevices>(exec, node_id);
  for (size_t i = 1; i < local->size(); ++i)
    devices.push_back({local->list()[i].id.str(), local->list()[i].ref});
  std::string list = "cpu:0";
  for (const ServedDevice& d : devices) list += ", " + d.name;
  log(devices.empty() ? LogLevel::Debug : LogLevel::Info, "server ", node_id, ": serves ", list);
}

const Server::Impl::ServedDevice* Server::Impl::served_device(const std::string& name) const {
  if (name.empty() || name == "cpu" || name == "cpu:0") return nullptr;
  std::string list = "cpu:0";
  for (const ServedDevice& d : devices) list += ", " + d.name;
  Device want;
  try {
    want = parse_device(name.c_str());
  } catch (const Error&) {
    fail(GENIE_ERR_UNSUPPORTED, "device '", name, "' is not served by ", node_id, ": it serves ", list);
  }
  for (const ServedDevice& d : devices)
    if (d.name == want.str()) return &d;
  fail(GENIE_ERR_UNSUPPORTED, "device '", name, "' is not served by ", node_id, ": it serves ", list);
}

DeviceRef Server::Impl::device_ref(const TensorData& t) const {
  if (t.host_accessible()) return {};
  for (const ServedDevice& d : devices)
    if (d.name == t.device().str()) return d.ref;
  fail(GENIE_ERR_INTERNAL, "a tensor in memory of ", t.device().str(), ", which this server does not serve");
}

TensorPtr Server::Impl::host_bytes(const TensorData& t, uint64_t offset, uint64_t n) const {
  auto host =
      std::make_shared<TensorData>(DType::Bool, Shape{static_cast<int64_t>(n)}, TensorData::Uninitialized{});
  if (n == 0) return host;
  const DeviceRef r = device_ref(t);
  if (r.backend == nullptr)
    std::memcpy(host->bytes(), t.bytes() + offset, n);
  else
    r.backend->copy_to_host(t.buffer(), offset, host->bytes(), n, nullptr);
  return host;
}

}  // namespace genie
