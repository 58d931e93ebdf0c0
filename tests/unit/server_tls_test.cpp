// TLS 1.3 between RemoteClient and Server (docs/security.md, "TLS"): a
// throwaway CA, server and client certificates are made with the openssl
// command for each run (no key is kept in the tree). Round trips over TLS,
// refusals (wrong CA, wrong name, missing client certificate, plaintext
// client), and what crosses the wire, captured by a small TCP relay.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "control/auth.hpp"
#include "control/client.hpp"
#include "control/wire.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "genie.pb.h"
#include "server/server.hpp"
#include "server_testing.hpp"
#include "server_tls_testing.hpp"

namespace genie {
namespace {

using tls_testing::hello;
using tls_testing::Pki;
using tls_testing::RawTls;
using tls_testing::stderr_of;

// Relays TCP connections to `target`, keeping a copy of every byte in both
// directions.
class Tap {
 public:
  explicit Tap(int target) : target_(target) {
    lfd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(lfd_, 16) != 0 ||
        ::getsockname(lfd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      ADD_FAILURE() << "tap: " << std::strerror(errno);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { loop(); });
  }
  ~Tap() {
    stop_ = true;
    thread_.join();
    ::close(lfd_);
    for (int fd : fds_) ::close(fd);
  }
  int port() const { return port_; }
  std::string captured() {
    std::lock_guard<std::mutex> lk(mu_);
    return seen_;
  }

 private:
  void loop() {
    std::vector<char> buf(1 << 16);
    while (!stop_) {
      std::vector<pollfd> p{{lfd_, POLLIN, 0}};
      for (int fd : fds_) p.push_back({fd, POLLIN, 0});
      if (::poll(p.data(), p.size(), 20) <= 0) continue;
      if (p[0].revents & POLLIN) {
        const int c = ::accept(lfd_, nullptr, nullptr);
        const int s = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<uint16_t>(target_));
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (c >= 0 && ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
          fds_.push_back(c);
          fds_.push_back(s);
        } else {
          ::close(c);
          ::close(s);
        }
        continue;
      }
      for (size_t i = 1; i < p.size(); ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP))) continue;
        const size_t k = i - 1;
        const int from = fds_[k], to = fds_[k ^ 1];
        const ssize_t n = ::recv(from, buf.data(), buf.size(), 0);
        if (n <= 0) {
          ::shutdown(to, SHUT_WR);
          continue;
        }
        {
          std::lock_guard<std::mutex> lk(mu_);
          seen_.append(buf.data(), static_cast<size_t>(n));
        }
        for (ssize_t off = 0; off < n;) {
          const ssize_t w = ::send(to, buf.data() + off, static_cast<size_t>(n - off), MSG_NOSIGNAL);
          if (w <= 0) break;
          off += w;
        }
      }
    }
  }
  int target_;
  int lfd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::vector<int> fds_;  // client, server, client, server...
  std::mutex mu_;
  std::string seen_;
  std::thread thread_;
};

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    set_log_level(LogLevel::Error);
    if (!pki.ok()) GTEST_SKIP() << "the openssl command is not available to make test certificates";
  }

  std::unique_ptr<Server> start(bool client_certs) {
    ServerOptions o;
    o.port = 0;
    o.num_threads = 2;
    o.node_id = "tls-server";
    o.tls_cert = pki.path("server.pem");
    o.tls_key = pki.path("server.key");
    if (client_certs) o.tls_ca = pki.path("ca.pem");
    return std::make_unique<Server>(o);
  }

  Config client(int port, const std::string& ca = "ca.pem", const std::string& cert = "") {
    Config c;
    c.master_addr = "127.0.0.1";
    c.master_port = port;
    c.timeout_ms = 5000;
    if (!ca.empty()) c.tls_ca = pki.path(ca);
    if (!cert.empty()) {
      c.tls_cert = pki.path(cert + ".pem");
      c.tls_key = pki.path(cert + ".key");
    }
    return c;
  }

  // Writes `n` bytes of a recognisable pattern and reads them back.
  static std::string round_trip(RemoteClient& c, size_t n) {
    std::string src(n, '\0');
    for (size_t i = 0; i < n; ++i) src[i] = "GENIE-SECRET-TENSOR-"[i % 20];
    const uint64_t id = c.tensor_alloc(DType::Bool, {static_cast<int64_t>(n)}, "cpu:0");
    c.tensor_write(id, 0, src.data(), n);
    std::string back(n, '\0');
    c.tensor_read(id, 0, back.data(), n);
    c.tensor_free(id);
    EXPECT_TRUE(back == src);
    return src.substr(0, 200);
  }

  Pki pki;
};

