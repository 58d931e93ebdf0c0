// The devices a server offers beyond its CPU (docs/cuda.md): those of the
// device backends loaded in this process (exec/backend_loader.hpp), such as
// a GPU server's cuda:N. Tensors allocated there live in device memory;
// writes and reads stage through host memory; a graph whose inputs are on
// one of them runs there.
#include "control/server/impl.hpp"
#include <cstring>

#include "exec/backend_loader.hpp"

namespace genie {

void Server::Impl::find_devices() {
  for (const std::string& kind : probed_backend_kinds()) {
    const LoadedBackend& b = device_backend(kind);
    if (!b.backend) {
      log(LogLevel::Debug, "server ", node_id, ": no ", kind, " devices: ", b.why_unavailable);
      continue;
    }
    for (size_t i = 0; i < b.backend->devices().size(); ++i)
      devices.push_back({b.backend->devices()[i].id.str(), DeviceRef{b.backend.get(), static_cast<int>(i)}});
  }
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
  auto host = std::make_shared<TensorData>(DType::Bool, Shape{static_cast<int64_t>(n)}, TensorData::Uninitialized{});
  if (n == 0) return host;
  const DeviceRef r = device_ref(t);
  if (r.backend == nullptr)
    std::memcpy(host->bytes(), t.bytes() + offset, n);
  else
    r.backend->copy_to_host(t.buffer(), offset, host->bytes(), n, nullptr);
  return host;
}

}  // namespace genie
