// The direct link (direct.hpp): a blocking-style exchange of one request
// and its reply on a non-blocking socket, with poll() bounding every wait by
// the call's deadline.
#include "control/client/direct.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "control/auth.hpp"
#include "control/client/impl.hpp"
#include "core/spin.hpp"
#include "dataplane/tcp/socket_buffers.hpp"
#include "dataplane/tcp/tls.hpp"

namespace genie {

DirectLink::DirectLink() = default;
DirectLink::~DirectLink() { reset(); }

bool DirectLink::reset() {
  tls.reset();
  plain.clear();
  taken = 0;
  std::lock_guard<std::mutex> lk(fd_mu);
  if (fd >= 0) ::close(fd);
  fd = -1;
  return shut;
}

void DirectLink::shutdown() {
  std::lock_guard<std::mutex> lk(fd_mu);
  shut = true;
  if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
}

namespace {

// Why an exchange stopped: the caller turns it into the framed path's error.
enum class Broke { Timeout, Closed, Protocol };
struct LinkBroken {
  Broke why;
  std::string detail;
};

[[noreturn]] void broke(Broke why, std::string detail) { throw LinkBroken{why, std::move(detail)}; }

int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

// Waits until `fd` is ready for `events` or the deadline passes. A reply
// that comes within microseconds is taken without sleeping (core/spin.hpp).
void wait_for(int fd, short events, Clock::time_point deadline, bool spin) {
  pollfd p{fd, events, 0};
  if (spin && spin_until([&] { return ::poll(&p, 1, 0) > 0; }, kReplySpin)) return;
  for (;;) {
    const int left = ms_left(deadline);
    const int rc = ::poll(&p, 1, left);
    if (rc > 0) return;
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) broke(Broke::Closed, cat("poll: ", std::strerror(errno)));
    broke(Broke::Timeout, "");
  }
}

// Sends every byte of `iov` (modified as it goes) on the socket.
void send_raw(int fd, iovec* iov, int cnt, Clock::time_point deadline) {
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
void recv_raw(int fd, void* dst, size_t n, Clock::time_point deadline, bool spin) {
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

// One exchange on the direct link: its socket and, with TLS, its session
// and the plaintext decrypted but not yet taken by a frame.
struct Io {
  int fd;
  dataplane::tcp::TlsSession* tls;  // null: plaintext
  std::string* plain;
  size_t* taken;  // bytes of *plain already taken
  Clock::time_point deadline;
};

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

void recv_all(Io& io, void* dst, size_t n, bool spin) {
  if (io.tls == nullptr) return recv_raw(io.fd, dst, n, io.deadline, spin);
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    const size_t have = io.plain->size() - *io.taken;
    if (have == 0) {
      tls_pull(io, spin);
      spin = false;
      continue;
    }
    const size_t k = std::min(n, have);
    std::memcpy(p, io.plain->data() + *io.taken, k);
    *io.taken += k;
    p += k;
    n -= k;
  }
}

void send_frame(Io& io, MsgType type, uint64_t rid, const std::string& msg, const void* payload,
                uint64_t len) {
  wire::FrameHeader h;
  h.type = type;
  h.request_id = rid;
  h.payload_len = len;
  uint8_t hdr[wire::kHeaderSize];
  wire::encode_header(h, msg.data(), msg.size(), hdr);
  iovec iov[3] = {{hdr, sizeof hdr},
                  {const_cast<char*>(msg.data()), msg.size()},
                  {const_cast<void*>(payload), static_cast<size_t>(len)}};
  send_all(io, iov, len > 0 ? 3 : 2);
}

// Reads a reply's header and message, the CRC checked. The payload, if any,
// is the caller's to read.
wire::FrameHeader recv_reply(Io& io, uint64_t rid, uint32_t max_message, std::string* msg) {
  uint8_t hdr[wire::kHeaderSize];
  recv_all(io, hdr, sizeof hdr, true);
  wire::FrameHeader h;
  try {
    h = wire::decode_header(hdr, max_message);
    msg->resize(h.msg_len);
    recv_all(io, msg->data(), msg->size(), false);
    wire::verify_crc(hdr, msg->data(), msg->size());
  } catch (const Error& e) {
    broke(Broke::Protocol, e.detail());
  }
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

}  // namespace

bool RemoteClient::Impl::direct_transfer(bool write, uint64_t id, size_t offset, void* buf, size_t nbytes) {
  if (!cfg.direct_calls || nbytes > kDirectMaxBytes || loop->on_loop_thread()) return false;
  if (direct.eligible.fetch_add(1, std::memory_order_relaxed) < kDirectAfterCalls) return false;
  std::unique_lock<std::mutex> own(direct.mu, std::try_to_lock);
  if (!own.owns_lock()) return false;  // another caller's call is on it: take the loop
  std::string address, secret;
  uint64_t epoch, session;
  {
    std::lock_guard<std::mutex> lk(mu);
    if (state != State::Ready || data_endpoint.transport != "tcp") return false;
    address = data_endpoint.address;
    epoch = link_epoch;
    // Written on the loop thread before the first Ready, never after.
    secret = token;
    session = session_id;
  }
  if (direct.refused == epoch) return false;
  if (direct.fd >= 0 && (direct.epoch != epoch || !idle_ok(direct.fd))) direct.reset();

  const auto deadline = Clock::now() + timeout;
  const char* what = write ? "tensor write" : "tensor read";
  // Whatever breaks the link: the socket goes, the caller gets the framed
  // path's error.
  const auto lost = [&](const LinkBroken& b) -> Error {
    // close() shuts the socket down before the loop marks the client
    // closed: its flag says which of the two ended the call.
    if (direct.reset())
      return Error(GENIE_ERR_SHUTDOWN, cat("the connection to ", addr, " has been closed (shut down)"));
    switch (b.why) {
      case Broke::Timeout:
        return Error(GENIE_ERR_TIMEOUT,
                     cat(what, ": no reply from ", addr, " within ", timeout.count(), " ms"));
      case Broke::Protocol: return Error(GENIE_ERR_PROTOCOL, cat(what, ": ", b.detail));
      default: return Error(GENIE_ERR_CONNECTION, cat("connection to ", addr, " lost: ", b.detail));
    }
  };

  if (direct.fd < 0) {
    {
      std::lock_guard<std::mutex> lk(direct.fd_mu);
      if (direct.shut) return false;  // closing: the framed path says SHUTDOWN
    }
    // Joining the session as a data connection does (link.cpp): DataHello,
    // the server's challenge, the proof of the session's secret, Welcome.
    int fd = -1;
    std::unique_ptr<dataplane::tcp::TlsSession> session_tls;
    std::string plain;
    size_t taken = 0;
    try {
      fd = connect_to(address, deadline);
      Io io{fd, nullptr, &plain, &taken, deadline};
      if (tls != nullptr) {
        // As the loop's data connection: TLS with this client's settings,
        // the server's certificate checked against the host connected to.
        std::string host;
        int port = 0;
        dataplane::split_address(address, &host, &port);
        session_tls = std::make_unique<dataplane::tcp::TlsSession>(tls, host);
        io.tls = session_tls.get();
        session_tls->start();
        send_all(io, nullptr, 0);  // the ClientHello
        while (!session_tls->handshake_done()) tls_pull(io, false);
      }
      std::string msg;
      wire::DataHello h;
      h.set_session_id(session);
      uint64_t rid = next_id.fetch_add(1);
      send_frame(io, MsgType::DataHello, rid, wire::encode_msg(h), nullptr, 0);
      wire::FrameHeader fh = recv_reply(io, rid, max_message, &msg);
      check(!is_error(fh) && fh.type == MsgType::Challenge && fh.payload_len == 0, GENIE_ERR_PROTOCOL,
            "the server answered the DataHello with ", wire::type_name(fh.type));
      const auto c = wire::parse_msg<wire::Challenge>(msg, fh.type);
      wire::AuthResponse r;
      // Bound to this TLS connection, as the loop's data connection's is.
      r.set_session_mac(
          data_proof(secret, c.nonce(), session, "tcp", session_tls ? session_tls->channel_binding() : ""));
      rid = next_id.fetch_add(1);
      send_frame(io, MsgType::AuthResponse, rid, wire::encode_msg(r), nullptr, 0);
      fh = recv_reply(io, rid, max_message, &msg);
      check(!is_error(fh) && fh.type == MsgType::Welcome && fh.payload_len == 0, GENIE_ERR_PROTOCOL,
            "the server answered the session proof with ", wire::type_name(fh.type));
    } catch (const LinkBroken& b) {
      if (fd >= 0) ::close(fd);
      log(LogLevel::Debug, "client: direct link to ", address, " not opened (",
          b.why == Broke::Timeout ? std::string("timed out") : b.detail, "): framed transfers");
      direct.refused = epoch;
      return false;
    } catch (const Error& e) {
      if (fd >= 0) ::close(fd);
      log(LogLevel::Debug, "client: direct link to ", address, " not opened (", e.detail(),
          "): framed transfers");
      direct.refused = epoch;
      return false;
    }
    std::lock_guard<std::mutex> lk(direct.fd_mu);
    if (direct.shut) {
      ::close(fd);
      return false;  // closed meanwhile: the framed path says SHUTDOWN
    }
    direct.fd = fd;
    direct.epoch = epoch;
    direct.tls = std::move(session_tls);
    direct.plain = std::move(plain);
    direct.taken = taken;
  }

  Io io{direct.fd, direct.tls.get(), &direct.plain, &direct.taken, deadline};
  const uint64_t rid = next_id.fetch_add(1);
  std::string msg;
  wire::FrameHeader fh;
  try {
    if (write) {
      wire::TensorWrite m;
      m.set_tensor_id(id);
      m.set_offset(offset);
      try {
        send_frame(io, MsgType::TensorWrite, rid, wire::encode_msg(m), buf, nbytes);
      } catch (const LinkBroken& b) {
        // A refused write: the server answers with its error and closes
        // without reading the payload. Its error is the one to report.
        if (b.why != Broke::Closed) throw;
        try {
          io.deadline = std::min(deadline, Clock::now() + std::chrono::seconds(1));
          fh = recv_reply(io, rid, max_message, &msg);
        } catch (const LinkBroken&) {
          throw b;
        }
        if (!is_error(fh)) throw b;
        direct.reset();
        auto [st, detail] = parse_error(msg);
        throw Error(st, std::move(detail));
      }
    } else {
      wire::TensorRead m;
      m.set_tensor_id(id);
      m.set_offset(offset);
      m.set_nbytes(nbytes);
      send_frame(io, MsgType::TensorRead, rid, wire::encode_msg(m), nullptr, 0);
    }
    fh = recv_reply(io, rid, max_message, &msg);
    if (is_error(fh)) {
      // The link stays in step: an error's payload (none is sent) is read
      // and dropped.
      std::vector<char> sink(static_cast<size_t>(std::min<uint64_t>(fh.payload_len, 1 << 16)));
      for (uint64_t left = fh.payload_len; left > 0;) {
        const size_t k = static_cast<size_t>(std::min<uint64_t>(left, sink.size()));
        recv_all(io, sink.data(), k, false);
        left -= k;
      }
      // A refused write's payload is never read: the server closes the
      // connection after its error, so the next call opens a new one.
      if (write && nbytes > 0) direct.reset();
      auto [st, detail] = parse_error(msg);
      throw Error(st, std::move(detail));
    }
    if (fh.type != MsgType::Ok)
      broke(Broke::Protocol, cat("reply is ", wire::type_name(fh.type), ", not Ok"));
    const uint64_t want = write ? 0 : nbytes;
    if (fh.payload_len != want)
      broke(Broke::Protocol, cat("reply carries ", fh.payload_len, " bytes, ", want, " were asked for"));
    if (!write) recv_all(io, buf, nbytes, false);
  } catch (const LinkBroken& b) {
    throw lost(b);
  }
  direct.calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace genie
