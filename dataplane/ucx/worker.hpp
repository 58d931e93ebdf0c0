// The UCX transport's process and loop state: one ucp_context per process
// (Context), one ucp_worker per owner loop (LoopWorker).
//
// A LoopWorker progresses its ucp_worker on the owner's libuv loop without
// spinning: the worker's event fd (ucp_worker_get_efd) is watched with
// uv_poll, and before the loop blocks (uv_prepare) the worker is progressed
// until idle, then armed (ucp_worker_arm); only when UCX answers "busy"
// (events arrived while arming) does an idle handle keep the loop from
// blocking for one more round. UCX callbacks run inside
// ucp_worker_progress, where UCX must not be re-entered, so they only
// record what happened and queue work (later()); the queue runs right after
// progress, on the loop thread, where owners' callbacks may call anything.
#pragma once

#include <ucp/api/ucp.h>
#include <uv.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "dataplane/plugin.hpp"

namespace genie::dataplane::ucx {

constexpr const char* kName = "ucx";

// Active message ids: a frame (header, then its message as data), the
// payload that follows a frame with payload_len > 0, the listener's welcome
// (the connecting side is connected once it arrives) and an orderly close.
enum AmId : unsigned { kAmWelcome = 1, kAmFrame = 2, kAmPayload = 3, kAmBye = 4 };

// Payloads from this size on travel by rendezvous: UCX moves them into the
// receiver's sink, with no copy of ours on either side.
constexpr uint64_t kRndvBytes = 16 << 10;

extern const TransportHost* g_host;

template <class... Parts>
void say(LogLevel level, Parts&&... parts) {
  if (g_host != nullptr) g_host->log(level, cat(std::forward<Parts>(parts)...));
}

// Runs an owner's callback; what it throws is logged, never unwound.
void run_logged(const std::function<void()>& fn, const char* what);

class Context {
 public:
  // Throws Error(UNSUPPORTED) naming UCX's reason when it does not start.
  Context();
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ucp_context_h get() const { return ctx_; }
  // Whether the context carries UCX's RMA operations (put, get). Where no
  // lane carries them, UCX emulates them in software, and the target's
  // worker then copies to and from whatever address a peer's message names,
  // checked against no registration, for any peer that reached a listener
  // of the process, before any handshake of Genie's (UCX 1.13, rma_sw.c).
  // So RMA is asked for only where UCX can be told not to emulate it
  // (PROTO_EMULATION_ENABLE=n, UCX 1.21 and later), or where
  // GENIE_UCX_RMA=always says the process trusts every UCX peer. Without
  // it, bulk bytes go as rendezvous payloads (rma_emulated()).
  bool rma() const { return rma_; }

 private:
  ucp_context_h ctx_ = nullptr;
  bool rma_ = false;
};

// GENIE_UCX_RMA=always: RMA even where UCX only emulates it (see
// Context::rma; to exercise the RMA path without RDMA hardware, in a process
// whose UCX peers are all trusted). Unset or "auto": RMA only where UCX
// does not emulate it.
bool rma_always();

// What a channel does with the active messages of its endpoint.
class AmSink {
 public:
  virtual ~AmSink() = default;
  // Inside progress: record the message; returns UCS_INPROGRESS to keep
  // `data` (a rendezvous descriptor) for later.
  virtual ucs_status_t arrive(unsigned id, const void* header, size_t header_len, void* data, size_t length,
                              const ucp_am_recv_param_t* param) = 0;
};

// Where a worker's active messages go: fn(arg, id, ...) inside progress.
struct AmRoute {
  ucs_status_t (*fn)(void* arg, unsigned id, const void* header, size_t header_len, void* data, size_t length,
                     const ucp_am_recv_param_t* param);
  void* arg;
};

// A worker with the handlers of every AmId, routed to `route` (which must
// outlive it). Throws Error(IO) naming UCX's reason.
ucp_worker_h create_worker(ucp_context_h ctx, ucs_thread_mode_t mode, const AmRoute* route);

// genie_transport_bytes_total{transport="ucx"} (dataplane/transport_bytes.hpp).
void count_bytes(bool sent, uint64_t n);

class LoopWorker : public std::enable_shared_from_this<LoopWorker> {
 public:
  struct Handles;  // the uv handles, freed by their close callbacks
  // The worker of `loop` (created on first use). Loop thread only.
  static std::shared_ptr<LoopWorker> for_loop(const std::shared_ptr<Context>& ctx, uv_loop_t* loop);
  ~LoopWorker();

  ucp_worker_h get() const { return worker_; }
  uv_loop_t* loop() const { return loop_; }
  const Context& context() const { return *ctx_; }

  // Queues fn to run on the loop after the current progress pass (never
  // inside the caller), and makes sure the loop comes round to it.
  void later(std::function<void()> fn);

  // Progresses and runs queued work until `done` holds or `limit` passed
  // (loop teardown, where the loop will not come round again).
  bool drive_until(const std::function<bool()>& done, std::chrono::milliseconds limit);

  // Progress until idle, run queued work, repeat; then arm the event fd.
  void pump();

  void attach(ucp_ep_h ep, AmSink* sink) { sinks_[ep] = sink; }
  void detach(ucp_ep_h ep) { sinks_.erase(ep); }

 private:
  LoopWorker(std::shared_ptr<Context> ctx, uv_loop_t* loop);
  void start();
  static ucs_status_t on_am(void* arg, unsigned id, const void* header, size_t header_len, void* data,
                            size_t length, const ucp_am_recv_param_t* param);

  std::shared_ptr<Context> ctx_;
  uv_loop_t* loop_;
  ucp_worker_h worker_ = nullptr;
  AmRoute route_{};
  Handles* h_ = nullptr;
  bool pumping_ = false;
  std::vector<std::function<void()>> later_;
  std::map<ucp_ep_h, AmSink*> sinks_;
};

// One lane of a wired endpoint: its transport ("tcp/lo", "cma/memory",
// "cm rdmacm") and what it carries, as UCX names the roles ("am am_bw#0
// wireup", "rma#0 rma_bw#0").
struct Lane {
  std::string transport;
  std::string roles;
};

// An endpoint's lanes (from ucp_ep_print_info; empty if it cannot be read).
// Loop thread only (the worker is single-threaded).
std::vector<Lane> endpoint_lanes(ucp_ep_h ep);

// The lanes as one line, e.g.
// "cm rdmacm, sysv/memory (am am_bw#0 keepalive), tcp/lo (rma_bw#0 wireup)".
std::string describe_lanes(const std::vector<Lane>& lanes);

// True when a lane carries UCX's RMA operations (role "rma#N": ucp_put_nbx,
// ucp_get_nbx). Without one, UCX 1.13 emulates them in software with active
// messages that the peer's worker must handle (bulk "rma_bw" lanes serve
// rendezvous only): between local processes with peer-failure handling,
// and over plain TCP, every RMA byte then goes through the peer's CPU and
// a socket.
bool has_rma_lane(const std::vector<Lane>& lanes);

// "a.b.c.d:port" or "[v6]:port" for a socket address.
std::string format_sockaddr(const struct sockaddr* sa);

}  // namespace genie::dataplane::ucx
