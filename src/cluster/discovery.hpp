// Network discovery: what this host (and a Genie server) can use for the
// data plane. Optional libraries are loaded at run time (dlopen), so
// libgenie runs where they are absent; each probe reports available or not
// with the reason, never an error.
//
// DPDK: EAL initialises once per process, takes about half a second and
// claims devices, hugepages and signal handlers; so the full probe
// (rte_eal_init, rte_eth_dev_count_avail, rte_gpu_count_avail) runs only on
// request (genie_discover, or an explicit dpdk/dpdk_gpudev backend) and
// always in a forked child process, which reports through a pipe and exits:
// this process never runs EAL.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cluster/types.hpp"
#include "cluster/ucx_probe.hpp"
#include "dataplane/tcp/tls.hpp"
#include "genie.h"

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
// libibverbs.so.1: ibv_get_device_list, ibv_open_device, ibv_query_port.
RdmaProbe probe_rdma();

struct DpdkProbe {
  bool probed = false;  // the EAL probe ran
  bool eal_ok = false;
  int ports = 0;
  int gpus = 0;         // rte_gpu_count_avail
  bool gpudev_lib = false;
  std::string reason;   // what was found, or why not
  double probe_ms = 0;
};
// Full probe in a forked child (waits at most timeout_ms).
DpdkProbe probe_dpdk(int64_t timeout_ms);
// Not probed: the reason says so.
DpdkProbe dpdk_not_probed(const std::string& why);

struct TcpProbe {
  std::string host;
  int port = 0;
  bool reachable = false;  // answered a Genie Probe
  genie_status_t status = GENIE_OK;  // CONNECTION, TIMEOUT or PROTOCOL when not
  std::string reason;
  double connect_us = 0;
  int rounds = 0;
  double rtt_p50_us = 0, rtt_min_us = 0, rtt_max_us = 0;
  std::string server_node_id;
  bool has_backends = false;
  std::vector<BackendAvail> server_backends;
};
// Connects to host:port, sends `rounds` Probe frames one after another and
// times each answer. Blocking; waits at most timeout_ms in all. With `tls`
// (control/tls.hpp, probe_tls), inside a TLS session.
TcpProbe probe_tcp(const std::string& host, int port, int64_t timeout_ms, int rounds,
                   std::shared_ptr<const dataplane::tcp::TlsContext> tls = nullptr);

// This end's backends from its probes (only TCP has a transport built).
// `ucx`: rdma also needs UCX to drive the device; ucx needs UCX to start.
std::vector<BackendAvail> local_backends(const RdmaProbe& rdma, const DpdkProbe& dpdk,
                                         const UcxProbe& ucx = ucx_not_probed("UCX not probed"));

struct Selection {
  genie_backend_t requested = GENIE_BACKEND_AUTO;
  genie_backend_t backend = GENIE_BACKEND_TCP;
  std::string reason;
};
// Explicit: that backend if available on both ends, else Error(UNSUPPORTED)
// naming the probe result. AUTO: dpdk_gpudev > rdma > dpdk > tcp among
// those available on both ends (`remote` NULL: this end only), recording
// why each better one was not chosen.
Selection select_backend(genie_backend_t requested, const std::vector<BackendAvail>& local,
                         const std::vector<BackendAvail>* remote, const std::string& remote_name);

// The transport (dataplane/registry.hpp) that carries a backend's data
// connections: tcp, ucx (rdma and ucx), dpdk, dpdk_gpudev.
const char* transport_for_backend(genie_backend_t backend);

JsonPtr rdma_to_json(const RdmaProbe& p);
JsonPtr dpdk_to_json(const DpdkProbe& p);
JsonPtr gpudev_to_json(const DpdkProbe& p);
JsonPtr tcp_to_json(const TcpProbe& p);
JsonPtr selection_to_json(const Selection& s);

}  // namespace genie
