// Kernel buffer sizes of bulk-transfer TCP sockets (data connections).
//
// Between two hosts the buffers must cover the path's bandwidth-delay
// product, so data connections ask for large ones. Between two processes on
// one host (the peer is a loopback address, or this socket's own address)
// there is no path to fill: every byte is copied into the kernel by the
// sender and out of it by the receiver, and what matters is that the bytes
// in between are still in the CPUs' caches when the receiver copies them.
// A pipe of a few hundred KiB keeps them there; megabytes in flight push
// them out to memory and each copy then runs at memory speed (measured:
// docs/benchmarks.md, "Same-host pipe, and a fork in the benchmark").
#pragma once

#include <sys/socket.h>

namespace genie::dataplane::tcp {

// What a data connection between two processes on one host asks for
// (SO_SNDBUF and SO_RCVBUF; Linux doubles both for its bookkeeping).
constexpr int kSameHostBufferBytes = 256 << 10;

// True when a socket bound to `local` and connected to `peer` talks to
// this host: the peer's address is a loopback address (127.0.0.0/8, ::1,
// ::ffff:127.0.0.0/104) or the same address as `local`. Ports are ignored.
bool same_host(const sockaddr_storage& local, const sockaddr_storage& peer);

// same_host() of the connected socket `fd`'s two addresses; false when
// either cannot be read.
bool peer_on_this_host(int fd);

// Sets SO_SNDBUF and SO_RCVBUF of the socket `fd` to `bytes`, or to
// kSameHostBufferBytes when `connected` and its peer is on this host (and
// `bytes` is larger). Before connect() (`connected` false) the size is
// applied as asked, so that the receive window's scale fits it; call again
// once connected. Failures are ignored (the kernel's sizes stay): returns
// the size asked for, for logging.
int set_socket_buffers(int fd, int bytes, bool connected);

}  // namespace genie::dataplane::tcp
