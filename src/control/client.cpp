// RemoteClient: the contract is in client.hpp.
//
// Threading. The connections, the table of requests in flight and the
// handshake live on the loop thread and are touched nowhere else. A caller
// thread builds a Call, posts it to the loop and waits on the Call's own
// condition variable, except for a graph submission: its caller returns once
// the Call is posted, and the Call ends by running its completion on the
// loop thread (GraphDone, the server's ErrorReply, or a failure). The
// connection state callers wait for (connecting, ready, reconnecting,
// failed, closed) is written only on the loop thread, under `mu`, so callers
// may read it under `mu` and the loop may read it without. Freed tensor ids
// are queued under `mu` too (`frees`): the loop sends them ahead of the next
// request on the control connection.
//
// Caller memory. tensor_write sends the caller's buffer and tensor_read
// receives straight into the caller's buffer, so a Call is not finished
// until the connection has let go of that buffer ("released"): the write was
// handed to the kernel, the read payload arrived, or the connection was
// closed (Connection::close stops all I/O on the socket at once). A timeout
// while bytes are still in transit therefore drops the connection, which
// then reconnects like any other loss.
#include "control/client.hpp"

#include <cjson/cJSON.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <uv.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "control/connection.hpp"
#include "graph/delta.hpp"
#include "control/loop_thread.hpp"
#include "control/wire.hpp"
#include "control/wire_json.hpp"
#include "control/wire_codec.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "genie.pb.h"
#include <google/protobuf/io/coded_stream.h>

namespace genie {

namespace {

using Clock = std::chrono::steady_clock;
using wire::MsgType;

constexpr int kDataSocketBuffer = 8 << 20;  // bulk tensor bytes: keep the pipe full on fast links
constexpr int kFirstRetryMs = 50;
constexpr int kMaxRetryMs = 1000;
constexpr int64_t kMaxGoodbyeWaitMs = 2000;  // close() never waits longer for the server
// A freed tensor's TensorFree goes out with the next request on the control
// connection, or after this long if none comes first.
constexpr uint64_t kFreeFlushMs = 5;

enum class Link { Control, Data };

// One request in flight, shared by the waiting caller and the loop thread.
struct Call {
  Call(MsgType t, Link l) : type(t), link(l) {}

  const MsgType type;
  const Link link;
  std::mutex mu;
  std::condition_variable cv;
  bool replied = false;  // reply (or failure) recorded in status/detail/reply
  bool released = true;  // the connection no longer touches the caller's buffer
  genie_status_t status = GENIE_OK;
  std::string detail;
  MsgType reply_type = MsgType::Ok;
  std::string reply;  // the encoded reply message
  // tensor_read: where the payload goes.
  void* dst = nullptr;
  uint64_t nbytes = 0;
  // submit: runs once, on the loop thread, with the completion or failure;
  // nobody waits on cv for a submission.
  std::function<void(RemoteResult&&)> done;
  // Asynchronous requests from the loop thread (heartbeats): runs once, on
  // the loop thread, with the reply message or the failure's detail.
  std::function<void(genie_status_t, std::string&&)> on_reply;
  // What goes on the wire (a submission may go as a GraphSubmitDelta).
  MsgType send_type = type;
  // A delta submission: what the full GraphSubmit needs if the server does
  // not hold the base (loop thread only).
  std::shared_ptr<const std::string> full_json;
  std::vector<std::pair<std::string, uint64_t>> bindings;
  std::string base_digest;
  std::string graph_digest;

  bool submission() const { return type == MsgType::GraphSubmit; }
  bool finished() const { return replied && released; }

  void settle(genie_status_t st, std::string why, MsgType rtype = MsgType::Ok, std::string msg = {}) {
    {
      std::lock_guard<std::mutex> lk(mu);
      if (replied) return;
      replied = true;
      status = st;
      detail = std::move(why);
      reply_type = rtype;
      reply = std::move(msg);
    }
    cv.notify_all();
  }
  void set_in_use() {
    std::lock_guard<std::mutex> lk(mu);
    released = false;
  }
  void release() {
    {
      std::lock_guard<std::mutex> lk(mu);
      released = true;
    }
    cv.notify_all();
  }
  bool in_use() {
    std::lock_guard<std::mutex> lk(mu);
    return !released;
  }
};

const char* what_of(MsgType t) {
  switch (t) {
    case MsgType::TensorAlloc: return "tensor alloc";
    case MsgType::TensorWrite: return "tensor write";
    case MsgType::TensorRead: return "tensor read";
    case MsgType::GraphSubmit: return "graph submit";
    case MsgType::ServerInfoRequest: return "server info";
    case MsgType::WorkerRegister: return "worker registration";
    case MsgType::PlanExplain: return "plan explain";
    default: return wire::type_name(t);
  }
}

// Only statuses from the frozen genie_status_t range are passed on; anything
// else from a peer is itself a protocol violation.
genie_status_t peer_status(int32_t s) {
  return s <= GENIE_ERR_INVALID_ARGUMENT && s >= GENIE_ERR_INTERNAL ? s : GENIE_ERR_PROTOCOL;
}

std::string hmac_sha256(const std::string& key, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len) == nullptr)
    fail(GENIE_ERR_INTERNAL, "HMAC-SHA256 failed in libcrypto");
  return std::string(reinterpret_cast<const char*>(out), len);
}

}  // namespace

struct RemoteClient::Impl : std::enable_shared_from_this<RemoteClient::Impl> {
  enum class State { Connecting, Ready, Reconnecting, Failed, Closed };
  enum class Handshake { Idle, Hello, DataHello, Done };

  Impl(const Config& c, std::string id)
      : cfg(c),
        node_id(std::move(id)),
        addr(cat(c.master_addr, ":", c.master_port)),
        max_message(static_cast<uint32_t>(c.max_message_bytes)),
        timeout(std::chrono::milliseconds(c.timeout_ms)) {}

  // --- immutable after connect() returns --------------------------------
  const Config cfg;
  const std::string node_id;
  const std::string addr;
  const uint32_t max_message;
  const std::chrono::milliseconds timeout;
  std::string server_node;
  std::vector<std::string> devices;

