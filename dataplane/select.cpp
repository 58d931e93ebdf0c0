#include "dataplane/select.hpp"

#include "core/config.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "dataplane/registry.hpp"

namespace genie {

using dataplane::lookup_transport;
using dataplane::TransportLookup;

namespace {

// Whether the backend's transport can be had here: built in (tcp), or its
// plugin found and loaded (dataplane/registry.hpp). Asked only of a backend
// whose probe succeeded, so that a plugin is not loaded for hardware that
// is not there.
bool transport_present(genie_backend_t b, bool probe_ok) {
  if (!probe_ok) return false;
  const TransportLookup t = lookup_transport(transport_for_backend(b));
  if (!t.transport) log(LogLevel::Debug, "discovery: backend ", backend_str(b), ": ", t.reason);
  return t.transport != nullptr;
}

// rdma: an InfiniBand or RoCE device with an active port (ibverbs) that
// UCX drives (an rc, ud or dc transport), where UCX was probed.
BackendAvail rdma_backend(const RdmaProbe& rdma, const UcxProbe& ucx) {
  if (!rdma.available || !ucx.probed) return {GENIE_BACKEND_RDMA, rdma.available, rdma.reason, false};
  if (ucx.rdma.empty())
    return {
        GENIE_BACKEND_RDMA, false,
        cat(rdma.reason, ", but UCX drives none of them (", ucx.ok ? ucx.reason : "UCX: " + ucx.reason, ")"),
        false};
  std::string list;
  for (const std::string& r : ucx.rdma) list += (list.empty() ? "" : ", ") + r;
  return {GENIE_BACKEND_RDMA, true, cat(rdma.reason, "; UCX drives them: ", list), false};
}

}  // namespace

std::vector<BackendAvail> local_backends(const RdmaProbe& rdma, const DpdkProbe& dpdk, const UcxProbe& ucx) {
  std::vector<BackendAvail> v;
  v.push_back({GENIE_BACKEND_TCP, true, "always available", true});
  v.push_back(rdma_backend(rdma, ucx));
  v.push_back(
      {GENIE_BACKEND_DPDK, dpdk.eal_ok && dpdk.ports > 0,
       dpdk.probed && dpdk.eal_ok && dpdk.ports == 0 ? "EAL initialised but no ethdev port" : dpdk.reason,
       false});
  std::string gpu_reason = dpdk.reason;
  if (dpdk.eal_ok && !dpdk.gpudev_lib)
    gpu_reason = "librte_gpudev.so.23 not loaded";
  else if (dpdk.eal_ok && dpdk.gpus == 0)
    gpu_reason = "EAL initialised but no gpudev device (Debian's DPDK has no CUDA gpudev driver)";
  else if (dpdk.eal_ok && dpdk.ports == 0)
    gpu_reason = "no ethdev port";
  v.push_back({GENIE_BACKEND_DPDK_GPUDEV, dpdk.eal_ok && dpdk.gpus > 0 && dpdk.ports > 0, gpu_reason, false});
  v.push_back({GENIE_BACKEND_UCX, ucx.ok, ucx.reason, false});
  for (BackendAvail& a : v)
    if (a.backend != GENIE_BACKEND_TCP) a.built = transport_present(a.backend, a.probe_ok);
  return v;
}

namespace {

const BackendAvail* find(const std::vector<BackendAvail>& v, genie_backend_t b) {
  for (const BackendAvail& a : v)
    if (a.backend == b) return &a;
  return nullptr;
}

// Why backend b cannot be used on one end ("" when it can). `built_note`:
// also say when the transport is missing (auto says it once at the end).
std::string why_not(const BackendAvail* a, const std::string& end, bool built_note = true) {
  if (!a) return cat(end, ": not reported");
  if (a->available()) return {};
  std::string s = end + ": ";
  if (!a->probe_ok) s += "probe: " + a->probe;
  if (!a->built && (built_note || a->probe_ok))
    s += std::string(a->probe_ok ? "" : "; ") + cat("transport not built in this version (no ",
                                                    transport_for_backend(a->backend), " transport plugin)");
  return s;
}

}  // namespace

Selection select_backend(genie_backend_t requested, const std::vector<BackendAvail>& local,
                         const std::vector<BackendAvail>* remote, const std::string& remote_name) {
  Selection s;
  s.requested = requested;
  const std::string remote_end = cat("server ", remote_name);
  if (requested != GENIE_BACKEND_AUTO) {
    const std::string l = why_not(find(local, requested), "this node");
    const std::string r = remote ? why_not(find(*remote, requested), remote_end) : std::string();
    if (!l.empty() || !r.empty())
      fail(GENIE_ERR_UNSUPPORTED, "backend ", backend_str(requested),
           " was requested but is not available: ", l, !l.empty() && !r.empty() ? "; " : "", r);
    s.backend = requested;
    s.reason = cat(backend_str(requested), " requested explicitly; available on ",
                   remote ? "both ends" : "this node");
    return s;
  }
  std::string why;
  bool unbuilt = false;
  for (const BackendInfo& info : backend_table()) {
    const genie_backend_t b = info.backend;
    if (info.auto_rank == 0 || b == GENIE_BACKEND_TCP) continue;  // tcp: the fallback below
    const BackendAvail* la = find(local, b);
    unbuilt = unbuilt || (la && la->probe_ok && !la->built);  // unprobed: not known
    const std::string l = why_not(la, "this node", false);
    const std::string r = remote ? why_not(find(*remote, b), remote_end, false) : std::string();
    if (l.empty() && r.empty()) {
      s.backend = b;
      s.reason = cat("auto: ", backend_str(b), " available on ", remote ? "both ends" : "this node",
                     why.empty() ? "" : "; not chosen: ", why);
      return s;
    }
    if (!why.empty()) why += "; ";
    why += cat(backend_str(b), " (", l, !l.empty() && !r.empty() ? "; " : "", r, ")");
  }
  s.backend = GENIE_BACKEND_TCP;
  s.reason = cat("auto: tcp (available on ", remote ? "both ends" : "this node", "); not chosen: ", why,
                 unbuilt ? "; besides, a probed backend's transport is not installed" : "");
  return s;
}

const std::vector<BackendInfo>& backend_table() {
  static const std::vector<BackendInfo> table = {
      {GENIE_BACKEND_DPDK_GPUDEV, "dpdk_gpudev", 1, "DPDK's EAL with an ethdev port and a gpudev device"},
      {GENIE_BACKEND_RDMA, "ucx", 2, "an InfiniBand or RoCE device with an active port that UCX drives"},
      {GENIE_BACKEND_DPDK, "dpdk", 3, "DPDK's EAL with an ethdev port"},
      {GENIE_BACKEND_TCP, "tcp", 4, "nothing: built in"},
      {GENIE_BACKEND_UCX, "ucx", 0, "UCX finding any transport (never picked by auto)"},
  };
  return table;
}

const char* transport_for_backend(genie_backend_t backend) {
  for (const BackendInfo& b : backend_table())
    if (b.backend == backend) return b.transport;
  return "tcp";
}

DataTransport choose_data_transport(const std::string& demanded, const std::string& selected, bool tls,
                                    const std::vector<DataTransport>& offered, const std::string& server) {
  const std::string want = !demanded.empty() ? demanded : selected.empty() ? "tcp" : selected;
  if (want == "tcp") return {"tcp", server};
  if (tls) {
    // Only TCP encrypts: with TLS, tensors never take another transport.
    check(demanded.empty(), GENIE_ERR_UNSUPPORTED, "data transport '", want,
          "' (GENIE_TRANSPORT) cannot be used with TLS: it does not encrypt");
    log(LogLevel::Info, "client: data transport '", want, "' is not used with TLS: data connections go over tcp");
    return {"tcp", server};
  }
  std::string list;
  const DataTransport* found = nullptr;
  for (const DataTransport& e : offered) {
    list += (list.empty() ? "" : ", ") + e.transport;
    if (e.transport == want) found = &e;
  }
  std::string why;
  if (found == nullptr) {
    why = cat("server ", server, " does not offer it (it offers ", list.empty() ? std::string("tcp") : list,
              "; a server offers more with GENIE_SERVE_TRANSPORTS)");
  } else {
    const TransportLookup t = lookup_transport(want);
    if (t.transport) return {want, found->address.empty() ? server : found->address};
    why = t.reason;
  }
  check(demanded.empty(), GENIE_ERR_UNSUPPORTED, "data transport '", want, "' (GENIE_TRANSPORT) cannot be used: ",
        why);
  log(LogLevel::Info, "client: data transport '", want, "' of the selected backend is not used (", why,
      "): data connections go over tcp");
  return {"tcp", server};
}

}  // namespace genie
