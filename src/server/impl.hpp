// The server's internals, shared by the files of src/server/: one
// file per job (setup and stopping, handshake and authentication, frame
// dispatch and replies, the tensor service, the graph service, the worker
// service). The contract is in server/server.hpp; docs/protocol.md
// describes the conversation.
//
// Threads: everything but stop(), wait() and stats() runs on the loop thread.
// Graph completions arrive on executor workers and are posted to the loop.
#pragma once

#include <cctype>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <unordered_map>
#include <unordered_set>

#include "control/client.hpp"
#include "control/connection.hpp"
#include "control/loop_thread.hpp"
#include "control/uv_timer.hpp"
#include "control/wire.hpp"
#include "control/wire_codec.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/log_limiter.hpp"
#include "core/metrics.hpp"
#include "dataplane/registry.hpp"
#include "dataplane/tcp/tls.hpp"
#include "exec/executor.hpp"
#include "exec/local_devices.hpp"
#include "exec/overhead.hpp"
#include "exec/run_memory.hpp"
#include "genie.pb.h"
#include "graph/binding.hpp"
#include "graph/delta.hpp"
#include "graph/graph.hpp"
#include "sched/plan.hpp"
#include "server/admission.hpp"
#include "server/graph_cache.hpp"
#include "server/multinode.hpp"
#include "server/server.hpp"
#include "server/session.hpp"
#include "server/task_pool.hpp"

namespace genie {

using wire::MsgType;
using wire::parse_msg;

// Data connections one session may have at once: the client's own two
// (the loop's and the direct link), and those of a reconnect while the
// old ones are still closing.
constexpr size_t kMaxDataConnections = 8;

// The most nodes of a device graph the event loop issues itself (each
// node's kernels take microseconds to queue); larger ones go to a worker.
constexpr size_t kIssueOnLoopNodes = 64;

// Threads for blocking work (TaskPool): as many sessions' forwarded calls
// to workers, and multi-node graphs between their stages, run at once; more
// queue for a free one. Stages waiting on workers hold none (MultiNode).
constexpr size_t kTaskThreads = 16;

// Graph JSON from this size up is parsed and validated off the loop (on the
// parse pool), so that no client's requests wait behind another's parse (a
// 100,000-node graph takes about a second), and is charged to the session's
// quota and the budget first, at kParseBytesPerByte: the most a parse holds
// at its peak. Below it a parse takes a few milliseconds at most, less than
// handing it over would cost a small graph.
constexpr size_t kOffLoopParseBytes = size_t{64} << 10;
constexpr size_t kParseBytesPerByte = 16;

// Threads parsing and validating large graphs (graphs.cpp), one session's
// at a time each: others' parses queue, the loop never waits for one.
constexpr size_t kParseThreads = 2;

// One accepted connection: in its handshake, a session's control
// connection, or one of its data connections.
struct Peer : std::enable_shared_from_this<Peer> {
  enum class State { Fresh, AwaitAuth, Control, Data };
  State state = State::Fresh;
  std::shared_ptr<Connection> conn;
  std::string name;       // "ip:port", for logs
  std::string source;     // the address part of `name`, counted by Admission
  bool admitted = false;  // counted by Admission until on_close
  bool vouched = false;   // a data connection of a session: not counted per source
  // In its handshake (counted in Impl::handshaking until it authenticates
  // or closes), and when it was accepted (Impl::next_peer_serial), so that
  // the oldest handshakes make room for new ones.
  bool handshaking = false;
  uint64_t serial = 0;
  std::shared_ptr<Session> session;
  std::string nonce;  // the challenge sent (AwaitAuth)
  // AwaitAuth on a data connection: the session its DataHello named (a
  // Session serial); 0 on a control connection.
  uint64_t data_session = 0;
  std::string session_mac;  // a control connection resuming: its proof (AuthResponse)
  wire::Hello hello;        // kept from Hello until the AuthResponse
  uint64_t hello_rid = 0;   // echoed by Welcome: the Hello's or AuthResponse's request id
  std::unique_ptr<Timer> handshake_timer;
  int pending_writes = 0;      // frames handed to the connection, not yet written
  uint64_t pending_bytes = 0;  // their header and message bytes
  // Tensor reads on this connection (read_window.cpp): payload bytes of the
  // read replies handed to the connection and not yet taken by the kernel,
  // and the reads waiting for room in the window (counted in
  // pending_writes and pending_bytes, so the reply caps bound them too).
  struct WaitingRead {
    uint64_t rid, tensor_id, offset, nbytes;
    std::weak_ptr<TensorData> tensor;  // a waiting read does not keep its tensor
    dataplane::SemanticTag tag;        // the request's, for the reply
  };
  uint64_t read_bytes_in_flight = 0;
  std::deque<WaitingRead> reads_waiting;
  bool pumping_reads = false;
  // Graph submissions of this connection in flight that asked for their
  // spans (GraphSubmit.trace): their GraphDone carries them (trace_spans.cpp).
  // At most kMaxTracedInFlight; past it a submission is not traced.
  std::unordered_set<uint64_t> traced;
  // Submissions of this connection in flight that asked for outputs' bytes
  // in their GraphDone (SubmitInline.return_outputs; inline_tensors.cpp):
  // the indexes asked. At most kMaxTracedInFlight; past it none are sent.
  std::unordered_map<uint64_t, std::vector<uint32_t>> returning;
  // Once set, further frames are ignored and the connection closes as soon as
  // its queued replies are written (so an ErrorReply reaches the client).
  bool closing = false;
  genie_status_t close_status = GENIE_OK;
  std::string close_detail;
};

// Puts host tensor t's bytes in o (OutputTensor.data) when they fit
// kMaxInlineTensorBytes and what is left of *budget (less them); nothing
// for a null or device tensor (inline_tensors.cpp).
void add_output_data(const TensorData* t, wire::OutputTensor& o, size_t* budget);

// A server tensor's device as clients see it ("cpu:0", "cuda:0").
inline std::string served_device_name(const TensorData& t) {
  return t.host_accessible() ? "cpu:0" : t.device().str();
}

struct Server::Impl {
  explicit Impl(ServerOptions o);
  ~Impl();

