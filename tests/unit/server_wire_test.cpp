// The server (src/server/) driven by a raw blocking-socket client
// that writes frames byte by byte, so tests can send exactly what a broken
// or hostile client would.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "control/wire.hpp"
#include "core/log.hpp"
#include "core/trace.hpp"
#include "genie.pb.h"
#include "graph/delta.hpp"
#include "graph/graph.hpp"
#include "server/master.hpp"
#include "server/server.hpp"
#include "server_testing.hpp"
#include "server_tls_testing.hpp"

namespace genie {
namespace {

using tls_testing::hello;
const char kClient[] = "test-client";

using wire::MsgType;
using Clock = std::chrono::steady_clock;

struct Frame {
  wire::FrameHeader h;
  std::string msg;
  std::string payload;
  bool is_error() const { return (h.flags & wire::kFlagError) != 0 && h.type == MsgType::ErrorReply; }
  template <class M>
  M as() const {
    M m;
    EXPECT_TRUE(m.ParseFromString(msg)) << "a " << wire::type_name(h.type) << " frame";
    return m;
  }
  wire::ErrorReply error() const {
    EXPECT_TRUE(is_error()) << "expected an ErrorReply, got " << wire::type_name(h.type);
    return as<wire::ErrorReply>();
  }
};

// One TCP connection to the server, blocking, with a receive timeout.
class Raw {
 public:
  // `rcvbuf` > 0: that receive buffer (set before connecting), so that a
  // test that stops reading stalls the server's writes early. `from`: the
  // loopback address to connect from (127.0.0.2, ...: another source).
  explicit Raw(int port, int rcvbuf = 0, const char* from = nullptr) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    if (from != nullptr) {
      sockaddr_in b{};
      b.sin_family = AF_INET;
      ::inet_pton(AF_INET, from, &b.sin_addr);
      if (::bind(fd_, reinterpret_cast<sockaddr*>(&b), sizeof b) != 0)
        ADD_FAILURE() << "bind " << from << ": " << std::strerror(errno);
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ADD_FAILURE() << "connect: " << std::strerror(errno);
      ::close(fd_);
      fd_ = -1;
      return;
    }
    const int one = 1;  // a header and its payload go out at once, as a real client's writev
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~Raw() { close(); }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  void send_bytes(const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      const ssize_t w = ::send(fd_, c, n, MSG_NOSIGNAL);
      if (w <= 0) return;  // the server may have closed: the test checks replies
      c += w;
      n -= static_cast<size_t>(w);
    }
  }

  // A well-formed frame.
  void send(MsgType type, uint64_t rid, const google::protobuf::Message& m, const std::string& payload = "",
            std::optional<uint64_t> payload_len = std::nullopt) {
    const std::string frame = encode(type, rid, m, payload_len.value_or(payload.size()));
    send_bytes(frame.data(), frame.size());
    send_bytes(payload.data(), payload.size());
  }

  static std::string encode(MsgType type, uint64_t rid, const google::protobuf::Message& m,
                            uint64_t payload_len = 0) {
    const std::string msg = m.SerializeAsString();
    wire::FrameHeader h;
    h.type = type;
    h.request_id = rid;
    h.payload_len = payload_len;
    uint8_t hdr[wire::kHeaderSize];
    wire::encode_header(h, msg.data(), msg.size(), hdr);
    return std::string(reinterpret_cast<char*>(hdr), sizeof hdr) + msg;
  }

  // The next frame, or nullopt when the server closed the connection (or
  // nothing came within the timeout: `timed_out` tells which).
  std::optional<Frame> recv(int timeout_ms = 10000) {
    timed_out_ = false;
    uint8_t hdr[wire::kHeaderSize];
    if (!read_exact(hdr, sizeof hdr, timeout_ms)) return std::nullopt;
    Frame f;
    f.h = wire::decode_header(hdr, 1u << 30);
    f.msg.resize(f.h.msg_len);
    if (!read_exact(f.msg.data(), f.msg.size(), timeout_ms)) return std::nullopt;
    wire::verify_crc(hdr, f.msg.data(), f.msg.size());
    f.payload.resize(f.h.payload_len);
    if (!read_exact(f.payload.data(), f.payload.size(), timeout_ms)) return std::nullopt;
    return f;
  }

  // Waits for the reply to `rid` (skipping nothing: replies come in order).
  Frame reply(uint64_t rid, int timeout_ms = 10000) {
    auto f = recv(timeout_ms);
    if (!f) {
      ADD_FAILURE() << (timed_out_ ? "no reply within the timeout" : "the server closed the connection");
      return Frame{};
    }
    EXPECT_EQ(f->h.request_id, rid) << wire::type_name(f->h.type);
    return *f;
  }

  // Whether anything has arrived that was not read yet (a reply, or EOF).
  bool readable() const {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }

  // True once the server has closed the connection (EOF or reset), reading
  // and dropping whatever frames come first.
  bool closed_by_server(int timeout_ms = 5000) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    char buf[4096];
    while (Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const ssize_t r = ::recv(fd_, buf, sizeof buf, 0);
      if (r <= 0) return true;
    }
    return false;
  }

  bool timed_out() const { return timed_out_; }

 private:
  bool read_exact(void* p, size_t n, int timeout_ms) {
    char* c = static_cast<char*>(p);
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (n > 0) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      pollfd pf{fd_, POLLIN, 0};
      if (left <= 0 || ::poll(&pf, 1, static_cast<int>(left)) <= 0) {
        timed_out_ = true;
        return false;
      }
      const ssize_t r = ::recv(fd_, c, n, 0);
      if (r <= 0) return false;
      c += r;
      n -= static_cast<size_t>(r);
    }
    return true;
  }

  int fd_ = -1;
  bool timed_out_ = false;
};

std::string hmac(const std::string& key, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

// The proofs of a session's secret (docs/protocol.md, "Sessions"), written
// out here from the specification rather than taken from the server's code.
std::string proof(const char* label, const std::string& secret, const std::string& nonce, uint64_t id,
                  const std::string& extra) {
  std::string s = label;
  s.push_back('\0');
  s += nonce;
  for (int i = 7; i >= 0; --i) s.push_back(static_cast<char>(id >> (8 * i)));
  s.push_back(static_cast<char>(extra.size()));
  s += extra;
  return hmac(secret, s);
}

// Runs the control handshake (no authentication) and returns the Welcome;
// with `resume`, resumes that session (answering the challenge as `node`).
wire::Welcome handshake(Raw& c, const wire::Welcome* resume = nullptr,
                        const std::string& node = "test-client") {
  c.send(MsgType::Hello, 1, hello(node, resume ? resume->session_id() : 0));
  Frame f = c.reply(1);
  if (resume != nullptr && f.h.type == MsgType::Challenge) {
    wire::AuthResponse r;
    r.set_session_mac(proof("genie session resumption v3", resume->session_token(),
                            f.as<wire::Challenge>().nonce(), resume->session_id(), node));
    c.send(MsgType::AuthResponse, 3, r);
    f = c.reply(3);
  }
  EXPECT_EQ(f.h.type, MsgType::Welcome) << (f.is_error() ? f.error().detail() : "");
  return f.as<wire::Welcome>();
}

// The challenge of a data connection for session `w`: its nonce.
std::string data_challenge(Raw& c, const wire::Welcome& w) {
  wire::DataHello d;
  d.set_session_id(w.session_id());
  c.send(MsgType::DataHello, 2, d);
  Frame f = c.reply(2);
  EXPECT_EQ(f.h.type, MsgType::Challenge) << (f.is_error() ? f.error().detail() : "");
  return f.as<wire::Challenge>().nonce();
}

// Opens a data connection of the session `w` (its control Welcome).
void data_handshake(Raw& c, const wire::Welcome& w) {
  wire::AuthResponse r;
  r.set_session_mac(
      proof("genie data connection v3", w.session_token(), data_challenge(c, w), w.session_id(), "tcp"));
  c.send(MsgType::AuthResponse, 3, r);
  Frame f = c.reply(3);
  ASSERT_EQ(f.h.type, MsgType::Welcome) << (f.is_error() ? f.error().detail() : "");
  EXPECT_EQ(f.as<wire::Welcome>().session_id(), w.session_id());
  EXPECT_TRUE(f.as<wire::Welcome>().session_token().empty()) << "the secret went over a data connection";
}

Frame alloc_frame(Raw& c, uint64_t rid, int32_t dtype, const Shape& shape,
                  const std::string& device = "cpu:0") {
  wire::TensorAlloc a;
  a.set_dtype(dtype);
  for (int64_t d : shape) a.add_shape(d);
  a.set_device(device);
  c.send(MsgType::TensorAlloc, rid, a);
  return c.reply(rid);
}

uint64_t alloc(Raw& c, const Shape& shape, int32_t dtype = GENIE_DTYPE_F32) {
  Frame f = alloc_frame(c, 100, dtype, shape);
  EXPECT_EQ(f.h.type, MsgType::TensorAllocReply) << (f.is_error() ? f.error().detail() : "");
  return f.as<wire::TensorAllocReply>().tensor_id();
}

Frame write(Raw& c, uint64_t id, uint64_t offset, const std::string& bytes, uint64_t rid = 200) {
  wire::TensorWrite w;
  w.set_tensor_id(id);
  w.set_offset(offset);
  c.send(MsgType::TensorWrite, rid, w, bytes);
  return c.reply(rid);
}

Frame read(Raw& c, uint64_t id, uint64_t offset, uint64_t nbytes, uint64_t rid = 300) {
  wire::TensorRead r;
  r.set_tensor_id(id);
  r.set_offset(offset);
  r.set_nbytes(nbytes);
  c.send(MsgType::TensorRead, rid, r);
  return c.reply(rid);
}

std::string floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

std::vector<float> to_floats(const std::string& s) {
  std::vector<float> v(s.size() / sizeof(float));
  std::memcpy(v.data(), s.data(), v.size() * sizeof(float));
  return v;
}

// Polls `cond` until it holds or `ms` pass.
bool eventually(const std::function<bool()>& cond, int ms = 5000) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
  while (Clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

// c = a + b, d = c * b over f32 [2, 3].
std::string add_mul_graph() {
  Graph g("add_mul");
  g.add_input("a", DType::F32, {2, 3});
  g.add_input("b", DType::F32, {-1, 3});
  g.add_node("add", "n_add", {"a", "b"}, {"c"});
  g.add_node("mul", "n_mul", {"c", "b"}, {"d"});
  g.mark_output("c");
  g.mark_output("d");
  return graph_to_json(g);
}

wire::GraphSubmit submit_msg(const std::string& json,
                             const std::vector<std::pair<std::string, uint64_t>>& b) {
  wire::GraphSubmit s;
  s.set_graph_json(json);
  for (const auto& [name, id] : b) {
    wire::Binding* x = s.add_bindings();
    x->set_name(name);
    x->set_tensor_id(id);
  }
  return s;
}

ServerOptions options() {
  ServerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.num_threads = 2;
  o.node_id = "test-server";
  return o;
}

class ControlServer : public ::testing::Test {
 protected:
  // Refusals are logged at WARN by design; GENIE_TEST_LOG=1 shows them.
  void SetUp() override { set_log_level(std::getenv("GENIE_TEST_LOG") ? LogLevel::Debug : LogLevel::Error); }
};

// ---------------------------------------------------------------------------

TEST_F(ControlServer, HandshakeWelcomesANewSession) {
  Server server(options());
  ASSERT_GT(server.port(), 0);
  Raw c(server.port());
  const wire::Welcome w = handshake(c);
  EXPECT_EQ(w.session_token().size(), 32u);
  EXPECT_EQ(w.server_node_id(), "test-server");
  EXPECT_EQ(w.protocol_version(), wire::kProtocolVersion);
  EXPECT_EQ(w.abi_version(), static_cast<uint32_t>(GENIE_ABI_VERSION));
  ASSERT_EQ(w.devices_size(), 1);
  EXPECT_EQ(w.devices(0), "cpu:0");
  EXPECT_FALSE(w.resumed());
  EXPECT_EQ(server.stats().sessions(), 1u);

  Raw c2(server.port());
  EXPECT_NE(handshake(c2).session_token(), w.session_token());
  EXPECT_EQ(server.stats().sessions(), 2u);

  c.send(MsgType::ServerInfoRequest, 9, wire::ServerInfoRequest());
  const Frame f = c.reply(9);
  ASSERT_EQ(f.h.type, MsgType::ServerInfo);
  const auto info = f.as<wire::ServerInfo>();
  EXPECT_EQ(info.node_id(), "test-server");
  EXPECT_EQ(info.sessions(), 2u);
  EXPECT_EQ(info.connections_refused(), 0u);
}

TEST_F(ControlServer, BindFailureNamesTheAddress) {
  Server first(options());
  ServerOptions o = options();
  o.port = first.port();
  try {
    Server second(o);
    FAIL() << "a second server bound the same port";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), GENIE_ERR_IO);
    EXPECT_NE(e.detail().find("127.0.0.1:" + std::to_string(first.port())), std::string::npos) << e.detail();
    EXPECT_NE(e.detail().find("in use"), std::string::npos) << e.detail();
  }
}

