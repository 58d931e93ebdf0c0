#include "cluster/discovery.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "cluster/child_probe.hpp"
#include "control/wire.hpp"
#include "control/wire_codec.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "dataplane/registry.hpp"
#include "dataplane/tcp/tls.hpp"
#include "genie.pb.h"

namespace genie {

namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

template <class F>
bool sym(void* lib, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  return out != nullptr;
}

const char* port_state_str(int s) {
  switch (s) {
    case IBV_PORT_NOP: return "NOP";
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
    default: return "UNKNOWN";
  }
}

const char* link_layer_str(int l) {
  switch (l) {
    case IBV_LINK_LAYER_INFINIBAND: return "InfiniBand";
    case IBV_LINK_LAYER_ETHERNET: return "Ethernet";
    default: return "unspecified";
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// RDMA
// ---------------------------------------------------------------------------

RdmaProbe probe_rdma() {
  RdmaProbe p;
  // Stays loaded for the life of the process: providers it loads keep
  // state that unloading would leave dangling.
  static void* lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    p.reason = "libibverbs.so.1 not loaded (rdma-core is not installed)";
    return p;
  }
  ibv_device** (*get_list)(int*);
  void (*free_list)(ibv_device**);
  const char* (*dev_name)(ibv_device*);
  ibv_context* (*open_dev)(ibv_device*);
  int (*close_dev)(ibv_context*);
  int (*query_dev)(ibv_context*, ibv_device_attr*);
  int (*query_port)(ibv_context*, uint8_t, ibv_port_attr*);
  if (!sym(lib, "ibv_get_device_list", get_list) || !sym(lib, "ibv_free_device_list", free_list) ||
      !sym(lib, "ibv_get_device_name", dev_name) || !sym(lib, "ibv_open_device", open_dev) ||
      !sym(lib, "ibv_close_device", close_dev) || !sym(lib, "ibv_query_device", query_dev) ||
      !sym(lib, "ibv_query_port", query_port)) {
    p.reason = "libibverbs.so.1 lacks the verbs this probe uses";
    return p;
  }
  int n = 0;
  ibv_device** list = get_list(&n);
  if (!list) {
    const int err = errno;
    p.reason = err == ENOSYS
                   ? "no RDMA support in this kernel (ibv_get_device_list: Function not implemented)"
                   : cat("ibv_get_device_list failed: ", std::strerror(err));
    return p;
  }
  for (int i = 0; i < n; ++i) {
    RdmaDevice d;
    d.name = dev_name(list[i]) ? dev_name(list[i]) : "?";
    ibv_context* ctx = open_dev(list[i]);
    if (ctx) {
      ibv_device_attr attr{};
      if (query_dev(ctx, &attr) == 0) {
        for (uint8_t port = 1; port <= attr.phys_port_cnt; ++port) {
          ibv_port_attr pa{};
          if (query_port(ctx, port, &pa) != 0) continue;
          d.ports.push_back({port, port_state_str(pa.state), link_layer_str(pa.link_layer)});
          if (pa.state == IBV_PORT_ACTIVE) p.available = true;
        }
      }
      close_dev(ctx);
    }
    p.devices.push_back(std::move(d));
  }
  free_list(list);
  if (n == 0)
    p.reason = "no RDMA device (ibv_get_device_list found none)";
  else if (!p.available)
    p.reason = cat(n, " RDMA device(s), no ACTIVE port");
  else
    p.reason = cat(n, " RDMA device(s) with an ACTIVE port");
  return p;
}

// ---------------------------------------------------------------------------
// DPDK (in a child process)
// ---------------------------------------------------------------------------

DpdkProbe dpdk_not_probed(const std::string& why) {
  DpdkProbe p;
  p.reason = why;
  return p;
}

namespace {

struct DpdkChildResult {
  int32_t stage;  // 0 libraries missing, 1 EAL init failed, 2 ok
  int32_t ports;
  int32_t gpus;
  int32_t gpudev_lib;
  char detail[256];
};

[[noreturn]] void dpdk_child(int out_fd) {
  DpdkChildResult r{};
  // EAL talks on stdout/stderr: keep it off the parent's terminal.
  const int devnull = open("/dev/null", O_RDWR);
  if (devnull >= 0) {
    dup2(devnull, STDOUT_FILENO);
    dup2(devnull, STDERR_FILENO);
  }
  void* eal = dlopen("librte_eal.so.23", RTLD_NOW | RTLD_GLOBAL);
  void* eth = eal ? dlopen("librte_ethdev.so.23", RTLD_NOW | RTLD_GLOBAL) : nullptr;
  void* gpu = eal ? dlopen("librte_gpudev.so.23", RTLD_NOW | RTLD_GLOBAL) : nullptr;
  int (*init)(int, char**) = nullptr;
  uint16_t (*count)() = nullptr;
  uint16_t (*gpu_count)() = nullptr;
  if (!eal || !eth || !sym(eal, "rte_eal_init", init) || !sym(eth, "rte_eth_dev_count_avail", count)) {
    const char* e = dlerror();
    std::snprintf(r.detail, sizeof r.detail, "DPDK 22.11 libraries not loaded (%s)",
                  e ? e : "librte_eal.so.23 / librte_ethdev.so.23");
  } else {
    r.gpudev_lib = gpu && sym(gpu, "rte_gpu_count_avail", gpu_count);
    cpu_set_t set;
    int cpu = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &set)) {
          cpu = c;
          break;
        }
    char lcore[16];
    std::snprintf(lcore, sizeof lcore, "%d", cpu);
    char a0[] = "genie-dpdk-probe", a1[] = "-l", a3[] = "--no-huge", a4[] = "--no-shconf",
         a5[] = "--no-telemetry", a6[] = "--log-level=*:error";
    char* argv[] = {a0, a1, lcore, a3, a4, a5, a6, nullptr};
    if (init(7, argv) < 0) {
      r.stage = 1;
      std::snprintf(r.detail, sizeof r.detail,
                    "rte_eal_init failed (no hugepages, no permission, or no usable CPU)");
    } else {
      r.stage = 2;
      r.ports = count();
      r.gpus = gpu_count ? gpu_count() : 0;
      // EAL made its runtime directory even with --no-shconf (empty then):
      // removed unless another process has files there.
      const char* (*runtime_dir)() = nullptr;
      if (sym(eal, "rte_eal_get_runtime_dir", runtime_dir) && runtime_dir() != nullptr) rmdir(runtime_dir());
    }
  }
  ssize_t ignored = write(out_fd, &r, sizeof r);
  (void)ignored;
  _exit(0);
}

}  // namespace

