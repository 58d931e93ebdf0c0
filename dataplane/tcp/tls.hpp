// TLS 1.3 for the TCP transport (OpenSSL 3), as a byte filter: a
// Connection (connection.hpp) hands the bytes it reads to TlsSession::feed
// and gets plaintext back, and turns plaintext into records with
// TlsSession::encrypt; both leave the bytes to send in take_output(). The
// session never touches a socket (memory BIOs), so the connection keeps its
// own reading, writing and closing.
//
// A TlsContext holds the certificates and settings shared by every
// connection of one side: a server's (its certificate and key; with a CA,
// client certificates are required and must chain to it), or a client's (the
// CA that the server's certificate must chain to, the name it must carry,
// and optionally a client certificate). Only TLS 1.3 is offered or accepted.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "genie.h"

struct ssl_ctx_st;
struct ssl_st;

namespace genie::dataplane::tcp {

struct TlsFiles {
  std::string cert;         // PEM certificate (chain) of this side; client: optional
  std::string key;          // PEM private key of `cert`
  std::string ca;           // server: client certificates are required and verified against it;
                            // client: the server's certificate is verified against it (required)
  std::string server_name;  // client: the name (DNS or IP) the server's certificate must carry;
                            // empty: the host connected to
};

class TlsContext {
 public:
  // Loads the files; throws Error(INVALID_ARGUMENT) naming the file and
  // OpenSSL's reason when one cannot be read or the key does not match.
  // `plaintext_refusal`: bytes written to a peer whose first bytes are not
  // a TLS handshake, before closing (e.g. a plaintext protocol error
  // explaining that TLS is required); empty: just close.
  static std::shared_ptr<const TlsContext> server(const TlsFiles& files, std::string plaintext_refusal = {});
  static std::shared_ptr<const TlsContext> client(const TlsFiles& files);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  bool is_server() const { return server_; }
  bool requires_client_cert() const { return server_ && !files_.ca.empty(); }
  const std::string& server_name() const { return files_.server_name; }
  ssl_ctx_st* native() const { return ctx_; }

  const std::string& plaintext_refusal() const { return refusal_; }

 private:
  TlsContext(ssl_ctx_st* ctx, bool server, TlsFiles files);
  ssl_ctx_st* ctx_;
  bool server_;
  TlsFiles files_;
  std::string refusal_;
};

class TlsSession {
 public:
  enum class Result {
    Ok,         // continue (plaintext, if any, appended; output may be waiting)
    Failed,     // the TLS session failed: error() says why; send take_output() (an alert), then close
    Plaintext,  // server: the peer does not speak TLS (its first bytes are not a handshake)
  };

  // `host`: a client's target host, checked against the server's
  // certificate unless the context names another.
  TlsSession(std::shared_ptr<const TlsContext> ctx, const std::string& host);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  // Client: starts the handshake (the ClientHello waits in take_output()).
  void start();
  // Bytes read from the socket; the plaintext they complete is appended to
  // *plain.
  Result feed(const char* data, size_t n, std::string* plain);
  // Plaintext to send, as records appended to the output. Only once
  // handshake_done(). Returns false (error() says why) when OpenSSL fails.
  bool encrypt(const char* data, size_t n);
  // Ciphertext to write to the socket, in order; empties the buffer.
  std::string take_output();

  bool handshake_done() const { return done_; }
  // "sha256:<hex>" of the certificate the peer presented and this side
  // verified; empty when it presented none.
  std::string peer_fingerprint() const;
  // The names the peer's verified certificate gives its subject: "CN:" and
  // each common name, then "URI:" and each subjectAltName URI. Empty when
  // it presented none.
  std::vector<std::string> peer_names() const;
  // The tls-exporter channel binding (RFC 9266): 32 bytes exported with the
  // label "EXPORTER-Channel-Binding" and an empty context, the same on both
  // ends of this TLS connection and on no other. Empty before the handshake
  // is done.
  std::string channel_binding() const;
  // Why the session failed, for a close detail: the certificate check's
  // reason, the peer's alert, or OpenSSL's error.
  const std::string& error() const { return error_; }
  // The status a failure closes the connection with: GENIE_ERR_AUTH for a
  // certificate that was refused (either side), GENIE_ERR_CONNECTION else.
  genie_status_t error_status() const { return error_status_; }

 private:
  Result fail(int ret, const char* what);
  Result pump(std::string* plain);

  std::shared_ptr<const TlsContext> ctx_;
  ssl_st* ssl_ = nullptr;
  bool done_ = false;
  bool first_bytes_ = true;
  std::string error_;
  genie_status_t error_status_ = GENIE_ERR_CONNECTION;
};

}  // namespace genie::dataplane::tcp