  // --- loop thread ---------------------------------------------------------
  void listen(std::promise<void>& bound);
  void on_accept(dataplane::Listener& listener, const std::string& transport);
  void on_close(const std::shared_ptr<Peer>& p, genie_status_t status, const std::string& detail);
  PayloadSink on_frame(const std::shared_ptr<Peer>& p, const wire::FrameHeader& h, std::string&& msg);

  void handshake(const std::shared_ptr<Peer>& p, const wire::FrameHeader& h, const std::string& msg);
  void admit(const std::shared_ptr<Peer>& p);
  PayloadSink request(const std::shared_ptr<Peer>& p, const wire::FrameHeader& h, const std::string& msg);
  // Runs a request's handler; its errors (and running out of memory while
  // `what`) become the ErrorReply to rid.
  PayloadSink answer_errors(Peer& p, uint64_t rid, const char* what, const std::function<void()>& handle);
  void tensor_alloc(Peer& p, uint64_t rid, const wire::TensorAlloc& m);
  PayloadSink tensor_write(const std::shared_ptr<Peer>& p, const wire::FrameHeader& h,
                           const wire::TensorWrite& m);
  void tensor_read(Peer& p, uint64_t rid, const wire::TensorRead& m);
  // TensorRmaWrite / TensorRmaRead (rma.cpp); the bytes moved are counted
  // under the request's `tag` once they have.
  void tensor_rma(const std::shared_ptr<Peer>& p, uint64_t rid, bool write, uint64_t tensor_id,
                  uint64_t offset, uint64_t nbytes, const std::string& region,
                  const dataplane::SemanticTag& tag);
  // Direct transfers between servers (docs/multinode.md, "Direct
  // transfers"): a ticket for one fetch of a tensor of this session; the
  // fetch by whichever session presents it; and, off the loop, fetching a
  // peer's exported tensor into one of this session's.
  void tensor_export(Peer& p, uint64_t rid, const wire::TensorExport& m);
  void tensor_fetch(Peer& p, uint64_t rid, const wire::TensorFetch& m);
  void tensor_import(const std::shared_ptr<Peer>& p, uint64_t rid, const wire::TensorImport& m);
  // This server's session on the server at host:port, opened on first use
  // and kept (task pool).
  std::shared_ptr<RemoteClient> peer_link(const std::string& host, int port);
  using Bindings = google::protobuf::RepeatedPtrField<wire::Binding>;
  using Inlined = google::protobuf::RepeatedPtrField<wire::InlineTensor>;
  // `loaded`, when set, runs on the loop thread once the graph has parsed
  // and validated, before it runs (sooner or later than this returns:
  // JSON of kOffLoopParseBytes or more is parsed on the parse pool).
  // `inlined`: inputs given by value (bind_inline).
  void graph_submit(const std::shared_ptr<Peer>& p, uint64_t rid, const std::string& json,
                    const Bindings& bindings, const Inlined& inlined, std::function<void()> loaded = nullptr);
  // Small tensors inside submissions and completions (inline_tensors.cpp).
  // bind_inline: each inline input checked (dtype, shape, its bytes, the
  // bounds, a name bound once) and made a host tensor charged to p's
  // session while anything holds it, appended to names/descs/tensors.
  // Throws INVALID_ARGUMENT, SIZE_MISMATCH, TOO_LARGE, OUT_OF_MEMORY.
  void bind_inline(Peer& p, const Inlined& in, std::vector<std::string>& names, std::vector<TensorDesc>& descs,
                   std::vector<TensorPtr>& tensors);
  // Notes which outputs request `rid` of `p` wants back; report_done takes
  // them (take_wanted_outputs), send_error forgets them.
  // Counts the inline inputs (names[first..], tensors[first..]) as written
  // bytes under the tags the graph gives them, as their uploads would have been.
  void count_inline(const Graph& g, const std::vector<std::string>& names, size_t first,
                    const std::vector<TensorPtr>& tensors);
  static void want_outputs(Peer& p, uint64_t rid, const google::protobuf::RepeatedField<uint32_t>& which);
  static std::vector<uint32_t> take_wanted_outputs(Peer& p, uint64_t rid);
  struct Parse;
  void parse_off_loop(const std::shared_ptr<Peer>& p, uint64_t rid, const std::string& json,
                      std::vector<TensorPtr> tensors, std::vector<RemoteTensorPtr> remote,
                      std::function<void()> loaded, size_t first_inline);
  void graph_parsed(const std::shared_ptr<Peer>& p, const std::shared_ptr<Session>& s, uint64_t rid,
                    Parse& job);
  // A validated graph's run, its bindings resolved (per binding: the
  // tensor here, or on a worker, and its description).
  void run_graph(const std::shared_ptr<Peer>& p, uint64_t rid,
                 const std::shared_ptr<const GraphCache::Entry>& cached, std::vector<TensorPtr>& tensors,
                 std::vector<RemoteTensorPtr>& remote, const std::vector<TensorDesc>& descs);
  // Runs a graph placed across this server's devices stage by stage
  // (LocalDevices::run_staged); its completion reaches graph_done.
  void run_staged(const std::shared_ptr<Peer>& p, uint64_t rid,
                  const std::shared_ptr<const GraphCache::Entry>& cached, LocalDevices::Placed placed,
                  std::unordered_map<ValueId, Shape> shapes, std::vector<TensorPtr> inputs);
  // The JSON text a GraphSubmitDelta of session `s` stands for; throws
  // Error(NOT_FOUND) with *unknown_base set when the base is not held (or
  // does not rebuild). Bases are the session's own: a delta cannot tell one
  // tenant which graphs another sent.
  std::shared_ptr<const std::string> rebuild(const Session& s, const wire::GraphSubmitDelta& m,
                                             bool* unknown_base);
  // Session s's key of a digest in `bases`, in a buffer reused by the next
  // call (loop thread).
  const std::string& base_key(const Session& s, const std::string& digest);
  std::string base_key_;
  // graph_submit's binding names and descriptions, their buffers reused
  // from one submission to the next (loop thread).
  std::vector<std::string> submit_names_;
  std::vector<TensorDesc> submit_descs_;
  // A graph of `p`'s session `s` has finished; either is null once gone
  // (the caller held weak pointers while it ran).
  void graph_done(const std::shared_ptr<Peer>& p, const std::shared_ptr<Session>& s, uint64_t rid,
                  const std::shared_ptr<const Graph>& graph, ExecResult& r);
  // The cost model's feed (sched/learned_cost.hpp): a graph this server ran
  // on its CPU teaches the CPU's learner each node's time, once this server
  // has its CPU's profile (a worker from joining, a master from its first
  // plan; a server that never calibrates is not made to). Loop thread.
  void learn_from(const Graph& graph, const ExecResult& r);
  void save_learned();  // writes it now (at stop)
  std::mutex learn_mu;                          // learn_topo
  std::shared_ptr<const sched::Topology> learn_topo;  // this server's CPU, with its learner
  int64_t learned_saved_ns = 0;                 // loop thread
  // What graph_done and multinode_done share: `store(output, session)`
  // puts one output in the session and returns its tensor id.
  // Notes that request `rid` of `p` asks for its graph's spans (a
  // submission with trace set); report_done answers it, send_error forgets it.
  static void want_spans(Peer& p, uint64_t rid);
  template <class Result, class Store>
  void report_done(const std::shared_ptr<Peer>& p, const std::shared_ptr<Session>& s, uint64_t rid,
                   const Graph& graph, Result& r, Store store);
  wire::ServerInfo server_info() const;