DpdkProbe probe_dpdk(int64_t timeout_ms) {
  DpdkProbe p;
  p.probed = true;
  const auto t0 = Clock::now();
  const ChildReport c = run_child_probe(timeout_ms, [](int fd) { dpdk_child(fd); });
  p.probe_ms = us_since(t0) / 1000.0;
  if (!c.error.empty()) {
    p.reason = c.error;
    return p;
  }
  DpdkChildResult r{};
  if (c.bytes.size() < sizeof r) {
    p.reason = !c.finished ? cat("the DPDK probe did not finish within ", timeout_ms, " ms")
                           : "the DPDK probe process died before reporting";
    return p;
  }
  std::memcpy(&r, c.bytes.data(), sizeof r);
  r.detail[sizeof r.detail - 1] = '\0';
  p.gpudev_lib = r.gpudev_lib != 0;
  if (r.stage < 2) {
    p.reason = r.detail;
    return p;
  }
  p.eal_ok = true;
  p.ports = r.ports;
  p.gpus = r.gpus;
  p.reason = cat("EAL initialised; ", r.ports, " ethdev port(s); ", r.gpus, " gpudev device(s)");
  return p;
}

// ---------------------------------------------------------------------------
// TCP
// ---------------------------------------------------------------------------

namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

// Waits for `events` on fd; false on timeout.
bool wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd pf{fd, events, 0};
    const int left = ms_left(deadline);
    const int r = poll(&pf, 1, left);
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return true;  // let the read/write report it
  }
}

// Reads exactly n bytes; throws TIMEOUT / CONNECTION.
void read_all(int fd, void* buf, size_t n, Clock::time_point deadline, const std::string& where) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = recv(fd, static_cast<char*>(buf) + got, n - got, 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) fail(GENIE_ERR_CONNECTION, where, " closed the connection");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      fail(GENIE_ERR_CONNECTION, where, ": ", std::strerror(errno));
    if (!wait_fd(fd, POLLIN, deadline)) fail(GENIE_ERR_TIMEOUT, "no answer from ", where);
  }
}

