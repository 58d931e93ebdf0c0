// Test helpers for TLS (server_tls_test.cpp, server_tls_identity_test.cpp):
// a throwaway PKI made with the openssl command per run, and a raw TLS
// connection that speaks frames RemoteClient would never send.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>

#include "control/wire.hpp"
#include "genie.pb.h"

namespace genie::tls_testing {

// Certificates for one test run, under a fresh temporary directory.
class Pki {
 public:
  Pki() {
    char tmpl[] = "/tmp/genie-tls-XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    if (d == nullptr) return;
    dir_ = d;
    ok_ = std::system("openssl version >/dev/null 2>&1") == 0 && make_ca("ca") && make_ca("other-ca") &&
          make_cert("server", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost") &&
          // Under mutual TLS a node id must be named by the certificate:
          // its CN, or a URI genie:<node-id>.
          make_cert("client", "ca", "subjectAltName=DNS:client,URI:genie:node-a,URI:genie:client-a") &&
          make_cert("client2", "ca", "subjectAltName=DNS:client2,URI:genie:node-a") &&
          make_cert("worker-w", "ca", "subjectAltName=IP:127.0.0.1") &&
          make_cert("stranger", "other-ca", "subjectAltName=DNS:stranger");
  }
  ~Pki() {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  bool ok() const { return ok_; }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  static bool write(const std::string& file, const std::string& text) {
    std::ofstream f(file);
    f << text;
    return static_cast<bool>(f);
  }
  bool run(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }
  bool make_ca(const std::string& n) {
    return run("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=" + n +
               " -keyout " + path(n + ".key") + " -out " + path(n + ".pem"));
  }
  bool make_cert(const std::string& n, const std::string& ca, const std::string& san) {
    return run("openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=" + n + " -keyout " +
               path(n + ".key") + " -out " + path(n + ".csr")) &&
           write(path(n + ".ext"), san + "\n") &&
           run("openssl x509 -req -days 1 -in " + path(n + ".csr") + " -CA " + path(ca + ".pem") +
               " -CAkey " + path(ca + ".key") + " -CAcreateserial -extfile " + path(n + ".ext") + " -out " +
               path(n + ".pem"));
  }
  std::string dir_;
  bool ok_ = false;
};

// One blocking TLS connection speaking raw frames, with the certificate
// `cert` of the test PKI: for what RemoteClient would never send.
class RawTls {
 public:
  RawTls(const Pki& pki, int port, const std::string& cert) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(ctx_, pki.path("ca.pem").c_str(), nullptr);
    SSL_CTX_use_certificate_file(ctx_, pki.path(cert + ".pem").c_str(), SSL_FILETYPE_PEM);
    SSL_CTX_use_PrivateKey_file(ctx_, pki.path(cert + ".key").c_str(), SSL_FILETYPE_PEM);
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval tv{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ssl_ = SSL_new(ctx_);
    ok_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && SSL_set_fd(ssl_, fd_) == 1 &&
          SSL_connect(ssl_) == 1;
    EXPECT_TRUE(ok_) << "TLS connection with certificate " << cert;
  }
  ~RawTls() {
    SSL_free(ssl_);
    SSL_CTX_free(ctx_);
    ::close(fd_);
  }
  void send(wire::MsgType type, uint64_t rid, const google::protobuf::Message& m) {
    const std::string msg = m.SerializeAsString();
    wire::FrameHeader h;
    h.type = type;
    h.request_id = rid;
    uint8_t hdr[wire::kHeaderSize];
    wire::encode_header(h, msg.data(), msg.size(), hdr);
    const std::string frame = std::string(reinterpret_cast<char*>(hdr), sizeof hdr) + msg;
    ASSERT_EQ(SSL_write(ssl_, frame.data(), static_cast<int>(frame.size())), static_cast<int>(frame.size()));
  }
  // The RFC 9266 tls-exporter value of this connection, as the server's
  // side must compute it too.
  std::string binding() const {
    static const char kLabel[] = "EXPORTER-Channel-Binding";
    std::string out(32, '\0');
    if (SSL_export_keying_material(ssl_, reinterpret_cast<unsigned char*>(out.data()), out.size(), kLabel,
                                   sizeof kLabel - 1, nullptr, 0, 0) != 1)
      ADD_FAILURE() << "SSL_export_keying_material failed";
    return out;
  }
  // The next frame's type and message; type 0 when the connection ended.
  std::pair<wire::MsgType, std::string> recv() {
    uint8_t hdr[wire::kHeaderSize];
    if (!read(hdr, sizeof hdr)) return {wire::MsgType{}, {}};
    const wire::FrameHeader h = wire::decode_header(hdr, 1u << 20);
    std::string msg(h.msg_len, '\0');
    if (!read(msg.data(), msg.size())) return {wire::MsgType{}, {}};
    return {h.type, msg};
  }
  template <class M>
  M expect(wire::MsgType type) {
    auto [t, msg] = recv();
    M m;
    if (t == wire::MsgType::ErrorReply && type != t) {
      wire::ErrorReply e;
      e.ParseFromString(msg);
      ADD_FAILURE() << "ErrorReply " << e.status() << ": " << e.detail();
    }
    EXPECT_EQ(t, type);
    m.ParseFromString(msg);
    return m;
  }

 private:
  bool read(void* p, size_t n) {
    size_t got = 0;
    while (got < n) {
      const int r = SSL_read(ssl_, static_cast<char*>(p) + got, static_cast<int>(n - got));
      if (r <= 0) return false;
      got += static_cast<size_t>(r);
    }
    return true;
  }
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
  bool ok_ = false;
};

inline wire::Hello hello(const std::string& node, uint64_t resume = 0) {
  wire::Hello h;
  h.set_protocol_version(wire::kProtocolVersion);
  h.set_abi_version(GENIE_ABI_VERSION);
  h.set_node_id(node);
  h.set_role(GENIE_NODE_ROLE_CLIENT);
  h.set_resume_session(resume);
  return h;
}

// What the server writes to stderr (its log) while `f` runs.
template <class F>
std::string stderr_of(F&& f) {
  char path[] = "/tmp/genie-tls-log-XXXXXX";
  const int fd = ::mkstemp(path);
  const int saved = ::dup(2);
  ::dup2(fd, 2);
  f();
  ::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(fd);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ::unlink(path);
  return text;
}

}  // namespace genie::tls_testing
