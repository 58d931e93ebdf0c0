// Plain TCP between a benchmark and a child process on 127.0.0.1: the
// "raw C" comparisons of bench/rpc_roundtrip.cpp and
// bench/tensor_throughput.cpp, so that they cross between two processes as
// Genie's calls do.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace raw_tcp {

// Sends or receives exactly n bytes; false when the peer is gone. With
// spin_us > 0 a receive first polls the socket (MSG_DONTWAIT, yielding the
// CPU between tries) for up to that long before it blocks, as Genie's
// waits do (src/core/spin.hpp): on these VMs a wake-up on another vCPU
// costs tens of microseconds, and polling is how a plain program avoids it.
inline bool full_io(int fd, char* buf, size_t n, bool writing, int spin_us = 0) {
  using clock = std::chrono::steady_clock;
  size_t done = 0;
  const auto spin_until = spin_us > 0 ? clock::now() + std::chrono::microseconds(spin_us) : clock::time_point{};
  while (done < n) {
    ssize_t r;
    if (writing) {
      r = ::send(fd, buf + done, n - done, MSG_NOSIGNAL);
    } else if (spin_us > 0 && clock::now() < spin_until) {
      r = ::recv(fd, buf + done, n - done, MSG_DONTWAIT);
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        ::sched_yield();
        continue;
      }
    } else {
      r = ::recv(fd, buf + done, n - done, 0);
    }
    if (r <= 0) return false;
    done += static_cast<size_t>(r);
  }
  return true;
}

inline void nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Forks a child that runs serve(fd) on its end of a loopback connection,
// then exits; returns this process's end (TCP_NODELAY on both) and the
// child's pid in *child. Call it before this process starts a thread, and
// before it touches large buffers (a fork write-protects every page
// touched until then, and each later write to one takes a fault).
template <class Serve>
int fork_peer(pid_t* child, Serve serve) {
  const int listen_fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(listen_fd, 1) != 0 ||
      ::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::perror("raw tcp: bind/listen");
    std::exit(1);
  }
  *child = ::fork();
  if (*child == 0) {
    const int fd = ::accept(listen_fd, nullptr, nullptr);
    nodelay(fd);
    serve(fd);
    ::_exit(0);
  }
  ::close(listen_fd);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (*child < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    std::perror("raw tcp: fork/connect");
    std::exit(1);
  }
  nodelay(fd);
  return fd;
}

}  // namespace raw_tcp
