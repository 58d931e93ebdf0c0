#include "dataplane/ucx/worker.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <mutex>

namespace genie::dataplane::ucx {

const TransportHost* g_host = nullptr;

void run_logged(const std::function<void()>& fn, const char* what) {
  try {
    if (fn) fn();
  } catch (const std::exception& e) {
    say(LogLevel::Error, "ucx: ", what, " threw: ", e.what());
  } catch (...) {
    say(LogLevel::Error, "ucx: ", what, " threw a non-standard exception");
  }
}

namespace {

// Channels ask for peer-failure handling (UCP_ERR_HANDLING_MODE_PEER: a
// peer that dies must fail its channel, not hang it). With that mode UCX
// 1.13 wires bulk (rendezvous) lanes only over transports whose memory
// domain can invalidate registrations, and cma (process_vm_readv/writev,
// one copy between two processes on a host) claims that only with
// UCX_CMA_MEMORY_INVALIDATE=y (default n): so between local processes
// every byte went over TCP (`ucx_info -e -u rmwe -P intra` shows it).
// Turning it on gives up nothing: cma registers nothing, and any process
// of the same user may read another's memory that way anyway. Rendezvous
// payloads then move by cma; active messages and software RMA stay on TCP
// (posix/sysv would take them with UCX_{POSIX,SYSV}_ERROR_HANDLING=y, but
// measured slower here, see docs/ucx.md). Peers on other hosts are
// unaffected: cma is never reachable there. A user who set the variable
// keeps their choice.
void allow_shared_memory_lanes(ucp_config_t* config) {
  if (std::getenv("UCX_CMA_MEMORY_INVALIDATE") != nullptr) return;
  // The name relative to the memory domain's prefix: only cma has it.
  const ucs_status_t st = ucp_config_modify(config, "MEMORY_INVALIDATE", "y");
  if (st != UCS_OK)
    say(LogLevel::Debug, "ucx: cannot enable cma for local peers (", ucs_status_string(st), "): they use TCP");
}

}  // namespace

bool rma_always() {
  static const bool always = [] {
    const char* v = std::getenv("GENIE_UCX_RMA");
    if (v == nullptr || *v == '\0' || std::strcmp(v, "auto") == 0) return false;
    if (std::strcmp(v, "always") == 0) return true;
    say(LogLevel::Warn, "ucx: GENIE_UCX_RMA='", v, "' is not 'auto' or 'always': using auto");
    return false;
  }();
  return always;
}

Context::Context() {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) fail(GENIE_ERR_UNSUPPORTED, "UCX: cannot read its configuration: ", ucs_status_string(st));
  allow_shared_memory_lanes(config);
  // Safe by default (Context::rma): no software-emulated RMA for any peer.
  // A UCX_PROTO_EMULATION_ENABLE in the environment cannot turn it back on.
  // (Older UCX accepts the unknown name here and only warns later, so the
  // version decides.)
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  const bool no_emulation = (major > 1 || (major == 1 && minor >= 21)) &&
                            ucp_config_modify(config, "PROTO_EMULATION_ENABLE", "n") == UCS_OK;
  rma_ = no_emulation || rma_always();
  if (!no_emulation && rma_)
    say(LogLevel::Warn, "ucx: GENIE_UCX_RMA=always with a UCX that emulates RMA in software: every UCX peer of "
                        "this process can read and write its memory");
  ucp_params_t p{};
  p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  p.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP | (rma_ ? UCP_FEATURE_RMA : 0);
  // Memory is registered from any thread while workers progress.
  p.mt_workers_shared = 1;
  p.name = "genie";
  st = ucp_init(&p, config, &ctx_);
  ucp_config_release(config);
  if (st != UCS_OK) fail(GENIE_ERR_UNSUPPORTED, "UCX: ucp_init failed: ", ucs_status_string(st));
}

Context::~Context() {
  if (ctx_ != nullptr) ucp_cleanup(ctx_);
}

struct LoopWorker::Handles {
  uv_poll_t poll{};
  uv_prepare_t prepare{};
  uv_idle_t idle{};
  int open = 0;
  LoopWorker* owner = nullptr;  // null once the worker is gone
};

namespace {

std::mutex g_mu;
std::map<uv_loop_t*, std::weak_ptr<LoopWorker>>& workers() {
  static auto* m = new std::map<uv_loop_t*, std::weak_ptr<LoopWorker>>;  // never destroyed
  return *m;
}

void handle_closed(uv_handle_t* h) {
  auto* hs = static_cast<LoopWorker::Handles*>(h->data);
  if (--hs->open == 0) delete hs;
}

// Every handle's callback: progress the worker, if it is still there.
void run_pump(uv_handle_t* h) {
  auto* hs = static_cast<LoopWorker::Handles*>(h->data);
  if (hs->owner != nullptr) hs->owner->pump();
}

}  // namespace