void write_all(int fd, const void* buf, size_t n, Clock::time_point deadline, const std::string& where) {
  size_t put = 0;
  while (put < n) {
    const ssize_t r = send(fd, static_cast<const char*>(buf) + put, n - put, MSG_NOSIGNAL);
    if (r > 0) {
      put += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
      fail(GENIE_ERR_CONNECTION, where, ": ", std::strerror(errno));
    if (!wait_fd(fd, POLLOUT, deadline)) fail(GENIE_ERR_TIMEOUT, "cannot send to ", where);
  }
}

// The probe's byte stream: the socket, or a TLS session over it when the
// client speaks TLS (a TLS server refuses a plaintext probe).
struct ProbeStream {
  int fd;
  Clock::time_point deadline;
  const std::string& where;
  std::unique_ptr<dataplane::tcp::TlsSession> tls;
  std::string plain;  // decrypted, not yet read

  void flush() {
    const std::string out = tls->take_output();
    write_all(fd, out.data(), out.size(), deadline, where);
  }
  // One read of ciphertext, decrypted into `plain`.
  void pull() {
    char buf[16 << 10];
    for (;;) {
      const ssize_t r = recv(fd, buf, sizeof buf, 0);
      if (r > 0) {
        const auto res = tls->feed(buf, static_cast<size_t>(r), &plain);
        flush();
        if (res != dataplane::tcp::TlsSession::Result::Ok)
          fail(GENIE_ERR_CONNECTION, where, ": ", tls->error());
        return;
      }
      if (r == 0)
        fail(GENIE_ERR_CONNECTION, where, " closed the connection",
             tls->handshake_done() ? "" : " during the TLS handshake (does it serve TLS?)");
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        fail(GENIE_ERR_CONNECTION, where, ": ", std::strerror(errno));
      if (!wait_fd(fd, POLLIN, deadline)) fail(GENIE_ERR_TIMEOUT, "no answer from ", where);
    }
  }
  void start(std::shared_ptr<const dataplane::tcp::TlsContext> ctx, const std::string& host) {
    if (!ctx) return;
    tls = std::make_unique<dataplane::tcp::TlsSession>(std::move(ctx), host);
    tls->start();
    flush();
    while (!tls->handshake_done()) pull();
  }
  void write(const std::string& bytes) {
    if (!tls) return write_all(fd, bytes.data(), bytes.size(), deadline, where);
    if (!tls->encrypt(bytes.data(), bytes.size())) fail(GENIE_ERR_CONNECTION, where, ": ", tls->error());
    flush();
  }
  void read(void* buf, size_t n) {
    if (!tls) return read_all(fd, buf, n, deadline, where);
    while (plain.size() < n) pull();
    std::memcpy(buf, plain.data(), n);
    plain.erase(0, n);
  }
};

}  // namespace

