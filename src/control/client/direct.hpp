// Synchronous tensor writes and reads, and graph submissions whose caller
// waits, driven by the calling thread on a socket of its own, with no
// event loop in between.
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
// and answers it on its loop like any other. Its frames are read and
// written by the TCP transport's blocking framed I/O
// (dataplane/tcp/blocking_stream.hpp; direct_io.hpp gives it control's
// message types). With TLS the link has its own TLS session
// (dataplane/tcp/tls.hpp, driven on the socket by the caller) with the
// client's settings and certificate, and its session proof is bound to
// that TLS connection.
//
// Over a data transport other than TCP, the link is the transport's
// blocking channel (dataplane/blocking.hpp: over UCX, a worker and
// endpoint of the link's own that the caller progresses while it waits),
// for transfers only (submissions take the loop); a transport without
// blocking channels keeps the framed path.
//
// Not used (the framed path runs instead): above kDirectMaxBytes, on the loop thread, while the session is
// not ready (the framed path waits for a reconnect), with Config::direct_calls off, and after opening the
// direct link failed, until the session is next re-established.
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
//
// Submissions (direct_submit.cpp). A server that says so in its Welcome
// (data_submit) runs a GraphSubmit sent on a data connection and answers
// there. Once the link is open, a submission is written on it (under
// send_mu, beside a thread that may be reading it; with TLS, whose one
// session serves both directions, only while no thread reads) and its Call
// is recorded as owed. Whoever holds `mu` reads the link and completes
// every owed submission whose GraphDone it finds, running its completion
// on that thread:
//  - a caller waiting for its future (RemoteClient::collect): with no
//    other thread in between, a synchronous submit and wait costs the
//    client one write and one read. Other waiters sleep until the reader
//    completes their call or lets the link go;
//  - a transfer, whose reply may come after some GraphDones;
//  - the watcher thread, started once a submission nobody will wait for
//    is owed (a completion callback is set, the future is destroyed, the
//    context shuts down): it reads in slices of 20 ms while such calls are
//    owed, so that a caller's transfer finds the link between them.
// A thread running a completion it read never takes the link again
// (DirectReader): its calls take the loop. When the link breaks, or the
// session is lost or closed, every owed submission completes once with the
// failure (CONNECTION, SHUTDOWN). While submissions are owed, the loop's
// liveness check treats the server's silence as it does for its own
// requests. At most kDirectMaxOwed are owed at once; past it, and while the
// link cannot be had, submissions take the loop. Tensors freed since the
// last submission go inside the next one where the server takes them
// there (Welcome.submit_frees), else as TensorFree frames ahead of it in
// the same write.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace genie::dataplane {
class BlockingChannel;
namespace tcp {
class TlsSession;
}
}  // namespace genie::dataplane

namespace genie {

struct Call;

constexpr uint64_t kDirectAfterCalls = 4;
// Submissions whose completion the direct link may owe at once; past it,
// submissions take the loop.
constexpr size_t kDirectMaxOwed = 1024;
// Larger transfers keep the loop's path: their cost is the bytes, not the
// hand-offs, and that path's streaming is the one measured at link speed.
constexpr size_t kDirectMaxBytes = size_t{1} << 20;
// A link quiet for longer is checked before it is used again (the server
// may have closed it: its session ended, or the server stopped), so that a
// call goes on a new link instead of failing on the closed one. Within it,
// the check's system call is not worth making: the server was answering
// on the link a moment ago.
constexpr std::chrono::milliseconds kDirectQuietCheck{1};

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
  // Instead of fd, over another transport: its blocking channel (written
  // under both mutexes).
  std::unique_ptr<dataplane::BlockingChannel> chan;
  uint64_t epoch = 0;    // the session establishment it joined (under mu)
  uint64_t refused = 0;  // the establishment in which opening it failed (under mu)
  bool shut = false;     // close() ran: never opened again (under fd_mu)
  // Under mu: with TLS, the link's session; the bytes received (decrypted)
  // that no frame has taken yet, from `taken` on (direct_io::Io).
  std::unique_ptr<dataplane::tcp::TlsSession> tls;
  std::string plain;
  size_t taken = 0;
  std::chrono::steady_clock::time_point heard{};  // the last frame read on it (under mu)
  std::string msg;                    // the message of the frame read last, its buffer reused (under mu)
  std::atomic<uint64_t> calls{0};     // transfers completed on it
  std::atomic<uint64_t> eligible{0};  // synchronous calls asked for (kDirectAfterCalls)
  std::atomic<uint64_t> submits{0};   // graph submissions sent on it
  std::atomic<uint64_t> frees_carried{0};  // tensor frees sent inside them

  // Frames are written under send_mu (taken after mu, and held briefly):
  // on a plaintext link a submission is sent while another thread holds mu
  // to read. The descriptor and the TLS session change only under both.
  std::mutex send_mu;
  // Under send_mu: the bytes of the frames being sent, and the tensor ids
  // freed before them, both buffers reused from one submission to the next.
  std::string out;
  std::vector<uint64_t> frees;
  // Submissions sent on the link whose GraphDone it still owes, by request
  // id (under owed_mu, a leaf; direct_submit.cpp). owed_count is
  // owed.size() and `watched` the owed calls nobody waits for, readable
  // without it.
  std::mutex owed_mu;
  std::unordered_map<uint64_t, std::shared_ptr<Call>> owed;
  std::atomic<size_t> owed_count{0};
  std::atomic<size_t> watched{0};
  // Threads waiting for a completion while another one reads the link:
  // `turns` is bumped (under wait_mu) whenever a reader lets the link go or
  // completes a submission.
  std::mutex wait_mu;
  std::condition_variable wait_cv;
  uint64_t turns = 0;
  // The watcher: collects completions nobody waits for (direct_submit.cpp).
  std::thread watcher;        // started and joined under wait_mu's protection
  bool drain = false;         // collect every owed completion (closing; under wait_mu)
  bool watcher_stop = false;  // under wait_mu

  // True while a socket or a channel is open (under mu).
  bool open() const { return fd >= 0 || chan != nullptr; }
  // Closes the socket or channel (under mu and send_mu, or from the
  // destructor); true once shutdown() has run.
  bool reset();
  // Any thread: ends a call blocked on the socket and keeps it from being
  // opened again.
  void shutdown();
  // Any thread: ends a call blocked on the socket (the connection was lost);
  // the next call opens a new one.
  void interrupt();
  // Wakes the threads waiting for a completion.
  void next_turn();
};

// The reader's turn: DirectLink::mu if it is free, and, when this lets it
// go, the threads waiting for a completion woken (one of them may read).
class DirectTurn {
 public:
  explicit DirectTurn(DirectLink& link) : link_(link), own_(link.mu, std::try_to_lock) {}
  DirectTurn(const DirectTurn&) = delete;
  DirectTurn& operator=(const DirectTurn&) = delete;
  ~DirectTurn() { release(); }
  bool owns() const { return own_.owns_lock(); }
  void release() {
    if (!own_.owns_lock()) return;
    own_.unlock();
    link_.next_turn();
  }

 private:
  DirectLink& link_;
  std::unique_lock<std::mutex> own_;
};

}  // namespace genie
