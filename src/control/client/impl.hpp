// The client's internals, shared by the files of src/control/client/: the
// link (connecting, the handshake, reconnecting, closing: link.cpp), the
// calls (requests in flight, replies, completions, tensor frees: calls.cpp)
// and the API (RemoteClient's methods: api.cpp). The contract is in
// control/client.hpp.
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
#pragma once

#include <google/protobuf/io/coded_stream.h>
#include <uv.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "control/client.hpp"
#include "control/client/direct.hpp"
#include "control/client/direct_io.hpp"
#include "control/client/rma_local.hpp"
#include "control/connection.hpp"
#include "control/loop_thread.hpp"
#include "control/tls.hpp"
#include "control/wire.hpp"
#include "control/wire_codec.hpp"
#include "control/wire_json.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "dataplane/registry.hpp"
#include "genie.pb.h"
#include "graph/delta.hpp"

namespace genie {

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
  // Tensor writes and reads: the tensor's semantic tag, sent with the frame.
  dataplane::SemanticTag tag;
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
  // Its encoded wire::SubmitInline (inline inputs, outputs asked back):
  // appended to the submission, and to the full one sent instead of a delta.
  std::string inline_extra;
  bool trace = false;  // the submission asks for the server's spans
  std::shared_ptr<const std::string> base_digest;
  std::shared_ptr<const std::string> graph_digest;

  // A submission sent on the direct link (direct_submit.cpp): its
  // completion has run (`completed`), and nobody waits for it, so the
  // watcher collects it (`watched`, under mu).
  std::atomic<bool> completed{false};
  bool watched = false;

  bool submission() const { return type == MsgType::GraphSubmit; }
  bool finished() const { return replied && released; }

  // The waiting caller needs both the reply and its buffer back
  // (finished()): each of settle() and release() wakes it only when it
  // completes the pair, so that it is never woken for nothing (a large
  // write's buffer comes back before its reply, a read's with it).
  void settle(genie_status_t st, std::string why, MsgType rtype = MsgType::Ok, std::string msg = {}) {
    bool wake;
    {
      std::lock_guard<std::mutex> lk(mu);
      if (replied) return;
      replied = true;
      status = st;
      detail = std::move(why);
      reply_type = rtype;
      reply = std::move(msg);
      wake = released;
    }
    if (wake) cv.notify_all();
  }
  // The last payload byte of a read: its reply and its buffer at once.
  void settle_released(genie_status_t st) {
    {
      std::lock_guard<std::mutex> lk(mu);
      released = true;
      if (!replied) {
        replied = true;
        status = st;
      }
    }
    cv.notify_all();
  }
  void set_in_use() {
    std::lock_guard<std::mutex> lk(mu);
    released = false;
  }
  void release() {
    bool wake;
    {
      std::lock_guard<std::mutex> lk(mu);
      released = true;
      wake = replied;
    }
    if (wake) cv.notify_all();
  }
  bool in_use() {
    std::lock_guard<std::mutex> lk(mu);
    return !released;
  }
};

// A submission on the direct link, as RemoteClient::submit hands it out.
// When the last handle goes, nobody can wait for it: the watcher collects
// it (direct_watch) if it has not completed.
struct RemoteClient::Submission {
  Submission(std::shared_ptr<Call> c, std::weak_ptr<RemoteClient::Impl> i)
      : call(std::move(c)), im(std::move(i)) {}
  Submission(const Submission&) = delete;
  Submission& operator=(const Submission&) = delete;
  ~Submission();
  const std::shared_ptr<Call> call;
  const std::weak_ptr<RemoteClient::Impl> im;
};