  // --- shared: written on the loop thread under mu -------------------------
  std::mutex mu;
  std::condition_variable cv;
  State state = State::Connecting;
  genie_status_t fail_status = GENIE_ERR_CONNECTION;
  std::string fail_detail;
  bool goodbye_done = false;
  // Calls whose caller is waiting: settled by close() if the loop is gone
  // before it reached them.
  std::unordered_set<std::shared_ptr<Call>> outstanding;
  // Tensors freed but not yet reported to the server (flush_frees), and
  // whether the loop has been asked to flush them soon.
  std::vector<uint64_t> frees;
  bool free_flush_due = false;
  std::atomic<uint64_t> next_id{1};
  std::once_flag close_once;
  // Graph deltas (Config::graph_deltas) and what they save on the wire.
  delta::DeltaEncoder encoder;
  std::atomic<uint64_t> graph_submits_full{0}, graph_submits_delta{0}, delta_fallbacks{0};
  std::atomic<uint64_t> graph_bytes_sent{0};  // submission frames as sent (fallbacks included)
  std::atomic<uint64_t> graph_bytes_full{0};  // the same submissions as full GraphSubmit frames

  // --- loop thread only ----------------------------------------------------
  std::shared_ptr<Connection> ctrl, data;
  uint64_t gen = 0;  // bumped at every teardown: events of old connections are ignored
  Handshake hs = Handshake::Idle;
  bool resuming = false;
  std::string token;
  std::unordered_map<uint64_t, std::shared_ptr<Call>> pending;
  uv_timer_t retry_timer{};
  uv_timer_t free_timer{};
  uv_timer_t deadline_timer{};
  int retry_ms = 0;
  Clock::time_point reconnect_deadline;

  // Last member: its thread runs code touching everything above, so it must
  // stop before they are destroyed.
  std::unique_ptr<LoopThread> loop;

  // ===== caller side =========================================================

  void set_state(State s, genie_status_t st = GENIE_OK, std::string detail = {}) {
    {
      std::lock_guard<std::mutex> lk(mu);
      state = s;
      if (s == State::Failed) {
        fail_status = st;
        fail_detail = std::move(detail);
      }
    }
    cv.notify_all();
  }

  void refuse_on_loop_thread(const char* what) const {
    check(!loop->on_loop_thread(), GENIE_ERR_UNSUPPORTED, what,
          " cannot wait for the server on the context's loop thread (from a completion callback): "
          "call it from another thread");
  }

  // Blocks until the session is usable (reconnecting in the background if
  // need be) or `deadline`; throws SHUTDOWN / CONNECTION otherwise.
  void wait_ready(Clock::time_point deadline) {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait_until(lk, deadline, [&] { return state != State::Reconnecting && state != State::Connecting; });
    switch (state) {
      case State::Ready: return;
      case State::Closed:
        fail(GENIE_ERR_SHUTDOWN, "the connection to ", addr, " has been closed (shut down)");
      case State::Failed: fail(GENIE_ERR_CONNECTION, fail_detail);
      default:
        fail(GENIE_ERR_CONNECTION, "not connected to ", addr, ": reconnecting did not succeed within ",
             timeout.count(), " ms");
    }
  }

  // Sends one request and waits for its reply. Throws the server's error,
  // TIMEOUT (no reply within the timeout), CONNECTION or SHUTDOWN.
  void transact(const std::shared_ptr<Call>& call, std::string msg, const void* payload = nullptr,
                uint64_t payload_len = 0) {
    refuse_on_loop_thread(what_of(call->type));
    // The connection would refuse it without a reply; say why now.
    check(msg.size() <= max_message, GENIE_ERR_TOO_LARGE, what_of(call->type), ": the encoded message of ",
          msg.size(), " bytes exceeds the maximum message size of ", max_message,
          " bytes (GENIE_MAX_MESSAGE)");
    wait_ready(Clock::now() + timeout);
    {
      std::lock_guard<std::mutex> lk(mu);
      outstanding.insert(call);
    }
    struct Unregister {
      Impl* self;
      const std::shared_ptr<Call>& call;
      ~Unregister() {
        std::lock_guard<std::mutex> lk(self->mu);
        self->outstanding.erase(call);
      }
    } unregister{this, call};

    const uint64_t id = next_id.fetch_add(1);
    if (!loop->post([this, call, id, msg = std::move(msg), payload, payload_len]() mutable {
          start(call, id, std::move(msg), payload, payload_len);
        }))
      fail(GENIE_ERR_SHUTDOWN, "the connection to ", addr, " has been closed (shut down)");

    std::unique_lock<std::mutex> lk(call->mu);
    if (!call->cv.wait_for(lk, timeout, [&] { return call->finished(); })) {
      lk.unlock();
      // If the loop is already stopping, close() settles the call instead.
      loop->post([this, call, id] { cancel(call, id); });
      lk.lock();
      call->cv.wait(lk, [&] { return call->finished(); });
    }
    if (call->status != GENIE_OK) throw Error(call->status, call->detail);
  }

  // Queues a graph submission and returns: the server's answer (GraphDone or
  // ErrorReply), or a failure, reaches call->done on the loop thread. Throws
  // only what is known before anything is sent (TOO_LARGE, not connected,
  // closed), and then call->done never runs.
  void submit(const std::shared_ptr<Call>& call, std::string msg) {
    refuse_on_loop_thread(what_of(call->type));
    check(msg.size() <= max_message, GENIE_ERR_TOO_LARGE, what_of(call->type), ": the encoded message of ",
          msg.size(), " bytes exceeds the maximum message size of ", max_message,
          " bytes (GENIE_MAX_MESSAGE)");
    wait_ready(Clock::now() + timeout);
    const uint64_t id = next_id.fetch_add(1);
    // A posted task always runs (LoopThread::stop runs the queue first), so
    // the completion cannot be lost once post() succeeded.
    if (!loop->post([this, call, id, msg = std::move(msg)]() mutable {
          start(call, id, std::move(msg), nullptr, 0);
        }))
      fail(GENIE_ERR_SHUTDOWN, "the connection to ", addr, " has been closed (shut down)");
  }

