// The direct link's socket I/O (direct_io.hpp).
#include "control/client/direct_io.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "control/client/impl.hpp"
#include "control/wire_codec.hpp"
#include "core/spin.hpp"
#include "dataplane/tcp/socket_buffers.hpp"
#include "dataplane/tcp/tls.hpp"

namespace genie::direct_io {

void broke(Broke why, std::string detail) { throw LinkBroken{why, std::move(detail)}; }

static int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

// Waits until `fd` is ready for `events` or the deadline passes. A reply
// that comes within microseconds is taken without sleeping (core/spin.hpp).
void wait_for(int fd, short events, Deadline& deadline, bool spin) {
  pollfd p{fd, events, 0};
  if (spin && spin_until([&] { return ::poll(&p, 1, 0) > 0; }, kReplySpin)) return;
  for (;;) {
    const int left = ms_left(deadline.at());
    const int rc = ::poll(&p, 1, left);
    if (rc > 0) return;
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) broke(Broke::Closed, cat("poll: ", std::strerror(errno)));
    broke(Broke::Timeout, "");
  }
}

void wait_for(int fd, short events, Clock::time_point deadline, bool spin) {
  Deadline d(deadline);
  wait_for(fd, events, d, spin);
}

// Sends every byte of `iov` (modified as it goes) on the socket.
static void send_raw(int fd, iovec* iov, int cnt, Deadline& deadline) {
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
static void recv_raw(int fd, void* dst, size_t n, Deadline& deadline, bool spin) {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t k = ::recv(fd, p, n, MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k == 0) broke(Broke::Closed, "the server closed the connection");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) broke(Broke::Closed, cat("recv: ", std::strerror(errno)));
    wait_for(fd, POLLIN, deadline, spin);
    spin = false;
  }
}

void send_all(Io& io, iovec* iov, int cnt) {
  if (io.tls == nullptr) return send_raw(io.fd, iov, cnt, io.deadline);
  for (int i = 0; i < cnt; ++i)
    if (iov[i].iov_len > 0 && !io.tls->encrypt(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len))
      broke(Broke::Protocol, cat("TLS: ", io.tls->error()));
  std::string out = io.tls->take_output();
  iovec one{out.data(), out.size()};
  send_raw(io.fd, &one, 1, io.deadline);
}

// With TLS: reads and decrypts what the socket has (waiting for it),
// answering whatever the session has to say (handshake, alerts).
void tls_pull(Io& io, bool spin) {
  char buf[16 << 10];
  for (;;) {
    const ssize_t k = ::recv(io.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (k == 0) broke(Broke::Closed, "the server closed the connection");
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) broke(Broke::Closed, cat("recv: ", std::strerror(errno)));
      wait_for(io.fd, POLLIN, io.deadline, spin);
      spin = false;
      continue;
    }
    if (*io.taken == io.plain->size()) {
      io.plain->clear();
      *io.taken = 0;
    }
    const auto r = io.tls->feed(buf, static_cast<size_t>(k), io.plain);
    std::string out = io.tls->take_output();
    if (!out.empty()) {
      iovec one{out.data(), out.size()};
      send_raw(io.fd, &one, 1, io.deadline);
    }
    if (r != dataplane::tcp::TlsSession::Result::Ok) broke(Broke::Closed, cat("TLS: ", io.tls->error()));
    return;
  }
}

// Plaintext: reads what the socket has, up to kReadAhead bytes, into the
// link's buffer (waiting for it).
static void read_ahead(Io& io, bool spin) {
  if (*io.taken == io.plain->size()) {
    io.plain->clear();
    *io.taken = 0;
  }
  size_t size = io.plain->size();
  // The buffer keeps only what was received, however this ends.
  struct Trim {
    std::string* s;
    const size_t* size;
    ~Trim() { s->resize(*size); }
  } trim{io.plain, &size};
  io.plain->resize(size + kReadAhead);
  for (;;) {
    const ssize_t k = ::recv(io.fd, io.plain->data() + size, kReadAhead, MSG_DONTWAIT);
    if (k > 0) {
      size += static_cast<size_t>(k);
      return;
    }
    if (k == 0) broke(Broke::Closed, "the server closed the connection");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) broke(Broke::Closed, cat("recv: ", std::strerror(errno)));
    // Spinning on poll, not on recv: a recv holds the socket's lock, and
    // the reply arriving meanwhile waits in its backlog.
    wait_for(io.fd, POLLIN, io.deadline, spin);
    spin = false;
  }
}