inline const char* what_of(MsgType t) {
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
inline genie_status_t peer_status(int32_t s) {
  return s <= GENIE_ERR_INVALID_ARGUMENT && s >= GENIE_ERR_INTERNAL ? s : GENIE_ERR_PROTOCOL;
}

struct RemoteClient::Impl : std::enable_shared_from_this<RemoteClient::Impl> {
  enum class State { Connecting, Ready, Reconnecting, Failed, Closed };
  enum class Handshake { Idle, Hello, DataHello, Done };
  Impl(const Config& c, std::string id)
      : cfg(c),
        node_id(std::move(id)),
        addr(cat(c.master_addr, ":", c.master_port)),
        max_message(static_cast<uint32_t>(c.max_message_bytes)),
        timeout(std::chrono::milliseconds(c.timeout_ms)),
        reconnect_window(std::chrono::milliseconds(
            c.reconnect_window_ms > 0 ? std::min(c.reconnect_window_ms, c.timeout_ms) : c.timeout_ms)),
        tls(client_tls(c)) {}

  // --- immutable after connect() returns --------------------------------
  const Config cfg;
  const std::string node_id;
  const std::string addr;
  const uint32_t max_message;
  const std::chrono::milliseconds timeout;
  const std::chrono::milliseconds reconnect_window;  // Config::reconnect_window_ms
  // TLS for the control connection and a TCP data connection; null: none.
  const std::shared_ptr<const dataplane::tcp::TlsContext> tls;
  std::string server_node;
  std::string server_instance;  // Welcome.server_instance
  std::vector<std::string> devices;
  // Where the data connection goes: the transport (registry name) and the
  // address for its connect. Written on the loop thread under mu.
  struct DataEndpoint {
    std::string transport = "tcp";
    std::string address;
  };
  DataEndpoint data_endpoint;

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
  // Payload bytes of the tensor writes and reads that succeeded.
  std::atomic<uint64_t> tensor_bytes_written{0}, tensor_bytes_read{0};
  // GraphDone frames received (header included), and the outputs' bytes in them.
  std::atomic<uint64_t> completion_bytes{0}, inline_output_bytes{0};
  // The server accepts submissions on a data connection
  // (Welcome.data_submit), and frees inside them (Welcome.submit_frees).
  // Written on the loop thread under mu.
  bool data_submit = false;
  bool submit_frees = false;
  // The server sends spans and answers ClockProbe (Welcome.trace_spans).
  // Written on the loop thread under mu.
  bool trace_spans = false;
  // Small tensors inside submissions and completions (Welcome.inline_tensors).
  // Written on the loop thread under mu.
  bool inline_tensors = false;
  // server_clock()'s last estimate, when and in which link_epoch it was
  // made (a reconnect may reach another server process), under clock_mu.
  std::mutex clock_mu;
  ClockOffset clock;
  std::chrono::steady_clock::time_point clock_at{};
  uint64_t clock_epoch = 0;
  // The data channel carries RMA only by emulating it through the server's
  // CPU (Channel::rma_emulated): rma_transfer takes the framed path. Set
  // on the loop thread when the data connection is up.
  std::atomic<bool> data_rma_emulated{false};
  // Bumped (under mu) each time the session becomes ready: a direct link
  // joined before a reconnect belongs to connections the server dropped.
  uint64_t link_epoch = 0;
  // Synchronous transfers on the caller's own socket (direct.hpp).
  DirectLink direct;
  // One-sided transfers into tensors a server on this host granted
  // (rma_local.hpp).
  LocalGrants local;

  // --- loop thread only ----------------------------------------------------
  std::shared_ptr<Connection> ctrl, data;
  uint64_t gen = 0;  // bumped at every teardown: events of old connections are ignored
  Handshake hs = Handshake::Idle;
  bool resuming = false;
  std::string token;        // the session's secret (Welcome); never sent back
  uint64_t session_id = 0;  // the session's name (Welcome)
  std::unordered_map<uint64_t, std::shared_ptr<Call>> pending;
  // Calls that reached the loop after a loss and before the session was
  // back: never sent, so they go once it is (send_parked) or fail with it.
  struct Parked {
    uint64_t id;
    std::shared_ptr<Call> call;
    std::string msg;
    const void* payload;
    uint64_t payload_len;
  };
  std::vector<Parked> parked;
  uv_timer_t retry_timer{};
  uv_timer_t free_timer{};
  uv_timer_t deadline_timer{};
  // Liveness: while requests wait, a server that sends nothing for half the
  // timeout gets a ServerInfoRequest (ping_id), and one silent for 1.25
  // timeouts is treated as lost, so that no wait outlives it (a stopped or
  // cut-off server keeps its TCP connection up).
  uv_timer_t live_timer{};
  Clock::time_point last_heard;
  uint64_t ping_id = 0;
  int retry_ms = 0;
  Clock::time_point reconnect_deadline;

  // Last member: its thread runs code touching everything above, so it must
  // stop before they are destroyed.
  std::unique_ptr<LoopThread> loop;

  // ===== caller side =========================================================

  void set_state(State s, genie_status_t st = GENIE_OK, std::string detail = {});
  void refuse_on_loop_thread(const char* what) const;

  // Blocks until the session is usable (reconnecting in the background if
  // need be), for at most the client's timeout; throws SHUTDOWN /
  // CONNECTION otherwise.
  void wait_ready();

  // Sends one request and waits for its reply. Throws the server's error,
  // TIMEOUT (no reply within the timeout), CONNECTION or SHUTDOWN.
  void transact(const std::shared_ptr<Call>& call, std::string msg, const void* payload = nullptr,
                uint64_t payload_len = 0);

  // Moves tensor bytes by RMA where the data transport has it (rma.cpp);
  // false: use the framed path. The request names `tag` (the server counts
  // the bytes under it).
  bool rma_transfer(bool write, uint64_t id, size_t offset, void* buf, size_t nbytes,
                    const dataplane::SemanticTag& tag = {});

  // One-sided transfers between local processes (rma_local.cpp): whether
  // an allocation asks for a grant; the session establishment a call
  // starts in (0: not ready); a grant recorded (ignored unless `epoch` is
  // still current) or forgotten; and the transfer itself, true when it
  // moved the bytes, false to take another path.
  bool local_wanted();
  uint64_t ready_epoch();
  void local_granted(uint64_t id, const wire::LocalGrant& grant, uint64_t epoch);
  void local_forget(uint64_t id) noexcept;
  bool local_transfer(bool write, uint64_t id, size_t offset, void* buf, size_t nbytes);

  // Moves tensor bytes on the direct link (direct.cpp) where it can be
  // used; false: use the framed path through the loop. Throws what
  // transact would (the server's error, TIMEOUT, CONNECTION, SHUTDOWN,
  // PROTOCOL).
  // TCP carries no semantic tags, so the direct link sends none.
  bool direct_transfer(bool write, uint64_t id, size_t offset, void* buf, size_t nbytes);

  // --- the direct link: direct.cpp, direct_submit.cpp ---------------------
  // Holding direct.mu: the link open and joined to the current session
  // (opened if need be; a link of an earlier one fails what it owed);
  // false when it cannot be had (the framed path runs instead). A
  // submission needs a server that takes it there (data_submit). *joined,
  // if given: the session establishment (link_epoch) the link belongs to.
  bool direct_open(bool submission, uint64_t* joined = nullptr);
  // The framed path's error for a broken link: SHUTDOWN after close(),
  // else TIMEOUT, PROTOCOL or CONNECTION naming `what`.
  Error direct_error(const direct_io::LinkBroken& b, const char* what);
  // Sends a submission (`msg`, as call->send_type) on the direct link;
  // false when it cannot (not eligible, busy, too many owed, not sent):
  // the loop sends it instead. Its completion runs where direct_collect,
  // the watcher or a transfer reads it.
  bool direct_submit(const std::shared_ptr<Call>& call, const std::string& msg);
  // Holding direct.mu: a frame for a submission the link owes.
  void direct_completion(const wire::FrameHeader& fh, const std::string& msg);
  void direct_done(Call& call, RemoteResult&& r);
  // Holding direct.mu: the link closes; every submission it owed fails.
  void direct_failed(genie_status_t st, const std::string& detail);
  // Holding direct.mu: reads completions until `until` or the deadline.
  void direct_read(const std::function<bool()>& until, Clock::time_point deadline);
  // Any thread but a reader's: until `call` completed or the deadline,
  // reading the link when no other thread does.
  void direct_collect(const std::shared_ptr<Call>& call, Clock::time_point deadline);
  // Nobody will wait for `call`: the watcher collects it.
  void direct_watch(const std::shared_ptr<Call>& call);
  // Every completion the link owes is collected from now on (closing).
  void direct_drain();
  void start_watcher();
  void watch_completions();  // the watcher's thread
  // Loop thread: the session's connections are lost.
  void direct_lost(const std::string& why);
  // close(): the watcher stops; what the link owed fails with SHUTDOWN.
  void direct_close();
  // Marks this thread as reading the link (it holds direct.mu) while it
  // lives, so completions it runs do not take the link again.
  struct DirectReader {
    explicit DirectReader(Impl& im);
    ~DirectReader();
    DirectReader(const DirectReader&) = delete;
    DirectReader& operator=(const DirectReader&) = delete;
    const void* prev;
  };
  bool reading_direct() const;

  // Any thread: frees `id` on the server with the next request, or after
  // kFreeFlushMs.
  void queue_free(uint64_t id) noexcept;
  // The full GraphSubmit of a delta submission, for a server that lacks its
  // base: encoded into *out; else why it cannot be sent.
  std::string full_submission(Call& call, std::string* out);

  // Queues a graph submission and returns: the server's answer (GraphDone or
  // ErrorReply), or a failure, reaches call->done on the loop thread, or,
  // when it went on the direct link (true), on the thread that reads its
  // completion there. Throws only what is known before anything is sent
  // (TOO_LARGE, not connected, closed), and then call->done never runs.
  bool submit(const std::shared_ptr<Call>& call, std::string msg);

  // ===== loop thread =========================================================

  // Sends a call, or parks it while the session is being resumed.
  void start(const std::shared_ptr<Call>& call, uint64_t id, std::string msg, const void* payload,
             uint64_t payload_len);
  // Sends the calls parked while reconnecting; the session is ready again.
  void send_parked();
  void cancel(const std::shared_ptr<Call>& call, uint64_t id);
  Connection::Handlers handlers(uint64_t g, Link link);

  // A frame we cannot make sense of (undecodable, unexpected): the peer is
  // broken, so the connection goes (Connection allows closing it from inside
  // its own frame handler).
  void frame_failed(genie_status_t st, const std::string& detail);
  void init_timers();
  void arm_deadline();
  void check_liveness();
  // Whether a request other than the liveness ping waits for its reply.
  bool requests_waiting() const;

  // Closes both connections; events still queued for them are ignored.
  void teardown();

  // Fails every request in flight and every parked one. The connections
  // must already be closed: that is what makes releasing the callers'
  // buffers safe.
  void fail_all(genie_status_t st, const std::string& detail);

  // Ends a call with an error: a submission through its completion, any
  // other call by waking its caller.
  void end_call(Call& call, genie_status_t st, std::string detail);
  void run_reply(Call& call, genie_status_t st, std::string&& msg);
  void run_done(Call& call, RemoteResult&& r);
  void begin_attempt();
  // The data connection's transport and address from the server's Welcome:
  // the transport the user demanded (Config::transport; Error(UNSUPPORTED)
  // naming it when the server does not offer it or it cannot be loaded
  // here), else the selected backend's (Config::selected_transport; TCP
  // when it cannot be had), else TCP.
  DataEndpoint choose_data_endpoint(const wire::Welcome& w) const;
  void open_data_link();

  // A connection attempt failed. Initial connect: report it. Reconnect:
  // retry with backoff while the deadline allows and the failure is one a
  // retry can fix.
  void attempt_failed(genie_status_t st, const std::string& detail, bool retryable = true);
  void give_up(genie_status_t st, const std::string& detail);
  void connection_lost(const std::string& why);
  void on_link_closed(Link link, genie_status_t st, const std::string& detail);
  static bool is_error(const wire::FrameHeader& fh);
  static bool unknown_base(const std::string& msg);

  // The server does not hold the base of a delta: the same submission goes
  // again in full (the completion still runs once).
  void resend_full(const std::shared_ptr<Call>& call);
  static std::pair<genie_status_t, std::string> parse_error(const std::string& msg);
  void handshake_frame(Link link, const wire::FrameHeader& fh, const std::string& msg);
  PayloadSink discard(uint64_t len);
  PayloadSink on_frame(Link link, const wire::FrameHeader& fh, std::string&& msg);
  RemoteResult parse_done(const std::string& msg);

  // Outputs of a graph whose caller gave up are nobody's: free them.
  void free_stray_outputs(const std::string& msg);

  // Loop thread: frees `id` on the server now, or after the reconnect.
  void send_free(uint64_t id);

  // Sends a TensorFree for every tensor freed so far. Called before each
  // request on the control connection, so the server frees them before it
  // handles anything the caller did after freeing (and a caller destroying
  // outputs between submissions costs no wake-up of its own), and by
  // free_timer, so they are not held back for long when no request comes.
  // While reconnecting they wait for the resumed session.
  void flush_frees();
  void arm_free_timer();

  // ===== lifetime ============================================================

  void close();
  void begin_close();
  void final_teardown();
};

}  // namespace genie
