// Socket buffer sizes of TCP data connections (dataplane/tcp/socket_buffers):
// which peers count as on this host, and what a socket is given.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "dataplane/tcp/socket_buffers.hpp"

using namespace genie::dataplane::tcp;

namespace {

sockaddr_storage addr(const std::string& ip, int port = 0) {
  sockaddr_storage ss{};
  if (ip.find(':') == std::string::npos) {
    auto& a = reinterpret_cast<sockaddr_in&>(ss);
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    EXPECT_EQ(1, ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr)) << ip;
  } else {
    auto& a = reinterpret_cast<sockaddr_in6&>(ss);
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    EXPECT_EQ(1, ::inet_pton(AF_INET6, ip.c_str(), &a.sin6_addr)) << ip;
  }
  return ss;
}

int get_int(int fd, int opt) {
  int v = 0;
  socklen_t len = sizeof v;
  EXPECT_EQ(0, ::getsockopt(fd, SOL_SOCKET, opt, &v, &len));
  return v;
}

// A connected pair over 127.0.0.1: the client socket and the accepted one.
struct LoopbackPair {
  int listener = -1, client = -1, server = -1;
  LoopbackPair() {
    listener = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(0, ::bind(listener, reinterpret_cast<sockaddr*>(&a), len));
    EXPECT_EQ(0, ::listen(listener, 1));
    EXPECT_EQ(0, ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len));
    client = ::socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(0, ::connect(client, reinterpret_cast<sockaddr*>(&a), len)) << std::strerror(errno);
    server = ::accept(listener, nullptr, nullptr);
    EXPECT_GE(server, 0);
  }
  ~LoopbackPair() {
    for (int fd : {listener, client, server})
      if (fd >= 0) ::close(fd);
  }
};

}  // namespace

TEST(TcpSocketBuffers, LoopbackAndOwnAddressesAreThisHost) {
  EXPECT_TRUE(same_host(addr("127.0.0.1", 40000), addr("127.0.0.1", 5555)));
  EXPECT_TRUE(same_host(addr("127.0.0.1"), addr("127.200.3.4")));    // all of 127.0.0.0/8
  EXPECT_TRUE(same_host(addr("192.0.2.7"), addr("192.0.2.7", 80)));  // our own address, another port
  EXPECT_TRUE(same_host(addr("::1"), addr("::1")));
  EXPECT_TRUE(same_host(addr("::ffff:127.0.0.1"), addr("::ffff:127.0.0.1")));
  EXPECT_TRUE(same_host(addr("2001:db8::1"), addr("2001:db8::1", 9)));
}

TEST(TcpSocketBuffers, OtherAddressesAreOtherHosts) {
  EXPECT_FALSE(same_host(addr("192.0.2.7"), addr("192.0.2.8")));
  EXPECT_FALSE(same_host(addr("127.0.0.1"), addr("192.0.2.8")));  // only the peer's address decides
  EXPECT_FALSE(same_host(addr("2001:db8::1"), addr("2001:db8::2")));
  EXPECT_FALSE(same_host(addr("::ffff:192.0.2.7"), addr("::ffff:192.0.2.8")));
  EXPECT_FALSE(same_host(addr("192.0.2.7"), addr("::ffff:192.0.2.7")));  // families differ
  EXPECT_FALSE(same_host(addr("192.0.2.7"), sockaddr_storage{}));        // no address
}

TEST(TcpSocketBuffers, ConnectedLoopbackSocketsGetTheSameHostSize) {
  LoopbackPair p;
  ASSERT_TRUE(peer_on_this_host(p.client));
  ASSERT_TRUE(peer_on_this_host(p.server));
  EXPECT_FALSE(peer_on_this_host(p.listener));  // not connected: no peer

  // What the kernel makes of a request for kSameHostBufferBytes (Linux
  // doubles it), on a socket of its own.
  const int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  int want = kSameHostBufferBytes;
  ::setsockopt(probe, SOL_SOCKET, SO_RCVBUF, &want, sizeof want);
  ::setsockopt(probe, SOL_SOCKET, SO_SNDBUF, &want, sizeof want);
  const int same_rcv = get_int(probe, SO_RCVBUF), same_snd = get_int(probe, SO_SNDBUF);
  ::close(probe);

  EXPECT_EQ(set_socket_buffers(p.client, 8 << 20, true), kSameHostBufferBytes);
  EXPECT_EQ(set_socket_buffers(p.server, 8 << 20, true), kSameHostBufferBytes);
  for (int fd : {p.client, p.server}) {
    EXPECT_EQ(get_int(fd, SO_RCVBUF), same_rcv);
    EXPECT_EQ(get_int(fd, SO_SNDBUF), same_snd);
  }
  // Smaller requests are kept; before connect() the size asked for is set.
  EXPECT_EQ(set_socket_buffers(p.client, 64 << 10, true), 64 << 10);
  EXPECT_EQ(set_socket_buffers(p.listener, 8 << 20, false), 8 << 20);
}