TcpProbe probe_tcp(const std::string& host, int port, int64_t timeout_ms, int rounds,
                   std::shared_ptr<const dataplane::tcp::TlsContext> tls) {
  TcpProbe p;
  p.host = host;
  p.port = port;
  const std::string where = cat(host, ":", port);
  const auto t0 = Clock::now();
  const auto deadline = t0 + std::chrono::milliseconds(timeout_ms);
  try {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* res = nullptr;
    std::string h = host;
    if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
    const int gai = getaddrinfo(h.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (gai != 0) fail(GENIE_ERR_CONNECTION, "cannot resolve ", host, ": ", gai_strerror(gai));
    std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(res, freeaddrinfo);
    Fd s;
    s.fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s.fd < 0) fail(GENIE_ERR_CONNECTION, "socket: ", std::strerror(errno));
    const int one = 1;
    setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    const auto c0 = Clock::now();
    if (connect(s.fd, res->ai_addr, res->ai_addrlen) != 0) {
      if (errno != EINPROGRESS)
        fail(GENIE_ERR_CONNECTION, "cannot connect to ", where, ": ", std::strerror(errno));
      if (!wait_fd(s.fd, POLLOUT, deadline))
        fail(GENIE_ERR_TIMEOUT, "no answer from ", where, " within ", timeout_ms, " ms");
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) fail(GENIE_ERR_CONNECTION, "cannot connect to ", where, ": ", std::strerror(err));
    }
    p.connect_us = us_since(c0);
    ProbeStream stream{s.fd, deadline, where, nullptr, {}};
    stream.start(std::move(tls), h);
    std::vector<double> rtts;
    const std::string msg = wire::encode_msg(wire::Probe());
    for (int i = 0; i < rounds; ++i) {
      uint8_t hdr[wire::kHeaderSize];
      wire::FrameHeader fh;
      fh.type = wire::MsgType::Probe;
      fh.request_id = static_cast<uint64_t>(i + 1);
      wire::encode_header(fh, msg.data(), msg.size(), hdr);
      const auto r0 = Clock::now();
      std::string frame(reinterpret_cast<char*>(hdr), sizeof hdr);
      frame += msg;
      stream.write(frame);
      uint8_t in[wire::kHeaderSize];
      stream.read(in, sizeof in);
      wire::FrameHeader rh;
      try {
        rh = wire::decode_header(in, 1u << 20);
      } catch (const Error& e) {
        fail(GENIE_ERR_PROTOCOL, where, " is not a Genie server (", e.detail(), ")");
      }
      std::string body(rh.msg_len, '\0');
      stream.read(body.data(), body.size());
      wire::verify_crc(in, body.data(), body.size());
      rtts.push_back(us_since(r0));
      if (rh.type == wire::MsgType::ErrorReply) {
        const auto e = wire::parse_msg<wire::ErrorReply>(body, rh.type);
        fail(GENIE_ERR_PROTOCOL, where, " refused the probe: ", e.detail());
      }
      const auto reply = wire::parse_msg<wire::ProbeReply>(body, rh.type);
      p.server_node_id = reply.node_id().substr(0, 255);
      if (!reply.backends_json().empty()) {
        const JsonPtr j = json_parse(reply.backends_json(), "the server's backend list");
        p.server_backends = backends_from_json(j.get());
        p.has_backends = true;
      }
    }
    p.reachable = true;
    p.rounds = static_cast<int>(rtts.size());
    if (!rtts.empty()) {
      std::sort(rtts.begin(), rtts.end());
      p.rtt_min_us = rtts.front();
      p.rtt_max_us = rtts.back();
      const size_t n = rtts.size();
      p.rtt_p50_us = n % 2 ? rtts[n / 2] : 0.5 * (rtts[n / 2 - 1] + rtts[n / 2]);
    }
    p.reason = cat("Genie server ", p.server_node_id, " answered ", p.rounds, " probe(s)");
  } catch (const Error& e) {
    p.reachable = false;
    p.status =
        e.code() == GENIE_ERR_TIMEOUT || e.code() == GENIE_ERR_PROTOCOL ? e.code() : GENIE_ERR_CONNECTION;
    p.reason = e.detail();
  }
  return p;
}

// ---------------------------------------------------------------------------
// Backends and selection
// ---------------------------------------------------------------------------

