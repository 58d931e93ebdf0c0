// The client side of remote mode: one session with a `genie serve` process
// over a control connection (requests, replies, completions; TCP_NODELAY)
// and a data connection (bulk tensor bytes; large socket buffers).
//
// Calls may come from any thread. Each is queued to the context's loop
// thread (LoopThread::post), written there, and matched to its reply by
// request id; many may be in flight at once (pipelining). Synchronous calls
// block the caller until the reply or the timeout (Config::timeout_ms);
// submit() does not wait: its completion arrives through a callback.
//
// Connection loss: every request in flight fails with GENIE_ERR_CONNECTION
// (graph completions too), then the client reconnects in the background
// with its session token for up to timeout_ms; the server keeps the
// session's tensors for its grace period, so a reconnect within it finds
// them intact. Calls made while disconnected wait for the reconnect (up to
// the timeout) and then fail with GENIE_ERR_CONNECTION.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "control/clock_offset.hpp"
#include "core/config.hpp"
#include "core/dtype.hpp"
#include "core/shape.hpp"
#include "core/trace.hpp"
#include "dataplane/transport.hpp"
#include "genie.h"
#include "sched/plan.hpp"

namespace genie {

class LoopThread;

struct RemoteOutput {
  std::string name;
  uint64_t tensor_id = 0;
  DType dtype = DType::Invalid;
  Shape shape;
  // Where it lives, in the server's names: "cpu:0" (its own device) or
  // "NODE/DEVICE" (one of its workers); a valid device string.
  std::string device = "cpu:0";
  // Its bytes, when the submission asked for them (SubmitExtras::
  // return_outputs) and the server sent them: has_data, and data holds the
  // whole tensor.
  bool has_data = false;
  std::string data;
};

// What a submission carries besides its graph and bindings, for a server
// with inline_tensors() (docs/protocol.md, "Small tensors inside a
// submission"): graph inputs given by value, bound for this submission only
// (each at most wire::kMaxInlineTensorBytes, kMaxInlineBytes in all; the
// bytes are copied while submit() encodes), and the indexes of the outputs
// whose bytes the completion should carry (RemoteOutput::data).
struct InlineInput {
  std::string name;
  DType dtype = DType::Invalid;
  Shape shape;
  const void* data = nullptr;
  size_t nbytes = 0;
};
struct SubmitExtras {
  std::vector<InlineInput> inputs;
  std::vector<uint32_t> return_outputs;
  bool empty() const { return inputs.empty() && return_outputs.empty(); }
};

// A span of the server's run of a graph (GraphDone.spans): `event` without
// its times and process, on the server's row event.tid named `row`, from
// start_ns on the server's steady clock for dur_ns.
struct RemoteSpan {
  trace::Event event;
  std::string row;
  uint64_t start_ns = 0;
  uint64_t dur_ns = 0;
};

struct RemoteResult {
  genie_status_t status = GENIE_OK;
  std::string detail;
  std::vector<RemoteOutput> outputs;  // graph outputs, mark order
  uint64_t exec_ns = 0;
  // A submission with want_spans: what the server recorded of the run, and
  // how many spans it left out (its bounds, server/trace_spans.hpp).
  std::vector<RemoteSpan> spans{};
  uint32_t spans_dropped = 0;
};

class RemoteClient : public std::enable_shared_from_this<RemoteClient> {
 public:
  // Connects both connections, runs the handshake (and the challenge-response
  // when the server asks for it, with cfg.auth_token). Throws
  // Error(CONNECTION) if the server cannot be reached, Error(TIMEOUT) past
  // cfg.timeout_ms, Error(AUTH), Error(VERSION_MISMATCH) naming both
  // versions, Error(PROTOCOL).
  static std::shared_ptr<RemoteClient> connect(const Config& cfg, const std::string& node_id);

  // Sends Goodbye (the server frees the session), closes, joins the loop.
  ~RemoteClient();
  void close();