  // ===== loop thread =========================================================

  void start(const std::shared_ptr<Call>& call, uint64_t id, std::string msg, const void* payload,
             uint64_t payload_len) {
    if (state != State::Ready) {
      end_call(*call, state == State::Closed ? GENIE_ERR_SHUTDOWN : GENIE_ERR_CONNECTION,
               cat("connection to ", addr, " lost before the ", what_of(call->type), " was sent"));
      return;
    }
    const std::shared_ptr<Connection> conn = call->link == Link::Data ? data : ctrl;
    const bool control = call->link == Link::Control;
    if (control) {
      // Tensors freed before this call: freed first, in the same write.
      conn->cork();
      flush_frees();
    }
    pending.emplace(id, call);
    std::function<void(genie_status_t)> sent;
    if (payload_len > 0) {
      call->set_in_use();
      sent = [call](genie_status_t) { call->release(); };
    }
    conn->send(call->send_type, id, 0, std::move(msg), payload, payload_len, nullptr, std::move(sent));
    if (control) conn->uncork();
  }

  void cancel(const std::shared_ptr<Call>& call, uint64_t id) {
    {
      std::lock_guard<std::mutex> lk(call->mu);
      if (call->replied) return;  // raced with the reply: the caller takes it
    }
    pending.erase(id);
    call->settle(GENIE_ERR_TIMEOUT,
                 cat(what_of(call->type), ": no reply from ", addr, " within ", timeout.count(), " ms"));
    if (call->in_use()) {
      // The connection still reads or writes the caller's buffer: only
      // closing it makes the buffer the caller's again.
      connection_lost(cat("a ", what_of(call->type), " timed out with bytes in transit"));
      call->release();
    }
  }

  Connection::Handlers handlers(uint64_t g, Link link) {
    Connection::Handlers h;
    h.on_frame = [this, g, link](const wire::FrameHeader& fh, std::string&& msg) -> PayloadSink {
      if (g != gen) return {};
      try {
        return on_frame(link, fh, std::move(msg));
      } catch (const Error& e) {
        frame_failed(e.code(), e.detail());
      } catch (const std::exception& e) {
        frame_failed(GENIE_ERR_INTERNAL, e.what());
      }
      return {};
    };
    h.on_close = [this, g, link](genie_status_t st, const std::string& detail) {
      if (g != gen) return;
      on_link_closed(link, st, detail);
    };
    return h;
  }

  // A frame we cannot make sense of (undecodable, unexpected): the peer is
  // broken, so the connection goes (Connection allows closing it from inside
  // its own frame handler).
  void frame_failed(genie_status_t st, const std::string& detail) {
    log(LogLevel::Warn, "client: ", addr, ": ", detail);
    if (hs != Handshake::Done)
      attempt_failed(st, cat("handshake with ", addr, " failed: ", detail));
    else
      connection_lost(cat("protocol error: ", detail));
  }

  void init_timers() {
    uv_timer_init(loop->loop(), &retry_timer);
    uv_timer_init(loop->loop(), &deadline_timer);
    uv_timer_init(loop->loop(), &free_timer);
    retry_timer.data = this;
    deadline_timer.data = this;
    free_timer.data = this;
  }

  void arm_deadline() {
    uv_timer_start(
        &deadline_timer,
        [](uv_timer_t* t) {
          auto* self = static_cast<Impl*>(t->data);
          if (self->state == State::Connecting)
            self->give_up(GENIE_ERR_TIMEOUT,
                          cat("no answer from ", self->addr, " within ", self->timeout.count(), " ms"));
          else if (self->state == State::Reconnecting)
            self->give_up(GENIE_ERR_CONNECTION,
                          cat("connection to ", self->addr, " lost and not re-established within ",
                              self->timeout.count(), " ms"));
        },
        static_cast<uint64_t>(timeout.count()), 0);
  }

  // Closes both connections; events still queued for them are ignored.
  void teardown() {
    ++gen;
    hs = Handshake::Idle;
    auto c = std::move(ctrl), d = std::move(data);
    if (d) d->close(GENIE_OK, "client teardown");
    if (c) c->close(GENIE_OK, "client teardown");
  }

  // Fails every request in flight. The connections must already be closed:
  // that is what makes releasing the callers' buffers safe.
  void fail_all(genie_status_t st, const std::string& detail) {
    auto calls = std::move(pending);
    pending.clear();
    for (auto& [id, call] : calls) {
      end_call(*call, st, detail);
      call->release();
    }
  }

  // Ends a call with an error: a submission through its completion, any
  // other call by waking its caller.
  void end_call(Call& call, genie_status_t st, std::string detail) {
    if (call.on_reply) {
      run_reply(call, st, std::move(detail));
      return;
    }
    if (!call.submission()) {
      call.settle(st, std::move(detail));
      return;
    }
    RemoteResult r;
    r.status = st;
    r.detail = std::move(detail);
    run_done(call, std::move(r));
  }

  void run_reply(Call& call, genie_status_t st, std::string&& msg) {
    auto fn = std::move(call.on_reply);
    call.on_reply = nullptr;
    if (!fn) return;
    try {
      fn(st, std::move(msg));
    } catch (const std::exception& e) {
      log(LogLevel::Error, "client: reply handler threw: ", e.what());
    } catch (...) {
      log(LogLevel::Error, "client: reply handler threw");
    }
  }

  void run_done(Call& call, RemoteResult&& r) {
    auto done = std::move(call.done);
    call.done = nullptr;
    if (!done) return;
    try {
      done(std::move(r));
    } catch (const std::exception& e) {
      log(LogLevel::Error, "client: graph completion handler threw: ", e.what());
    } catch (...) {
      log(LogLevel::Error, "client: graph completion handler threw");
    }
  }