namespace {

// Whether the backend's transport can be had here: built in (tcp), or its
// plugin found and loaded (dataplane/registry.hpp). Asked only of a backend
// whose probe succeeded, so that a plugin is not loaded for hardware that
// is not there.
bool transport_present(genie_backend_t b, bool probe_ok) {
  if (!probe_ok) return false;
  const dataplane::TransportLookup t = dataplane::lookup_transport(transport_for_backend(b));
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
  for (genie_backend_t b : {GENIE_BACKEND_DPDK_GPUDEV, GENIE_BACKEND_RDMA, GENIE_BACKEND_DPDK}) {
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

const char* transport_for_backend(genie_backend_t backend) {
  switch (backend) {
    case GENIE_BACKEND_RDMA: return "ucx";
    case GENIE_BACKEND_UCX: return "ucx";
    case GENIE_BACKEND_DPDK: return "dpdk";
    case GENIE_BACKEND_DPDK_GPUDEV: return "dpdk_gpudev";
    default: return "tcp";
  }
}

// ---------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------

JsonPtr rdma_to_json(const RdmaProbe& p) {
  JsonPtr o = json_object();
  cJSON_AddBoolToObject(o.get(), "available", p.available);
  cJSON_AddStringToObject(o.get(), "reason", p.reason.c_str());
  JsonPtr devs = json_array();
  for (const RdmaDevice& d : p.devices) {
    JsonPtr dj = json_object();
    cJSON_AddStringToObject(dj.get(), "name", d.name.c_str());
    JsonPtr ports = json_array();
    for (const RdmaPort& port : d.ports) {
      JsonPtr pj = json_object();
      cJSON_AddNumberToObject(pj.get(), "port", port.port);
      cJSON_AddStringToObject(pj.get(), "state", port.state.c_str());
      cJSON_AddStringToObject(pj.get(), "link_layer", port.link_layer.c_str());
      cJSON_AddItemToArray(ports.get(), pj.release());
    }
    cJSON_AddItemToObject(dj.get(), "ports", ports.release());
    cJSON_AddItemToArray(devs.get(), dj.release());
  }
  cJSON_AddItemToObject(o.get(), "devices", devs.release());
  return o;
}

namespace {

// Whether the dpdk transport plugin is installed (it is not loaded here:
// loading it starts an EAL in this process).
std::string dpdk_plugin_status() {
  std::string dirs;
  for (const std::string& dir : dataplane::transport_search_path()) {
    const std::string path = dir + "/" + dataplane::plugin_file_name("dpdk");
    if (::access(path.c_str(), F_OK) == 0)
      return cat("installed (", path, "); its port comes from GENIE_DPDK_EAL, e.g. --vdev=net_memif0,...");
    dirs += (dirs.empty() ? "" : ", ") + dir;
  }
  return cat("not installed: no ", dataplane::plugin_file_name("dpdk"), " in ", dirs,
             " (it is built only where pkg-config finds libdpdk)");
}

}  // namespace

JsonPtr dpdk_to_json(const DpdkProbe& p) {
  JsonPtr o = json_object();
  cJSON_AddStringToObject(o.get(), "transport_plugin", dpdk_plugin_status().c_str());
  cJSON_AddBoolToObject(o.get(), "available", p.eal_ok && p.ports > 0);
  cJSON_AddBoolToObject(o.get(), "probed", p.probed);
  cJSON_AddBoolToObject(o.get(), "eal_initialised", p.eal_ok);
  cJSON_AddNumberToObject(o.get(), "ports", p.ports);
  cJSON_AddStringToObject(o.get(), "reason", p.reason.c_str());
  if (p.probed) cJSON_AddNumberToObject(o.get(), "probe_ms", p.probe_ms);
  return o;
}

JsonPtr gpudev_to_json(const DpdkProbe& p) {
  JsonPtr o = json_object();
  cJSON_AddBoolToObject(o.get(), "available", p.eal_ok && p.gpus > 0);
  cJSON_AddNumberToObject(o.get(), "devices", p.gpus);
  std::string reason = p.reason;
  if (p.eal_ok) reason = p.gpudev_lib ? cat(p.gpus, " gpudev device(s)") : "librte_gpudev.so.23 not loaded";
  cJSON_AddStringToObject(o.get(), "reason", reason.c_str());
  return o;
}

JsonPtr tcp_to_json(const TcpProbe& p) {
  JsonPtr o = json_object();
  cJSON_AddStringToObject(o.get(), "host", p.host.c_str());
  cJSON_AddNumberToObject(o.get(), "port", p.port);
  cJSON_AddBoolToObject(o.get(), "reachable", p.reachable);
  cJSON_AddStringToObject(o.get(), "reason", p.reason.c_str());
  if (p.reachable) {
    cJSON_AddNumberToObject(o.get(), "connect_us", p.connect_us);
    JsonPtr rtt = json_object();
    cJSON_AddNumberToObject(rtt.get(), "p50", p.rtt_p50_us);
    cJSON_AddNumberToObject(rtt.get(), "min", p.rtt_min_us);
    cJSON_AddNumberToObject(rtt.get(), "max", p.rtt_max_us);
    cJSON_AddNumberToObject(rtt.get(), "rounds", p.rounds);
    cJSON_AddItemToObject(o.get(), "rtt_us", rtt.release());
    cJSON_AddStringToObject(o.get(), "server_node_id", p.server_node_id.c_str());
    if (p.has_backends)
      cJSON_AddItemToObject(o.get(), "server_backends", backends_to_json(p.server_backends).release());
  }
  return o;
}

JsonPtr selection_to_json(const Selection& s) {
  JsonPtr o = json_object();
  cJSON_AddStringToObject(o.get(), "requested", backend_str(s.requested));
  cJSON_AddStringToObject(o.get(), "selected", backend_str(s.backend));
  cJSON_AddStringToObject(o.get(), "transport", transport_for_backend(s.backend));
  cJSON_AddStringToObject(o.get(), "reason", s.reason.c_str());
  return o;
}

}  // namespace genie
