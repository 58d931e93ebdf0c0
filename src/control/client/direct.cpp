// The direct link (direct.hpp): opening it, and a blocking-style exchange of
// one transfer and its reply on it, with poll() bounding every wait by the
// call's deadline (direct_io.hpp). Submissions on it: direct_submit.cpp.
#include "control/client/direct.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <optional>

#include "control/auth.hpp"
#include "control/client/direct_io.hpp"
#include "control/client/impl.hpp"
#include "dataplane/registry.hpp"
#include "dataplane/tcp/tls.hpp"

namespace genie {

using namespace direct_io;

DirectLink::DirectLink() = default;
DirectLink::~DirectLink() { reset(); }

bool DirectLink::reset() {
  tls.reset();
  plain.clear();
  taken = 0;
  std::lock_guard<std::mutex> lk(fd_mu);
  if (fd >= 0) ::close(fd);
  fd = -1;
  chan.reset();  // under fd_mu: interrupt() may be using it
  return shut;
}

void DirectLink::shutdown() {
  std::lock_guard<std::mutex> lk(fd_mu);
  shut = true;
  if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
  if (chan) chan->interrupt();
}

void DirectLink::interrupt() {
  std::lock_guard<std::mutex> lk(fd_mu);
  if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
  if (chan) chan->interrupt();
}

void DirectLink::next_turn() {
  {
    std::lock_guard<std::mutex> lk(wait_mu);
    ++turns;
  }
  wait_cv.notify_all();
}

bool RemoteClient::Impl::direct_open(bool submission, uint64_t* joined) {
  uint64_t epoch;
  {
    std::lock_guard<std::mutex> lk(mu);
    if (state != State::Ready) return false;
    // Submissions on the socket only (a blocking channel carries transfers).
    if (submission && (!data_submit || data_endpoint.transport != "tcp")) return false;
    epoch = link_epoch;
  }
  if (joined != nullptr) *joined = epoch;
  if (direct.open() && direct.epoch != epoch) {
    // Joined to connections the server has dropped since.
    direct_failed(GENIE_ERR_CONNECTION, cat("connection to ", addr, " lost (the session reconnected)"));
  } else if (direct.chan && Clock::now() - direct.heard > kDirectQuietCheck && !direct.chan->idle_ok()) {
    std::lock_guard<std::mutex> lk(direct.send_mu);
    direct.reset();
  } else if (direct.fd >= 0 && direct.owed_count.load() == 0 &&
             (direct.taken != direct.plain.size() ||
              (Clock::now() - direct.heard > kDirectQuietCheck && !idle_ok(direct.fd)))) {
    // Closed by the server, or out of step: a new one.
    std::lock_guard<std::mutex> lk(direct.send_mu);
    direct.reset();
  }
  if (direct.open()) return true;
  if (direct.refused == epoch) return false;
  {
    std::lock_guard<std::mutex> lk(direct.fd_mu);
    if (direct.shut) return false;  // closing: the framed path says SHUTDOWN
  }
  std::string address, transport, secret;
  uint64_t session;
  {
    std::lock_guard<std::mutex> lk(mu);
    if (state != State::Ready || link_epoch != epoch) return false;
    address = data_endpoint.address;
    transport = data_endpoint.transport;
    // Written on the loop thread before the first Ready, never after.
    secret = token;
    session = session_id;
  }
  const auto deadline = Clock::now() + timeout;
  // Joining the session as a data connection does (link.cpp): DataHello,
  // the server's challenge, the proof of the session's secret, Welcome.
  int fd = -1;
  std::unique_ptr<dataplane::BlockingChannel> chan;
  std::unique_ptr<dataplane::tcp::TlsSession> session_tls;
  std::string plain;
  size_t taken = 0;
  try {
    std::optional<SocketExchange> sock;
    std::optional<ChannelExchange> other;
    std::string binding;
    if (transport == "tcp") {
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
        dataplane::tcp::tls_handshake(io);
        // Bound to this TLS connection, as the loop's data connection's is.
        binding = session_tls->channel_binding();
      }
      sock.emplace(io, max_message);
    } else {
      dataplane::ChannelOptions o;
      o.max_message = max_message;
      chan = dataplane::find_transport(transport)->connect_blocking(address, o, deadline);
      other.emplace(*chan, deadline, max_message);
    }
    Exchange& x = sock ? static_cast<Exchange&>(*sock) : *other;
    std::string msg;
    wire::DataHello h;
    h.set_session_id(session);
    uint64_t rid = next_id.fetch_add(1);
    x.send(MsgType::DataHello, rid, wire::encode_msg(h), nullptr, 0);
    wire::FrameHeader fh = x.reply(rid, &msg);
    check(!is_error(fh) && fh.type == MsgType::Challenge && fh.payload_len == 0, GENIE_ERR_PROTOCOL,
          "the server answered the DataHello with ", wire::type_name(fh.type));
    const auto c = wire::parse_msg<wire::Challenge>(msg, fh.type);
    wire::AuthResponse r;
    r.set_session_mac(data_proof(secret, c.nonce(), session, transport, binding));
    rid = next_id.fetch_add(1);
    x.send(MsgType::AuthResponse, rid, wire::encode_msg(r), nullptr, 0);
    fh = x.reply(rid, &msg);
    check(!is_error(fh) && fh.type == MsgType::Welcome && fh.payload_len == 0, GENIE_ERR_PROTOCOL,
          "the server answered the session proof with ", wire::type_name(fh.type));
  } catch (const LinkBroken& b) {
    if (fd >= 0) ::close(fd);
    log(LogLevel::Debug, "client: direct link to ", address, " not opened (",
        b.why == Broke::Timeout ? std::string("timed out") : b.detail, "): framed calls");
    direct.refused = epoch;
    return false;
  } catch (const Error& e) {
    if (fd >= 0) ::close(fd);
    log(LogLevel::Debug, "client: direct link to ", address, " over ", transport, " not opened (", e.detail(),
        "): framed calls");
    direct.refused = epoch;
    return false;
  }
  std::lock_guard<std::mutex> sending(direct.send_mu);
  std::lock_guard<std::mutex> lk(direct.fd_mu);
  if (direct.shut) {
    if (fd >= 0) ::close(fd);
    return false;  // closed meanwhile: the framed path says SHUTDOWN
  }
  direct.fd = fd;
  direct.chan = std::move(chan);
  direct.epoch = epoch;
  direct.tls = std::move(session_tls);
  direct.plain = std::move(plain);
  direct.taken = taken;
  direct.heard = Clock::now();
  return true;
}

