// libFuzzer harness: a real `genie serve` server (server/server.hpp) in
// this process, with an auth token and small quotas, fed one connection per
// input. The connection is in memory (mem_channel.hpp): the input's bytes
// are decoded as a TCP connection decodes them and handed to the server's
// connection state machine on its loop thread (Server::adopt and
// run_in_loop), so an input costs no socket, no thread and no waiting, and
// the server (sessions, tensors, quotas, back-off records) carries over
// from one input to the next. The input is a script of records:
//
//   0 T LL MSG...        a frame of type kScriptTypes[T % N] (server_script.hpp) carrying MSG (LL bytes,
//                        little-endian), with a correct CRC, so the fuzzer
//                        explores the handshake and the requests behind it;
//                        with bit 7 of the first byte set, PP bytes of
//                        payload follow MSG (u16 PP, then the bytes)
//   1 LL BYTES...        raw bytes (frame decoding, CRCs, lengths)
//   2                    answer the server's last Challenge correctly (the
//                        HMAC of the nonce and the Hello's node id), so
//                        requests after the handshake are reached
//   3                    take one reply the server sent
//
// then the peer hangs up. Whatever the bytes, the server must answer or
// close, and keep serving: every 4096 inputs the harness completes a
// handshake with it over real TCP.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "control/auth.hpp"
#include "control/wire.hpp"
#include "control/wire_codec.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "genie.pb.h"
#include "mem_channel.hpp"
#include "server/server.hpp"
#include "server_script.hpp"

namespace {

using genie::wire::MsgType;

const char kToken[] = "fuzz-token-0123456789abcdef";

using genie::fuzz::kNumScriptTypes;
using genie::fuzz::kScriptTypes;

genie::Server* g_server = nullptr;
int g_port = 0;

struct Reader {
  const uint8_t* p;
  size_t n;
  bool take(size_t k, const uint8_t** out) {
    if (n < k) return false;
    *out = p;
    p += k;
    n -= k;
    return true;
  }
  bool u8(uint8_t* v) {
    const uint8_t* b;
    if (!take(1, &b)) return false;
    *v = b[0];
    return true;
  }
  bool u16(uint16_t* v) {
    const uint8_t* b;
    if (!take(2, &b)) return false;
    *v = static_cast<uint16_t>(b[0] | (b[1] << 8));
    return true;
  }
};

bool send_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Reads exactly n bytes, waiting at most wait_ms for each piece.
bool recv_all(int fd, void* data, size_t n, int wait_ms) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, wait_ms) <= 0) return false;
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Builds a frame with a correct CRC.
std::string frame(MsgType type, uint64_t rid, const std::string& msg, const std::string& payload) {
  genie::wire::FrameHeader h;
  h.type = type;
  h.request_id = rid;
  h.payload_len = payload.size();
  uint8_t hdr[genie::wire::kHeaderSize];
  genie::wire::encode_header(h, msg.data(), msg.size(), hdr);
  return std::string(reinterpret_cast<const char*>(hdr), sizeof hdr) + msg + payload;
}

bool send_frame(int fd, MsgType type, uint64_t rid, const std::string& msg, const std::string& payload) {
  const std::string f = frame(type, rid, msg, payload);
  return send_all(fd, f.data(), f.size());
}

// One reply frame (type and message; the payload is read and dropped).
bool read_frame(int fd, int wait_ms, MsgType* type, std::string* msg) {
  uint8_t hdr[genie::wire::kHeaderSize];
  if (!recv_all(fd, hdr, sizeof hdr, wait_ms)) return false;
  genie::wire::FrameHeader h;
  try {
    h = genie::wire::decode_header(hdr, 64u << 20);
  } catch (const genie::Error& e) {
    std::fprintf(stderr, "server_fuzz: the server sent a bad frame header: %s\n", e.what());
    std::abort();
  }
  msg->assign(h.msg_len, '\0');
  if (!recv_all(fd, msg->data(), msg->size(), wait_ms)) return false;
  std::string payload;
  for (uint64_t left = h.payload_len; left > 0;) {
    char buf[4096];
    const size_t k = left < sizeof buf ? static_cast<size_t>(left) : sizeof buf;
    if (!recv_all(fd, buf, k, wait_ms)) return false;
    left -= k;
  }
  *type = h.type;
  return true;
}