  void begin_attempt() {
    const uint64_t g = ++gen;
    hs = Handshake::Hello;
    ctrl = Connection::create(loop->loop(), max_message, handlers(g, Link::Control));
    ctrl->set_nodelay(true);  // requests and replies are small: never wait for Nagle
    ctrl->connect(cfg.master_addr, cfg.master_port, [this, g](genie_status_t st, const std::string& detail) {
      if (g != gen) return;
      if (st != GENIE_OK) return attempt_failed(GENIE_ERR_CONNECTION, detail);  // names the address
      wire::Hello h;
      h.set_protocol_version(wire::kProtocolVersion);
      h.set_abi_version(GENIE_ABI_VERSION);
      h.set_node_id(node_id);
      h.set_role(static_cast<int32_t>(cfg.role));
      if (resuming) h.set_resume_token(token);
      ctrl->send(MsgType::Hello, next_id.fetch_add(1), 0, wire::encode_msg(h));
    });
  }

  void open_data_link() {
    const uint64_t g = gen;
    hs = Handshake::DataHello;
    data = Connection::create(loop->loop(), max_message, handlers(g, Link::Data));
    // Before the SYN, so that the window scale can use the whole buffer.
    data->set_buffer_sizes(kDataSocketBuffer);
    data->connect(cfg.master_addr, cfg.master_port, [this, g](genie_status_t st, const std::string& detail) {
      if (g != gen) return;
      if (st != GENIE_OK) return attempt_failed(GENIE_ERR_CONNECTION, cat("data connection: ", detail));
      wire::DataHello h;
      h.set_session_token(token);
      data->send(MsgType::DataHello, next_id.fetch_add(1), 0, wire::encode_msg(h));
    });
  }

  // A connection attempt failed. Initial connect: report it. Reconnect:
  // retry with backoff while the deadline allows and the failure is one a
  // retry can fix.
  void attempt_failed(genie_status_t st, const std::string& detail, bool retryable = true) {
    teardown();
    if (state == State::Connecting) return give_up(st, detail);
    if (state != State::Reconnecting) return;
    retryable =
        retryable && (st == GENIE_ERR_CONNECTION || st == GENIE_ERR_TIMEOUT || st == GENIE_ERR_PROTOCOL);
    retry_ms = retry_ms == 0 ? kFirstRetryMs : std::min(retry_ms * 2, kMaxRetryMs);
    if (!retryable || Clock::now() + std::chrono::milliseconds(retry_ms) >= reconnect_deadline)
      return give_up(GENIE_ERR_CONNECTION,
                     cat("connection to ", addr, " lost and not re-established: ", detail));
    log(LogLevel::Debug, "client: reconnect to ", addr, " failed (", detail, "); retrying in ", retry_ms,
        " ms");
    uv_timer_start(
        &retry_timer,
        [](uv_timer_t* t) {
          auto* self = static_cast<Impl*>(t->data);
          if (self->state == State::Reconnecting) self->begin_attempt();
        },
        static_cast<uint64_t>(retry_ms), 0);
  }

  void give_up(genie_status_t st, const std::string& detail) {
    teardown();
    uv_timer_stop(&retry_timer);
    uv_timer_stop(&deadline_timer);
    {
      std::lock_guard<std::mutex> lk(mu);
      frees.clear();
    }
    fail_all(GENIE_ERR_CONNECTION, detail);
    if (state == State::Reconnecting) log(LogLevel::Warn, "client: ", detail);
    set_state(State::Failed, st, detail);
  }

  void connection_lost(const std::string& why) {
    if (state != State::Ready) return;
    teardown();
    const std::string detail = cat("connection to ", addr, " lost: ", why);
    log(LogLevel::Warn, "client: ", detail, "; reconnecting");
    set_state(State::Reconnecting);
    fail_all(GENIE_ERR_CONNECTION, detail);
    resuming = true;
    retry_ms = 0;
    reconnect_deadline = Clock::now() + timeout;
    arm_deadline();
    begin_attempt();
  }

  void on_link_closed(Link link, genie_status_t st, const std::string& detail) {
    const char* which = link == Link::Control ? "control connection" : "data connection";
    if (hs != Handshake::Done) {
      attempt_failed(st == GENIE_ERR_VERSION_MISMATCH ? st : GENIE_ERR_CONNECTION,
                     cat(which, " closed during the handshake: ", detail));
      return;
    }
    connection_lost(cat(which, ": ", detail));
  }

  static bool is_error(const wire::FrameHeader& fh) {
    return (fh.flags & wire::kFlagError) != 0 || fh.type == MsgType::ErrorReply;
  }

  static bool unknown_base(const std::string& msg) {
    wire::ErrorReply e;
    return e.ParseFromString(msg) && e.reason() == wire::REASON_UNKNOWN_BASE;
  }

  // The server does not hold the base of a delta: the same submission goes
  // again in full (the completion still runs once).
  void resend_full(const std::shared_ptr<Call>& call) {
    delta_fallbacks.fetch_add(1, std::memory_order_relaxed);
    // The full graph goes with keep_as_base, so the server holds it again;
    // the base the delta named, if another text, it does not.
    if (call->base_digest != call->graph_digest) encoder.forget(call->base_digest);
    wire::GraphSubmit m;
    m.set_graph_json(*call->full_json);
    for (const auto& [name, tid] : call->bindings) {
      wire::Binding* b = m.add_bindings();
      b->set_name(name);
      b->set_tensor_id(tid);
    }
    m.set_keep_as_base(true);
    std::string full = wire::encode_msg(m);
    graph_bytes_sent.fetch_add(wire::kHeaderSize + full.size(), std::memory_order_relaxed);
    call->send_type = MsgType::GraphSubmit;
    call->full_json.reset();
    call->bindings.clear();
    if (full.size() > max_message) {
      run_done(*call, RemoteResult{GENIE_ERR_TOO_LARGE,
                                   cat("graph submit: the encoded message of ", full.size(),
                                       " bytes exceeds the maximum message size of ", max_message, " bytes"),
                                   {},
                                   0});
      return;
    }
    start(call, next_id.fetch_add(1), std::move(full), nullptr, 0);
  }