TEST_F(ControlServer, VersionMismatchIsRefusedNamingBothVersions) {
  Server server(options());
  {
    Raw c(server.port());
    wire::Hello h = hello(kClient);
    h.set_protocol_version(99);
    c.send(MsgType::Hello, 1, h);
    const Frame f = c.reply(1);
    const auto e = f.error();
    EXPECT_EQ(e.status(), GENIE_ERR_VERSION_MISMATCH);
    EXPECT_NE(e.detail().find("protocol 99"), std::string::npos) << e.detail();
    EXPECT_NE(e.detail().find("protocol " + std::to_string(wire::kProtocolVersion)), std::string::npos)
        << e.detail();
    EXPECT_TRUE(c.closed_by_server());
  }
  {
    Raw c(server.port());
    wire::Hello h = hello(kClient);
    h.set_abi_version(GENIE_ABI_VERSION + 6);
    c.send(MsgType::Hello, 1, h);
    const auto e = c.reply(1).error();
    EXPECT_EQ(e.status(), GENIE_ERR_VERSION_MISMATCH);
    EXPECT_NE(e.detail().find("ABI " + std::to_string(GENIE_ABI_VERSION + 6)), std::string::npos)
        << e.detail();
    EXPECT_NE(e.detail().find("ABI " + std::to_string(GENIE_ABI_VERSION)), std::string::npos) << e.detail();
    EXPECT_TRUE(c.closed_by_server());
  }
  EXPECT_TRUE(eventually([&] { return server.stats().connections_refused() == 2; }));
  EXPECT_EQ(server.stats().sessions(), 0u);
}

TEST_F(ControlServer, AnythingButHelloFirstIsAProtocolError) {
  Server server(options());
  Raw c(server.port());
  wire::TensorAlloc a;
  a.set_dtype(GENIE_DTYPE_F32);
  c.send(MsgType::TensorAlloc, 5, a);
  const auto e = c.reply(5).error();
  EXPECT_EQ(e.status(), GENIE_ERR_PROTOCOL);
  EXPECT_NE(e.detail().find("TensorAlloc"), std::string::npos) << e.detail();
  EXPECT_TRUE(c.closed_by_server());
  EXPECT_EQ(server.stats().sessions(), 0u);

  // A node id that could smuggle control characters into the log.
  Raw c2(server.port());
  wire::Hello h = hello(kClient);
  h.set_node_id("evil\n[genie E] forged");
  c2.send(MsgType::Hello, 6, h);
  EXPECT_EQ(c2.reply(6).error().status(), GENIE_ERR_PROTOCOL);
  EXPECT_TRUE(c2.closed_by_server());
  EXPECT_TRUE(eventually([&] { return server.stats().connections_refused() == 2; }));
}

TEST_F(ControlServer, AuthenticationByChallengeResponse) {
  ServerOptions o = options();
  o.auth_token = "s3cret-token-0123456";
  o.handshake_timeout_ms = 300;
  Server server(o);

  auto challenge = [&](Raw& c) {
    c.send(MsgType::Hello, 1, hello(kClient));
    const Frame f = c.reply(1);
    EXPECT_EQ(f.h.type, MsgType::Challenge);
    const std::string nonce = f.as<wire::Challenge>().nonce();
    EXPECT_EQ(nonce.size(), 32u);
    return nonce;
  };
  {  // the right token
    Raw c(server.port());
    wire::AuthResponse r;
    r.set_mac(hmac("s3cret-token-0123456", challenge(c) + "test-client"));
    c.send(MsgType::AuthResponse, 2, r);
    const Frame f = c.reply(2);
    ASSERT_EQ(f.h.type, MsgType::Welcome) << (f.is_error() ? f.error().detail() : "");
    EXPECT_EQ(f.as<wire::Welcome>().session_token().size(), 32u);
    EXPECT_NE(alloc(c, {4}), 0u);  // the session works
  }
  {  // a wrong token
    Raw c(server.port());
    wire::AuthResponse r;
    r.set_mac(hmac("guess", challenge(c) + "test-client"));
    c.send(MsgType::AuthResponse, 2, r);
    const auto e = c.reply(2).error();
    EXPECT_EQ(e.status(), GENIE_ERR_AUTH);
    EXPECT_TRUE(c.closed_by_server());
  }
  {  // the right token for another nonce (a replayed response)
    Raw c(server.port());
    challenge(c);
    wire::AuthResponse r;
    r.set_mac(hmac("s3cret-token-0123456", std::string(32, 'x') + "test-client"));
    c.send(MsgType::AuthResponse, 2, r);
    EXPECT_EQ(c.reply(2).error().status(), GENIE_ERR_AUTH);
    EXPECT_TRUE(c.closed_by_server());
  }
  {  // no response: closed by the handshake timeout
    Raw c(server.port());
    challenge(c);
    const auto t0 = Clock::now();
    EXPECT_TRUE(c.closed_by_server(5000));
    EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(200));
  }
  {  // a connection that never says anything
    Raw c(server.port());
    EXPECT_TRUE(c.closed_by_server(5000));
  }
  EXPECT_TRUE(eventually([&] { return server.stats().connections_refused() == 4; }))
      << server.stats().connections_refused();
  EXPECT_TRUE(eventually([&] { return server.stats().sessions() == 1; }));
}

