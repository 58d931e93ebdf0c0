#include "control/tls.hpp"

#include "control/wire.hpp"
#include "control/wire_codec.hpp"
#include "core/error.hpp"
#include "genie.pb.h"

namespace genie {

std::shared_ptr<const dataplane::tcp::TlsContext> client_tls(const Config& cfg) {
  if (cfg.tls_ca.empty()) {
    check(cfg.tls_cert.empty(), GENIE_ERR_INVALID_ARGUMENT,
          "a TLS client certificate is set but no CA to verify the server with (genie_config_set_tls_ca, "
          "GENIE_TLS_CA)");
    check(cfg.tls_server_name.empty(), GENIE_ERR_INVALID_ARGUMENT,
          "a TLS server name is set but no CA to verify the server with (genie_config_set_tls_ca, "
          "GENIE_TLS_CA)");
    return nullptr;
  }
  dataplane::tcp::TlsFiles f;
  f.ca = cfg.tls_ca;
  f.cert = cfg.tls_cert;
  f.key = cfg.tls_key;
  f.server_name = cfg.tls_server_name;
  return dataplane::tcp::TlsContext::client(f);
}

std::shared_ptr<const dataplane::tcp::TlsContext> probe_tls(const Config& cfg) {
  return cfg.tls_ca.empty() ? nullptr : client_tls(cfg);
}

std::shared_ptr<const dataplane::tcp::TlsContext> server_tls(const std::string& cert, const std::string& key,
                                                             const std::string& ca) {
  if (cert.empty() && key.empty()) {
    check(ca.empty(), GENIE_ERR_INVALID_ARGUMENT,
          "a TLS CA for client certificates needs the server's own certificate and key (--tls-cert, "
          "--tls-key)");
    return nullptr;
  }
  // What a plaintext client reads before the server hangs up: a frame it
  // understands, so it reports the reason rather than a lost connection.
  wire::ErrorReply e;
  e.set_status(GENIE_ERR_AUTH);
  e.set_detail(
      "this server requires TLS: give the client the CA that signed the server's certificate "
      "(genie_config_set_tls_ca, GENIE_TLS_CA)");
  const std::string msg = wire::encode_msg(e);
  dataplane::FrameHeader h;
  h.type = static_cast<uint16_t>(wire::MsgType::ErrorReply);
  h.flags = wire::kFlagError;
  uint8_t header[dataplane::kFrameHeaderSize];
  dataplane::encode_frame_header(h, msg.data(), msg.size(), header);
  std::string refusal(reinterpret_cast<const char*>(header), sizeof header);
  refusal += msg;
  dataplane::tcp::TlsFiles f;
  f.cert = cert;
  f.key = key;
  f.ca = ca;
  return dataplane::tcp::TlsContext::server(f, std::move(refusal));
}

}  // namespace genie