  // --- multi-node (docs/multinode.md) --------------------------------------
  void join_master();  // a worker, at start: not on the loop thread
  void worker_register(const std::shared_ptr<Peer>& p, uint64_t rid, const wire::WorkerRegister& m);
  void plan_explain(const std::shared_ptr<Peer>& p, uint64_t rid, const wire::PlanExplain& m);
  void forward_alloc(const std::shared_ptr<Peer>& p, uint64_t rid, const std::string& node,
                     const std::string& device, DType dtype, Shape shape);
  PayloadSink forward_write(const std::shared_ptr<Peer>& p, const wire::FrameHeader& h,
                            const RemoteTensorPtr& t, uint64_t offset, const dataplane::SemanticTag& tag);
  void forward_read(const std::shared_ptr<Peer>& p, uint64_t rid, const RemoteTensorPtr& t, uint64_t offset,
                    uint64_t nbytes, const dataplane::SemanticTag& tag);
  // Bindings resolved: each graph input's tensor (here or on a worker), the
  // validated graph and the bound shapes of its inputs.
  struct Resolved {
    std::shared_ptr<const GraphCache::Entry> entry;
    std::vector<Held> inputs;  // per graph input, declaration order
    std::unordered_map<ValueId, Shape> shapes;
  };
  void multinode_done(const std::shared_ptr<Peer>& p, const std::shared_ptr<Session>& s, uint64_t rid,
                      const std::shared_ptr<const Graph>& graph, MultiResult& r);
  // Runs `task` on the task pool, in order with the other tasks of p's
  // session; its errors become an ErrorReply to rid.
  void off_loop(const std::shared_ptr<Peer>& p, uint64_t rid, std::function<void()> task);
  void worker_session_gone(const Session& s);