  static std::pair<genie_status_t, std::string> parse_error(const std::string& msg) {
    const auto e = wire::parse_msg<wire::ErrorReply>(msg, MsgType::ErrorReply);
    return {peer_status(e.status()), e.detail()};
  }

  void handshake_frame(Link link, const wire::FrameHeader& fh, const std::string& msg) {
    if (fh.payload_len != 0)
      return attempt_failed(GENIE_ERR_PROTOCOL,
                            cat("unexpected payload on ", wire::type_name(fh.type), " during the handshake"));
    if (is_error(fh)) {
      auto [st, detail] = parse_error(msg);
      if (resuming && (st == GENIE_ERR_NOT_FOUND || st == GENIE_ERR_AUTH))
        return attempt_failed(st, cat("server ", addr, " did not resume the session: ", detail), false);
      return attempt_failed(st, cat("server ", addr, " refused the connection: ", detail), false);
    }
    if (link == Link::Control && hs == Handshake::Hello) {
      if (fh.type == MsgType::Challenge) {
        const auto c = wire::parse_msg<wire::Challenge>(msg, fh.type);
        if (cfg.auth_token.empty())
          return attempt_failed(GENIE_ERR_AUTH,
                                cat("server ", addr,
                                    " requires authentication: set the shared token "
                                    "(genie_config_set_auth_token or GENIE_AUTH_TOKEN)"),
                                false);
        wire::AuthResponse r;
        r.set_mac(hmac_sha256(cfg.auth_token, c.nonce() + node_id));
        ctrl->send(MsgType::AuthResponse, next_id.fetch_add(1), 0, wire::encode_msg(r));
        return;
      }
      if (fh.type == MsgType::Welcome) {
        const auto w = wire::parse_msg<wire::Welcome>(msg, fh.type);
        if (w.protocol_version() != wire::kProtocolVersion)
          return attempt_failed(GENIE_ERR_VERSION_MISMATCH,
                                cat("server ", addr, " speaks protocol version ", w.protocol_version(),
                                    ", this client ", wire::kProtocolVersion),
                                false);
        if (resuming && (!w.resumed() || w.session_token() != token)) {
          // The server no longer has our session: its tensor ids would name
          // nothing (or another session's tensors). End the new session.
          auto c = ctrl;
          c->send(MsgType::Goodbye, next_id.fetch_add(1), 0, wire::encode_msg(wire::Goodbye()), nullptr, 0,
                  nullptr, [c](genie_status_t) { c->close(GENIE_OK, "session not resumed"); });
          ctrl = nullptr;
          return attempt_failed(GENIE_ERR_CONNECTION,
                                cat("server ", addr,
                                    " no longer holds this session (its grace period "
                                    "ended): its tensors are gone; create a new context"),
                                false);
        }
        if (!resuming) {
          token = w.session_token();
          server_node = w.server_node_id();
          devices.assign(w.devices().begin(), w.devices().end());
        }
        return open_data_link();
      }
    } else if (link == Link::Data && hs == Handshake::DataHello && fh.type == MsgType::Welcome) {
      hs = Handshake::Done;
      uv_timer_stop(&deadline_timer);
      uv_timer_stop(&retry_timer);
      if (resuming) log(LogLevel::Info, "client: session with ", addr, " resumed");
      set_state(State::Ready);
      flush_frees();  // those freed while reconnecting
      return;
    }
    attempt_failed(GENIE_ERR_PROTOCOL, cat("unexpected ", wire::type_name(fh.type), " during the handshake"));
  }

  PayloadSink discard(uint64_t len) {
    std::shared_ptr<char[]> buf = std::make_unique_for_overwrite<char[]>(len);
    PayloadSink s;
    s.dst = buf.get();
    s.keep = buf;
    return s;
  }

  PayloadSink on_frame(Link link, const wire::FrameHeader& fh, std::string&& msg) {
    if (hs != Handshake::Done) {
      handshake_frame(link, fh, msg);
      return {};
    }
    auto it = pending.find(fh.request_id);
    if (it == pending.end()) {
      // The caller gave up (timeout) before the reply came.
      if (fh.type == MsgType::GraphDone) free_stray_outputs(msg);
      return fh.payload_len ? discard(fh.payload_len) : PayloadSink{};
    }
    std::shared_ptr<Call> call = it->second;
    if (is_error(fh)) {
      pending.erase(it);
      if (call->send_type == MsgType::GraphSubmitDelta && fh.payload_len == 0 && unknown_base(msg)) {
        resend_full(call);
        return {};
      }
      auto [st, detail] = parse_error(msg);
      end_call(*call, st, std::move(detail));
      return fh.payload_len ? discard(fh.payload_len) : PayloadSink{};
    }
    const auto protocol = [&](const std::string& why) -> PayloadSink {
      pending.erase(fh.request_id);
      end_call(*call, GENIE_ERR_PROTOCOL, cat(what_of(call->type), ": ", why));
      connection_lost(cat("protocol error: ", why));
      return {};
    };
    switch (call->type) {
      case MsgType::TensorRead: {
        if (fh.type != MsgType::Ok) return protocol(cat("reply is ", wire::type_name(fh.type), ", not Ok"));
        if (fh.payload_len != call->nbytes)
          return protocol(cat("reply carries ", fh.payload_len, " bytes, ", call->nbytes, " were asked for"));
        if (fh.payload_len == 0) {
          pending.erase(it);
          call->settle(GENIE_OK, {});
          return {};
        }
        call->set_in_use();
        PayloadSink s;
        s.dst = call->dst;
        s.done = [this, call, id = fh.request_id] {
          pending.erase(id);
          call->settle(GENIE_OK, {});
          call->release();
        };
        return s;
      }
      case MsgType::GraphSubmit: {
        if (fh.payload_len) return protocol("unexpected payload");
        // Servers before the acceptance was dropped send one ahead of the
        // GraphDone; it carries nothing this client needs.
        if (fh.type == MsgType::SubmitAccepted) return {};
        if (fh.type != MsgType::GraphDone) return protocol(cat("unexpected ", wire::type_name(fh.type)));
        pending.erase(it);
        run_done(*call, parse_done(msg));
        return {};
      }
      default: {
        const MsgType want = call->type == MsgType::TensorAlloc         ? MsgType::TensorAllocReply
                             : call->type == MsgType::ServerInfoRequest ? MsgType::ServerInfo
                             : call->type == MsgType::Heartbeat         ? MsgType::HeartbeatReply
                             : call->type == MsgType::PlanExplain       ? MsgType::PlanExplainReply
                                                                        : MsgType::Ok;
        if (fh.type != want || fh.payload_len)
          return protocol(cat("reply is ", wire::type_name(fh.type), ", expected ", wire::type_name(want)));
        pending.erase(it);
        if (call->on_reply) {
          run_reply(*call, GENIE_OK, std::move(msg));
          return {};
        }
        call->settle(GENIE_OK, {}, fh.type, std::move(msg));
        return {};
      }
    }
  }

