#include "dataplane/tcp/tls.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>

#include "core/error.hpp"

namespace genie::dataplane::tcp {
namespace {

// Plaintext handed to SSL_write at a time: records are 16 KiB anyway, and
// OpenSSL's lengths are ints.
constexpr size_t kEncryptChunk = size_t{1} << 20;
constexpr unsigned char kTlsHandshakeRecord = 0x16;

// OpenSSL's queued errors as one line, emptying the queue.
std::string drain_errors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(e);
    if (!out.empty()) out += "; ";
    out += reason != nullptr ? reason : "unknown OpenSSL error";
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

[[noreturn]] void refuse(SSL_CTX* ctx, const std::string& what, const std::string& file) {
  SSL_CTX_free(ctx);
  fail(GENIE_ERR_INVALID_ARGUMENT, "TLS: cannot use ", what, " '", file, "': ", drain_errors());
}

SSL_CTX* new_context(const SSL_METHOD* method) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(method);
  if (ctx == nullptr) fail(GENIE_ERR_INTERNAL, "TLS: SSL_CTX_new failed: ", drain_errors());
  // TLS 1.3 only: no negotiation down to older versions.
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
  return ctx;
}

void load_own_certificate(SSL_CTX* ctx, const TlsFiles& f) {
  if (SSL_CTX_use_certificate_chain_file(ctx, f.cert.c_str()) != 1) refuse(ctx, "certificate", f.cert);
  if (SSL_CTX_use_PrivateKey_file(ctx, f.key.c_str(), SSL_FILETYPE_PEM) != 1)
    refuse(ctx, "private key", f.key);
  if (SSL_CTX_check_private_key(ctx) != 1)
    refuse(ctx, "private key (it does not match the certificate)", f.key);
}

void load_ca(SSL_CTX* ctx, const std::string& ca) {
  if (SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr) != 1) refuse(ctx, "CA certificate", ca);
}

// Errors that mean a certificate was refused, by this side's check or by
// the peer's alert.
bool is_certificate_refusal(unsigned long e) {
  switch (ERR_GET_REASON(e)) {
    case SSL_R_CERTIFICATE_VERIFY_FAILED:
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
    case SSL_R_TLSV1_ALERT_ACCESS_DENIED: return true;
    default: return false;
  }
}

}  // namespace

TlsContext::TlsContext(SSL_CTX* ctx, bool server, TlsFiles files)
    : ctx_(ctx), server_(server), files_(std::move(files)) {}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

