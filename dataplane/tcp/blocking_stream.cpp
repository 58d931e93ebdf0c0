// Framed TCP I/O driven by the calling thread (blocking_stream.hpp).
#include "dataplane/tcp/blocking_stream.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "core/error.hpp"
#include "core/spin.hpp"
#include "dataplane/tcp/socket_buffers.hpp"
#include "dataplane/tcp/tls.hpp"
#include "dataplane/resolve.hpp"
#include "dataplane/transport_bytes.hpp"

namespace genie::dataplane::tcp {
namespace {

// Counted as the loop's Connection counts (transport_bytes.hpp).
metrics::Counter& sent_bytes() {
  static metrics::Counter& c = transport_bytes("tcp", true);
  return c;
}
metrics::Counter& received_bytes() {
  static metrics::Counter& c = transport_bytes("tcp", false);
  return c;
}

int ms_left(StreamClock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - StreamClock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

// One recv without waiting: > 0 bytes, or 0 when the socket has none yet.
// A close or an error breaks the exchange.
size_t recv_some(int fd, void* dst, size_t n) {
  for (;;) {
    const ssize_t k = ::recv(fd, dst, n, MSG_DONTWAIT);
    if (k > 0) {
      received_bytes().add(static_cast<double>(k));
      return static_cast<size_t>(k);
    }
    if (k == 0) broke(Broke::Closed, "the server closed the connection");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) broke(Broke::Closed, cat("recv: ", std::strerror(errno)));
    return 0;
  }
}

// Sends every byte of `iov` (modified as it goes) on the socket.
void send_raw(int fd, iovec* iov, int cnt, Deadline& deadline) {
  while (cnt > 0) {
    msghdr mh{};
    mh.msg_iov = iov;
    mh.msg_iovlen = static_cast<size_t>(cnt);
    const ssize_t k = ::sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        wait_for(fd, POLLOUT, deadline, false);
        continue;
      }
      broke(Broke::Closed, cat("send: ", std::strerror(errno)));
    }
    size_t done = static_cast<size_t>(k);
    while (cnt > 0 && done >= iov->iov_len) {
      done -= iov->iov_len;
      ++iov;
      --cnt;
    }
    if (cnt > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + done;
      iov->iov_len -= done;
    }
  }
}

// Receives exactly n bytes from the socket into dst; `spin` for the first
// wait (the reply is expected within microseconds).
void recv_raw(int fd, void* dst, size_t n, Deadline& deadline, bool spin) {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    const size_t k = recv_some(fd, p, n);
    if (k > 0) {
      p += k;
      n -= k;
      continue;
    }
    wait_for(fd, POLLIN, deadline, spin);
    spin = false;
  }
}

// The buffer's bytes all taken: start it over.
void restart_if_taken(BlockingStream& s) {
  if (*s.taken == s.plain->size()) {
    s.plain->clear();
    *s.taken = 0;
  }
}

// With TLS: reads and decrypts what the socket has (waiting for it),
// answering whatever the session has to say (handshake, alerts).
void tls_pull(BlockingStream& s, bool spin) {
  char buf[16 << 10];
  size_t k;
  while ((k = recv_some(s.fd, buf, sizeof buf)) == 0) {
    wait_for(s.fd, POLLIN, s.deadline, spin);
    spin = false;
  }
  restart_if_taken(s);
  const auto r = s.tls->feed(buf, k, s.plain);
  std::string out = s.tls->take_output();
  if (!out.empty()) {
    iovec one{out.data(), out.size()};
    send_raw(s.fd, &one, 1, s.deadline);
  }
  if (r != TlsSession::Result::Ok) broke(Broke::Closed, cat("TLS: ", s.tls->error()));
}

// Plaintext: reads what the socket has, up to kReadAhead bytes, into the
// stream's buffer (waiting for it).
void read_ahead(BlockingStream& s, bool spin) {
  restart_if_taken(s);
  size_t size = s.plain->size();
  // The buffer keeps only what was received, however this ends.
  struct Trim {
    std::string* s;
    const size_t* size;
    ~Trim() { s->resize(*size); }
  } trim{s.plain, &size};
  s.plain->resize(size + kReadAhead);
  size_t k;
  while ((k = recv_some(s.fd, s.plain->data() + size, kReadAhead)) == 0) {
    // Spinning on poll, not on recv: a recv holds the socket's lock, and
    // the reply arriving meanwhile waits in its backlog.
    wait_for(s.fd, POLLIN, s.deadline, spin);
    spin = false;
  }
  size += k;
}

}  // namespace