// Peers without the token, from several addresses, hold every connection
// slot they can: they never hold more than the handshake limit, and a
// client that completes its handshake always gets in.
TEST_F(ControlServer, IdleHandshakesFromManyAddressesLeaveRoomForAClient) {
  ServerOptions o = options();
  o.max_connections = 64;  // handshakes: at most a quarter, 16
  Server server(o);
  const char* sources[] = {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"};
  std::vector<std::unique_ptr<Raw>> idle;
  auto flood = [&] {  // 64 more, as many as the server takes connections
    for (int i = 0; i < 64; ++i) idle.push_back(std::make_unique<Raw>(server.port(), 0, sources[i % 4]));
  };
  int ok = 0;
  constexpr int kTries = 10;
  for (int t = 0; t < kTries; ++t) {
    flood();
    Raw c(server.port());
    c.send(MsgType::Hello, 1, hello(kClient));
    const auto f = c.recv(5000);
    if (f && f->h.type == MsgType::Welcome) ++ok;
  }
  std::printf(
      "a client completed its handshake %d of %d times with %zu idle connections from 4 other "
      "addresses against a limit of 64\n",
      ok, kTries, idle.size());
  EXPECT_EQ(ok, kTries);
}

// A token an attacker could guess is refused at start, saying how to make
// one.
TEST_F(ControlServer, GuessableTokensAreRefusedAtStart) {
  for (const std::string token :
       {std::string(16, 'a'), std::string("abcdefghijklmnopqrstuvwx"), std::string("0123456789abcdef0123")}) {
    ServerOptions o = options();
    o.auth_token = token;
    const std::string detail = expect_error(GENIE_ERR_INVALID_ARGUMENT, [&] { Server s(o); });
    EXPECT_NE(detail.find("openssl rand -hex 32"), std::string::npos) << detail;
  }
  ServerOptions o = options();
  o.auth_token = "9c1f4e7a02b85d36e1fa4c90b7d2583e";  // openssl rand -hex 16
  Server ok(o);
  EXPECT_GT(ok.port(), 0);
}

// Before authenticating, a Probe learns what a handshake needs, not who the
// server is.
TEST_F(ControlServer, AProbeOfAnAuthenticatingServerDoesNotNameIt) {
  for (bool token : {false, true}) {
    ServerOptions o = options();
    if (token) o.auth_token = "9c1f4e7a02b85d36e1fa4c90b7d2583e";
    o.node_id = "host-name-1234";
    ClusterMaster cluster{Config{}};
    o.cluster = &cluster;
    Server server(o);
    cluster.set_node_id(server.node_id());
    Raw c(server.port());
    c.send(MsgType::Probe, 1, wire::Probe());
    const Frame f = c.reply(1);
    ASSERT_EQ(f.h.type, MsgType::ProbeReply);
    const auto r = f.as<wire::ProbeReply>();
    EXPECT_EQ(r.protocol_version(), wire::kProtocolVersion);
    EXPECT_EQ(r.node_id(), token ? "" : "host-name-1234");
  }
}

TEST_F(ControlServer, WriteAndReadOneMebibyte) {
  Server server(options());
  Raw c(server.port());
  const wire::Welcome w = handshake(c);
  const uint64_t id = alloc(c, {256, 1024});  // 1 MiB of f32
  EXPECT_EQ(server.stats().tensors(), 1u);
  EXPECT_EQ(server.stats().tensor_bytes(), 1u << 20);

  std::string bytes(1 << 20, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 7919) >> 3);
  Frame f = write(c, id, 0, bytes);
  ASSERT_EQ(f.h.type, MsgType::Ok) << (f.is_error() ? f.error().detail() : "");
  f = read(c, id, 0, bytes.size());
  ASSERT_EQ(f.h.type, MsgType::Ok);
  EXPECT_TRUE(f.payload == bytes);

  // A partial write at an offset, through a data connection; read back a
  // range on the control connection.
  Raw d(server.port());
  data_handshake(d, w);
  f = write(d, id, 1000, "ABCDEFGH", 201);
  ASSERT_EQ(f.h.type, MsgType::Ok);
  f = read(c, id, 996, 16);
  ASSERT_EQ(f.h.type, MsgType::Ok);
  EXPECT_EQ(f.payload, bytes.substr(996, 4) + "ABCDEFGH" + bytes.substr(1008, 4));
  f = read(d, id, (1 << 20) - 4, 4, 301);
  EXPECT_EQ(f.payload, bytes.substr((1 << 20) - 4));

  // A zero-byte read at the very end is in range.
  EXPECT_EQ(read(c, id, 1 << 20, 0).h.type, MsgType::Ok);
}

// Tensor reads through the per-connection window
// (src/server/read_window.cpp).

wire::TensorRead read_msg(uint64_t id, uint64_t offset, uint64_t nbytes) {
  wire::TensorRead r;
  r.set_tensor_id(id);
  r.set_offset(offset);
  r.set_nbytes(nbytes);
  return r;
}

wire::TensorFree free_msg(uint64_t id) {
  wire::TensorFree f;
  f.set_tensor_id(id);
  return f;
}

// A 32 MiB tensor (more than the read window and the socket buffers) whose
// bytes are `bytes`, written in 1 MiB pieces.
uint64_t big_tensor(Raw& c, std::string* bytes) {
  const uint64_t id = alloc(c, {8 << 20});
  bytes->assign(32 << 20, '\0');
  for (size_t i = 0; i < bytes->size(); ++i) (*bytes)[i] = static_cast<char>((i * 2654435761u) >> 13);
  for (size_t off = 0; off < bytes->size(); off += 1 << 20) {
    const Frame f = write(c, id, off, bytes->substr(off, 1 << 20));
    EXPECT_EQ(f.h.type, MsgType::Ok) << (f.is_error() ? f.error().detail() : "");
  }
  return id;
}

// Resident memory of this process (the server runs in it), in bytes.
uint64_t resident_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  unsigned long size = 0, resident = 0;
  if (f == nullptr) return 0;
  if (std::fscanf(f, "%lu %lu", &size, &resident) != 2) resident = 0;
  std::fclose(f);
  return uint64_t{resident} * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

// A server, a session's control connection `c` and a big tensor `id` on
// it whose bytes are `bytes`.
struct BigTensorSession {
  explicit BigTensorSession(const ServerOptions& o = options())
      : server(o), c(server.port()), w(handshake(c)), id(big_tensor(c, &bytes)) {}
  Server server;
  Raw c;
  wire::Welcome w;
  std::string bytes;
  uint64_t id;
};

TEST_F(ControlServer, ManyReadsInFlightOnOneConnectionAnswerInOrder) {
  BigTensorSession b;
  auto& [server, c, w, bytes, id] = b;
  Raw d(server.port());
  data_handshake(d, w);
  // Small reads, one larger than the window among them, all sent before
  // any reply is read.
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // offset, length
  for (uint64_t i = 0; i < 40; ++i) ranges.push_back({i * 70001, 64 << 10});
  ranges.insert(ranges.begin() + 20, {0, bytes.size()});
  ranges.push_back({bytes.size() - 3, 3});
  for (size_t i = 0; i < ranges.size(); ++i)
    d.send(MsgType::TensorRead, 1000 + i, read_msg(id, ranges[i].first, ranges[i].second));
  for (size_t i = 0; i < ranges.size(); ++i) {
    const Frame f = d.reply(1000 + i);
    ASSERT_EQ(f.h.type, MsgType::Ok) << "read " << i << ": " << (f.is_error() ? f.error().detail() : "");
    EXPECT_TRUE(f.payload == bytes.substr(ranges[i].first, ranges[i].second)) << "read " << i;
  }
}

TEST_F(ControlServer, ReadsWaitingBehindAStalledReadDoNotHoldTheirTensors) {
  BigTensorSession b;
  auto& [server, c, w, bytes, big] = b;
  std::vector<uint64_t> small;
  for (int i = 0; i < 3; ++i) small.push_back(alloc(c, {1 << 18}));  // 1 MiB each
  const uint64_t kept = alloc(c, {4});
  ASSERT_EQ(write(c, kept, 0, "0123456789abcdef").h.type, MsgType::Ok);

  // A client that stops reading (a small receive buffer): the big read
  // stalls in flight; each small tensor is read, then freed, behind it.
  Raw d(server.port(), 64 << 10);
  data_handshake(d, w);
  d.send(MsgType::TensorRead, 500, read_msg(big, 0, bytes.size()));
  for (size_t i = 0; i < small.size(); ++i) {
    d.send(MsgType::TensorRead, 501 + i, read_msg(small[i], 0, 1 << 20));
    d.send(MsgType::TensorFree, 600 + i, free_msg(small[i]));
  }
  d.send(MsgType::TensorRead, 510, read_msg(kept, 0, 16));
  ASSERT_TRUE(eventually([&] { return server.stats().tensors() == 2; }));  // the frees arrived

  Frame f = d.reply(500);
  ASSERT_EQ(f.h.type, MsgType::Ok);
  EXPECT_TRUE(f.payload == bytes);
  for (size_t i = 0; i < small.size(); ++i) {
    // Freed while it waited: the waiting read did not keep the tensor.
    f = d.reply(501 + i);
    ASSERT_TRUE(f.is_error()) << "read " << i << " was answered from a freed tensor";
    EXPECT_EQ(f.error().status(), GENIE_ERR_NOT_FOUND);
    EXPECT_NE(f.error().detail().find("freed before its read"), std::string::npos) << f.error().detail();
  }
  f = d.reply(510);
  ASSERT_EQ(f.h.type, MsgType::Ok);
  EXPECT_EQ(f.payload, "0123456789abcdef");
}