  RemoteResult parse_done(const std::string& msg) {
    RemoteResult r;
    wire::GraphDone d;
    if (!d.ParseFromString(msg)) {
      r.status = GENIE_ERR_PROTOCOL;
      r.detail = "undecodable GraphDone";
      return r;
    }
    r.status = d.status() == GENIE_OK ? GENIE_OK : peer_status(d.status());
    r.detail = d.detail();
    r.exec_ns = d.exec_ns();
    for (const auto& o : d.outputs()) {
      RemoteOutput out;
      out.name = o.name();
      out.tensor_id = o.tensor_id();
      out.dtype = static_cast<DType>(o.dtype());
      out.shape.assign(o.shape().begin(), o.shape().end());
      if (!o.device().empty()) out.device = o.device();
      bool ok = dtype_valid(o.dtype()) && out.shape.size() <= GENIE_MAX_DIMS;
      try {
        if (ok) byte_size(out.shape, dtype_size(out.dtype));
        if (ok) out.device = parse_device(out.device.c_str()).str();
      } catch (const Error&) {
        ok = false;
      }
      if (!ok && r.status == GENIE_OK) {
        r.status = GENIE_ERR_PROTOCOL;
        r.detail = cat("GraphDone output '", o.name(), "' has an invalid dtype, shape or device");
      }
      r.outputs.push_back(std::move(out));
    }
    if (r.status != GENIE_OK) {
      // Whatever a failed completion names is nobody's.
      for (const RemoteOutput& o : r.outputs) send_free(o.tensor_id);
      r.outputs.clear();
    }
    return r;
  }

  // Outputs of a graph whose caller gave up are nobody's: free them.
  void free_stray_outputs(const std::string& msg) {
    wire::GraphDone d;
    if (!d.ParseFromString(msg)) return;
    for (const auto& o : d.outputs()) send_free(o.tensor_id());
  }

  // Loop thread: frees `id` on the server now, or after the reconnect.
  void send_free(uint64_t id) {
    if (state != State::Ready && state != State::Reconnecting) return;
    {
      std::lock_guard<std::mutex> lk(mu);
      frees.push_back(id);
    }
    flush_frees();
  }

  // Sends a TensorFree for every tensor freed so far. Called before each
  // request on the control connection, so the server frees them before it
  // handles anything the caller did after freeing (and a caller destroying
  // outputs between submissions costs no wake-up of its own), and by
  // free_timer, so they are not held back for long when no request comes.
  // While reconnecting they wait for the resumed session.
  void flush_frees() {
    if (state != State::Ready || !ctrl) return;
    std::vector<uint64_t> ids;
    {
      std::lock_guard<std::mutex> lk(mu);
      ids.swap(frees);
    }
    ctrl->cork();  // one write for them all
    for (uint64_t id : ids) {
      wire::TensorFree f;
      f.set_tensor_id(id);
      ctrl->send(MsgType::TensorFree, next_id.fetch_add(1), 0, wire::encode_msg(f));
    }
    ctrl->uncork();
  }

  void arm_free_timer() {
    uv_timer_start(
        &free_timer,
        [](uv_timer_t* t) {
          auto* self = static_cast<Impl*>(t->data);
          {
            std::lock_guard<std::mutex> lk(self->mu);
            self->free_flush_due = false;
          }
          self->flush_frees();
        },
        kFreeFlushMs, 0);
  }

  // ===== lifetime ============================================================

  void close() {
    if (!loop) return;  // connect() failed before the loop existed
    std::call_once(close_once, [this] {
      if (loop->on_loop_thread()) {
        // The last reference went away inside a completion handler: the loop
        // cannot join itself, so another thread finishes the job.
        loop->post([this] { begin_close(); });
        std::thread([self = shared_from_this()] {
          self->loop->stop([s = self.get()] { s->final_teardown(); });
        }).detach();
        return;
      }
      if (loop->post([this] { begin_close(); })) {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait_for(lk, std::min(timeout, std::chrono::milliseconds(kMaxGoodbyeWaitMs)),
                    [&] { return goodbye_done; });
      }
      loop->stop([this] { final_teardown(); });
      // Calls whose tasks the stopping loop dropped: nothing touches their
      // buffers any more.
      std::unordered_set<std::shared_ptr<Call>> left;
      {
        std::lock_guard<std::mutex> lk(mu);
        left = outstanding;
      }
      for (const auto& c : left) {
        c->settle(GENIE_ERR_SHUTDOWN, cat("the connection to ", addr, " has been closed (shut down)"));
        c->release();
      }
    });
  }