bool RemoteClient::Impl::direct_transfer(bool write, uint64_t id, size_t offset, void* buf, size_t nbytes) {
  if (!cfg.direct_calls || nbytes > kDirectMaxBytes || loop->on_loop_thread() || reading_direct())
    return false;
  if (direct.eligible.fetch_add(1, std::memory_order_relaxed) < kDirectAfterCalls) return false;
  DirectTurn turn(direct);
  if (!turn.owns()) return false;  // another thread reads it: take the loop
  DirectReader reading(*this);
  if (!direct_open(false)) return false;

  const auto deadline = Clock::now() + timeout;
  const char* what = write ? "tensor write" : "tensor read";
  // Whatever breaks the link: the socket goes, submissions it owed fail,
  // the caller gets the framed path's error.
  const auto lost = [&](const LinkBroken& b) -> Error {
    Error e = direct_error(b, what);
    direct_failed(e.code(), e.detail());
    return e;
  };

  std::optional<SocketExchange> sock;
  std::optional<ChannelExchange> other;
  if (direct.chan)
    other.emplace(*direct.chan, deadline, max_message);
  else
    sock.emplace(Io{direct.fd, direct.tls.get(), &direct.plain, &direct.taken, deadline}, max_message);
  Exchange& x = sock ? static_cast<Exchange&>(*sock) : *other;
  const uint64_t rid = next_id.fetch_add(1);
  std::string msg;
  wire::FrameHeader fh;
  // The reply to this request; completions of submissions the link owes
  // may come first.
  const auto reply = [&] {
    for (;;) {
      fh = x.read(&msg, true);
      if (fh.request_id == rid) return;
      bool owed;
      {
        std::lock_guard<std::mutex> lk(direct.owed_mu);
        owed = direct.owed.count(fh.request_id) > 0;
      }
      if (!owed)
        broke(Broke::Protocol, cat("reply to request ", fh.request_id, " while request ", rid, " waited"));
      direct_completion(fh, msg);
    }
  };
  try {
    if (write) {
      wire::TensorWrite m;
      m.set_tensor_id(id);
      m.set_offset(offset);
      try {
        std::lock_guard<std::mutex> sending(direct.send_mu);
        x.send(MsgType::TensorWrite, rid, wire::encode_msg(m), buf, nbytes);
      } catch (const LinkBroken& b) {
        // A refused write: the server answers with its error and closes
        // without reading the payload. Its error is the one to report.
        if (b.why != Broke::Closed) throw;
        try {
          x.set_deadline(std::min(deadline, Clock::now() + std::chrono::seconds(1)));
          reply();
        } catch (const LinkBroken&) {
          throw b;
        }
        if (!is_error(fh)) throw b;
        auto [st, detail] = parse_error(msg);
        direct_failed(GENIE_ERR_CONNECTION, cat("connection to ", addr, " lost: ", b.detail));
        throw Error(st, std::move(detail));
      }
    } else {
      wire::TensorRead m;
      m.set_tensor_id(id);
      m.set_offset(offset);
      m.set_nbytes(nbytes);
      std::lock_guard<std::mutex> sending(direct.send_mu);
      x.send(MsgType::TensorRead, rid, wire::encode_msg(m), nullptr, 0);
    }
    reply();
    if (is_error(fh)) {
      // The link stays in step: an error's payload (none is sent) is read
      // and dropped.
      x.skip(fh.payload_len);
      auto [st, detail] = parse_error(msg);
      // A refused write's payload is never read: the server closes the
      // connection after its error, so the next call opens a new one.
      if (write && nbytes > 0)
        direct_failed(GENIE_ERR_CONNECTION, cat("connection to ", addr, " lost: the server refused a write"));
      throw Error(st, std::move(detail));
    }
    if (fh.type != MsgType::Ok)
      broke(Broke::Protocol, cat("reply is ", wire::type_name(fh.type), ", not Ok"));
    const uint64_t want = write ? 0 : nbytes;
    if (fh.payload_len != want)
      broke(Broke::Protocol, cat("reply carries ", fh.payload_len, " bytes, ", want, " were asked for"));
    if (!write) x.payload(buf, nbytes);
    direct.heard = Clock::now();
  } catch (const LinkBroken& b) {
    throw lost(b);
  }
  direct.calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

Error RemoteClient::Impl::direct_error(const LinkBroken& b, const char* what) {
  // close() shuts the socket down before the loop marks the client
  // closed: its flag says which of the two ended the call.
  bool shut;
  {
    std::lock_guard<std::mutex> lk(direct.fd_mu);
    shut = direct.shut;
  }
  if (shut) return Error(GENIE_ERR_SHUTDOWN, cat("the connection to ", addr, " has been closed (shut down)"));
  switch (b.why) {
    case Broke::Timeout:
      return Error(GENIE_ERR_TIMEOUT,
                   cat(what, ": no reply from ", addr, " within ", timeout.count(), " ms"));
    case Broke::Protocol: return Error(GENIE_ERR_PROTOCOL, cat(what, ": ", b.detail));
    default: return Error(GENIE_ERR_CONNECTION, cat("connection to ", addr, " lost: ", b.detail));
  }
}

}  // namespace genie
