// The UCX blocking channel (blocking.hpp).
#include "dataplane/ucx/blocking.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>

namespace genie::dataplane::ucx {
namespace {

// How long closing waits for UCX to flush the endpoint.
constexpr auto kCloseWait = std::chrono::milliseconds(1000);

int ms_left(StreamClock::time_point at) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at - StreamClock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

class BlockingEndpoint final : public BlockingChannel {
 public:
  BlockingEndpoint(std::shared_ptr<Context> ctx, std::string peer, uint32_t max_message)
      : ctx_(std::move(ctx)), peer_(std::move(peer)), max_message_(max_message) {
    route_ = AmRoute{&BlockingEndpoint::on_am, this};
    // Driven by one thread at a time, not always the same one.
    worker_ = create_worker(ctx_->get(), UCS_THREAD_MODE_SERIALIZED, &route_);
    const ucs_status_t st = ucp_worker_get_efd(worker_, &efd_);
    if (st != UCS_OK) {
      ucp_worker_destroy(worker_);
      fail(GENIE_ERR_IO, "UCX: ucp_worker_get_efd failed: ", ucs_status_string(st));
    }
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (wake_fd_ < 0) {
      ucp_worker_destroy(worker_);
      fail(GENIE_ERR_IO, "eventfd: ", std::strerror(errno));
    }
  }

  ~BlockingEndpoint() override {
    if (ep_ != nullptr) {
      // Orderly where the channel is healthy: the peer hears a bye (its
      // channel closes at once), then the endpoint flushes what was sent.
      const bool orderly = healthy();
      if (orderly) {
        ucp_request_param_t p{};
        p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = UCP_AM_SEND_FLAG_REPLY;  // the listener's worker routes by the reply endpoint
        const ucs_status_ptr_t r = ucp_am_send_nbx(ep_, kAmBye, nullptr, 0, nullptr, 0, &p);
        finish(r, kCloseWait);
      }
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = orderly ? 0 : UCP_EP_CLOSE_FLAG_FORCE;
      finish(ucp_ep_close_nbx(ep_, &p), kCloseWait);
    }
    for (Msg& m : inbox_) release(m);
    ucp_worker_destroy(worker_);
    ::close(wake_fd_);
  }

  void connect(const struct sockaddr* addr, socklen_t len, Deadline& deadline) {
    ucp_ep_params_t p{};
    p.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                   UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    p.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    p.sockaddr.addr = addr;
    p.sockaddr.addrlen = len;
    p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    p.err_handler.cb = &BlockingEndpoint::on_error;
    p.err_handler.arg = this;
    const ucs_status_t st = ucp_ep_create(worker_, &p, &ep_);
    if (st != UCS_OK) {
      ep_ = nullptr;
      fail(GENIE_ERR_CONNECTION, "cannot connect to ", peer_, ": ", ucs_status_string(st));
    }
    try {
      wait([&] { return welcomed_; }, deadline);
    } catch (const StreamBroken& b) {
      fail(GENIE_ERR_CONNECTION, "cannot connect to ", peer_, ": ",
           b.why == Broke::Timeout ? std::string("timed out") : b.detail);
    }
  }

  void send_frame(const FrameHeader& fh, const void* msg, size_t msg_len, const void* payload,
                  uint64_t payload_len, Deadline& deadline) override {
    alive();
    FrameHeader h = fh;
    h.payload_len = payload_len;
    uint8_t header[kFrameHeaderSize];
    encode_frame_header(h, msg, msg_len, header);
    count_bytes(true, kFrameHeaderSize + msg_len + payload_len);
    Request frame(this), data(this);
    ucp_request_param_t p = frame.param(UCP_AM_SEND_FLAG_REPLY);
    frame.start(ucp_am_send_nbx(ep_, kAmFrame, header, sizeof header, msg, msg_len, &p));
    if (payload_len > 0) {
      ucp_request_param_t pp =
          data.param(UCP_AM_SEND_FLAG_REPLY | (payload_len >= kRndvBytes ? UCP_AM_SEND_FLAG_RNDV : 0));
      data.start(ucp_am_send_nbx(ep_, kAmPayload, nullptr, 0, payload, payload_len, &pp));
    }
    // The header and the payload are the caller's: both sent before return.
    wait([&] { return frame.done() && data.done(); }, deadline);
    frame.check("sending a frame");
    data.check("sending a payload");
  }