// Waits until `fd` is ready for `events` or the deadline passes. A reply
// that comes within microseconds is taken without sleeping (core/spin.hpp).
void wait_for(int fd, short events, Deadline& deadline, bool spin) {
  pollfd p{fd, events, 0};
  if (spin && spin_until([&] { return ::poll(&p, 1, 0) > 0; }, kReplySpin)) return;
  for (;;) {
    const int rc = ::poll(&p, 1, ms_left(deadline.at()));
    if (rc > 0) return;
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) broke(Broke::Closed, cat("poll: ", std::strerror(errno)));
    broke(Broke::Timeout, "");
  }
}

void send_all(BlockingStream& s, iovec* iov, int cnt) {
  uint64_t bytes = 0;
  for (int i = 0; i < cnt; ++i) bytes += iov[i].iov_len;
  sent_bytes().add(static_cast<double>(bytes));
  if (s.tls == nullptr) return send_raw(s.fd, iov, cnt, s.deadline);
  for (int i = 0; i < cnt; ++i)
    if (iov[i].iov_len > 0 && !s.tls->encrypt(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len))
      broke(Broke::Protocol, cat("TLS: ", s.tls->error()));
  std::string out = s.tls->take_output();
  iovec one{out.data(), out.size()};
  send_raw(s.fd, &one, 1, s.deadline);
}

void recv_all(BlockingStream& s, void* dst, size_t n, bool spin) {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    const size_t have = s.plain->size() - *s.taken;
    if (have > 0) {
      const size_t k = std::min(n, have);
      std::memcpy(p, s.plain->data() + *s.taken, k);
      *s.taken += k;
      p += k;
      n -= k;
      continue;
    }
    if (s.tls != nullptr) {
      tls_pull(s, spin);
    } else if (n >= kReadAhead) {
      return recv_raw(s.fd, p, n, s.deadline, spin);  // a payload: straight to its place
    } else {
      read_ahead(s, spin);
    }
    spin = false;
  }
}

void tls_handshake(BlockingStream& s) {
  s.tls->start();
  std::string hello = s.tls->take_output();  // the ClientHello
  iovec one{hello.data(), hello.size()};
  send_raw(s.fd, &one, 1, s.deadline);
  while (!s.tls->handshake_done()) tls_pull(s, false);
}

void send_frame(BlockingStream& s, const FrameHeader& h, const void* msg, size_t msg_len, const void* payload,
                uint64_t payload_len) {
  FrameHeader with = h;
  with.payload_len = payload_len;
  uint8_t hdr[kFrameHeaderSize];
  encode_frame_header(with, msg, msg_len, hdr);
  iovec iov[3] = {{hdr, sizeof hdr},
                  {const_cast<void*>(msg), msg_len},
                  {const_cast<void*>(payload), static_cast<size_t>(payload_len)}};
  send_all(s, iov, payload_len > 0 ? 3 : 2);
}

FrameHeader read_frame(BlockingStream& s, uint32_t max_message, const FrameTypes& types, std::string* msg,
                       bool spin) {
  uint8_t hdr[kFrameHeaderSize];
  recv_all(s, hdr, sizeof hdr, spin);
  FrameHeader h;
  try {
    h = decode_frame_header(hdr, max_message, types);
    msg->resize(h.msg_len);
    recv_all(s, msg->data(), msg->size(), false);
    verify_frame_crc(hdr, msg->data(), msg->size(), types);
  } catch (const Error& e) {
    broke(Broke::Protocol, e.detail());
  }
  return h;
}

int connect_blocking(const std::string& address, int buffer_bytes, StreamClock::time_point deadline) {
  std::string why;
  const AddrInfo res = resolve_address(address, false, &why);
  check(res != nullptr, GENIE_ERR_CONNECTION, "cannot resolve ", address, ": ", why);
  const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  check(fd >= 0, GENIE_ERR_CONNECTION, "socket: ", std::strerror(errno));
  // As the loop's data connection: buffers set before the SYN (window
  // scale), requests never held back by Nagle.
  const int one = 1;
  set_socket_buffers(fd, buffer_bytes, false);
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  try {
    if (::connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) broke(Broke::Closed, std::strerror(errno));
      Deadline d(deadline);
      wait_for(fd, POLLOUT, d, false);
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) broke(Broke::Closed, std::strerror(err));
    }
  } catch (const StreamBroken& b) {
    ::close(fd);
    fail(GENIE_ERR_CONNECTION, "connecting to ", address, ": ",
         b.why == Broke::Timeout ? std::string("timed out") : b.detail);
  }
  return fd;
}

bool idle_ok(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  return ::poll(&p, 1, 0) == 0;
}

}  // namespace genie::dataplane::tcp