std::shared_ptr<LoopWorker> LoopWorker::for_loop(const std::shared_ptr<Context>& ctx, uv_loop_t* loop) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (auto w = workers()[loop].lock()) return w;
  std::shared_ptr<LoopWorker> w(new LoopWorker(ctx, loop));
  w->start();
  workers()[loop] = w;
  return w;
}

LoopWorker::LoopWorker(std::shared_ptr<Context> ctx, uv_loop_t* loop) : ctx_(std::move(ctx)), loop_(loop) {}

namespace {

// The receive callback has no id argument: one instance per id, `arg` the
// AmRoute.
template <unsigned Id>
ucs_status_t route_am(void* arg, const void* header, size_t header_len, void* data, size_t length,
                      const ucp_am_recv_param_t* param) {
  auto* r = static_cast<const AmRoute*>(arg);
  return r->fn(r->arg, Id, header, header_len, data, length, param);
}

}  // namespace

ucp_worker_h create_worker(ucp_context_h ctx, ucs_thread_mode_t mode, const AmRoute* route) {
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = mode;
  ucp_worker_h worker = nullptr;
  ucs_status_t st = ucp_worker_create(ctx, &wp, &worker);
  if (st != UCS_OK) fail(GENIE_ERR_IO, "UCX: ucp_worker_create failed: ", ucs_status_string(st));
  for (unsigned id : {kAmWelcome, kAmFrame, kAmPayload, kAmBye}) {
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = id;
    hp.cb = id == kAmWelcome   ? &route_am<kAmWelcome>
            : id == kAmFrame   ? &route_am<kAmFrame>
            : id == kAmPayload ? &route_am<kAmPayload>
                               : &route_am<kAmBye>;
    hp.arg = const_cast<AmRoute*>(route);
    st = ucp_worker_set_am_recv_handler(worker, &hp);
    if (st != UCS_OK) {
      ucp_worker_destroy(worker);
      fail(GENIE_ERR_IO, "UCX: cannot set an active message handler: ", ucs_status_string(st));
    }
  }
  return worker;
}

void count_bytes(bool sent, uint64_t n) {
  static metrics::Counter& out = g_host->byte_counter(kName, true);
  static metrics::Counter& in = g_host->byte_counter(kName, false);
  (sent ? out : in).add(static_cast<double>(n));
}

void LoopWorker::start() {
  route_ = AmRoute{&LoopWorker::on_am, this};
  // The owner's loop thread only.
  worker_ = create_worker(ctx_->get(), UCS_THREAD_MODE_SINGLE, &route_);
  int fd = -1;
  const ucs_status_t st = ucp_worker_get_efd(worker_, &fd);
  if (st != UCS_OK) {
    ucp_worker_destroy(worker_);
    worker_ = nullptr;
    fail(GENIE_ERR_IO, "UCX: ucp_worker_get_efd failed: ", ucs_status_string(st));
  }
  h_ = new Handles;
  h_->owner = this;
  uv_poll_init(loop_, &h_->poll, fd);
  uv_prepare_init(loop_, &h_->prepare);
  uv_idle_init(loop_, &h_->idle);
  h_->poll.data = h_->prepare.data = h_->idle.data = h_;
  h_->open = 3;
  uv_poll_start(&h_->poll, UV_READABLE,
                [](uv_poll_t* p, int, int) { run_pump(reinterpret_cast<uv_handle_t*>(p)); });
  uv_prepare_start(&h_->prepare, [](uv_prepare_t* p) { run_pump(reinterpret_cast<uv_handle_t*>(p)); });
  // The prepare handle alone must not keep a loop alive: channels do.
  uv_unref(reinterpret_cast<uv_handle_t*>(&h_->prepare));
}

LoopWorker::~LoopWorker() {
  {
    std::lock_guard<std::mutex> lk(g_mu);
    auto it = workers().find(loop_);
    if (it != workers().end() && it->second.expired()) workers().erase(it);
  }
  if (h_ != nullptr) {
    h_->owner = nullptr;
    for (uv_handle_t* h : {reinterpret_cast<uv_handle_t*>(&h_->poll), reinterpret_cast<uv_handle_t*>(&h_->prepare),
                           reinterpret_cast<uv_handle_t*>(&h_->idle)}) {
      if (uv_is_closing(h)) {
        // Swept by a loop teardown (uv_walk) without our callback.
        if (--h_->open == 0) delete h_;
      } else {
        uv_close(h, handle_closed);
      }
    }
  }
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
}