  uint64_t tensor_alloc(DType dtype, const Shape& shape, const std::string& device);
  // `tag`: the tensor's semantic tag (control/semantic_tag.hpp), which a
  // data transport that carries tags (dpdk) puts on every packet of the
  // write, and of the read's request and reply (the server answers a read
  // with the tag it came with); the others ignore it. A transfer by RMA
  // names it in its request instead.
  void tensor_write(uint64_t id, size_t offset, const void* src, size_t nbytes,
                    const dataplane::SemanticTag& tag = {});
  void tensor_read(uint64_t id, size_t offset, void* dst, size_t nbytes, const dataplane::SemanticTag& tag = {});
  // Moving a tensor between two servers without this client relaying it
  // (docs/multinode.md, "Direct transfers"). tensor_export: a ticket (32
  // bytes) for one fetch of tensor `id` by any session of the server within
  // a minute. tensor_fetch: the whole tensor a ticket names, into dst (nbytes
  // must be its size: SIZE_MISMATCH otherwise; NOT_FOUND for a ticket used,
  // expired or never handed out). tensor_import: the server fetches the
  // tensor `ticket` names from the server at host:port into its tensor
  // `id`; returns once the bytes are there. Only a session opened with the
  // server role may ask (UNSUPPORTED otherwise). `tag`: the semantic tag
  // of the tensor moved, named in the request (the serving side counts the
  // bytes under it, whatever the transport) and put on the fetch's frames
  // (and its reply's) where the transport carries tags; tensor_import's
  // server fetches with it.
  std::string tensor_export(uint64_t id);
  void tensor_fetch(const std::string& ticket, void* dst, size_t nbytes, const dataplane::SemanticTag& tag = {});
  void tensor_import(uint64_t id, const std::string& host, int port, const std::string& ticket,
                     const std::string& source_node, const dataplane::SemanticTag& tag = {});
  // Fire and forget; never throws. Ignored after close(). The TensorFree
  // goes out ahead of the next request on the control connection (so that
  // request sees the tensor freed), or a few milliseconds later if no
  // request comes: freeing costs no wake-up of the loop of its own.
  void tensor_free(uint64_t id) noexcept;

  // Queues the graph (its JSON, graph_to_json of a graph already validated
  // with the bound shapes) and its bindings (graph input name -> tensor id)
  // -- as a GraphSubmitDelta against a graph sent before when the JSON has
  // the same shape, falling back to the full graph by itself when the server
  // does not hold that base (docs/protocol.md) -- and returns without waiting for
  // the server, so that many submissions can be in flight. `done` runs
  // exactly once, on the loop thread, with the completion: GraphDone, or the
  // server's refusal (e.g. NOT_FOUND for a tensor of another session), or
  // GENIE_ERR_CONNECTION / GENIE_ERR_SHUTDOWN. Submissions go out in call
  // order on the control connection, after every write that has returned
  // (tensor_write waits for the server to apply it). Throws, and then never
  // runs `done`, only for what is known before sending: TOO_LARGE,
  // UNSUPPORTED on the loop thread, CONNECTION or SHUTDOWN when not
  // connected (after waiting up to the timeout for a reconnect).
  //
  // Returns null, or, when the submission went on the direct link
  // (client/direct.hpp, "Submissions"), a handle for collect() and
  // watch(): its `done` then runs on whichever thread reads its completion
  // there (a collect() of any submission, a transfer on the link, or the
  // watcher thread). A caller waits for it with collect(); watch(), or
  // dropping the last handle, leaves it to the watcher thread.
  //
  // `want_spans`: the completion carries the server's spans of the run
  // (RemoteResult::spans), from a server that sends them (trace_spans()).
  struct Submission;
  //
  // `extras`: inline inputs and outputs asked back, for a server with
  // inline_tensors() only (INTERNAL otherwise: the caller checks first).
  std::shared_ptr<Submission> submit(const std::string& graph_json,
                                     std::vector<std::pair<std::string, uint64_t>> bindings,
                                     std::function<void(RemoteResult&&)> done, bool want_spans = false,
                                     const SubmitExtras& extras = {});
  // Returns once `s`'s done has run or at `deadline`, reading the direct
  // link on this thread while no other thread does. Returns at once on a
  // thread running a completion read off the link (the reader goes on).
  void collect(const Submission& s, std::chrono::steady_clock::time_point deadline);
  // Nobody will wait for `s`: its completion is collected in the background.
  void watch(const Submission& s);
  // Every completion the direct link owes is collected in the background
  // from now on (before closing).
  void drain();
  // Submissions sent on the direct link so far, and the tensor frees they
  // carried (Welcome.submit_frees) instead of TensorFree frames.
  uint64_t direct_submits() const;
  uint64_t direct_frees_carried() const;