// A tensor freed while a stalled read holds it still takes memory: it stays
// charged to its session and the budget until the read lets go, so that
// freeing and allocating again behind a stalled read cannot pass the budget.
TEST_F(ControlServer, ATensorFreedUnderAStalledReadStaysCharged) {
  ServerOptions o = options();
  o.memory_budget = 80u << 20;
  BigTensorSession b(o);  // 32 MiB
  auto& [server, c, w, bytes, big] = b;
  Raw d(server.port(), 64 << 10);
  data_handshake(d, w);
  d.send(MsgType::TensorRead, 500, read_msg(big, 0, bytes.size()));  // stalls: nobody reads
  c.send(MsgType::TensorFree, 600, free_msg(big));
  ASSERT_TRUE(eventually([&] { return server.stats().tensors() == 0; }));
  EXPECT_EQ(server.stats().tensor_bytes(), 32u << 20) << "the freed tensor is still in memory";
  const uint64_t second = alloc(c, {8 << 20});  // 32 + 32 MiB: within 80 MiB
  Frame f = alloc_frame(c, 101, GENIE_DTYPE_F32, {8 << 20});
  ASSERT_TRUE(f.is_error()) << "96 MiB held against a budget of 80 MiB";
  EXPECT_EQ(f.error().status(), GENIE_ERR_OUT_OF_MEMORY);
  // Once the read has gone out, its tensor is gone and counted no more.
  f = d.reply(500, 30000);
  ASSERT_EQ(f.h.type, MsgType::Ok);
  EXPECT_TRUE(f.payload == bytes);
  ASSERT_TRUE(eventually([&] {
    const Frame g = alloc_frame(c, 102, GENIE_DTYPE_F32, {8 << 20});
    return g.h.type == MsgType::TensorAllocReply;
  }));
  EXPECT_NE(second, 0u);
}

// Heartbeats answered with a large view, from sessions that never read:
// each stays under its connection's cap, but together they pass the
// server's, and the connections with the most queued are cut off while a
// client that reads goes on.
TEST_F(ControlServer, RepliesQueuedToAllConnectionsAreBounded) {
  ServerOptions o = options();
  o.max_queued_reply_bytes_total = 48u << 20;  // each connection may queue 32 MiB
  ClusterMaster cluster{Config{}};
  o.cluster = &cluster;
  Server server(o);
  cluster.set_node_id(server.node_id());
  // 72 nodes of 15 KiB statuses each heartbeat once: the view every
  // heartbeat reply carries is then over 1 MiB.
  const auto status = [](const std::string& id, int devices) {
    std::string j = "{\"id\":\"" + id + "\",\"last_heartbeat_ms\":0,\"devices\":[";
    for (int d = 0; d < devices; ++d) j += (d ? ",\"" : "\"") + std::string(250, 'd') + "\"";
    return j + "]}";
  };
  for (int i = 0; i < 72; ++i) {
    Raw f(server.port());
    const std::string id = "fill-" + std::to_string(i);
    handshake(f, nullptr, id);
    wire::Heartbeat big;
    big.set_node_json(status(id, 60));
    f.send(MsgType::Heartbeat, 7, big);
    ASSERT_EQ(f.reply(7).h.type, MsgType::HeartbeatReply);
  }
  std::vector<std::unique_ptr<Raw>> slow;
  for (int i = 0; i < 4; ++i) {
    slow.push_back(std::make_unique<Raw>(server.port(), 64 << 10));
    handshake(*slow.back(), nullptr, "slow-" + std::to_string(i));
  }
  for (int k = 0; k < 24; ++k)  // 24 MiB of replies each, 96 MiB in all
    for (int i = 0; i < 4; ++i) {
      wire::Heartbeat hb;
      hb.set_node_json(status("slow-" + std::to_string(i), 0));
      slow[i]->send(MsgType::Heartbeat, 1000 + k, hb);
    }
  int cut = 0;
  for (auto& s : slow) cut += s->closed_by_server(3000) ? 1 : 0;
  std::printf("%d of 4 connections that never read were cut off (24 MiB of replies each, 48 MiB for all)\n",
              cut);
  EXPECT_GE(cut, 1) << "96 MiB of replies queued against a server-wide limit of 48 MiB";
  Raw c(server.port());
  handshake(c);
  EXPECT_NE(alloc(c, {4}), 0u);
}

TEST_F(ControlServer, WaitingReadsCountAgainstTheReplyCap) {
  ServerOptions o = options();
  o.max_queued_reply_bytes = 4096;  // about a hundred waiting reads
  BigTensorSession b(o);
  auto& [server, c, w, bytes, big] = b;
  Raw d(server.port(), 64 << 10);
  data_handshake(d, w);
  d.send(MsgType::TensorRead, 500, read_msg(big, 0, bytes.size()));
  for (uint64_t i = 0; i < 1000; ++i) d.send(MsgType::TensorRead, 501 + i, read_msg(big, i, 16));
  EXPECT_TRUE(d.closed_by_server(10000)) << "a client that never reads had 1000 reads queued";
  // Only that connection went: the session still reads.
  EXPECT_EQ(read(c, big, 5, 3).payload, bytes.substr(5, 3));
}

TEST_F(ControlServer, ReadCutOffByDisconnectReleasesItsFreedTensor) {
  BigTensorSession b;
  auto& [server, c, w, bytes, big] = b;
  bytes = std::string();  // only the server's copy stays resident
  const uint64_t before_free = resident_bytes();
  {
    Raw d(server.port(), 64 << 10);
    data_handshake(d, w);
    d.send(MsgType::TensorRead, 500, read_msg(big, 0, 32 << 20));
    d.send(MsgType::TensorFree, 501, free_msg(big));
    ASSERT_TRUE(eventually([&] { return server.stats().tensors() == 0; }));
    // The read in flight still sends from the tensor: its memory stays.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_GT(resident_bytes() + (24 << 20), before_free);
  }  // the client goes without reading
  EXPECT_TRUE(eventually([&] { return resident_bytes() + (24 << 20) < before_free; }))
      << "resident " << (resident_bytes() >> 20) << " MiB, " << (before_free >> 20) << " MiB before";
  EXPECT_EQ(server.stats().sessions(), 1u);
  EXPECT_EQ(read(c, big, 0, 4).error().status(), GENIE_ERR_NOT_FOUND);
}