  void begin_close() {
    const bool was_ready = state == State::Ready;
    uv_timer_stop(&retry_timer);
    uv_timer_stop(&deadline_timer);
    {
      std::lock_guard<std::mutex> lk(mu);
      state = State::Closed;
    }
    cv.notify_all();
    // Data first: that releases the buffers of reads and writes in flight.
    if (auto d = std::move(data)) d->close(GENIE_OK, "client closed");
    fail_all(GENIE_ERR_SHUTDOWN, "the context was shut down");
    auto c = std::move(ctrl);
    ++gen;
    const auto finished = [this] {
      {
        std::lock_guard<std::mutex> lk(mu);
        goodbye_done = true;
      }
      cv.notify_all();
    };
    if (was_ready && c && !c->closed()) {
      // The server frees the session (and its tensors) at once on Goodbye.
      c->send(MsgType::Goodbye, next_id.fetch_add(1), 0, wire::encode_msg(wire::Goodbye()), nullptr, 0,
              nullptr, [c, finished](genie_status_t) {
                c->close(GENIE_OK, "goodbye");
                finished();
              });
    } else {
      if (c) c->close(GENIE_OK, "client closed");
      finished();
    }
  }

  void final_teardown() {
    {
      std::lock_guard<std::mutex> lk(mu);
      state = State::Closed;
    }
    cv.notify_all();
    teardown();
    fail_all(GENIE_ERR_SHUTDOWN, "the context was shut down");
  }
};

// =============================================================================

std::shared_ptr<RemoteClient> RemoteClient::connect(const Config& cfg, const std::string& node_id) {
  check(!cfg.master_addr.empty(), GENIE_ERR_INVALID_ARGUMENT, "no master address configured");
  std::shared_ptr<RemoteClient> client(new RemoteClient());
  client->impl_ = std::make_shared<Impl>(cfg, node_id);
  Impl& im = *client->impl_;
  im.loop = std::make_unique<LoopThread>();
  im.loop->post([&im] {
    im.init_timers();
    im.arm_deadline();
    im.begin_attempt();
  });
  {
    std::unique_lock<std::mutex> lk(im.mu);
    // The loop's deadline timer ends the attempt; the margin only guards
    // against a loop that never ran it.
    const bool settled = im.cv.wait_for(lk, im.timeout + std::chrono::seconds(5),
                                        [&] { return im.state != Impl::State::Connecting; });
    if (!settled) fail(GENIE_ERR_TIMEOUT, "no answer from ", im.addr, " within ", im.timeout.count(), " ms");
    if (im.state == Impl::State::Failed) throw Error(im.fail_status, im.fail_detail);
  }
  log(LogLevel::Info, "client ", node_id, ": connected to ", im.server_node, " at ", im.addr);
  return client;
}

RemoteClient::~RemoteClient() {
  if (impl_) impl_->close();
}

void RemoteClient::close() {
  if (impl_) impl_->close();
}

uint64_t RemoteClient::tensor_alloc(DType dtype, const Shape& shape, const std::string& device) {
  wire::TensorAlloc m;
  m.set_dtype(static_cast<int32_t>(dtype));
  for (int64_t d : shape) m.add_shape(d);
  m.set_device(device);
  auto call = std::make_shared<Call>(MsgType::TensorAlloc, Link::Control);
  impl_->transact(call, wire::encode_msg(m));
  return wire::parse_msg<wire::TensorAllocReply>(call->reply, call->reply_type).tensor_id();
}

void RemoteClient::tensor_write(uint64_t id, size_t offset, const void* src, size_t nbytes) {
  check(src != nullptr || nbytes == 0, GENIE_ERR_INVALID_ARGUMENT, "src is NULL");
  wire::TensorWrite m;
  m.set_tensor_id(id);
  m.set_offset(offset);
  auto call = std::make_shared<Call>(MsgType::TensorWrite, Link::Data);
  // The caller blocks until the reply, so its buffer can be the payload.
  impl_->transact(call, wire::encode_msg(m), src, nbytes);
}

void RemoteClient::tensor_read(uint64_t id, size_t offset, void* dst, size_t nbytes) {
  check(dst != nullptr || nbytes == 0, GENIE_ERR_INVALID_ARGUMENT, "dst is NULL");
  wire::TensorRead m;
  m.set_tensor_id(id);
  m.set_offset(offset);
  m.set_nbytes(nbytes);
  auto call = std::make_shared<Call>(MsgType::TensorRead, Link::Data);
  call->dst = dst;
  call->nbytes = nbytes;
  impl_->transact(call, wire::encode_msg(m));
}

void RemoteClient::tensor_free(uint64_t id) noexcept {
  try {
    Impl* im = impl_.get();
    bool arm;
    {
      std::lock_guard<std::mutex> lk(im->mu);
      if (im->state == Impl::State::Closed || im->state == Impl::State::Failed) return;
      im->frees.push_back(id);
      // Only the first free since the last flush wakes the loop; the next
      // request usually takes them all before the timer fires.
      arm = !im->free_flush_due;
      im->free_flush_due = true;
    }
    if (arm) im->loop->post([im] { im->arm_free_timer(); });
  } catch (...) {
    // Fire and forget: at worst the server frees it with the session.
  }
}

void RemoteClient::submit(const std::string& graph_json,
                          const std::vector<std::pair<std::string, uint64_t>>& bindings,
                          std::function<void(RemoteResult&&)> done) {
  Impl& im = *impl_;
  auto call = std::make_shared<Call>(MsgType::GraphSubmit, Link::Control);
  call->done = std::move(done);
  // What the full message takes, without encoding the JSON twice.
  wire::GraphSubmit full;
  for (const auto& [name, id] : bindings) {
    wire::Binding* b = full.add_bindings();
    b->set_name(name);
    b->set_tensor_id(id);
  }
  const size_t json_field = 1 + google::protobuf::io::CodedOutputStream::VarintSize64(graph_json.size()) +
                            graph_json.size();
  const size_t full_bytes = wire::kHeaderSize + full.ByteSizeLong() + json_field;
  std::string msg;
  if (im.cfg.graph_deltas) {
    delta::Encoded e = im.encoder.encode(graph_json);
    if (e.is_delta) {
      wire::GraphSubmitDelta d;
      d.set_base_hash(e.base_digest);
      d.set_graph_hash(e.digest);
      for (delta::Patch& p : e.patches) {
        wire::LeafPatch* lp = d.add_patches();
        lp->set_leaf(p.leaf);
        lp->set_json(std::move(p.json));
      }
      *d.mutable_bindings() = full.bindings();
      msg = wire::encode_msg(d);
      call->send_type = MsgType::GraphSubmitDelta;
      call->full_json = std::move(e.text);
      call->bindings = bindings;
      call->base_digest = std::move(e.base_digest);
      call->graph_digest = std::move(e.digest);
    } else {
      full.set_keep_as_base(true);
    }
  }
  if (msg.empty()) {
    full.set_graph_json(graph_json);
    msg = wire::encode_msg(full);
  }
  const size_t sent = wire::kHeaderSize + msg.size();
  // Read before the loop owns the call (a fallback changes its send_type).
  const bool as_delta = call->send_type == MsgType::GraphSubmitDelta;
  im.submit(call, std::move(msg));  // throws before sending, or it is on its way
  (as_delta ? im.graph_submits_delta : im.graph_submits_full).fetch_add(1, std::memory_order_relaxed);
  im.graph_bytes_sent.fetch_add(sent, std::memory_order_relaxed);
  im.graph_bytes_full.fetch_add(full_bytes, std::memory_order_relaxed);
}