  // Frees the tensors a submission carries (GraphSubmit.free_tensor_ids).
  static void free_carried(Session& s, const google::protobuf::RepeatedField<uint64_t>& ids);
  // `sent` runs on the loop thread once the kernel has taken the frame (or
  // the write failed), while the peer still exists.
  void send(Peer& p, MsgType type, uint64_t rid, const google::protobuf::Message& msg,
            const void* payload = nullptr, uint64_t payload_len = 0, std::shared_ptr<void> keep = nullptr,
            std::function<void(Peer&)> sent = nullptr, const dataplane::SemanticTag& tag = {});
  // Counts `bytes` of tensor payload that went `dir` ("write", "read",
  // "import") with a semantic tag (ServerInfo.tagged_bytes); untagged bytes
  // are not counted.
  void count_tagged(const char* dir, const dataplane::SemanticTag& tag, uint64_t bytes);
  // False (and the connection closed) when one more queued reply of `size`
  // header and message bytes would pass the reply caps: the connection's,
  // and the server's for all connections together (past which the
  // connection with the most queued goes first).
  bool reply_room(Peer& p, uint64_t size);
  // Reply bytes queued to all connections (Peer::pending_bytes summed).
  uint64_t queued_reply_bytes = 0;
  // Drops the reads waiting on a closed connection from the counts.
  void drop_waiting_reads(Peer& p);
  // Tensor reads through the per-connection window (read_window.cpp).
  // The reply carries `tag` (the request's).
  void read_or_wait(Peer& p, uint64_t rid, uint64_t tensor_id, const TensorPtr& t, uint64_t offset,
                    uint64_t nbytes, const dataplane::SemanticTag& tag = {});
  void start_read(Peer& p, uint64_t rid, const TensorPtr& t, uint64_t offset, uint64_t nbytes,
                  const dataplane::SemanticTag& tag);
  void pump_reads(Peer& p);
  void send_error(Peer& p, uint64_t rid, genie_status_t status, const std::string& detail);
  // Replies ErrorReply (when `reply`) and closes the connection once it is
  // written; `status` is what the log line and on_close report.
  void refuse(Peer& p, uint64_t rid, genie_status_t status, const std::string& detail, bool reply = true);
  void close_when_flushed(Peer& p, genie_status_t status, const std::string& detail);
  // `control`: the Welcome of the control connection, which alone carries
  // the session secret.
  wire::Welcome welcome(const Session& s, bool resumed, bool control) const;
  // A session by its id (Session::serial), or null.
  std::shared_ptr<Session> session_by_id(uint64_t id) const;
  void admit_data(const std::shared_ptr<Peer>& p, uint64_t rid, const wire::AuthResponse& m);
  void check_certificate_names(Peer& p);

