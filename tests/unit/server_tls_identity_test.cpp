// Identity and channel binding under TLS (docs/security.md, "TLS" and
// "Sessions"): under mutual TLS a node id must be named by the client
// certificate (its CN or a URI genie:<node-id>); and every answer to a
// challenge covers the TLS connection's tls-exporter value (RFC 9266), so
// an answer relayed from another TLS connection is refused.
#include <gtest/gtest.h>

#include <memory>
#include <string>

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

const char kToken[] = "a-shared-secret-of-32-bytes-0123";

class TlsIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    set_log_level(LogLevel::Error);
    if (!pki.ok()) GTEST_SKIP() << "the openssl command is not available to make test certificates";
  }

  ServerOptions options(bool client_certs) const {
    ServerOptions o;
    o.port = 0;
    o.num_threads = 1;
    o.node_id = "tls-server";
    o.tls_cert = pki.path("server.pem");
    o.tls_key = pki.path("server.key");
    if (client_certs) o.tls_ca = pki.path("ca.pem");
    return o;
  }

  Config client(int port, const std::string& cert) const {
    Config c;
    c.master_addr = "127.0.0.1";
    c.master_port = port;
    c.timeout_ms = 5000;
    c.tls_ca = pki.path("ca.pem");
    if (!cert.empty()) {
      c.tls_cert = pki.path(cert + ".pem");
      c.tls_key = pki.path(cert + ".key");
    }
    return c;
  }

  // A Hello of `node` (with `role`) over a raw TLS connection presenting
  // `cert`: the reply's type and message.
  std::pair<wire::MsgType, std::string> say_hello(int port, const std::string& cert, const std::string& node,
                                                  genie_node_role_t role = GENIE_NODE_ROLE_CLIENT) {
    RawTls c(pki, port, cert);
    wire::Hello h = hello(node);
    h.set_role(role);
    c.send(wire::MsgType::Hello, 1, h);
    return c.recv();
  }

  Pki pki;
};

wire::ErrorReply as_error(const std::pair<wire::MsgType, std::string>& reply) {
  EXPECT_EQ(reply.first, wire::MsgType::ErrorReply);
  wire::ErrorReply e;
  e.ParseFromString(reply.second);
  return e;
}

TEST_F(TlsIdentityTest, UnderMutualTlsANodeIdIsTheCertificates) {
  Server server(options(true));
  // The certificate "client" names CN client, URIs genie:node-a and genie:client-a.
  EXPECT_EQ(say_hello(server.port(), "client", "client").first, wire::MsgType::Welcome);
  EXPECT_EQ(say_hello(server.port(), "client", "node-a").first, wire::MsgType::Welcome);
  for (const char* claimed : {"worker-w", "node-b", "client2", "node-a.b"}) {
    const wire::ErrorReply e = as_error(say_hello(server.port(), "client", claimed, GENIE_NODE_ROLE_WORKER));
    EXPECT_EQ(e.status(), GENIE_ERR_AUTH) << claimed;
    EXPECT_NE(e.detail().find("is not named by the client certificate (CN:client, URI:genie:node-a"),
              std::string::npos)
        << e.detail();
  }
  // The worker's own certificate (CN worker-w) claims its id.
  EXPECT_EQ(say_hello(server.port(), "worker-w", "worker-w", GENIE_NODE_ROLE_WORKER).first,
            wire::MsgType::Welcome);
  // The client library: the same refusal, as an error naming the reason.
  const std::string d = expect_error(
      GENIE_ERR_AUTH, [&] { RemoteClient::connect(client(server.port(), "client"), "worker-w"); });
  EXPECT_NE(d.find("is not named by the client certificate"), std::string::npos) << d;
  RemoteClient::connect(client(server.port(), "client"), "client-a")->close();
}

TEST_F(TlsIdentityTest, WithoutClientCertificatesTheNodeIdIsNotChecked) {
  Server server(options(false));
  EXPECT_EQ(say_hello(server.port(), "", "any-node").first, wire::MsgType::Welcome);
  RemoteClient::connect(client(server.port(), ""), "worker-w")->close();
}

// A source that keeps claiming ids its certificate does not name is backed
// off like any failed authentication, and the log says so at a bounded rate.
TEST_F(TlsIdentityTest, RepeatedMismatchesBackOffAndAreLogged) {
  set_log_level(LogLevel::Warn);
  std::string last;
  const std::string log = stderr_of([&] {
    Server server(options(true));
    for (int i = 0; i < 6; ++i) as_error(say_hello(server.port(), "client", "worker-w"));
    // Now refused before any handshake, even with a name that matches.
    RawTls c(pki, server.port(), "client");
    c.send(wire::MsgType::Hello, 1, hello("client"));
    const auto reply = c.recv();
    if (reply.first == wire::MsgType::ErrorReply) last = as_error(reply).detail();
  });
  EXPECT_NE(log.find("is not named by the client certificate"), std::string::npos) << log;
  EXPECT_NE(log.find("repeated failed authentications from 127.0.0.1"), std::string::npos) << log;
  EXPECT_NE(last.find("failed authentications from 127.0.0.1"), std::string::npos) << last;
}