RemoteClient::GraphStats RemoteClient::graph_stats() const {
  const Impl& im = *impl_;
  GraphStats s;
  s.submits_full = im.graph_submits_full.load();
  s.submits_delta = im.graph_submits_delta.load();
  s.delta_fallbacks = im.delta_fallbacks.load();
  s.bytes_sent = im.graph_bytes_sent.load();
  s.bytes_full = im.graph_bytes_full.load();
  return s;
}

std::string RemoteClient::server_info_json() {
  auto call = std::make_shared<Call>(MsgType::ServerInfoRequest, Link::Control);
  impl_->transact(call, wire::encode_msg(wire::ServerInfoRequest()));
  const auto info = wire::parse_msg<wire::ServerInfo>(call->reply, call->reply_type);
  std::unique_ptr<cJSON, void (*)(cJSON*)> o(cJSON_CreateObject(), cJSON_Delete);
  check(o != nullptr, GENIE_ERR_OUT_OF_MEMORY, "out of memory");
  // Every field of ServerInfo, counters as JSON numbers (exact up to 2^53).
  wire::add_fields_to_json(info, o.get());
  // This client's side of the same traffic.
  const GraphStats g = graph_stats();
  cJSON* c = cJSON_AddObjectToObject(o.get(), "client");
  check(c != nullptr, GENIE_ERR_OUT_OF_MEMORY, "out of memory");
  cJSON_AddBoolToObject(c, "graph_deltas", impl_->cfg.graph_deltas);
  cJSON_AddNumberToObject(c, "graph_submits_full", static_cast<double>(g.submits_full));
  cJSON_AddNumberToObject(c, "graph_submits_delta", static_cast<double>(g.submits_delta));
  cJSON_AddNumberToObject(c, "graph_delta_fallbacks", static_cast<double>(g.delta_fallbacks));
  cJSON_AddNumberToObject(c, "graph_bytes_sent", static_cast<double>(g.bytes_sent));
  cJSON_AddNumberToObject(c, "graph_bytes_full", static_cast<double>(g.bytes_full));
  char* text = cJSON_PrintUnformatted(o.get());
  check(text != nullptr, GENIE_ERR_OUT_OF_MEMORY, "out of memory");
  std::string s(text);
  cJSON_free(text);
  return s;
}

void RemoteClient::heartbeat_async(std::string msg, std::function<void(genie_status_t, std::string&&)> done) {
  Impl& im = *impl_;
  auto call = std::make_shared<Call>(MsgType::Heartbeat, Link::Control);
  call->on_reply = std::move(done);
  if (msg.size() > im.max_message) {
    im.end_call(*call, GENIE_ERR_TOO_LARGE, "heartbeat exceeds the maximum message size");
    return;
  }
  im.start(call, im.next_id.fetch_add(1), std::move(msg), nullptr, 0);
}

LoopThread* RemoteClient::loop_thread() const { return impl_->loop.get(); }

bool RemoteClient::failed() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->state == Impl::State::Failed || impl_->state == Impl::State::Closed;
}

void RemoteClient::register_worker(const std::string& host, int port,
                                   const std::vector<sched::DeviceProfile>& devices) {
  wire::WorkerRegister m;
  m.set_node_id(impl_->node_id);
  m.set_host(host);
  m.set_port(static_cast<uint32_t>(port));
  for (const auto& d : devices) {
    wire::DeviceInfo* i = m.add_devices();
    i->set_device(d.device);
    i->set_peak_flops(d.peak_flops);
    i->set_mem_bw_bytes_per_s(d.mem_bw_bytes_per_s);
    i->set_mem_capacity_bytes(d.mem_capacity_bytes);
    i->set_mem_budget_bytes(d.mem_budget_bytes);
    i->set_op_overhead_s(d.op_overhead_s);
    i->set_vector_flops(d.vector_flops);
  }
  auto call = std::make_shared<Call>(MsgType::WorkerRegister, Link::Control);
  impl_->transact(call, wire::encode_msg(m));
}

std::string RemoteClient::plan_explain(const std::string& graph_json,
                                       const std::vector<std::pair<std::string, uint64_t>>& bindings) {
  wire::PlanExplain m;
  m.set_graph_json(graph_json);
  for (const auto& [name, id] : bindings) {
    wire::Binding* b = m.add_bindings();
    b->set_name(name);
    b->set_tensor_id(id);
  }
  auto call = std::make_shared<Call>(MsgType::PlanExplain, Link::Control);
  impl_->transact(call, wire::encode_msg(m));
  return wire::parse_msg<wire::PlanExplainReply>(call->reply, call->reply_type).json();
}

const std::string& RemoteClient::server_node_id() const { return impl_->server_node; }

const std::vector<std::string>& RemoteClient::server_devices() const { return impl_->devices; }

bool RemoteClient::connected() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->state == Impl::State::Ready;
}

}  // namespace genie