TEST_F(ControlServer, AllocRefusesBadRequests) {
  Server server(options());
  Raw c(server.port());
  handshake(c);
  EXPECT_EQ(alloc_frame(c, 1, GENIE_DTYPE_F32, {2}, "gpu:0").error().status(), GENIE_ERR_UNSUPPORTED);
  EXPECT_EQ(alloc_frame(c, 2, 99, {2}).error().status(), GENIE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(alloc_frame(c, 3, GENIE_DTYPE_F32, {2, -3}).error().status(), GENIE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(alloc_frame(c, 4, GENIE_DTYPE_F32, {1, 2, 3, 4, 5, 6, 7, 8, 9}).error().status(),
            GENIE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(alloc_frame(c, 5, GENIE_DTYPE_F32, {int64_t{1} << 40, int64_t{1} << 40}).error().status(),
            GENIE_ERR_TOO_LARGE);
  // 2^46 bytes: representable, but more than this machine has.
  const auto e = alloc_frame(c, 6, GENIE_DTYPE_F32, {int64_t{1} << 44}).error();
  EXPECT_EQ(e.status(), GENIE_ERR_OUT_OF_MEMORY) << e.detail();
  EXPECT_EQ(server.stats().tensors(), 0u);
  // "" and "cpu" are the CPU too; the connection survived every error.
  EXPECT_EQ(alloc_frame(c, 7, GENIE_DTYPE_F32, {2}, "").h.type, MsgType::TensorAllocReply);
  EXPECT_EQ(alloc_frame(c, 8, GENIE_DTYPE_I64, {}, "cpu").h.type, MsgType::TensorAllocReply);
  EXPECT_EQ(server.stats().tensors(), 2u);
  EXPECT_EQ(server.stats().connections_refused(), 0u);
}

TEST_F(ControlServer, OutOfRangeAccessIsRefused) {
  Server server(options());
  Raw c(server.port());
  const wire::Welcome w = handshake(c);
  const uint64_t id = alloc(c, {4});  // 16 bytes
  ASSERT_EQ(write(c, id, 0, floats({1, 2, 3, 4})).h.type, MsgType::Ok);

  auto e = read(c, id, 8, 12).error();
  EXPECT_EQ(e.status(), GENIE_ERR_SIZE_MISMATCH);
  EXPECT_NE(e.detail().find("16 bytes"), std::string::npos) << e.detail();
  EXPECT_EQ(read(c, id, ~uint64_t{0}, 2).error().status(), GENIE_ERR_SIZE_MISMATCH);  // no wrap-around
  EXPECT_EQ(write(c, id, 17, "").error().status(), GENIE_ERR_SIZE_MISMATCH);  // no payload: stays open

  // With a payload the bytes are never read: the connection closes (after
  // the ErrorReply, if it gets through) and the tensor is untouched.
  Raw d(server.port());
  data_handshake(d, w);
  wire::TensorWrite tw;
  tw.set_tensor_id(id);
  tw.set_offset(8);
  d.send(MsgType::TensorWrite, 7, tw, std::string(64 << 10, 'x'));
  if (auto f = d.recv(5000)) EXPECT_EQ(f->error().status(), GENIE_ERR_SIZE_MISMATCH);
  EXPECT_TRUE(d.closed_by_server());
  // A payload announced far beyond the tensor is refused from the header
  // alone, before the client has sent any of it.
  Raw d2(server.port());
  data_handshake(d2, w);
  d2.send(MsgType::TensorWrite, 8, tw, "", uint64_t{1} << 40);
  if (auto f = d2.recv(5000)) EXPECT_EQ(f->error().status(), GENIE_ERR_SIZE_MISMATCH);
  EXPECT_TRUE(d2.closed_by_server());

  const Frame f = read(c, id, 0, 16);
  ASSERT_EQ(f.h.type, MsgType::Ok);
  EXPECT_EQ(to_floats(f.payload), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(server.stats().sessions(), 1u);
}

TEST_F(ControlServer, TensorIdsAreScopedToTheirSession) {
  Server server(options());
  Raw a(server.port()), b(server.port());
  handshake(a);
  handshake(b);
  const uint64_t id = alloc(a, {2, 3});
  ASSERT_EQ(write(a, id, 0, floats({1, 2, 3, 4, 5, 6})).h.type, MsgType::Ok);

  auto e = read(b, id, 0, 4).error();
  EXPECT_EQ(e.status(), GENIE_ERR_NOT_FOUND);
  EXPECT_NE(e.detail().find("no tensor " + std::to_string(id) + " in this session"), std::string::npos)
      << e.detail();
  EXPECT_EQ(write(b, id, 0, "").error().status(), GENIE_ERR_NOT_FOUND);
  b.send(MsgType::GraphSubmit, 40, submit_msg(add_mul_graph(), {{"a", id}, {"b", id}}));
  e = b.reply(40).error();
  EXPECT_EQ(e.status(), GENIE_ERR_NOT_FOUND);
  EXPECT_NE(e.detail().find("in this session"), std::string::npos) << e.detail();
  // Freeing another session's id does nothing to it.
  wire::TensorFree fr;
  fr.set_tensor_id(id);
  b.send(MsgType::TensorFree, 41, fr);
  EXPECT_EQ(to_floats(read(a, id, 0, 24).payload), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // Its own free does.
  a.send(MsgType::TensorFree, 42, fr);
  EXPECT_EQ(read(a, id, 0, 4).error().status(), GENIE_ERR_NOT_FOUND);
  EXPECT_EQ(server.stats().tensors(), 0u);
}

// Spans go back only with a submission that asks for them (trace = true),
// and the server answers ClockProbe with its clock (Welcome.trace_spans).
TEST_F(ControlServer, SpansOnlyForASubmissionThatAsks) {
  Server server(options());
  Raw c(server.port());
  const wire::Welcome w = handshake(c);
  EXPECT_TRUE(w.trace_spans());
  const uint64_t a = alloc(c, {2, 3});
  const uint64_t b = alloc(c, {2, 3});
  c.send(MsgType::GraphSubmit, 50, submit_msg(add_mul_graph(), {{"b", b}, {"a", a}}));
  const auto plain = c.reply(50).as<wire::GraphDone>();
  ASSERT_EQ(plain.status(), GENIE_OK) << plain.detail();
  EXPECT_EQ(plain.spans_size(), 0) << "not asked";
  wire::GraphSubmit traced = submit_msg(add_mul_graph(), {{"b", b}, {"a", a}});
  traced.set_trace(true);
  c.send(MsgType::GraphSubmit, 51, traced);
  const auto done = c.reply(51).as<wire::GraphDone>();
  ASSERT_EQ(done.status(), GENIE_OK) << done.detail();
  ASSERT_EQ(done.spans_size(), 3) << "the graph and its two nodes";
  EXPECT_EQ(done.spans(0).cat(), "graph");
  EXPECT_EQ(done.spans(0).dur_ns(), done.exec_ns());
  EXPECT_EQ(done.spans(1).cat(), "node");
  EXPECT_EQ(done.spans_dropped(), 0u);
  // A traced submission refused is answered by its error alone.
  wire::GraphSubmit bad = submit_msg(add_mul_graph(), {{"b", b}});
  bad.set_trace(true);
  c.send(MsgType::GraphSubmit, 52, bad);
  EXPECT_TRUE(c.reply(52).is_error());
  c.send(MsgType::GraphSubmit, 53, submit_msg(add_mul_graph(), {{"b", b}, {"a", a}}));
  EXPECT_EQ(c.reply(53).as<wire::GraphDone>().spans_size(), 0) << "the next one did not ask";

  const uint64_t before = trace::now_ns();
  c.send(MsgType::ClockProbe, 60, wire::ClockProbe());
  Frame f = c.reply(60);
  ASSERT_EQ(f.h.type, MsgType::ClockProbeReply);
  const uint64_t server_ns = f.as<wire::ClockProbeReply>().server_ns();
  // One process, one steady clock.
  EXPECT_GE(server_ns, before);
  EXPECT_LE(server_ns, trace::now_ns());
}

TEST_F(ControlServer, GraphRunsAndItsOutputsStayOnTheServer) {
  Server server(options());
  Raw c(server.port());
  handshake(c);
  const uint64_t a = alloc(c, {2, 3});
  const uint64_t b = alloc(c, {2, 3});
  ASSERT_EQ(write(c, a, 0, floats({1, 2, 3, 4, 5, 6})).h.type, MsgType::Ok);
  ASSERT_EQ(write(c, b, 0, floats({10, 20, 30, 40, 50, 60})).h.type, MsgType::Ok);

  c.send(MsgType::GraphSubmit, 50, submit_msg(add_mul_graph(), {{"b", b}, {"a", a}}));
  // The one answer is the GraphDone: no acceptance comes first.
  Frame f = c.reply(50);
  ASSERT_EQ(f.h.type, MsgType::GraphDone) << (f.is_error() ? f.error().detail() : "");
  const auto done = f.as<wire::GraphDone>();
  ASSERT_EQ(done.status(), GENIE_OK) << done.detail();
  ASSERT_EQ(done.outputs_size(), 2);
  EXPECT_EQ(done.outputs(0).name(), "c");
  EXPECT_EQ(done.outputs(1).name(), "d");
  EXPECT_EQ(done.outputs(1).dtype(), GENIE_DTYPE_F32);
  EXPECT_EQ(std::vector<int64_t>(done.outputs(1).shape().begin(), done.outputs(1).shape().end()),
            (std::vector<int64_t>{2, 3}));
  EXPECT_GT(done.exec_ns(), 0u);
  EXPECT_EQ(server.stats().tensors(), 4u);
  EXPECT_EQ(server.stats().graphs_executed(), 1u);

  EXPECT_EQ(to_floats(read(c, done.outputs(0).tensor_id(), 0, 24).payload),
            (std::vector<float>{11, 22, 33, 44, 55, 66}));
  EXPECT_EQ(to_floats(read(c, done.outputs(1).tensor_id(), 0, 24).payload),
            (std::vector<float>{110, 440, 990, 1760, 2750, 3960}));

  // An output is an ordinary tensor of the session: it can feed a new graph.
  c.send(MsgType::GraphSubmit, 51,
         submit_msg(add_mul_graph(), {{"a", done.outputs(0).tensor_id()}, {"b", b}}));
  const auto done2 = c.reply(51).as<wire::GraphDone>();
  ASSERT_EQ(done2.status(), GENIE_OK) << done2.detail();
  EXPECT_EQ(to_floats(read(c, done2.outputs(0).tensor_id(), 0, 24).payload),
            (std::vector<float>{21, 42, 63, 84, 105, 126}));
}

TEST_F(ControlServer, GraphSubmitErrorsAreAnswered) {
  Server server(options());
  Raw c(server.port());
  handshake(c);
  const uint64_t a = alloc(c, {2, 3});
  const uint64_t i = alloc(c, {2, 3}, GENIE_DTYPE_I32);
  const uint64_t wide = alloc(c, {2, 4});
  auto submit_error = [&](uint64_t rid, const std::string& json,
                          const std::vector<std::pair<std::string, uint64_t>>& b) {
    c.send(MsgType::GraphSubmit, rid, submit_msg(json, b));
    return c.reply(rid).error();
  };
  EXPECT_EQ(submit_error(60, "{not json", {}).status(), GENIE_ERR_PARSE);
  EXPECT_EQ(submit_error(61, add_mul_graph(), {{"a", a}}).status(), GENIE_ERR_INVALID_GRAPH);
  EXPECT_EQ(submit_error(62, add_mul_graph(), {{"a", a}, {"b", a}, {"x", a}}).status(),
            GENIE_ERR_INVALID_GRAPH);
  EXPECT_EQ(submit_error(63, add_mul_graph(), {{"a", a}, {"b", i}}).status(), GENIE_ERR_DTYPE_MISMATCH);
  EXPECT_EQ(submit_error(64, add_mul_graph(), {{"a", wide}, {"b", a}}).status(), GENIE_ERR_SHAPE_MISMATCH);
  // b is [-1, 3]: bound to [2, 4] its last dimension is wrong.
  EXPECT_EQ(submit_error(65, add_mul_graph(), {{"a", a}, {"b", wide}}).status(), GENIE_ERR_SHAPE_MISMATCH);
  EXPECT_EQ(server.stats().graphs_executed(), 0u);
  EXPECT_EQ(alloc_frame(c, 66, GENIE_DTYPE_F32, {1}).h.type, MsgType::TensorAllocReply);  // still open
}

// Quotas (server/quota.hpp): graphs in flight, and a graph's outputs and
// intermediates reserved before it runs and released when it completes.
// A graph past the server's node or byte limit is refused before it is
// parsed, with TOO_LARGE naming the limit; one within them runs.
TEST_F(ControlServer, GraphsPastTheNodeOrByteLimitAreRefused) {
  ServerOptions o = options();
  o.max_graph_nodes = 1000;
  o.max_graph_bytes = 256u << 10;
  Server server(o);
  Raw c(server.port());
  handshake(c);
  const uint64_t x = alloc(c, {4});
  auto chain = [](int n, size_t name_pad) {
    Graph g("chain");
    g.add_input("x", DType::F32, {4});
    std::string prev = "x";
    for (int i = 0; i < n; ++i) {
      const std::string next = "v" + std::to_string(i) + std::string(name_pad, '_');
      g.add_node("relu", "r" + std::to_string(i), {prev}, {next});
      prev = next;
    }
    g.mark_output(prev);
    return graph_to_json(g);
  };
  c.send(MsgType::GraphSubmit, 70, submit_msg(chain(1001, 0), {{"x", x}}));
  wire::ErrorReply e = c.reply(70).error();
  EXPECT_EQ(e.status(), GENIE_ERR_TOO_LARGE);
  EXPECT_NE(e.detail().find("at most 1000 nodes"), std::string::npos) << e.detail();
  const std::string wide = chain(900, 200);  // fewer nodes, long names
  ASSERT_GT(wide.size(), 256u << 10);
  c.send(MsgType::GraphSubmit, 71, submit_msg(wide, {{"x", x}}));
  e = c.reply(71).error();
  EXPECT_EQ(e.status(), GENIE_ERR_TOO_LARGE);
  EXPECT_NE(e.detail().find("bytes of graph"), std::string::npos) << e.detail();
  c.send(MsgType::GraphSubmit, 72, submit_msg(chain(1000, 0), {{"x", x}}));
  const Frame f = c.reply(72);
  EXPECT_EQ(f.h.type, MsgType::GraphDone) << (f.is_error() ? f.error().detail() : "");
}

// A large graph is parsed and validated off the server's event loop: while
// one client's 100,000-node graph is parsed, another client's small graph
// is answered. The large one is refused for an input's shape, found only
// once all of it is parsed, so its answer marks the parse's end: parsed on
// the loop, it went out before the small request was even read. Then the
// same graph, bound right, runs (under raised limits).
TEST_F(ControlServer, ALargeGraphsParseDoesNotHoldOtherClients) {
  ServerOptions o = options();
  o.max_graph_nodes = 200000;
  o.max_graph_bytes = 64u << 20;
  Server server(o);
  Raw big(server.port()), small(server.port());
  handshake(big, nullptr, "big-graph");
  handshake(small, nullptr, "small-graph");
  const uint64_t x4 = alloc(big, {4});
  const uint64_t x8 = alloc(big, {8});
  const uint64_t y = alloc(small, {4});
  constexpr int kNodes = 100000;
  Graph g("large");
  g.add_input("x", DType::F32, {8});
  std::string prev = "x";
  for (int i = 0; i < kNodes; ++i) {
    std::string next = "v" + std::to_string(i);
    g.add_node("relu", "r" + std::to_string(i), {prev}, {next});
    prev = std::move(next);
  }
  g.mark_output(prev);
  const std::string large = graph_to_json(g);
  Graph t("tiny");
  t.add_input("x", DType::F32, {4});
  t.add_node("relu", "r", {"x"}, {"y"});
  t.mark_output("y");
  const std::string tiny = graph_to_json(t);
  small.send(MsgType::GraphSubmit, 1, submit_msg(tiny, {{"x", y}}));  // parsed and kept now
  ASSERT_EQ(small.reply(1).h.type, MsgType::GraphDone);

  const uint64_t submitted = server.stats().graph_submits_full();
  const auto sent = Clock::now();
  big.send(MsgType::GraphSubmit, 2, submit_msg(large, {{"x", x4}}));
  // The server has read all of it and started on it.
  ASSERT_TRUE(eventually([&] { return server.stats().graph_submits_full() > submitted; }, 30000));
  const auto asked = Clock::now();
  small.send(MsgType::GraphSubmit, 3, submit_msg(tiny, {{"x", y}}));
  const Frame f = small.reply(3, 60000);
  const auto answered = Clock::now();
  EXPECT_EQ(f.h.type, MsgType::GraphDone) << (f.is_error() ? f.error().detail() : "");
  EXPECT_FALSE(big.readable())
      << "the large graph's parse ended before another client's request was answered";
  const Frame e = big.reply(2, 60000);
  const auto refused = Clock::now();
  EXPECT_EQ(e.error().status(), GENIE_ERR_SHAPE_MISMATCH) << e.error().detail();
  const auto us = [](auto d) { return std::chrono::duration_cast<std::chrono::microseconds>(d).count(); };
  std::printf(
      "graph of %d nodes (%zu bytes of JSON) parsed in %lld ms; another client's small graph "
      "meanwhile: %lld us\n",
      kNodes, large.size(), static_cast<long long>(us(refused - sent) / 1000),
      static_cast<long long>(us(answered - asked)));

  big.send(MsgType::GraphSubmit, 4, submit_msg(large, {{"x", x8}}));
  const Frame done = big.reply(4, 120000);
  ASSERT_EQ(done.h.type, MsgType::GraphDone) << (done.is_error() ? done.error().detail() : "");
  EXPECT_EQ(done.as<wire::GraphDone>().status(), GENIE_OK) << done.as<wire::GraphDone>().detail();
}

// A graph parsed off the loop is charged to the session first, at 16 bytes
// per byte of JSON, so that queued parses hold no memory its quota does not
// see: one past the quota is refused before it is parsed or queued.
TEST_F(ControlServer, ParsingALargeGraphIsChargedFirst) {
  ServerOptions o = options();
  o.quota.max_bytes = 1u << 20;
  Server server(o);
  Raw c(server.port());
  handshake(c);
  const uint64_t x = alloc(c, {4});
  Graph g("wide");
  g.add_input("x", DType::F32, {4});
  std::string prev = "x";
  for (int i = 0; i < 1000; ++i) {
    std::string next = "v" + std::to_string(i);
    g.add_node("relu", "r" + std::to_string(i), {prev}, {next});
    prev = std::move(next);
  }
  g.mark_output(prev);
  const std::string json = graph_to_json(g);
  ASSERT_GE(json.size(), size_t{64} << 10);  // parsed off the loop, charged past the quota
  c.send(MsgType::GraphSubmit, 1, submit_msg(json, {{"x", x}}));
  const wire::ErrorReply e = c.reply(1).error();
  EXPECT_EQ(e.status(), GENIE_ERR_OUT_OF_MEMORY);
  EXPECT_NE(e.detail().find("parsing a graph of " + std::to_string(json.size())), std::string::npos)
      << e.detail();
}

TEST_F(ControlServer, SessionQuotasHoldGraphsInFlightAndTheirMemory) {
  ServerOptions o = options();
  o.quota.max_graphs = 1;
  o.quota.max_bytes = 3 * (4u << 20) + 4096;  // 3 matrices of 4 MiB, and a little
  Server server(std::move(o));
  Raw c(server.port());
  handshake(c);
  const uint64_t a = alloc(c, {1024, 1024});
  Graph g("slow");
  g.add_input("a", DType::F32, {1024, 1024});
  g.add_node("matmul", "m1", {"a", "a"}, {"b"});
  g.add_node("matmul", "m2", {"b", "a"}, {"c"});
  g.add_node("matmul", "m3", {"c", "a"}, {"d"});
  g.mark_output("d");
  const std::string slow = graph_to_json(g);
  // Two values of 4 MiB alive at once, with a's 4 MiB: 12 MiB fit.
  c.send(MsgType::GraphSubmit, 70, submit_msg(slow, {{"a", a}}));
  c.send(MsgType::GraphSubmit, 71, submit_msg(slow, {{"a", a}}));
  const auto busy = c.reply(71).error();
  EXPECT_EQ(busy.status(), GENIE_ERR_OUT_OF_MEMORY);
  EXPECT_NE(busy.detail().find("graphs in flight"), std::string::npos) << busy.detail();
  EXPECT_NE(busy.detail().find("its quota is 1"), std::string::npos) << busy.detail();
  const auto done = c.reply(70).as<wire::GraphDone>();
  ASSERT_EQ(done.status(), GENIE_OK) << done.detail();
  // Its output (4 MiB) is now held: another run needs 8 MiB more, past the
  // quota; the refusal names the graph and both figures.
  c.send(MsgType::GraphSubmit, 72, submit_msg(slow, {{"a", a}}));
  const auto full = c.reply(72).error();
  EXPECT_EQ(full.status(), GENIE_ERR_OUT_OF_MEMORY);
  EXPECT_NE(full.detail().find("graph 'slow'"), std::string::npos) << full.detail();
  EXPECT_NE(full.detail().find("session byte quota: 8388608 more bytes"), std::string::npos) << full.detail();
  EXPECT_NE(full.detail().find("with 8388608 held"), std::string::npos) << full.detail();
  // Freeing the output releases its bytes: the graph runs again.
  wire::TensorFree f;
  f.set_tensor_id(done.outputs(0).tensor_id());
  c.send(MsgType::TensorFree, 73, f);  // no reply
  c.send(MsgType::GraphSubmit, 74, submit_msg(slow, {{"a", a}}));
  EXPECT_EQ(c.reply(74).as<wire::GraphDone>().status(), GENIE_OK);
}

TEST_F(ControlServer, MalformedFramesCloseOnlyTheirConnection) {
  Server server(options());
  Raw good(server.port());
  handshake(good);
  const uint64_t id = alloc(good, {4});

  const std::string valid = Raw::encode(MsgType::TensorAlloc, 7, wire::TensorAlloc());
  auto patched = [&](size_t offset, uint32_t value, size_t width) {
    std::string s = valid;
    for (size_t i = 0; i < width; ++i) s[offset + i] = static_cast<char>(value >> (8 * i));
    return s;
  };
  std::string bad_crc = Raw::encode(MsgType::ServerInfoRequest, 7, wire::ServerInfoRequest());
  bad_crc[33] ^= 0x5a;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"garbage", std::string("GET / HTTP/1.1\r\nHost: genie\r\n\r\n") + std::string(16, '\0')},
      {"oversize", patched(12, (64u << 20) + 1, 4)},
      {"bad CRC", bad_crc},
      {"unknown type", patched(6, 999, 2)},
      {"payload on a message that takes none",
       Raw::encode(MsgType::ServerInfoRequest, 7, wire::ServerInfoRequest(), 8) + "12345678"},
      {"a reply type from a client", Raw::encode(MsgType::Welcome, 7, wire::Welcome())},
      {"undecodable message",
       [] {
         const std::string junk = "\xff\xff\xff\xff";
         wire::FrameHeader h;
         h.type = MsgType::TensorRead;
         uint8_t hdr[wire::kHeaderSize];
         wire::encode_header(h, junk.data(), junk.size(), hdr);
         return std::string(reinterpret_cast<char*>(hdr), sizeof hdr) + junk;
       }()},
  };
  uint64_t refused = 0;
  for (const auto& [what, bytes] : cases) {
    SCOPED_TRACE(what);
    for (bool established : {false, true}) {
      SCOPED_TRACE(established ? "after the handshake" : "as the first frame");
      Raw bad(server.port());
      if (established) handshake(bad);
      bad.send_bytes(bytes.data(), bytes.size());
      EXPECT_TRUE(bad.closed_by_server());
      ++refused;
      EXPECT_TRUE(eventually([&] { return server.stats().connections_refused() == refused; }))
          << server.stats().connections_refused();
      // The other session is unaffected.
      ASSERT_EQ(write(good, id, 0, floats({1, 2, 3, 4})).h.type, MsgType::Ok);
      EXPECT_EQ(to_floats(read(good, id, 0, 16).payload), (std::vector<float>{1, 2, 3, 4}));
    }
  }
  // Nothing was left behind by the refused connections' sessions beyond
  // their grace period: only the good session and its tensor are held.
  EXPECT_EQ(server.stats().tensors(), 1u);
}

// A delta names a base graph by its SHA-256: only the session that sent
// that graph can use it, so a delta's answer does not tell one tenant
// whether another sent a given graph.
TEST_F(ControlServer, GraphDeltaBasesAreTheSessionsOwn) {
  Server server(options());
  Raw a(server.port()), b(server.port());
  handshake(a);
  handshake(b);
  const std::string json = add_mul_graph();
  const auto bind = [&](Raw& c) {
    const uint64_t x = alloc(c, {2, 3}), y = alloc(c, {2, 3});
    return std::vector<std::pair<std::string, uint64_t>>{{"a", x}, {"b", y}};
  };
  const auto a_in = bind(a), b_in = bind(b);
  wire::GraphSubmit full = submit_msg(json, a_in);
  full.set_keep_as_base(true);
  a.send(MsgType::GraphSubmit, 60, full);
  ASSERT_EQ(a.reply(60).h.type, MsgType::GraphDone);

  const auto delta_msg = [&](const std::vector<std::pair<std::string, uint64_t>>& in) {
    wire::GraphSubmitDelta d;
    d.set_base_hash(delta::digest(json));
    d.set_graph_hash(delta::digest(json));
    for (const auto& [name, id] : in) {
      wire::Binding* x = d.add_bindings();
      x->set_name(name);
      x->set_tensor_id(id);
    }
    return d;
  };
  b.send(MsgType::GraphSubmitDelta, 61, delta_msg(b_in));
  const Frame refused = b.reply(61);
  ASSERT_TRUE(refused.is_error());
  EXPECT_EQ(refused.error().status(), GENIE_ERR_NOT_FOUND);
  EXPECT_EQ(refused.error().reason(), wire::REASON_UNKNOWN_BASE);
  a.send(MsgType::GraphSubmitDelta, 62, delta_msg(a_in));
  EXPECT_EQ(a.reply(62).h.type, MsgType::GraphDone) << "the sender's own base serves it";
}

TEST_F(ControlServer, OnlyAWorkerSessionRegistersAWorker) {
  Server server(options());
  Raw c(server.port());
  handshake(c);  // role client
  wire::WorkerRegister m;
  m.set_node_id("test-client");
  m.set_host("127.0.0.1");
  m.set_port(1);
  c.send(MsgType::WorkerRegister, 7, m);
  const Frame f = c.reply(7);
  ASSERT_TRUE(f.is_error());
  EXPECT_EQ(f.error().status(), GENIE_ERR_AUTH);
  EXPECT_NE(f.error().detail().find("only a worker's session"), std::string::npos) << f.error().detail();
}

TEST_F(ControlServer, GoodbyeFreesTheSessionAtOnce) {
  Server server(options());
  Raw c(server.port());
  const wire::Welcome w = handshake(c);
  alloc(c, {1024});
  alloc(c, {8, 8});
  EXPECT_EQ(server.stats().tensors(), 2u);
  c.send(MsgType::Goodbye, 70, wire::Goodbye());
  EXPECT_TRUE(c.closed_by_server());
  EXPECT_EQ(server.stats().tensors(), 0u);
  EXPECT_EQ(server.stats().tensor_bytes(), 0u);
  EXPECT_EQ(server.stats().sessions(), 0u);
  EXPECT_EQ(server.stats().connections_refused(), 0u);
  // Its token no longer resumes anything.
  Raw again(server.port());
  const wire::Welcome w2 = handshake(again, &w);
  EXPECT_FALSE(w2.resumed());
  EXPECT_NE(w2.session_token(), w.session_token());
}

TEST_F(ControlServer, LostConnectionKeepsTensorsForTheGracePeriod) {
  ServerOptions o = options();
  o.session_grace_ms = 600;
  Server server(o);
  {
    Raw c(server.port());
    handshake(c);
    alloc(c, {64});
    alloc(c, {64});
  }
  const auto lost = Clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  EXPECT_EQ(server.stats().tensors(), 2u);
  EXPECT_EQ(server.stats().sessions(), 1u);
  // The session's tensors are freed before the session leaves the table:
  // wait for both.
  EXPECT_TRUE(eventually(
      [&] {
        const ServerStats s = server.stats();
        return s.tensors() == 0 && s.sessions() == 0;
      },
      5000));
  EXPECT_GE(Clock::now() - lost, std::chrono::milliseconds(550));
  EXPECT_EQ(server.stats().tensor_bytes(), 0u);
}

TEST_F(ControlServer, ResumeWithinGraceGetsTheTensorsBack) {
  ServerOptions o = options();
  o.session_grace_ms = 10000;
  Server server(o);
  wire::Welcome first;
  uint64_t id = 0;
  const std::string bytes = floats({3.5f, -1.f, 8.f, 0.25f});
  {
    Raw c(server.port());
    first = handshake(c);
    alloc(c, {2});
    id = alloc(c, {4});
    ASSERT_EQ(write(c, id, 0, bytes).h.type, MsgType::Ok);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  Raw c(server.port());
  const wire::Welcome w = handshake(c, &first);
  EXPECT_TRUE(w.resumed());
  EXPECT_EQ(w.session_token(), first.session_token());
  EXPECT_EQ(server.stats().sessions(), 1u);
  EXPECT_EQ(server.stats().tensors(), 2u);
  const Frame f = read(c, id, 0, 16);
  ASSERT_EQ(f.h.type, MsgType::Ok);
  EXPECT_EQ(f.payload, bytes);
  // New ids continue after the old ones.
  EXPECT_EQ(alloc(c, {1}), id + 1);

  // A client that comes back before the server noticed the old connection
  // die takes the session over; the old connection is closed.
  Raw again(server.port());
  EXPECT_TRUE(handshake(again, &first).resumed());
  EXPECT_TRUE(c.closed_by_server());
  EXPECT_EQ(read(again, id, 0, 16).payload, bytes);

  // An unknown token opens a new, empty session.
  Raw other(server.port());
  wire::Welcome unknown;
  unknown.set_session_id(first.session_id() + 100);
  unknown.set_session_token(std::string(32, '\x01'));
  const wire::Welcome w3 = handshake(other, &unknown);
  EXPECT_FALSE(w3.resumed());
  EXPECT_EQ(read(other, id, 0, 4).error().status(), GENIE_ERR_NOT_FOUND);
}

TEST_F(ControlServer, ProvedDataConnectionsCountPerSessionNotPerAddress) {
  ServerOptions o = options();
  o.max_connections_per_source = 2;
  Server server(o);
  Raw c(server.port());
  const wire::Welcome w = handshake(c);
  // Data connections that proved the session's secret leave the address's
  // two slots to sessions; a session has at most 8.
  std::vector<std::unique_ptr<Raw>> data;
  for (int i = 0; i < 8; ++i) {
    data.push_back(std::make_unique<Raw>(server.port()));
    data_handshake(*data.back(), w);
  }
  Raw ninth(server.port());
  wire::AuthResponse r;
  r.set_session_mac(
      proof("genie data connection v3", w.session_token(), data_challenge(ninth, w), w.session_id(), "tcp"));
  ninth.send(MsgType::AuthResponse, 3, r);
  const auto e = ninth.reply(3).error();
  EXPECT_EQ(e.status(), GENIE_ERR_CONNECTION);
  EXPECT_NE(e.detail().find("data connections, the limit per session"), std::string::npos) << e.detail();
  EXPECT_TRUE(ninth.closed_by_server());
  // The address's second slot is free for another session...
  Raw c2(server.port());
  handshake(c2, nullptr, "second-client");
  // ...and its third is refused before any handshake.
  Raw third(server.port());
  EXPECT_TRUE(third.closed_by_server());
}

TEST_F(ControlServer, DataConnectionsProveTheSessionSecretForTheirOwnChallenge) {
  Server server(options());
  Raw c(server.port());
  const wire::Welcome w = handshake(c);
  const auto refused = [](Raw& d, uint64_t rid, genie_status_t status, const char* why) {
    const Frame f = d.reply(rid);
    EXPECT_EQ(f.error().status(), status) << f.error().detail();
    EXPECT_NE(f.error().detail().find(why), std::string::npos) << f.error().detail();
    EXPECT_TRUE(d.closed_by_server());
  };
  {  // the bearer token of protocol 2 is refused outright
    Raw d(server.port());
    wire::DataHello h;
    h.set_session_id(w.session_id());
    h.set_session_token(w.session_token());
    d.send(MsgType::DataHello, 2, h);
    refused(d, 2, GENIE_ERR_PROTOCOL, "answer a challenge");
  }
  {  // presenting the secret itself instead of the answer
    Raw d(server.port());
    data_challenge(d, w);
    wire::AuthResponse r;
    r.set_session_mac(w.session_token());
    d.send(MsgType::AuthResponse, 3, r);
    refused(d, 3, GENIE_ERR_AUTH, "does not prove it holds the secret");
  }
  {  // not answering: a request instead of the AuthResponse
    Raw d(server.port());
    data_challenge(d, w);
    wire::TensorRead r;
    d.send(MsgType::TensorRead, 3, r);
    refused(d, 3, GENIE_ERR_PROTOCOL, "expected AuthResponse");
  }
  // An answer seen on one connection is worth nothing on the next: its
  // nonce differs.
  Raw d1(server.port());
  const std::string nonce = data_challenge(d1, w);
  wire::AuthResponse answer;
  answer.set_session_mac(proof("genie data connection v3", w.session_token(), nonce, w.session_id(), "tcp"));
  d1.send(MsgType::AuthResponse, 3, answer);
  ASSERT_EQ(d1.reply(3).h.type, MsgType::Welcome);
  Raw d2(server.port());
  EXPECT_NE(data_challenge(d2, w), nonce);
  d2.send(MsgType::AuthResponse, 3, answer);
  refused(d2, 3, GENIE_ERR_AUTH, "does not prove it holds the secret");
  // The session and its first data connection are unaffected.
  EXPECT_NE(alloc(c, {4}), 0u);
  EXPECT_FALSE(d1.closed_by_server(100));
}

TEST_F(ControlServer, OnlyTheIdentityThatOpenedASessionResumesIt) {
  ServerOptions o = options();
  o.session_grace_ms = 10000;
  Server server(o);
  wire::Welcome first;
  {
    Raw c(server.port());
    first = handshake(c);
    alloc(c, {4});
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  {  // the secret, proven correctly, from another node id
    Raw c(server.port());
    c.send(MsgType::Hello, 1, hello("intruder", first.session_id()));
    const Frame ch = c.reply(1);
    ASSERT_EQ(ch.h.type, MsgType::Challenge);
    wire::AuthResponse r;
    r.set_session_mac(proof("genie session resumption v3", first.session_token(),
                            ch.as<wire::Challenge>().nonce(), first.session_id(), "intruder"));
    c.send(MsgType::AuthResponse, 2, r);
    const Frame f = c.reply(2);
    EXPECT_EQ(f.error().status(), GENIE_ERR_AUTH);
    EXPECT_NE(f.error().detail().find("only its owner may resume it"), std::string::npos)
        << f.error().detail();
  }
  {  // the owner's node id without the secret
    Raw c(server.port());
    c.send(MsgType::Hello, 1, hello(kClient, first.session_id()));
    ASSERT_EQ(c.reply(1).h.type, MsgType::Challenge);
    wire::AuthResponse r;
    r.set_session_mac(std::string(32, 'x'));
    c.send(MsgType::AuthResponse, 2, r);
    EXPECT_EQ(c.reply(2).error().status(), GENIE_ERR_AUTH);
  }
  EXPECT_EQ(server.stats().sessions(), 1u);
  EXPECT_EQ(server.stats().tensors(), 1u);
  Raw owner(server.port());
  EXPECT_TRUE(handshake(owner, &first).resumed());
}

TEST_F(ControlServer, ClientDyingMidWriteLeavesAPartialTensorFreedAfterGrace) {
  ServerOptions o = options();
  o.session_grace_ms = 300;
  Server server(o);
  Raw c(server.port());
  const wire::Welcome w = handshake(c);
  const uint64_t id = alloc(c, {1 << 18});  // 1 MiB
  {
    Raw d(server.port());
    data_handshake(d, w);
    wire::TensorWrite tw;
    tw.set_tensor_id(id);
    d.send(MsgType::TensorWrite, 9, tw, std::string(1000, '\x7f'), uint64_t{1} << 20);
  }  // the client dies 1000 bytes into a 1 MiB payload
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const Frame f = read(c, id, 0, 1004);
  ASSERT_EQ(f.h.type, MsgType::Ok);
  EXPECT_EQ(f.payload, std::string(1000, '\x7f') + std::string(4, '\0'));
  EXPECT_EQ(server.stats().tensors(), 1u);
  c.close();
  EXPECT_TRUE(eventually([&] { return server.stats().tensors() == 0 && server.stats().sessions() == 0; }));
}

TEST_F(ControlServer, DataConnectionNeedsALiveSession) {
  Server server(options());
  Raw d(server.port());
  wire::DataHello dh;
  dh.set_session_id(42);
  d.send(MsgType::DataHello, 3, dh);
  EXPECT_EQ(d.reply(3).error().status(), GENIE_ERR_NOT_FOUND);
  EXPECT_TRUE(d.closed_by_server());

  Raw c(server.port());
  const wire::Welcome w = handshake(c);
  EXPECT_TRUE(w.data_submit());
  Raw d2(server.port());
  data_handshake(d2, w);
  // A graph may be submitted on a data connection of the session
  // (Welcome.data_submit): its GraphDone comes back on that connection,
  // and its outputs are the session's.
  const uint64_t a = alloc(c, {2, 3});
  ASSERT_EQ(write(d2, a, 0, floats({1, 2, 3, 4, 5, 6})).h.type, MsgType::Ok);
  d2.send(MsgType::GraphSubmit, 4, submit_msg(add_mul_graph(), {{"a", a}, {"b", a}}));
  const Frame f = d2.reply(4);
  ASSERT_EQ(f.h.type, MsgType::GraphDone) << (f.is_error() ? f.error().detail() : "");
  const auto done = f.as<wire::GraphDone>();
  ASSERT_EQ(done.status(), GENIE_OK) << done.detail();
  EXPECT_EQ(to_floats(read(c, done.outputs(1).tensor_id(), 0, 24).payload),
            (std::vector<float>{2, 8, 18, 32, 50, 72}));
  // Control-only requests still are.
  d2.send(MsgType::Heartbeat, 5, wire::Heartbeat());
  EXPECT_EQ(d2.reply(5).error().status(), GENIE_ERR_PROTOCOL);
  EXPECT_TRUE(d2.closed_by_server());
  // Losing the control connection closes the session's data connections.
  Raw d3(server.port());
  data_handshake(d3, w);
  c.close();
  EXPECT_TRUE(d3.closed_by_server());
}

bool port_refuses(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool refused = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0;
  ::close(fd);
  return refused;
}

TEST_F(ControlServer, StopLetsAGraphInFlightFinishAndReport) {
  ServerOptions o = options();
  o.num_threads = 1;
  Server server(o);
  Raw c(server.port());
  handshake(c);
  const uint64_t x = alloc(c, {256, 256});
  c.send(MsgType::GraphSubmit, 80, submit_msg(slow_graph(400), {{"x", x}}));
  // Requests are handled in order: once this is answered, the graph runs.
  c.send(MsgType::ServerInfoRequest, 79, wire::ServerInfoRequest());
  ASSERT_EQ(c.reply(79).h.type, MsgType::ServerInfo);
  server.stop();
  const bool still_running = server.stats().graphs_executed() == 0;
  server.stop();  // idempotent
  // Stopping has begun once nothing listens any more; a new graph is then
  // refused, the one in flight still reports.
  EXPECT_TRUE(eventually([&] { return port_refuses(server.port()); }));
  c.send(MsgType::GraphSubmit, 81, submit_msg(slow_graph(1), {{"x", x}}));
  std::optional<wire::GraphDone> done;
  std::optional<wire::ErrorReply> refused;
  for (int i = 0; i < 2; ++i) {
    auto f = c.recv(15000);
    ASSERT_TRUE(f.has_value()) << "frame " << i;
    if (f->h.request_id == 80 && f->h.type == MsgType::GraphDone) done = f->as<wire::GraphDone>();
    if (f->h.request_id == 81 && f->is_error()) refused = f->error();
  }
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->status(), GENIE_OK) << done->detail();
  EXPECT_EQ(done->outputs_size(), 1);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status(), GENIE_ERR_SHUTDOWN);
  EXPECT_TRUE(still_running) << "the graph finished before stop(): make it slower";
  server.wait();
  EXPECT_TRUE(c.closed_by_server());
  EXPECT_EQ(server.stats().tensors(), 0u);
  EXPECT_EQ(server.stats().sessions(), 0u);
  EXPECT_EQ(server.stats().graphs_executed(), 1u);
}

TEST_F(ControlServer, StopFromAnotherThreadClosesIdleSessions) {
  ServerOptions o = options();
  o.session_grace_ms = 60000;
  Server server(o);
  Raw c(server.port());
  handshake(c);
  alloc(c, {16});
  Raw in_grace(server.port());
  handshake(in_grace);
  alloc(in_grace, {16});
  in_grace.close();
  Raw half(server.port());  // still in its handshake
  std::thread([&] { server.stop(); }).join();
  std::thread other([&] { server.wait(); });
  server.wait();
  other.join();
  EXPECT_TRUE(c.closed_by_server());
  EXPECT_TRUE(half.closed_by_server());
  EXPECT_EQ(server.stats().sessions(), 0u);
  EXPECT_EQ(server.stats().tensors(), 0u);
}

}  // namespace
}  // namespace genie