TEST_F(TlsTest, TensorsRoundTripOverTls) {
  auto server = start(false);
  auto c = RemoteClient::connect(client(server->port()), "client-a");
  for (int i = 0; i < 2; ++i)
    for (size_t n : {size_t{1}, size_t{100000}, (size_t{8} << 20) + 5}) round_trip(*c, n);
  EXPECT_GT(c->direct_transfers(), 0u);  // the later ones on the direct link
  EXPECT_EQ(c->server_node_id(), "tls-server");
}

TEST_F(TlsTest, TheWireCarriesNoPlaintext) {
  auto server = start(false);
  {
    Tap tap(server->port());
    auto c = RemoteClient::connect(client(tap.port()), "client-a");
    // Past a session's first synchronous transfers, the direct link
    // (control/client/direct.hpp) carries them: through TLS too.
    std::string pattern;
    for (int i = 0; i < 3; ++i) pattern = round_trip(*c, 1 << 20);
    EXPECT_GT(c->direct_transfers(), 0u);
    c->close();
    const std::string wire = tap.captured();
    EXPECT_GT(wire.size(), size_t{2} << 20);
    EXPECT_EQ(wire.find(pattern.substr(0, 40)), std::string::npos)
        << "tensor bytes crossed the wire in the clear";
    EXPECT_EQ(wire.find("client-a"), std::string::npos) << "the node id crossed the wire in the clear";
  }
  // The same capture without TLS does see the pattern: the check above can fail.
  ServerOptions o;
  o.port = 0;
  o.num_threads = 1;
  Server plain(o);
  Tap tap(plain.port());
  auto c = RemoteClient::connect(client(tap.port(), ""), "client-a");
  const std::string pattern = round_trip(*c, 1 << 20);
  c->close();
  EXPECT_NE(tap.captured().find(pattern.substr(0, 40)), std::string::npos);
}

TEST_F(TlsTest, AServerCertificateFromAnotherCaIsRefused) {
  auto server = start(false);
  const std::string d = expect_error(GENIE_ERR_CONNECTION, [&] {
    RemoteClient::connect(client(server->port(), "other-ca.pem"), "client-a");
  });
  EXPECT_NE(d.find("server's certificate was refused"), std::string::npos) << d;
  EXPECT_NE(d.find("unable to get local issuer certificate"), std::string::npos) << d;
}

TEST_F(TlsTest, AServerCertificateForAnotherNameIsRefused) {
  auto server = start(false);
  Config c = client(server->port());
  c.tls_server_name = "genie.example";
  const std::string d = expect_error(GENIE_ERR_CONNECTION, [&] { RemoteClient::connect(c, "client-a"); });
  EXPECT_NE(d.find("certificate was refused: hostname mismatch"), std::string::npos) << d;
  c.tls_server_name = "localhost";  // the certificate's DNS name
  RemoteClient::connect(c, "client-a")->close();
}

TEST_F(TlsTest, MutualTlsRequiresAClientCertificateFromTheCa) {
  auto server = start(true);
  std::string d =
      expect_error(GENIE_ERR_CONNECTION, [&] { RemoteClient::connect(client(server->port()), "a"); });
  EXPECT_NE(d.find("the server requires a client certificate"), std::string::npos) << d;
  d = expect_error(GENIE_ERR_CONNECTION,
                   [&] { RemoteClient::connect(client(server->port(), "ca.pem", "stranger"), "a"); });
  EXPECT_NE(d.find("TLS"), std::string::npos) << d;
  auto c = RemoteClient::connect(client(server->port(), "ca.pem", "client"), "client-a");
  round_trip(*c, 4096);
  // The direct link presents the same client certificate and joins the
  // session like the data connection.
  for (int i = 0; i < 3; ++i) round_trip(*c, 4096);
  EXPECT_GT(c->direct_transfers(), 0u);
}

TEST_F(TlsTest, APlaintextClientIsToldThatTlsIsRequired) {
  auto server = start(false);
  const std::string d =
      expect_error(GENIE_ERR_AUTH, [&] { RemoteClient::connect(client(server->port(), ""), "a"); });
  EXPECT_NE(d.find("this server requires TLS"), std::string::npos) << d;
}

TEST_F(TlsTest, ATlsClientOfAPlaintextServerFailsClearly) {
  ServerOptions o;
  o.port = 0;
  o.num_threads = 1;
  Server plain(o);
  const std::string d =
      expect_error(GENIE_ERR_CONNECTION, [&] { RemoteClient::connect(client(plain.port()), "a"); });
  EXPECT_NE(d.find("TLS handshake"), std::string::npos) << d;
}