  FrameHeader recv_frame(uint32_t max_message, const FrameTypes& types, std::string* msg,
                         Deadline& deadline) override {
    if (want_payload_) broke(Broke::Protocol, "a frame was asked for before the previous one's payload");
    Held held(this, deadline);
    Msg& m = held.m;
    if (m.id != kAmFrame)
      broke(Broke::Protocol, cat("an active message ", m.id, " from ", peer_, " where a frame was expected"));
    if (m.header.size() != kFrameHeaderSize)
      broke(Broke::Protocol,
            cat("a frame header of ", m.header.size(), " bytes (expected ", kFrameHeaderSize, ")"));
    const auto* hb = reinterpret_cast<const uint8_t*>(m.header.data());
    FrameHeader h;
    try {
      h = decode_frame_header(hb, std::min(max_message, max_message_), types);
      if (m.length != h.msg_len)
        broke(Broke::Protocol,
              cat("a frame carries ", m.length, " bytes of message, its header says ", h.msg_len));
      take(m, msg, m.length, deadline);
      verify_frame_crc(hb, msg->data(), msg->size(), types);
    } catch (const Error& e) {
      broke(Broke::Protocol, e.detail());
    }
    count_bytes(false, kFrameHeaderSize + m.length);
    want_payload_ = h.payload_len > 0;
    payload_len_ = h.payload_len;
    return h;
  }

  void recv_payload(void* dst, uint64_t length, Deadline& deadline) override {
    if (!want_payload_ || length != payload_len_)
      broke(Broke::Protocol, cat("a payload of ", length, " bytes asked for where the frame announced ",
                                 want_payload_ ? payload_len_ : 0));
    Held held(this, deadline);
    Msg& m = held.m;
    if (m.id != kAmPayload || m.length != length)
      broke(Broke::Protocol, cat("expected a ", length, "-byte payload, got active message ", m.id, " of ",
                                 m.length, " bytes"));
    want_payload_ = false;
    count_bytes(false, length);
    take(m, dst, length, deadline);
  }

  bool idle_ok() override {
    if (!healthy()) return false;
    while (ucp_worker_progress(worker_) != 0) {
    }
    return healthy() && inbox_.empty();
  }

  void interrupt() override {
    interrupted_.store(true, std::memory_order_release);
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t k = ::write(wake_fd_, &one, sizeof one);
  }

 private:
  struct Msg {
    unsigned id = 0;
    std::string header;
    std::string data;      // eager bytes, copied
    void* desc = nullptr;  // rendezvous descriptor, or eager data UCX keeps until released
    bool rndv = false;
    size_t length = 0;
  };

  // The next message (waiting for it), released when done with; a bye
  // breaks the exchange (Closed).
  struct Held {
    Held(BlockingEndpoint* e, Deadline& deadline) : self(e) {
      self->wait([&] { return !self->inbox_.empty(); }, deadline);
      m = std::move(self->inbox_.front());
      self->inbox_.pop_front();
      if (m.id == kAmBye) {
        self->release(m);  // the destructor does not run for a constructor that throws
        broke(Broke::Closed, cat("the connection to ", self->peer_, " was closed by the peer"));
      }
    }
    ~Held() { self->release(m); }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
    BlockingEndpoint* self;
    Msg m;
  };

  // One UCX request: done once UCX completed it (or at once).
  struct Request {
    explicit Request(BlockingEndpoint* e) : ep(e) {}
    BlockingEndpoint* ep;
    bool pending = false;
    ucs_status_t status = UCS_OK;
    // Inside progress.
    static void completed(void* req, ucs_status_t st, void* user) {
      auto* r = static_cast<Request*>(user);
      r->status = st;
      r->pending = false;
      ucp_request_free(req);
    }
    ucp_request_param_t param(uint32_t flags) {
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = flags;
      p.cb.send = &Request::completed;
      p.user_data = this;
      return p;
    }
    ucp_request_param_t recv_param() {
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      p.cb.recv_am = [](void* req, ucs_status_t st, size_t, void* user) { completed(req, st, user); };
      p.user_data = this;
      return p;
    }
    void start(ucs_status_ptr_t r) {
      if (UCS_PTR_IS_ERR(r))
        status = UCS_PTR_STATUS(r);
      else if (r != nullptr)
        pending = true;
    }
    bool done() const { return !pending; }
    void check(const char* what) const {
      if (status != UCS_OK) broke(Broke::Closed, cat(what, " failed: ", ucs_status_string(status)));
    }
    // A request still pending when the caller gives up (a timeout, an
    // interrupt) must not complete into freed memory: UCX cancels it on the
    // endpoint's forced close, which the destructor runs, and the worker
    // never calls back after it is destroyed; until then the channel is
    // unusable and no request outlives the call that made it: the wait
    // below drains it.
    ~Request() {
      if (pending) ep->abandon(this);
    }
  };