std::shared_ptr<const TlsContext> TlsContext::server(const TlsFiles& f, std::string plaintext_refusal) {
  check(!f.cert.empty() && !f.key.empty(), GENIE_ERR_INVALID_ARGUMENT,
        "TLS: a server needs both a certificate and its private key (--tls-cert and --tls-key)");
  SSL_CTX* ctx = new_context(TLS_server_method());
  load_own_certificate(ctx, f);
  if (!f.ca.empty()) {
    load_ca(ctx, f.ca);
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(f.ca.c_str());
    if (names == nullptr) refuse(ctx, "CA certificate", f.ca);
    SSL_CTX_set_client_CA_list(ctx, names);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  // No resumption tickets: every connection does a full handshake, so a
  // client certificate is checked on each one.
  SSL_CTX_set_num_tickets(ctx, 0);
  auto made = std::shared_ptr<TlsContext>(new TlsContext(ctx, true, f));
  made->refusal_ = std::move(plaintext_refusal);
  return made;
}

std::shared_ptr<const TlsContext> TlsContext::client(const TlsFiles& f) {
  check(!f.ca.empty(), GENIE_ERR_INVALID_ARGUMENT,
        "TLS: a client needs the CA certificate that the server's certificate must chain to "
        "(genie_config_set_tls_ca, GENIE_TLS_CA)");
  check(f.cert.empty() == f.key.empty(), GENIE_ERR_INVALID_ARGUMENT,
        "TLS: a client certificate needs its private key and the other way round "
        "(genie_config_set_tls_cert, GENIE_TLS_CERT and GENIE_TLS_KEY)");
  SSL_CTX* ctx = new_context(TLS_client_method());
  load_ca(ctx, f.ca);
  if (!f.cert.empty()) load_own_certificate(ctx, f);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  return std::shared_ptr<const TlsContext>(new TlsContext(ctx, false, f));
}

TlsSession::TlsSession(std::shared_ptr<const TlsContext> ctx, const std::string& host)
    : ctx_(std::move(ctx)) {
  ssl_ = SSL_new(ctx_->native());
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  if (ssl_ == nullptr || in == nullptr || out == nullptr) {
    BIO_free(in);
    BIO_free(out);
    SSL_free(ssl_);
    genie::fail(GENIE_ERR_INTERNAL, "TLS: cannot create a session: ", drain_errors());
  }
  SSL_set_bio(ssl_, in, out);  // the session owns both
  if (ctx_->is_server()) {
    SSL_set_accept_state(ssl_);
    return;
  }
  SSL_set_connect_state(ssl_);
  std::string name = ctx_->server_name().empty() ? host : ctx_->server_name();
  if (name.size() >= 2 && name.front() == '[' && name.back() == ']') name = name.substr(1, name.size() - 2);
  // An address is checked against the certificate's IP entries, a name
  // against its DNS entries (and sent as SNI).
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl_);
  if (X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str()) != 1) {
    ERR_clear_error();
    if (SSL_set1_host(ssl_, name.c_str()) != 1 || SSL_set_tlsext_host_name(ssl_, name.c_str()) != 1) {
      SSL_free(ssl_);
      genie::fail(GENIE_ERR_INVALID_ARGUMENT, "TLS: cannot check the server's certificate for the name '",
                  name, "': ", drain_errors());
    }
  }
}

TlsSession::~TlsSession() { SSL_free(ssl_); }

void TlsSession::start() { (void)pump(nullptr); }

TlsSession::Result TlsSession::fail(int ret, const char* what) {
  const int err = SSL_get_error(ssl_, ret);
  const unsigned long first = ERR_peek_error();
  if (err == SSL_ERROR_ZERO_RETURN) {
    error_ = "the peer closed the TLS session";
  } else if (ERR_GET_REASON(first) == SSL_R_CERTIFICATE_VERIFY_FAILED &&
             SSL_get_verify_result(ssl_) != X509_V_OK) {
    error_ = cat("the ", ctx_->is_server() ? "client's" : "server's",
                 " certificate was refused: ", X509_verify_cert_error_string(SSL_get_verify_result(ssl_)));
  } else {
    error_ = cat(what, ": ", drain_errors());
  }
  if (first != 0 && is_certificate_refusal(first)) error_status_ = GENIE_ERR_AUTH;
  if (ctx_->is_server() && ctx_->requires_client_cert() &&
      ERR_GET_REASON(first) == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE)
    error_ = "the client sent no certificate, and this server requires one (mutual TLS)";
  if (!ctx_->is_server() && ERR_GET_REASON(first) == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED)
    error_ =
        "the server requires a client certificate (mutual TLS): set one with genie_config_set_tls_cert "
        "(GENIE_TLS_CERT, GENIE_TLS_KEY)";
  ERR_clear_error();
  error_ = cat("TLS: ", error_);
  return Result::Failed;
}

TlsSession::Result TlsSession::pump(std::string* plain) {
  ERR_clear_error();
  if (!done_) {
    const int r = SSL_do_handshake(ssl_);
    if (r != 1) {
      if (SSL_get_error(ssl_, r) == SSL_ERROR_WANT_READ) return Result::Ok;
      return fail(r, "handshake failed");
    }
    done_ = true;
  }
  if (plain == nullptr) return Result::Ok;
  char buf[16 << 10];
  for (;;) {
    size_t n = 0;
    const int r = SSL_read_ex(ssl_, buf, sizeof buf, &n);
    if (r == 1) {
      plain->append(buf, n);
      continue;
    }
    if (SSL_get_error(ssl_, r) == SSL_ERROR_WANT_READ) return Result::Ok;
    return fail(r, "cannot decrypt what the peer sent");
  }
}