  // The peer's handshake succeeded: it may send messages up to
  // max_message_bytes from now on.
  void authenticated(Peer& p);
  // An AuthResponse of `p` did not prove the token: its source backs off.
  void auth_failed(Peer& p);
  // Every few seconds (loop thread): ends idle sessions, flushes the log
  // limiter's summary.
  void housekeeping();

  void end_session(const std::shared_ptr<Session>& s, const char* why);
  void control_lost(const std::shared_ptr<Session>& s);

  void begin_stop();
  void maybe_finish_stop();
  void force_close_all();
  void publish_sessions() { counters.sessions.store(sessions.size()); }

  ServerOptions opts;
  std::string node_id;
  // Welcome.server_instance: tells this server from every other one, however
  // it is reached (a master refuses to register itself as its worker).
  const std::string instance;
  const std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  ServerCounters counters;
  // Before exec: a graph's reservation may end on an executor worker, which
  // ~Executor joins first.
  MemoryGate gate;
  int bound_port = 0;

  Executor exec;
  // Devices offered besides cpu:0 (devices.cpp): those of the device
  // backends loaded in this process ("cuda:0", ...), in the order the
  // Welcome lists them after cpu:0.
  struct ServedDevice {
    std::string name;
    DeviceRef ref;
  };
  std::vector<ServedDevice> devices;
  // This server's devices, cpu:0 first, and the plans over them: a graph
  // bound to tensors on several is placed across them as in embedded mode.
  std::unique_ptr<LocalDevices> local;
  void find_devices();
  // The served device named `name` (canonical or an alias); nullptr for cpu:0.
  // Throws Error(UNSUPPORTED) listing what is served when there is none.
  const ServedDevice* served_device(const std::string& name) const;
  // Where a tensor of this server lives: {} for host memory.
  DeviceRef device_ref(const TensorData& t) const;
  // A copy of t's bytes [offset, offset + n) in host memory.
  TensorPtr host_bytes(const TensorData& t, uint64_t offset, uint64_t n) const;
  // A Config for connections this server opens, with its credentials.
  Config client_config() const;
  // At construction: refuses an unauthenticated server beyond loopback
  // unless allowed, and warns about one that does not encrypt.
  void check_exposure() const;
  // Members the loop touches are declared before the loop, so they outlive
  // its thread (members are destroyed in reverse order).
  // Where connections come in: TCP on the server's port first (control and
  // data connections), then each other data transport offered.
  struct Listening {
    std::string transport;
    std::string address;  // as Welcome advertises it; empty: the server's own
    std::shared_ptr<dataplane::Listener> listener;
  };
  std::vector<Listening> listeners;
  std::shared_ptr<const dataplane::tcp::TlsContext> tls;  // null: plaintext
  // Data connections admitted, by transport (server_info reads it from any
  // thread).
  mutable std::mutex data_mu;
  std::map<std::string, uint64_t> data_connections;
  std::map<std::string, uint64_t> tagged_bytes;      // ServerInfo.tagged_bytes
  std::vector<std::string> data_transports_offered;  // the transports of `listeners`
  std::unordered_map<Peer*, std::shared_ptr<Peer>> peers;
  std::unordered_map<std::string, std::shared_ptr<Session>> sessions;  // by token
  // Bounds on connections and failed authentications, per source.
  Admission admission{opts.max_connections, opts.max_connections_per_source};
  // Connections in their handshake, all sources together: past
  // opts.max_handshakes, a new one closes the oldest handshake of the source
  // with the most (make_handshake_room), so unauthenticated peers never
  // hold more than that many slots and a new client always gets one.
  size_t handshaking = 0;
  uint64_t next_peer_serial = 1;
  void make_handshake_room(const Peer& arriving);
  void end_handshake(Peer& p);
  // Refused connections are logged at a bounded rate.
  LogLimiter refusal_log{"refused-connection", 20, 10000};
  // Bytes of messages still arriving, all connections together.
  std::shared_ptr<dataplane::MessageBudget> message_budget;
  std::unique_ptr<Timer> housekeeping_timer;
  GraphCache graphs;
  delta::BaseTable bases;  // graph texts deltas may name, by SHA-256
  uint64_t next_session_serial = 1;
  int graphs_in_flight = 0;
  int device_graphs_in_flight = 0;  // of which run on a device backend's device
  bool stopping = false;            // loop: stop() has begun
  bool closing_all = false;         // loop: graphs are done, connections are closing
  std::unique_ptr<Timer> stop_timer;

