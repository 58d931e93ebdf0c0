// Discovery: what this host and a Genie server offer for the data plane,
// as genie_discover and genie_init report it. The transports' own probes
// (RDMA and UCX: dataplane/ucx/probe.hpp; DPDK: dataplane/dpdk/probe.hpp)
// and the choice among backends (dataplane/select.hpp) live with the data
// plane; here: the TCP probe of a server (a Genie Probe over the control
// protocol) and the JSON of every probe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cluster/types.hpp"
#include "dataplane/select.hpp"
#include "dataplane/tcp/tls.hpp"
#include "genie.h"

namespace genie {

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

JsonPtr rdma_to_json(const RdmaProbe& p);
JsonPtr dpdk_to_json(const DpdkProbe& p);
JsonPtr gpudev_to_json(const DpdkProbe& p);
JsonPtr tcp_to_json(const TcpProbe& p);
JsonPtr ucx_to_json(const UcxProbe& p);
JsonPtr selection_to_json(const Selection& s);

}  // namespace genie