int connect_server() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) std::abort();
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(g_port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    // libFuzzer's timers interrupt system calls (SIGALRM): an interrupted
    // connect goes on in the background; wait for it.
    int err = errno;
    if (err == EINTR) {
      pollfd pfd{fd, POLLOUT, 0};
      while (::poll(&pfd, 1, -1) < 0 && errno == EINTR) {
      }
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err != 0) {
      std::fprintf(stderr, "server_fuzz: connect: %s\n", std::strerror(err));
      std::abort();
    }
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// Answers a Challenge (read within wait_ms) for the node id `node`.
bool authenticate(int fd, const std::string& node, int wait_ms, uint64_t rid) {
  MsgType type;
  std::string msg;
  while (read_frame(fd, wait_ms, &type, &msg)) {
    if (type != MsgType::Challenge) continue;
    genie::wire::Challenge c;
    if (!c.ParseFromString(msg)) return false;
    genie::wire::AuthResponse r;
    r.set_mac(genie::token_proof(kToken, c.nonce(), node, ""));
    return send_frame(fd, MsgType::AuthResponse, rid, genie::wire::encode_msg(r), "");
  }
  return false;
}

// Half-closes and reads until the server closes.
void finish(int fd) {
  ::shutdown(fd, SHUT_WR);
  char buf[65536];
  while (::recv(fd, buf, sizeof buf, 0) > 0) {
  }
  ::close(fd);
}

// A full handshake must still succeed: the server survived.
void check_alive() {
  const int fd = connect_server();
  genie::wire::Hello h;
  h.set_protocol_version(genie::wire::kProtocolVersion);
  h.set_abi_version(GENIE_ABI_VERSION);
  h.set_node_id("alive");
  h.set_role(GENIE_NODE_ROLE_CLIENT);
  MsgType type = MsgType::Ok;
  std::string msg;
  const bool ok = send_frame(fd, MsgType::Hello, 1, genie::wire::encode_msg(h), "") &&
                  authenticate(fd, "alive", 5000, 2) && read_frame(fd, 5000, &type, &msg) &&
                  type == MsgType::Welcome;
  if (!ok) {
    std::fprintf(stderr, "server_fuzz: the server no longer completes a handshake\n");
    std::abort();
  }
  finish(fd);
}

// Runs one script against the server, on its loop thread.
void run_script(const uint8_t* data, size_t size, uint64_t input) {
  // Sources rotate over a few addresses, so that one input's failed
  // authentications back off only some of the inputs after it.
  genie::fuzz::MemListener listener("127.0.0." + std::to_string(1 + input % 8) + ":4000");
  g_server->adopt(listener, "tcp");
  const std::shared_ptr<genie::fuzz::MemChannel> ch = listener.channel;
  if (ch == nullptr) return;
  Reader in{data, size};
  std::string node;   // the node id of the last Hello sent
  std::string nonce;  // of the last Challenge the server sent
  uint64_t rid = 1;
  const auto note_replies = [&] {
    for (const auto& r : ch->sent())
      if (r.type == static_cast<uint16_t>(MsgType::Challenge)) {
        genie::wire::Challenge c;
        if (c.ParseFromString(r.msg)) nonce = c.nonce();
      }
  };
  for (int records = 0; records < 64 && !ch->closed(); ++records) {
    uint8_t op;
    if (!in.u8(&op)) break;
    switch (op & 3) {
      case genie::fuzz::kOpFrame: {
        uint8_t t;
        uint16_t len, plen = 0;
        const uint8_t *msg = nullptr, *payload = nullptr;
        if (!in.u8(&t) || !in.u16(&len) || !in.take(len, &msg)) break;
        if ((op & genie::fuzz::kWithPayload) && (!in.u16(&plen) || !in.take(plen, &payload))) break;
        const MsgType type = kScriptTypes[t % kNumScriptTypes];
        const std::string m(reinterpret_cast<const char*>(msg), len);
        if (type == MsgType::Hello) {
          genie::wire::Hello h;
          google::protobuf::LogSilencer
              quiet;  // the harness's own parse: the server's must be quiet by itself
          if (h.ParseFromString(m)) node = h.node_id();
        }
        const std::string f =
            frame(type, rid++, m, std::string(reinterpret_cast<const char*>(payload ? payload : msg), plen));
        ch->feed(f.data(), f.size());
        break;
      }
      case genie::fuzz::kOpRaw: {
        uint16_t len;
        const uint8_t* raw;
        if (!in.u16(&len) || !in.take(len, &raw)) break;
        ch->feed(raw, len);
        break;
      }
      case genie::fuzz::kOpAuth: {
        note_replies();
        if (nonce.empty()) break;
        genie::wire::AuthResponse r;
        r.set_mac(genie::token_proof(kToken, nonce, node, ""));
        nonce.clear();
        const std::string f = frame(MsgType::AuthResponse, rid++, genie::wire::encode_msg(r), "");
        ch->feed(f.data(), f.size());
        break;
      }
      case genie::fuzz::kOpRead:
        note_replies();
        ch->sent().clear();
        break;
    }
  }
  ch->peer_closed();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  genie::set_log_level(genie::LogLevel::Off);
  genie::ServerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.auth_token = kToken;
  o.session_grace_ms = 0;  // a session ends with its connection
  o.max_message_bytes = 1u << 20;
  o.num_threads = 1;
  o.node_id = "fuzz-server";
  o.memory_budget = 64u << 20;
  o.quota = {16u << 20, 64, 4};
  g_server = new genie::Server(std::move(o));  // lives as long as the process
  g_port = g_server->port();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static uint64_t runs = 0;
  if (++runs % 4096 == 0) check_alive();
  g_server->run_in_loop([&] { run_script(data, size, runs); });
  return 0;
}