TlsSession::Result TlsSession::feed(const char* data, size_t n, std::string* plain) {
  if (n == 0) return Result::Ok;
  if (first_bytes_ && ctx_->is_server() && static_cast<unsigned char>(data[0]) != kTlsHandshakeRecord)
    return Result::Plaintext;
  first_bytes_ = false;
  if (BIO_write(SSL_get_rbio(ssl_), data, static_cast<int>(n)) != static_cast<int>(n)) {
    error_ = cat("TLS: cannot buffer ", n, " bytes: ", drain_errors());
    return Result::Failed;
  }
  return pump(plain);
}

bool TlsSession::encrypt(const char* data, size_t n) {
  ERR_clear_error();
  while (n > 0) {
    const size_t k = std::min(n, kEncryptChunk);
    size_t written = 0;
    if (SSL_write_ex(ssl_, data, k, &written) != 1 || written != k) {
      (void)fail(0, "cannot encrypt");
      return false;
    }
    data += k;
    n -= k;
  }
  return true;
}

std::string TlsSession::peer_fingerprint() const {
  if (!done_) return {};
  X509* cert = SSL_get0_peer_certificate(ssl_);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (cert == nullptr || X509_digest(cert, EVP_sha256(), md, &len) != 1) return {};
  static const char hex[] = "0123456789abcdef";
  std::string s = "sha256:";
  for (unsigned int i = 0; i < len; ++i) {
    s.push_back(hex[md[i] >> 4]);
    s.push_back(hex[md[i] & 15]);
  }
  return s;
}

std::vector<std::string> TlsSession::peer_names() const {
  std::vector<std::string> names;
  X509* cert = done_ ? SSL_get0_peer_certificate(ssl_) : nullptr;
  if (cert == nullptr) return names;
  const auto text = [](const ASN1_STRING* s) {
    return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                       static_cast<size_t>(ASN1_STRING_length(s)));
  };
  X509_NAME* subject = X509_get_subject_name(cert);
  for (int i = X509_NAME_get_index_by_NID(subject, NID_commonName, -1); i >= 0;
       i = X509_NAME_get_index_by_NID(subject, NID_commonName, i))
    names.push_back("CN:" + text(X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i))));
  auto* alt = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; alt != nullptr && i < sk_GENERAL_NAME_num(alt); ++i) {
    const GENERAL_NAME* g = sk_GENERAL_NAME_value(alt, i);
    if (g->type == GEN_URI) names.push_back("URI:" + text(g->d.uniformResourceIdentifier));
  }
  GENERAL_NAMES_free(alt);
  return names;
}

std::string TlsSession::channel_binding() const {
  if (!done_) return {};
  static const char kLabel[] = "EXPORTER-Channel-Binding";
  std::string out(32, '\0');
  if (SSL_export_keying_material(ssl_, reinterpret_cast<unsigned char*>(out.data()), out.size(), kLabel,
                                 sizeof kLabel - 1, nullptr, 0, 0) != 1) {
    ERR_clear_error();
    return {};
  }
  return out;
}

std::string TlsSession::take_output() {
  BIO* out = SSL_get_wbio(ssl_);
  const size_t pending = BIO_ctrl_pending(out);
  std::string bytes(pending, '\0');
  if (pending > 0) {
    const int r = BIO_read(out, bytes.data(), static_cast<int>(pending));
    bytes.resize(r > 0 ? static_cast<size_t>(r) : 0);
  }
  return bytes;
}

}  // namespace genie::dataplane::tcp