  static ucs_status_t on_am(void* arg, unsigned id, const void* header, size_t header_len, void* data,
                            size_t length, const ucp_am_recv_param_t* param) {
    auto* self = static_cast<BlockingEndpoint*>(arg);
    if (id == kAmWelcome) {
      self->welcomed_ = true;
      return UCS_OK;
    }
    Msg m;
    m.id = id;
    m.header.assign(static_cast<const char*>(header), header_len);
    m.length = length;
    ucs_status_t keep = UCS_OK;
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) {
      m.desc = data;
      m.rndv = true;
      keep = UCS_INPROGRESS;
    } else if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA) != 0 && length > 0) {
      m.desc = data;  // UCX's buffer, copied where it goes
      keep = UCS_INPROGRESS;
    } else if (length > 0) {
      m.data.assign(static_cast<const char*>(data), length);
    }
    self->inbox_.push_back(std::move(m));
    return keep;
  }

  static void on_error(void* arg, ucp_ep_h, ucs_status_t status) {
    auto* self = static_cast<BlockingEndpoint*>(arg);
    self->errored_ = true;
    self->error_ = status;
  }

  bool healthy() const { return !errored_ && !interrupted_.load(std::memory_order_acquire); }

  // Throws Closed once the channel is broken or interrupted.
  void alive() const {
    if (interrupted_.load(std::memory_order_acquire)) broke(Broke::Closed, "the connection was closed");
    if (errored_) broke(Broke::Closed, cat("connection to ", peer_, " lost: ", ucs_status_string(error_)));
  }

  // Progresses the worker until `done` holds: polling first (the host's
  // spin rule), then sleeping on the worker's event fd and our wake fd
  // until the deadline.
  template <class Done>
  void wait(Done&& done, Deadline& deadline) {
    const auto step = [&] {
      const bool did = ucp_worker_progress(worker_) != 0;
      if (done() || !healthy()) return SpinStep::Done;
      return did ? SpinStep::Busy : SpinStep::Idle;
    };
    if (!done() && !g_host->spin(step, kReplySpin)) {
      pollfd fds[2] = {{efd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
      for (;;) {
        while (ucp_worker_progress(worker_) != 0) {
        }
        if (done() || !healthy()) break;
        const ucs_status_t st = ucp_worker_arm(worker_);
        if (st == UCS_ERR_BUSY) continue;  // events arrived meanwhile
        if (st != UCS_OK) broke(Broke::Closed, cat("ucp_worker_arm: ", ucs_status_string(st)));
        const int rc = ::poll(fds, 2, ms_left(deadline.at()));
        if (rc < 0 && errno != EINTR) broke(Broke::Closed, cat("poll: ", std::strerror(errno)));
        if (rc == 0) broke(Broke::Timeout, cat("no answer from ", peer_));
      }
    }
    if (!done()) alive();
  }

  // Moves a message's bytes into dst (a rendezvous: received there).
  void take(Msg& m, void* dst, size_t n, Deadline& deadline) {
    if (n == 0) return;
    if (!m.rndv) {
      std::memcpy(dst, m.desc != nullptr ? m.desc : m.data.data(), n);
      return;
    }
    Request r(this);
    ucp_request_param_t p = r.recv_param();
    r.start(ucp_am_recv_data_nbx(worker_, std::exchange(m.desc, nullptr), dst, n, &p));
    wait([&] { return r.done(); }, deadline);
    r.check("receiving a rendezvous message");
  }
  void take(Msg& m, std::string* msg, size_t n, Deadline& deadline) {
    msg->resize(n);
    take(m, msg->data(), n, deadline);
  }

  void release(Msg& m) {
    if (m.desc != nullptr) ucp_am_data_release(worker_, m.desc);
    m.desc = nullptr;
  }

  // A request whose caller gave up: the channel is unusable from now on,
  // and the request is cancelled by a forced close of the endpoint here,
  // before its memory goes.
  void abandon(Request* r) {
    interrupted_.store(true, std::memory_order_release);
    if (ep_ != nullptr) {
      ucp_request_param_t p{};
      p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      p.flags = UCP_EP_CLOSE_FLAG_FORCE;
      finish(ucp_ep_close_nbx(ep_, &p), kCloseWait);
      ep_ = nullptr;
    }
    const auto until = StreamClock::now() + kCloseWait;
    while (r->pending && StreamClock::now() < until) ucp_worker_progress(worker_);
  }

  // Progresses until request `r` (of UCX's own: no callback) completed, at
  // most `limit`.
  void finish(ucs_status_ptr_t r, std::chrono::milliseconds limit) {
    if (r == nullptr || UCS_PTR_IS_ERR(r)) return;
    const auto until = StreamClock::now() + limit;
    while (ucp_request_check_status(r) == UCS_INPROGRESS && StreamClock::now() < until)
      ucp_worker_progress(worker_);
    ucp_request_free(r);
  }

  std::shared_ptr<Context> ctx_;
  const std::string peer_;
  const uint32_t max_message_;
  AmRoute route_{};
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
  int efd_ = -1;
  int wake_fd_ = -1;
  std::atomic<bool> interrupted_{false};
  bool errored_ = false;
  ucs_status_t error_ = UCS_OK;
  bool welcomed_ = false;
  std::deque<Msg> inbox_;
  bool want_payload_ = false;
  uint64_t payload_len_ = 0;
};

}  // namespace

std::unique_ptr<BlockingChannel> connect_blocking(std::shared_ptr<Context> ctx, const struct sockaddr* addr,
                                                  socklen_t len, std::string peer, uint32_t max_message,
                                                  Deadline deadline) {
  auto ch = std::make_unique<BlockingEndpoint>(std::move(ctx), std::move(peer), max_message);
  ch->connect(addr, len, deadline);
  return ch;
}

}  // namespace genie::dataplane::ucx
