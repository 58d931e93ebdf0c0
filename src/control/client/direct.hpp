// Synchronous tensor writes and reads driven by the calling thread on a
// socket of its own, with no event loop in between.
//
// Why: a framed call through the loop passes the caller -> client loop ->
// server -> client loop -> caller; at 64 KiB, and on the 2-vCPU machines
// Genie is measured on, the client loop's hand-offs (and the third thread
// that must run for them) cost more than the bytes. So the session keeps
// one more TCP data connection, the direct link, that no loop
// watches: a caller holding its mutex writes the request frame, then reads
// the reply frame straight into its own buffer, and is the only thread that
// touches the socket while it does. Ownership is the mutex and nothing
// else: the loop never registers the socket, so there is nothing to hand
// over and back. A caller that finds the mutex taken (another thread's call
// is on the direct link) uses the framed path through the loop instead, so
// concurrent callers still pipeline there.
//
// The wire is unchanged: the same frames with their CRC and limits, and
// the same handshake a data connection has (DataHello, the challenge, the
// session proof); the server sees one more data connection of the session
// and answers it on its loop like any other. With TLS the link has its own
// TLS session (dataplane/tcp/tls.hpp, driven on the socket by the caller)
// with the client's settings and certificate, and its session proof is
// bound to that TLS connection.
//
// Not used (the framed path runs instead): above kDirectMaxBytes, for a
// data transport other than TCP, on the loop thread, while the session is not ready (the framed path
// waits for a reconnect), with Config::direct_calls off, and after opening
// the direct link failed, until the session is next re-established.
//
// A session opens its direct link only once it has made kDirectAfterCalls
// synchronous transfers: one that moves a few tensors (a client that
// writes its inputs and submits) never costs the server a connection, which
// its per-source limit counts (ServerOptions::max_connections_per_source).
//
// Failures end the direct link (the next call opens a new one) and are
// reported as the framed path reports them: TIMEOUT (no reply within the
// timeout), CONNECTION (the server closed or the link broke), SHUTDOWN (the
// client was closed meanwhile), PROTOCOL (a malformed reply: bad CRC, wrong
// type, request id or length), or the server's own error, which leaves the
// link usable.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace genie::dataplane::tcp {
class TlsSession;
}

namespace genie {

constexpr uint64_t kDirectAfterCalls = 4;
// Larger transfers keep the loop's path: their cost is the bytes, not the
// hand-offs, and that path's streaming is the one measured at link speed.
constexpr size_t kDirectMaxBytes = size_t{1} << 20;

// The direct link's socket. `mu` is held by the caller driving it, for the
// whole call; `fd_mu` only while the descriptor is opened or closed, so that
// close() can shut a blocked call's socket down without racing with its
// descriptor being closed and reused.
struct DirectLink {
  DirectLink();
  DirectLink(const DirectLink&) = delete;
  DirectLink& operator=(const DirectLink&) = delete;
  ~DirectLink();

  std::mutex mu;
  std::mutex fd_mu;
  int fd = -1;           // written under both mutexes
  uint64_t epoch = 0;    // the session establishment it joined (under mu)
  uint64_t refused = 0;  // the establishment in which opening it failed (under mu)
  bool shut = false;     // close() ran: never opened again (under fd_mu)
  // With TLS (under mu): the link's session, and the plaintext it decrypted
  // that no frame has taken yet (from `taken` on).
  std::unique_ptr<dataplane::tcp::TlsSession> tls;
  std::string plain;
  size_t taken = 0;
  std::atomic<uint64_t> calls{0};     // transfers completed on it
  std::atomic<uint64_t> eligible{0};  // synchronous transfers asked for (kDirectAfterCalls)

  // Closes the socket (under mu, or from the destructor); true once
  // shutdown() has run.
  bool reset();
  // Any thread: ends a call blocked on the socket and keeps it from being
  // opened again.
  void shutdown();
};

}  // namespace genie
