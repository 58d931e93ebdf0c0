// The probes of the ucx transport, which carries the ucx and rdma backends
// (dataplane/select.hpp): what UCX finds on this host, and the RDMA devices
// (ibverbs) it could drive. Compiled into libgenie, not the plugin: a
// probe never loads the transport.
//
// What UCX finds on this host: its transports and devices ("tcp/lo",
// "posix/memory", "rc_mlx5/mlx5_0:1" ...), read from
// ucp_context_print_info. UCX is loaded (dlopen libucp.so.0) and started in
// a forked child that reports through a pipe and exits, so that this
// process never runs UCX's memory hooks for a probe; it takes a few tens of
// milliseconds, so genie_init runs it only when the backend asked for may
// use UCX (probe_ucx_if_used).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.hpp"

namespace genie {

struct RdmaPort {
  uint32_t port = 0;
  std::string state;       // "ACTIVE", "DOWN" ...
  std::string link_layer;  // "InfiniBand", "Ethernet"
};
struct RdmaDevice {
  std::string name;
  std::vector<RdmaPort> ports;
};
struct RdmaProbe {
  bool available = false;  // a device with an ACTIVE port
  std::string reason;
  std::vector<RdmaDevice> devices;
};
// libibverbs.so.1 (dlopen): ibv_get_device_list, ibv_open_device,
// ibv_query_port. In this process: it is cheap and starts nothing.
RdmaProbe probe_rdma();

struct UcxProbe {
  bool probed = false;
  bool ok = false;                     // UCX started and found a transport
  std::vector<std::string> resources;  // "transport/device"
  std::vector<std::string> rdma;       // those over InfiniBand or RoCE (rc, ud, dc)
  std::string reason;                  // what was found, or why not
};

UcxProbe probe_ucx(int64_t timeout_ms);
UcxProbe ucx_not_probed(const std::string& why);

// probe_ucx only where UCX may be used: a server offering the ucx transport
// (serve_transports), or the backend `cfg` asks for (ucx, rdma, or auto
// with `rdma_device`: an RDMA device found); otherwise "not probed". The
// probe forks, and a fork while other libraries' threads run is not free
// (OpenBLAS, for one, joins its threads in a fork handler): a process that
// will not use UCX does not pay for it.
UcxProbe probe_ucx_if_used(const Config& cfg, bool rdma_device);

// Parses ucp_context_print_info's text into `p` (resources, rdma, ok,
// reason). Separate for tests.
void parse_ucx_info(const std::string& text, UcxProbe& p);

}  // namespace genie