void recv_all(Io& io, void* dst, size_t n, bool spin) {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    const size_t have = io.plain->size() - *io.taken;
    if (have > 0) {
      const size_t k = std::min(n, have);
      std::memcpy(p, io.plain->data() + *io.taken, k);
      *io.taken += k;
      p += k;
      n -= k;
      continue;
    }
    if (io.tls != nullptr) {
      tls_pull(io, spin);
    } else if (n >= kReadAhead) {
      return recv_raw(io.fd, p, n, io.deadline, spin);  // a payload: straight to its place
    } else {
      read_ahead(io, spin);
    }
    spin = false;
  }
}

namespace {

// A frame's header, its CRC over the header and the `len` bytes of its
// message at `msg`.
void frame_header(MsgType type, uint64_t rid, const void* msg, size_t len, uint64_t payload_len,
                  uint8_t out[wire::kHeaderSize]) {
  wire::FrameHeader h;
  h.type = type;
  h.request_id = rid;
  h.payload_len = payload_len;
  wire::encode_header(h, msg, len, out);
}

}  // namespace

void append_frame(std::string* out, MsgType type, uint64_t rid, const std::string& msg,
                  const std::vector<uint64_t>& frees) {
  const size_t at = out->size();
  const size_t start = at + wire::kHeaderSize;
  out->resize(start);  // the header, once the message is in place
  out->append(msg);
  wire::append_submit_frees(out, frees);
  frame_header(type, rid, out->data() + start, out->size() - start, 0,
               reinterpret_cast<uint8_t*>(out->data() + at));
}

void send_frame(Io& io, MsgType type, uint64_t rid, const std::string& msg, const void* payload,
                uint64_t len) {
  uint8_t hdr[wire::kHeaderSize];
  frame_header(type, rid, msg.data(), msg.size(), len, hdr);
  iovec iov[3] = {{hdr, sizeof hdr},
                  {const_cast<char*>(msg.data()), msg.size()},
                  {const_cast<void*>(payload), static_cast<size_t>(len)}};
  send_all(io, iov, len > 0 ? 3 : 2);
}

wire::FrameHeader read_frame(Io& io, uint32_t max_message, std::string* msg, bool spin) {
  uint8_t hdr[wire::kHeaderSize];
  recv_all(io, hdr, sizeof hdr, spin);
  wire::FrameHeader h;
  try {
    h = wire::decode_header(hdr, max_message);
    msg->resize(h.msg_len);
    recv_all(io, msg->data(), msg->size(), false);
    wire::verify_crc(hdr, msg->data(), msg->size());
  } catch (const Error& e) {
    broke(Broke::Protocol, e.detail());
  }
  return h;
}

wire::FrameHeader recv_reply(Io& io, uint64_t rid, uint32_t max_message, std::string* msg) {
  const wire::FrameHeader h = read_frame(io, max_message, msg, true);
  if (h.request_id != rid)
    broke(Broke::Protocol, cat("reply to request ", h.request_id, " while request ", rid, " waited"));
  return h;
}

// A blocking connect bounded by the deadline; the socket comes back
// non-blocking, with the data connection's options.
int connect_to(const std::string& address, Clock::time_point deadline) {
  std::string host;
  int port = 0;
  dataplane::split_address(address, &host, &port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const int gai = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  check(gai == 0 && res != nullptr, GENIE_ERR_CONNECTION, "cannot resolve ", host, ": ", ::gai_strerror(gai));
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(res, ::freeaddrinfo);
  const int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  check(fd >= 0, GENIE_ERR_CONNECTION, "socket: ", std::strerror(errno));
  // As the loop's data connection: buffers set before the SYN (window
  // scale), requests never held back by Nagle.
  const int one = 1;
  dataplane::tcp::set_socket_buffers(fd, kDataSocketBuffer, false);
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  try {
    if (::connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) broke(Broke::Closed, std::strerror(errno));
      wait_for(fd, POLLOUT, deadline, false);
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) broke(Broke::Closed, std::strerror(err));
    }
  } catch (const LinkBroken& b) {
    ::close(fd);
    fail(GENIE_ERR_CONNECTION, "connecting to ", address, ": ",
         b.why == Broke::Timeout ? std::string("timed out") : b.detail);
  }
  return fd;
}

// True when an idle socket still looks usable: nothing to read (a peer's
// close or stray bytes make it readable) and no error.
bool idle_ok(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  return ::poll(&p, 1, 0) == 0;
}

}  // namespace genie::direct_io
