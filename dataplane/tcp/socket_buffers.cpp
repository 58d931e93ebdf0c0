#include "dataplane/tcp/socket_buffers.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

namespace genie::dataplane::tcp {

namespace {

bool is_loopback(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in&>(ss).sin_addr.s_addr) >> 24) == 127;
  if (ss.ss_family == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&a)) return true;
    return IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127;
  }
  return false;
}

bool same_address(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET)
    return reinterpret_cast<const sockaddr_in&>(a).sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in&>(b).sin_addr.s_addr;
  if (a.ss_family == AF_INET6)
    return std::memcmp(&reinterpret_cast<const sockaddr_in6&>(a).sin6_addr,
                       &reinterpret_cast<const sockaddr_in6&>(b).sin6_addr, sizeof(in6_addr)) == 0;
  return false;
}

}  // namespace

bool same_host(const sockaddr_storage& local, const sockaddr_storage& peer) {
  return is_loopback(peer) || same_address(local, peer);
}

bool peer_on_this_host(int fd) {
  sockaddr_storage local{}, peer{};
  socklen_t llen = sizeof local, plen = sizeof peer;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &llen) != 0) return false;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) != 0) return false;
  return same_host(local, peer);
}

int set_socket_buffers(int fd, int bytes, bool connected) {
  if (connected && bytes > kSameHostBufferBytes && peer_on_this_host(fd)) bytes = kSameHostBufferBytes;
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
  return bytes;
}

}  // namespace genie::dataplane::tcp