TEST_F(TlsTest, BadFilesAreNamed) {
  ServerOptions o;
  o.port = 0;
  o.tls_cert = pki.path("missing.pem");
  o.tls_key = pki.path("server.key");
  std::string d = expect_error(GENIE_ERR_INVALID_ARGUMENT, [&] { Server s(o); });
  EXPECT_NE(d.find("missing.pem"), std::string::npos) << d;
  o.tls_cert = pki.path("server.pem");
  o.tls_key = pki.path("client.key");
  d = expect_error(GENIE_ERR_INVALID_ARGUMENT, [&] { Server s(o); });
  EXPECT_NE(d.find("client.key"), std::string::npos) << d;
  EXPECT_NE(d.find("mismatch"), std::string::npos) << d;
  Config c = client(1, "");
  c.tls_cert = pki.path("client.pem");
  c.tls_key = pki.path("client.key");
  d = expect_error(GENIE_ERR_INVALID_ARGUMENT, [&] { RemoteClient::connect(c, "a"); });
  EXPECT_NE(d.find("no CA"), std::string::npos) << d;
}

// Under mutual TLS the session belongs to the certificate that opened it:
// the session's secret, proven correctly, does not let another certificate
// of the same CA join it with a data connection or resume it.
TEST_F(TlsTest, ASessionBelongsToTheClientCertificateThatOpenedIt) {
  ServerOptions o;
  o.port = 0;
  o.num_threads = 1;
  o.session_grace_ms = 10000;
  o.tls_cert = pki.path("server.pem");
  o.tls_key = pki.path("server.key");
  o.tls_ca = pki.path("ca.pem");
  Server server(o);
  wire::Welcome w;
  {
    RawTls owner(pki, server.port(), "client");
    owner.send(wire::MsgType::Hello, 1, hello("node-a"));
    w = owner.expect<wire::Welcome>(wire::MsgType::Welcome);
    ASSERT_EQ(w.session_token().size(), 32u);

    RawTls other(pki, server.port(), "client2");
    wire::DataHello dh;
    dh.set_session_id(w.session_id());
    other.send(wire::MsgType::DataHello, 2, dh);
    const auto c = other.expect<wire::Challenge>(wire::MsgType::Challenge);
    wire::AuthResponse r;
    r.set_session_mac(data_proof(w.session_token(), c.nonce(), w.session_id(), "tcp", other.binding()));
    other.send(wire::MsgType::AuthResponse, 3, r);
    const auto e = other.expect<wire::ErrorReply>(wire::MsgType::ErrorReply);
    EXPECT_EQ(e.status(), GENIE_ERR_AUTH);
    EXPECT_NE(e.detail().find("another client certificate"), std::string::npos) << e.detail();
  }  // the owner's connection goes: the session waits for it
  const auto resume = [&](const std::string& cert) {
    auto c = std::make_unique<RawTls>(pki, server.port(), cert);
    c->send(wire::MsgType::Hello, 1, hello("node-a", w.session_id()));
    const auto ch = c->expect<wire::Challenge>(wire::MsgType::Challenge);
    wire::AuthResponse r;
    r.set_session_mac(resume_proof(w.session_token(), ch.nonce(), w.session_id(), "node-a", c->binding()));
    c->send(wire::MsgType::AuthResponse, 2, r);
    return c;
  };
  auto intruder = resume("client2");
  const auto e = intruder->expect<wire::ErrorReply>(wire::MsgType::ErrorReply);
  EXPECT_EQ(e.status(), GENIE_ERR_AUTH);
  EXPECT_NE(e.detail().find("only its owner may resume it"), std::string::npos) << e.detail();
  auto back = resume("client");
  EXPECT_TRUE(back->expect<wire::Welcome>(wire::MsgType::Welcome).resumed());
}

// Beyond loopback a server must authenticate its clients: with a token or
// with client certificates (docs/security.md, "TLS"). TLS without a client
// CA encrypts but admits anyone; a token without TLS is allowed, loudly.
TEST_F(TlsTest, BeyondLoopbackATokenOrClientCertificatesAreRequired) {
  ServerOptions o;
  o.host = "0.0.0.0";
  o.port = 0;
  o.num_threads = 1;
  o.tls_cert = pki.path("server.pem");
  o.tls_key = pki.path("server.key");
  const std::string d = expect_error(GENIE_ERR_INVALID_ARGUMENT, [&] { Server s(o); });
  EXPECT_NE(d.find("TLS without a client CA encrypts but admits anyone"), std::string::npos) << d;
  o.tls_ca = pki.path("ca.pem");  // mutual TLS authenticates
  set_log_level(LogLevel::Warn);
  EXPECT_EQ(stderr_of([&] { Server s(o); }).find("[genie W"), std::string::npos);
  ServerOptions plain;
  plain.host = "0.0.0.0";
  plain.port = 0;
  plain.num_threads = 1;
  plain.auth_token = "a-shared-secret-of-32-bytes-0123";
  const std::string log = stderr_of([&] { Server s(plain); });
  EXPECT_NE(log.find("with an auth token but without TLS"), std::string::npos) << log;
}

}  // namespace
}  // namespace genie