// A relay that terminates TLS on both sides (with certificates the peers
// accept) passes the server's challenge to the real client and its answer
// back. The answer covers the client's TLS connection, not the relay's, so
// the server refuses it; the same answer computed for the relay's own
// connection is accepted, so the refusal is the binding's doing.
TEST_F(TlsIdentityTest, AnAnswerRelayedFromAnotherTlsConnectionIsRefused) {
  ServerOptions o = options(false);
  o.auth_token = kToken;
  Server server(o);

  // The token proof of a Hello.
  {
    RawTls victim(pki, server.port(), "");  // the real client's connection (to the relay)
    RawTls relay(pki, server.port(), "");
    ASSERT_NE(victim.binding(), relay.binding());
    ASSERT_EQ(relay.binding().size(), 32u);
    relay.send(wire::MsgType::Hello, 1, hello("node-a"));
    const auto c = relay.expect<wire::Challenge>(wire::MsgType::Challenge);
    wire::AuthResponse r;
    r.set_mac(token_proof(kToken, c.nonce(), "node-a", victim.binding()));
    relay.send(wire::MsgType::AuthResponse, 2, r);
    EXPECT_EQ(relay.expect<wire::ErrorReply>(wire::MsgType::ErrorReply).status(), GENIE_ERR_AUTH);
  }
  {
    RawTls relay(pki, server.port(), "");
    relay.send(wire::MsgType::Hello, 1, hello("node-a"));
    const auto c = relay.expect<wire::Challenge>(wire::MsgType::Challenge);
    wire::AuthResponse r;
    r.set_mac(token_proof(kToken, c.nonce(), "node-a", ""));  // unbound, as before channel binding
    relay.send(wire::MsgType::AuthResponse, 2, r);
    EXPECT_EQ(relay.expect<wire::ErrorReply>(wire::MsgType::ErrorReply).status(), GENIE_ERR_AUTH);
  }

  // A session's owner, then a data connection joining it.
  RawTls owner(pki, server.port(), "");
  owner.send(wire::MsgType::Hello, 1, hello("node-a"));
  const auto oc = owner.expect<wire::Challenge>(wire::MsgType::Challenge);
  wire::AuthResponse ar;
  ar.set_mac(token_proof(kToken, oc.nonce(), "node-a", owner.binding()));
  owner.send(wire::MsgType::AuthResponse, 2, ar);
  const auto w = owner.expect<wire::Welcome>(wire::MsgType::Welcome);
  ASSERT_EQ(w.session_token().size(), 32u);

  const auto join = [&](const std::string& binding_of) {
    RawTls victim(pki, server.port(), "");
    RawTls relay(pki, server.port(), "");
    wire::DataHello dh;
    dh.set_session_id(w.session_id());
    relay.send(wire::MsgType::DataHello, 3, dh);
    const auto c = relay.expect<wire::Challenge>(wire::MsgType::Challenge);
    const std::string binding = binding_of == "victim"  ? victim.binding()
                                : binding_of == "relay" ? relay.binding()
                                                        : "";
    wire::AuthResponse r;
    r.set_session_mac(data_proof(w.session_token(), c.nonce(), w.session_id(), "tcp", binding));
    relay.send(wire::MsgType::AuthResponse, 4, r);
    return relay.recv();
  };
  for (const char* relayed : {"victim", "none"}) {
    const wire::ErrorReply e = as_error(join(relayed));
    EXPECT_EQ(e.status(), GENIE_ERR_AUTH) << relayed;
    EXPECT_NE(e.detail().find("does not prove it holds the secret"), std::string::npos) << e.detail();
  }
  EXPECT_EQ(join("relay").first, wire::MsgType::Welcome);
}

// RemoteClient binds its answers too: over mutual TLS with a token it opens
// a session and joins it with a data connection.
TEST_F(TlsIdentityTest, TheClientBindsItsAnswersToItsConnections) {
  ServerOptions o = options(true);
  o.auth_token = kToken;
  Server server(o);
  Config c = client(server.port(), "client");
  c.auth_token = kToken;
  auto rc = RemoteClient::connect(c, "node-a");
  const std::string x = "bound to this connection";
  const uint64_t id = rc->tensor_alloc(DType::Bool, {static_cast<int64_t>(x.size())}, "cpu:0");
  rc->tensor_write(id, 0, x.data(), x.size());
  std::string y(x.size(), '\0');
  rc->tensor_read(id, 0, y.data(), y.size());
  EXPECT_EQ(y, x);
}

}  // namespace
}  // namespace genie