  // Graph submissions so far: full and as deltas (Config::graph_deltas), the
  // deltas sent again in full because the server did not hold their base,
  // and the bytes of the submission frames as sent vs as full GraphSubmits;
  // the payload bytes of the tensor writes and reads that succeeded.
  struct GraphStats {
    uint64_t submits_full = 0, submits_delta = 0, delta_fallbacks = 0;
    uint64_t bytes_sent = 0, bytes_full = 0;
    uint64_t tensor_bytes_written = 0, tensor_bytes_read = 0;
    // Completion frames received (GraphDone), outputs' bytes inside them
    // included; and of those, the outputs' bytes alone.
    uint64_t completion_bytes = 0, inline_output_bytes = 0;
  };
  GraphStats graph_stats() const;
  // Tensor writes and reads done on the caller's own socket, without the
  // loop (control/client/direct.hpp).
  uint64_t direct_transfers() const;
  // Tensor writes and reads made one-sided into a server on this host
  // (control/client/rma_local.hpp).
  uint64_t local_transfers() const;

  // The server sends the spans of the graphs a submission asks for and
  // answers ClockProbe (Welcome.trace_spans; false from older servers).
  bool trace_spans() const;
  // The server takes small tensors inside submissions and sends small
  // outputs back inside completions (Welcome.inline_tensors; false from
  // older servers).
  bool inline_tensors() const;
  // The server's steady clock against this process's (trace::now_ns()),
  // from kClockProbes ClockProbe round trips on the control connection
  // (control/clock_offset.hpp); measured once per connection to the
  // server and again once older than kClockMaxAge. Not known from a server
  // without trace_spans(). Throws as a synchronous call does (CONNECTION,
  // TIMEOUT, SHUTDOWN). Any thread but the loop thread.
  static constexpr int kClockProbes = 8;
  static constexpr std::chrono::seconds kClockMaxAge{10};
  ClockOffset server_clock();

  // ServerInfo as JSON text, with this client's GraphStats under "client".
  std::string server_info_json();

  // Loop thread only (the cluster layer's heartbeat timer): sends `msg`
  // (an encoded wire::Heartbeat) on the control connection without waiting.
  // `done(status, reply)` runs exactly once, on the loop thread: GENIE_OK
  // with the encoded HeartbeatReply, or the server's error, or CONNECTION
  // (not connected, or the connection was lost first) / SHUTDOWN, with the
  // detail in place of the reply.
  void heartbeat_async(std::string msg, std::function<void(genie_status_t, std::string&&)> done);
  // The context's loop thread (connections, timers, event delivery).
  LoopThread* loop_thread() const;
  // True once the session is gone for good (reconnecting failed, or closed).
  bool failed() const;

  // Registers the server listening at host:port (this client's node id)
  // as a worker of the server this client is connected to (its master):
  // returns once the master has connected back (docs/multinode.md).
  // Throws the master's error (e.g. CONNECTION: it could not reach
  // host:port).
  void register_worker(const std::string& host, int port, const std::vector<sched::DeviceProfile>& devices);

  // The server's plan for this graph and these bindings, as JSON
  // (sched::Plan::explain_json). Throws the server's error.
  std::string plan_explain(const std::string& graph_json,
                           const std::vector<std::pair<std::string, uint64_t>>& bindings);

  const std::string& server_node_id() const;
  // The server's instance (Welcome.server_instance): 16 random bytes drawn
  // when that server started, which tell one server from another whatever
  // the address they were reached at (empty from a server that sends none).
  const std::string& server_instance() const;
  const std::vector<std::string>& server_devices() const;
  bool connected() const;
  // The transport the data connection runs over (registry name, e.g. "tcp").
  std::string data_transport() const;

 private:
  RemoteClient() = default;
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace genie