  // Multi-node: this server as a master (its workers), and its blocking
  // client calls, made on the task pool; as a worker, its session on the
  // master.
  std::unique_ptr<MultiNode> workers;  // null: no multi-node (WorkerRegister refused)
  // Registered workers' node ids and the sessions that registered them
  // (loop thread): a heartbeat for such a node from any other session is
  // refused, so nobody else can mark it alive or rewrite its status.
  std::unordered_map<std::string, const Session*> worker_nodes;
  // Blocking work, one queue per session (its serial; 0: none): one
  // session's multi-node graph waiting for a worker never holds another's.
  TaskPool tasks{kTaskThreads};
  // Large graphs' parses, one queue per session (graph_submit).
  TaskPool parses{kParseThreads};
  std::shared_ptr<RemoteClient> master_link;
  // Tickets handed out by TensorExport, by ticket (loop thread): each names
  // a tensor of one session and is good for one TensorFetch until it
  // expires. Bounded: an export past the bound first drops expired tickets,
  // then is refused.
  struct Export {
    std::weak_ptr<Session> session;
    uint64_t tensor_id = 0;
    std::chrono::steady_clock::time_point expires;
  };
  std::unordered_map<std::string, Export> exports;
  // Sessions on peer servers for TensorImport (task pool), by "host:port".
  std::mutex peer_mu;
  std::unordered_map<std::string, std::shared_ptr<RemoteClient>> peer_links;

  std::atomic<bool> stop_requested{false};
  std::mutex done_mu;
  std::condition_variable done_cv;
  bool drained = false;  // guarded by done_mu
  std::mutex join_mu;

  LoopThread loop;
};

}  // namespace genie