void LoopWorker::later(std::function<void()> fn) {
  later_.push_back(std::move(fn));
  if (!pumping_ && h_ != nullptr && !uv_is_closing(reinterpret_cast<uv_handle_t*>(&h_->idle)))
    uv_idle_start(&h_->idle, [](uv_idle_t* i) { run_pump(reinterpret_cast<uv_handle_t*>(i)); });
}

void LoopWorker::pump() {
  if (pumping_) return;
  auto self = shared_from_this();  // queued work may drop the last other reference
  pumping_ = true;
  for (;;) {
    while (ucp_worker_progress(worker_) != 0) {
    }
    if (later_.empty()) {
      if (ucp_worker_arm(worker_) != UCS_ERR_BUSY) break;
      continue;  // events arrived while arming: progress them first
    }
    auto batch = std::exchange(later_, {});
    for (auto& fn : batch) run_logged(fn, "queued work");
  }
  pumping_ = false;
  if (h_ != nullptr && !uv_is_closing(reinterpret_cast<uv_handle_t*>(&h_->idle))) uv_idle_stop(&h_->idle);
}

bool LoopWorker::drive_until(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  auto self = shared_from_this();
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    ucp_worker_progress(worker_);
    auto batch = std::exchange(later_, {});
    for (auto& fn : batch) run_logged(fn, "queued work");
  }
  return true;
}

ucs_status_t LoopWorker::on_am(void* arg, unsigned id, const void* header, size_t header_len, void* data,
                               size_t length, const ucp_am_recv_param_t* param) {
  auto* self = static_cast<LoopWorker*>(arg);
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) == 0) return UCS_OK;  // not ours: dropped
  auto it = self->sinks_.find(param->reply_ep);
  if (it == self->sinks_.end()) return UCS_OK;  // its channel has closed: dropped
  return it->second->arrive(id, header, header_len, data, length, param);
}

std::vector<Lane> endpoint_lanes(ucp_ep_h ep) {
  // UCX 1.13's ucp_ep_query cannot name an endpoint's transports; its
  // printout can: "lane[1]:  3:sysv/memory.0 md[2] -> ... am am_bw#0".
  std::vector<Lane> lanes;
  char* text = nullptr;
  size_t size = 0;
  FILE* f = open_memstream(&text, &size);
  if (f == nullptr) return lanes;
  ucp_ep_print_info(ep, f);
  std::fclose(f);
  const std::string all(text, size);
  std::free(text);
  for (size_t at = all.find("lane["); at != std::string::npos; at = all.find("lane[", at + 1)) {
    const size_t colon = all.find(": ", at);
    const size_t eol = all.find('\n', at);
    if (colon == std::string::npos || colon > eol) continue;
    std::string line = all.substr(colon + 2, eol - colon - 2);
    const size_t arrow = line.find("-> ");
    std::string tl = line.substr(0, line.find(" md["));
    tl.erase(0, tl.find_first_not_of(' '));
    if (const size_t idx = tl.find(':'); idx != std::string::npos && tl.rfind("cm ", 0) != 0) tl.erase(0, idx + 1);
    if (const size_t dot = tl.rfind('.'); dot != std::string::npos && tl.find('/') != std::string::npos)
      tl.erase(dot);  // "tcp/lo.0" -> "tcp/lo"
    Lane lane;
    lane.transport = std::move(tl);
    if (arrow != std::string::npos) {
      const size_t sp = line.find(' ', arrow + 3);
      if (sp != std::string::npos) lane.roles = line.substr(sp + 1);
    }
    lanes.push_back(std::move(lane));
  }
  return lanes;
}

std::string describe_lanes(const std::vector<Lane>& lanes) {
  std::string out;
  for (const Lane& l : lanes)
    out += cat(out.empty() ? "" : ", ", l.transport, l.roles.empty() ? "" : cat(" (", l.roles, ")"));
  return out.empty() ? "?" : out;
}

bool has_rma_lane(const std::vector<Lane>& lanes) {
  for (const Lane& l : lanes) {
    // Roles are space-separated words: "rma#0" (not "rma_bw#0").
    for (size_t at = l.roles.find("rma#"); at != std::string::npos; at = l.roles.find("rma#", at + 1))
      if (at == 0 || l.roles[at - 1] == ' ') return true;
  }
  return false;
}

std::string format_sockaddr(const struct sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    return cat(host, ':', ntohs(in->sin_port));
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    return cat('[', host, "]:", ntohs(in6->sin6_port));
  }
  return "?";
}

}  // namespace genie::dataplane::ucx
