#include "cluster/discovery.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "control/client/direct_io.hpp"
#include "control/wire.hpp"
#include "control/wire_codec.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "dataplane/tcp/tls.hpp"
#include "genie.pb.h"

namespace genie {

namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

}  // namespace

// ---------------------------------------------------------------------------
// TCP
// ---------------------------------------------------------------------------

TcpProbe probe_tcp(const std::string& host, int port, int64_t timeout_ms, int rounds,
                   std::shared_ptr<const dataplane::tcp::TlsContext> tls) {
  TcpProbe p;
  p.host = host;
  p.port = port;
  const bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  const std::string where = v6 ? cat("[", host, "]:", port) : cat(host, ":", port);
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  // The framed, deadline-bounded I/O of the client's direct link
  // (control/client/direct_io.hpp), in plaintext or TLS.
  int fd = -1;
  std::unique_ptr<dataplane::tcp::TlsSession> session;
  try {
    const auto c0 = Clock::now();
    try {
      fd = direct_io::connect_to(where, deadline);
    } catch (const Error& e) {
      if (Clock::now() >= deadline) fail(GENIE_ERR_TIMEOUT, "no answer from ", where, " within ", timeout_ms, " ms");
      throw;
    }
    p.connect_us = us_since(c0);
    std::string plain;
    size_t taken = 0;
    direct_io::Io io{fd, nullptr, &plain, &taken, deadline};
    if (tls) {
      std::string h = host;
      if (h.size() > 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
      session = std::make_unique<dataplane::tcp::TlsSession>(std::move(tls), h);
      io.tls = session.get();
      dataplane::tcp::tls_handshake(io);
    }
    std::vector<double> rtts;
    const std::string msg = wire::encode_msg(wire::Probe());
    for (int i = 0; i < rounds; ++i) {
      const uint64_t rid = static_cast<uint64_t>(i + 1);
      const auto r0 = Clock::now();
      direct_io::send_frame(io, wire::MsgType::Probe, rid, msg, nullptr, 0);
      std::string body;
      const wire::FrameHeader rh = direct_io::read_frame(io, 1u << 20, &body, false);
      rtts.push_back(us_since(r0));
      // A refusal may answer no request in particular (request 0: a TLS
      // server refusing plaintext says so before closing).
      if (rh.type == wire::MsgType::ErrorReply) {
        const auto e = wire::parse_msg<wire::ErrorReply>(body, rh.type);
        fail(GENIE_ERR_PROTOCOL, where, " refused the probe: ", e.detail());
      }
      if (rh.request_id != rid)
        fail(GENIE_ERR_PROTOCOL, where, " answered request ", rh.request_id, " to probe ", rid);
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
  } catch (const direct_io::LinkBroken& b) {
    p.reachable = false;
    switch (b.why) {
      case direct_io::Broke::Timeout:
        p.status = GENIE_ERR_TIMEOUT;
        p.reason = cat("no answer from ", where, " within ", timeout_ms, " ms");
        break;
      case direct_io::Broke::Closed:
        p.status = GENIE_ERR_CONNECTION;
        p.reason = cat(where, " closed the connection (", b.detail, ")",
                       session && !session->handshake_done() ? " during the TLS handshake (does it serve TLS?)" : "");
        break;
      case direct_io::Broke::Protocol:
        p.status = GENIE_ERR_PROTOCOL;
        p.reason = cat(where, " is not a Genie server (", b.detail, ")");
        break;
    }
  } catch (const Error& e) {
    p.reachable = false;
    p.status =
        e.code() == GENIE_ERR_TIMEOUT || e.code() == GENIE_ERR_PROTOCOL ? e.code() : GENIE_ERR_CONNECTION;
    p.reason = e.detail();
  }
  if (fd >= 0) ::close(fd);
  return p;
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

JsonPtr ucx_to_json(const UcxProbe& p) {
  JsonPtr o = json_object();
  cJSON_AddBoolToObject(o.get(), "available", p.ok);
  cJSON_AddBoolToObject(o.get(), "probed", p.probed);
  cJSON_AddStringToObject(o.get(), "reason", p.reason.c_str());
  JsonPtr r = json_array();
  for (const std::string& s : p.resources) cJSON_AddItemToArray(r.get(), cJSON_CreateString(s.c_str()));
  cJSON_AddItemToObject(o.get(), "transports", r.release());
  JsonPtr d = json_array();
  for (const std::string& s : p.rdma) cJSON_AddItemToArray(d.get(), cJSON_CreateString(s.c_str()));
  cJSON_AddItemToObject(o.get(), "rdma_transports", d.release());
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
