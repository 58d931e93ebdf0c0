// The control plane's TLS settings (docs/security.md, "TLS"): the TCP
// transport's TLS contexts (dataplane/tcp/tls.hpp) built from a Config or a
// server's options.
#pragma once

#include <memory>
#include <string>

#include "core/config.hpp"
#include "dataplane/tcp/tls.hpp"

namespace genie {

// A client's context, or null when `cfg` asks for no TLS (no CA). Throws
// Error(INVALID_ARGUMENT) for a client certificate without a CA, or a file
// that cannot be used.
std::shared_ptr<const dataplane::tcp::TlsContext> client_tls(const Config& cfg);

// For connections a node makes on the side (cluster probes): the client
// context when `cfg` names a CA, else null (never throws for a certificate
// without a CA, which a server's own settings may have).
std::shared_ptr<const dataplane::tcp::TlsContext> probe_tls(const Config& cfg);

// A server's context, or null without a certificate. A plaintext client is
// answered with an ErrorReply (GENIE_ERR_AUTH) saying that TLS is required.
std::shared_ptr<const dataplane::tcp::TlsContext> server_tls(const std::string& cert, const std::string& key,
                                                             const std::string& ca);

}  // namespace genie
