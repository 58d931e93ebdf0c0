// Choosing the data plane: the one place that says which backends this
// host and a peer can use and which one carries a client's data connections
// (docs/architecture.md, "What a change touches").
//
// The vocabulary (include/genie.h, genie_backend_t): a user selects a
// *backend* (auto, tcp, rdma, dpdk, dpdk_gpudev, ucx); each backend is
// carried by one *transport*, the plugin of that name
// (dataplane/registry.hpp): rdma and ucx by ucx, the others by their own.
// A transport carries its probe beside it (dataplane/ucx/probe.hpp,
// dataplane/dpdk/probe.hpp), compiled into libgenie so that probing never
// loads a plugin; the backends' table below says what each needs and where
// auto ranks it.
#pragma once

#include <string>
#include <vector>

#include "dataplane/dpdk/probe.hpp"
#include "dataplane/ucx/probe.hpp"
#include "genie.h"

namespace genie {

// One backend as an end reports it (its probe, whether its transport is
// installed); exchanged with peers in the Probe reply.
struct BackendAvail {
  genie_backend_t backend = GENIE_BACKEND_TCP;
  bool probe_ok = false;
  std::string probe;  // what the probe found, or why not
  bool built = false;
  bool available() const { return probe_ok && built; }
};

// The backends: the transport that carries each, its rank in auto's
// choice (1 first; 0 never chosen by auto) and what it needs.
struct BackendInfo {
  genie_backend_t backend;
  const char* transport;
  int auto_rank;
  const char* needs;
};
// In auto's order of preference: dpdk_gpudev > rdma > dpdk > tcp; then ucx.
const std::vector<BackendInfo>& backend_table();

// This end's backends from its probes. A backend whose probe succeeded is
// available when its transport plugin is installed (loaded to check).
std::vector<BackendAvail> local_backends(const RdmaProbe& rdma, const DpdkProbe& dpdk,
                                         const UcxProbe& ucx = ucx_not_probed("UCX not probed"));

struct Selection {
  genie_backend_t requested = GENIE_BACKEND_AUTO;
  genie_backend_t backend = GENIE_BACKEND_TCP;
  std::string reason;
};
// Explicit: that backend if available on both ends, else Error(UNSUPPORTED)
// naming the probe result. AUTO: the best ranked available on both ends
// (`remote` NULL: this end only), recording why each better one was not
// chosen; tcp when none is.
Selection select_backend(genie_backend_t requested, const std::vector<BackendAvail>& local,
                         const std::vector<BackendAvail>* remote, const std::string& remote_name);

// The transport that carries a backend (backend_table()).
const char* transport_for_backend(genie_backend_t backend);

// A transport and the address to reach it at.
struct DataTransport {
  std::string transport;
  std::string address;  // "": the server's own address
};
// The transport of a client's data connections to `server` ("host:port"):
// `demanded` (GENIE_TRANSPORT) when set, else `selected` (the selected
// backend's transport; "" is tcp), where the server offers it (`offered`,
// from its Welcome) and its plugin loads here. Not with TLS: only tcp
// encrypts. When the choice cannot be had: Error(UNSUPPORTED) if it was
// demanded, else tcp (logged at Info).
DataTransport choose_data_transport(const std::string& demanded, const std::string& selected, bool tls,
                                    const std::vector<DataTransport>& offered, const std::string& server);

}  // namespace genie
