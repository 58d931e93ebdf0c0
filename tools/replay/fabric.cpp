#include "fabric.hpp"

#include <algorithm>
#include <cstring>
#include <future>

#include "buffer_pool.hpp"
#include "cluster/discovery.hpp"
#include "core/error.hpp"
#include "dataplane/registry.hpp"

namespace genie::replay {

namespace {

constexpr uint16_t kHello = 1;  // request_id: the sender's rank
constexpr uint16_t kData = 2;   // request_id: the match key; message: the sender's label; payload: the bytes
constexpr uint16_t kEnd = 3;    // the sender's last frame; request_id: 1 when it stopped on a failure

bool accepts(uint16_t t) { return t == kHello || t == kData || t == kEnd; }
const char* type_name(uint16_t t) {
  return t == kHello ? "Hello" : t == kData ? "Data" : t == kEnd ? "End" : "unknown";
}

}  // namespace

std::string resolve_backend(const std::string& backend, bool same_host, std::string* why) {
  if (backend == "tcp") return "tcp";
  if (backend == "dpdk") return "dpdk";
  if (backend == "rdma" || backend == "ucx") return "ucx";
  if (backend != "auto") fail(GENIE_ERR_INVALID_ARGUMENT, "--backend ", backend, ": expected tcp, dpdk, rdma or auto");
  // UCX where it drives an RDMA device, or where every rank is on this host:
  // there it moves the ranks' rendezvous payloads by cma (one copy, against
  // loopback TCP's two), measured about twice Genie's own TCP
  // (docs/benchmarks.md, "Replay"). Across hosts without an RDMA device its
  // channels would run over TCP, no faster than Genie's own. DPDK needs a
  // port bound to it and hugepages, so it is never guessed.
  const RdmaProbe rdma = same_host ? RdmaProbe{} : probe_rdma();
  if (same_host || rdma.available) {
    const dataplane::TransportLookup t = dataplane::lookup_transport("ucx");
    if (t.transport) return "ucx";
    if (why) *why = t.reason;
  } else if (why) {
    *why = cat("no RDMA device: ", rdma.reason);
  }
  return "tcp";
}

struct Fabric::Op {
  int peer = -1;  // a receive's source (-1: a send)
  uint64_t key = 0;
  bool done = false;
  genie_status_t status = GENIE_OK;
  std::string detail;
};

// A receive posted before its bytes arrived, or bytes that arrived (or are
// arriving) before their receive.
struct Fabric::Pending {
  OpPtr op;                  // the receive, once posted
  void* dst = nullptr;       // its buffer
  uint64_t len = 0;          // its length
  bool arriving = false;     // a frame for this key has begun
  bool arrived = false;      // and its payload is complete (in `held` unless direct)
  bool direct = false;       // the payload goes straight to dst
  std::shared_ptr<char[]> held;  // not zeroed: every byte is overwritten
  uint64_t held_len = 0;
  std::string label;         // the sender's, for an unclaimed message
};

Fabric::Fabric(const std::string& transport, int rank, int size, const std::string& bind_host,
               std::chrono::milliseconds stall_timeout, std::string token)
    : transport_name_(transport),
      rank_(rank),
      size_(size),
      stall_timeout_(stall_timeout),
      token_(std::move(token)) {
  transport_ = dataplane::find_transport(transport);
  out_.resize(size);
  in_.resize(size);
  ended_.assign(size, 0);
  last_progress_ = std::chrono::steady_clock::now();
  loop_ = std::make_unique<LoopThread>();
  send_loop_ = std::make_unique<LoopThread>();
  std::promise<std::string> bound;
  auto fut = bound.get_future();
  loop_->post([&] {
    try {
      dataplane::ChannelOptions opts;
      opts.nodelay = true;
      opts.buffer_bytes = 0;
      opts.max_message = kMaxMessage;
      // Where an endpoint names a listener on a link rather than a host
      // (DPDK), ranks whose ports share a link must listen on different
      // ones, so rank r takes endpoint r + 1. Elsewhere the system picks a
      // free port.
      const std::string at = cat(bind_host, ":", transport_->capabilities().link_endpoints ? rank + 1 : 0);
      listener_ = transport_->listen(loop_->loop(), at, opts, [this](dataplane::Listener& l) {
        auto peer = std::make_shared<int>(-1);
        // Channels that have not said Hello yet: those older than
        // kHelloWithin are closed, and past kMaxStrangers open at once a new
        // one is closed at once, so that no peer holds this rank's sockets.
        const auto now = std::chrono::steady_clock::now();
        std::erase_if(strangers_, [&](const Stranger& s) {
          auto ch = s.ch.lock();
          if (!ch || *s.peer >= 0) return true;
          if (now - s.at < kHelloWithin) return false;
          ch->close(GENIE_ERR_TIMEOUT, "no Hello in time");
          return true;
        });
        dataplane::ChannelHandlers h = handlers(-1);
        // A channel that never said who it is may close (or be closed for
        // a wrong Hello) without harm to the run.
        h.on_close = [this, peer, inner = h.on_close](genie_status_t st, const std::string& detail) {
          if (*peer >= 0) inner(st, detail);
        };
        auto ch_holder = std::make_shared<std::weak_ptr<dataplane::Channel>>();
        // Incoming channels say who they are first (kHello, with the run's
        // token as its message).
        h.on_frame = [this, peer, ch_holder](const dataplane::FrameHeader& fh, std::string&& msg) {
          dataplane::PayloadSink sink;
          if (*peer < 0 && (fh.type != kHello || !presents_token(msg)))
            fail(GENIE_ERR_AUTH, "a peer did not present this run's token");
          if (fh.type == kHello) {
            const int r = static_cast<int>(fh.request_id);
            std::lock_guard<std::mutex> lk(mu_);
            if (r < 0 || r >= size_ || r == rank_ || *peer != -1 || in_[r])
              fail(GENIE_ERR_PROTOCOL, "a peer announced itself as rank ", fh.request_id);
            *peer = r;
            in_[r] = ch_holder->lock();
            ++connected_in_;
            cv_.notify_all();
            return sink;
          }
          if (*peer < 0) fail(GENIE_ERR_PROTOCOL, "data before the peer said which rank it is");
          if (fh.type == kEnd) {
            // Not progress for a wait: a peer that ends sends nothing more.
            std::lock_guard<std::mutex> lk(mu_);
            last_end_ = std::chrono::steady_clock::now();
            ended_[*peer] = fh.request_id == 1 ? 2 : 1;
            ++ends_;
            cv_.notify_all();
            return sink;
          }
          on_data(*peer, fh, std::move(msg), &sink);
          return sink;
        };
        *ch_holder = l.accept(std::move(h));
        if (auto ch = ch_holder->lock()) {
          if (strangers_.size() >= kMaxStrangers)
            ch->close(GENIE_ERR_CONNECTION, "too many channels without a Hello");
          else
            strangers_.push_back(Stranger{ch, peer, now});
        }
      });
      bound.set_value(listener_->address());
    } catch (...) {
      bound.set_exception(std::current_exception());
    }
  });
  address_ = fut.get();
}

Fabric::~Fabric() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (abort_reason_.empty()) abort_reason_ = "the replay is shutting down";
  }
  send_loop_->stop([this] {
    for (auto& c : out_)
      if (c) c->close();
  });
  loop_->stop([this] {
    if (listener_) listener_->close();
    for (auto& c : in_)
      if (c) c->close();
  });
}

dataplane::ChannelHandlers Fabric::handlers(int peer_hint) {
  dataplane::ChannelHandlers h;
  h.types = dataplane::FrameTypes{&accepts, &type_name};
  h.on_close = [this, peer_hint](genie_status_t st, const std::string& detail) {
    if (st == GENIE_OK || st == GENIE_ERR_SHUTDOWN) return;
    abort(cat("the connection ", peer_hint >= 0 ? cat("to rank ", peer_hint) : std::string("from a peer"),
              " was lost: ", genie_status_str(st), ": ", detail));
  };
  return h;
}

void Fabric::connect_all(const std::vector<std::string>& addrs) {
  if (static_cast<int>(addrs.size()) != size_)
    fail(GENIE_ERR_INTERNAL, "connect_all: ", addrs.size(), " addresses for ", size_, " ranks");
  send_loop_->post([this, addrs] {
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      dataplane::ChannelOptions opts;
      opts.nodelay = true;
      opts.buffer_bytes = 0;
      opts.max_message = kMaxMessage;
      dataplane::ChannelHandlers h = handlers(r);
      h.on_frame = [r](const dataplane::FrameHeader&, std::string&&) -> dataplane::PayloadSink {
        fail(GENIE_ERR_PROTOCOL, "rank ", r, " sent a frame on a channel that only carries ours");
      };
      try {
        auto ch = transport_->connect(send_loop_->loop(), addrs[r], opts, std::move(h),
                                      [this, r](genie_status_t st, const std::string& detail) {
                                        std::lock_guard<std::mutex> lk(mu_);
                                        if (st != GENIE_OK) {
                                          connect_error_ = cat("connecting to rank ", r, ": ", detail);
                                        } else {
                                          out_[r]->send(kHello, static_cast<uint64_t>(rank_), 0, token_);
                                          ++connected_out_;
                                        }
                                        cv_.notify_all();
                                      });
        std::lock_guard<std::mutex> lk(mu_);
        out_[r] = ch;
      } catch (const Error& e) {
        std::lock_guard<std::mutex> lk(mu_);
        connect_error_ = cat("connecting to rank ", r, " at ", addrs[r], ": ", e.detail());
        cv_.notify_all();
      }
    }
  });
  std::unique_lock<std::mutex> lk(mu_);
  const auto deadline = std::chrono::steady_clock::now() + stall_timeout_;
  while (connected_out_ < size_ - 1 || connected_in_ < size_ - 1) {
    if (!connect_error_.empty()) fail(GENIE_ERR_CONNECTION, "rank ", rank_, ": ", connect_error_);
    if (!abort_reason_.empty()) fail(GENIE_ERR_CONNECTION, "rank ", rank_, ": ", abort_reason_);
    if (cv_.wait_until(lk, deadline) == std::cv_status::timeout)
      fail(GENIE_ERR_TIMEOUT, "rank ", rank_, ": the other ranks did not all connect (", connected_out_, " of ",
           size_ - 1, " out, ", connected_in_, " in)");
  }
}

void Fabric::progress() { last_progress_ = std::chrono::steady_clock::now(); }

// Loop thread.
void Fabric::on_data(int src, const dataplane::FrameHeader& h, std::string&& label, dataplane::PayloadSink* sink) {
  std::lock_guard<std::mutex> lk(mu_);
  progress();
  const auto key = std::make_pair(src, h.request_id);
  auto& slot = pending_[key];
  if (!slot) slot = std::make_shared<Pending>();
  std::shared_ptr<Pending> p = slot;
  if (p->arriving) fail(GENIE_ERR_PROTOCOL, "rank ", src, " sent key ", h.request_id, " twice");
  p->arriving = true;
  p->label = std::move(label);
  auto finish = [this, key, p, src, len = h.payload_len] {
    // mu_ held by the caller.
    received_ += len;
    p->arrived = true;
    if (p->op) {
      if (!p->direct && len == p->len && len > 0) {
        std::memcpy(p->dst, p->held.get(), len);
        staged_ += len;
      }
      if (len != p->len) {
        p->op->status = GENIE_ERR_SIZE_MISMATCH;
        p->op->detail = cat("rank ", src, " sent ", len, " bytes, the receive expects ", p->len);
      }
      p->op->done = true;
      pending_.erase(key);
    }
    cv_.notify_all();
  };
  if (p->op && p->len == h.payload_len) {
    p->direct = true;
    sink->dst = p->dst;
  } else {
    p->held = pooled_bytes(h.payload_len);
    p->held_len = h.payload_len;
    sink->dst = p->held.get();
    sink->keep = p->held;
  }
  if (h.payload_len == 0) {
    finish();
    return;
  }
  sink->done = [this, finish] {
    std::lock_guard<std::mutex> lk2(mu_);
    progress();
    finish();
  };
}

Fabric::OpPtr Fabric::irecv(int peer, uint64_t key, void* dst, uint64_t len) {
  auto op = std::make_shared<Op>();
  op->peer = peer;
  op->key = key;
  std::lock_guard<std::mutex> lk(mu_);
  auto& slot = pending_[std::make_pair(peer, key)];
  if (!slot) slot = std::make_shared<Pending>();
  Pending& p = *slot;
  if (p.op) fail(GENIE_ERR_INTERNAL, "two receives from rank ", peer, " under key ", key);
  p.op = op;
  p.dst = dst;
  p.len = len;
  if (p.arrived) {
    if (p.held_len == len) {
      if (len) std::memcpy(dst, p.held.get(), len);
      if (peer != rank_) staged_ += len;
    } else {
      op->status = GENIE_ERR_SIZE_MISMATCH;
      op->detail = cat("rank ", peer, " sent ", p.held_len, " bytes, the receive expects ", len);
    }
    op->done = true;
    pending_.erase(std::make_pair(peer, key));
  }
  return op;
}

Fabric::OpPtr Fabric::isend(int peer, uint64_t key, const void* data, uint64_t len, std::string label) {
  if (label.size() > kMaxMessage / 2)
    label.resize(kMaxMessage / 2);  // it names a node; a frame's message is bounded
  auto op = std::make_shared<Op>();
  std::shared_ptr<std::vector<char>> copy;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (corrupt_ && len > 0 && corrupt_(peer, key)) {
      corrupt_ = nullptr;
      copy = std::make_shared<std::vector<char>>(static_cast<const char*>(data), static_cast<const char*>(data) + len);
      (*copy)[len / 2] ^= 0x5a;
      data = copy->data();
    }
  }
  if (peer == rank_) {  // to itself: a copy, matched like any other
    std::shared_ptr<char[]> r = pooled_bytes(len);
    if (len) std::memcpy(r.get(), data, len);
    std::lock_guard<std::mutex> lk(mu_);
    auto& slot = pending_[std::make_pair(peer, key)];
    if (!slot) slot = std::make_shared<Pending>();
    Pending& p = *slot;
    p.arriving = p.arrived = true;
    p.held = r;
    p.held_len = len;
    p.label = std::move(label);
    if (p.op) {
      if (p.len == len) {
        if (len) std::memcpy(p.dst, r.get(), len);
      } else {
        p.op->status = GENIE_ERR_SIZE_MISMATCH;
        p.op->detail = cat("rank ", peer, " sent ", len, " bytes, the receive expects ", p.len);
      }
      p.op->done = true;
      pending_.erase(std::make_pair(peer, key));
    }
    op->done = true;
    sent_ += len;
    cv_.notify_all();
    return op;
  }
  send_loop_->post([this, op, peer, key, data, len, copy, label = std::move(label)]() mutable {
    std::shared_ptr<dataplane::Channel> ch;
    {
      std::lock_guard<std::mutex> lk(mu_);
      ch = out_[peer];
    }
    auto done = [this, op, len](genie_status_t st) {
      std::lock_guard<std::mutex> lk(mu_);
      progress();
      op->status = st;
      if (st != GENIE_OK) op->detail = genie_status_str(st);
      sent_ += len;
      op->done = true;
      cv_.notify_all();
    };
    if (!ch) {
      done(GENIE_ERR_CONNECTION);
      return;
    }
    ch->send(kData, key, 0, std::move(label), data, len, copy, done);
  });
  return op;
}

// mu_ held. Fails when `op` can never finish: the run was aborted, its
// peer ended without sending it, or no byte has moved for the stall
// timeout since the wait began (`since`) or since the last byte moved.
void Fabric::check_waiting(const Op& op, const std::function<std::string()>& what,
                           std::chrono::steady_clock::time_point since) {
  if (!abort_reason_.empty()) fail(GENIE_ERR_CANCELLED, abort_reason_, " (rank ", rank_, " was waiting for ", what(), ")");
  // Channels are ordered: once a peer's end is here, a message of its that
  // has not begun to arrive never will.
  if (op.peer >= 0 && op.peer != rank_ && ended_[op.peer]) {
    auto it = pending_.find(std::make_pair(op.peer, op.key));
    if (it == pending_.end() || !it->second->arriving) {
      if (ended_[op.peer] == 2)
        fail(GENIE_ERR_CANCELLED, "rank ", op.peer, " stopped on a failure (rank ", rank_, " was waiting for ", what(),
             ")");
      fail(GENIE_ERR_PROTOCOL, "deadlock: rank ", rank_, " waits for ", what(), ", but rank ", op.peer,
           " finished its trace without sending it: the ranks' traces do not match");
    }
  }
  if (std::chrono::steady_clock::now() - std::max(since, last_progress_) > stall_timeout_)
    fail(GENIE_ERR_TIMEOUT, "deadlock: rank ", rank_, " waited ", stall_timeout_.count() / 1000.0,
         " s with no data moving for ", what());
}

void Fabric::wait(const OpPtr& op, const std::function<std::string()>& what) {
  const auto since = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lk(mu_);
  while (!op->done) {
    check_waiting(*op, what, since);
    cv_.wait_for(lk, std::chrono::milliseconds(200));
  }
  if (op->status != GENIE_OK)
    fail(op->status, "rank ", rank_, ": ", what(), ": ", op->detail);
}

size_t Fabric::wait_any(const std::vector<OpPtr>& ops, const std::function<std::string(size_t)>& what) {
  if (ops.empty()) fail(GENIE_ERR_INTERNAL, "wait_any with nothing to wait for");
  const auto since = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    for (size_t i = 0; i < ops.size(); ++i) {
      if (!ops[i]->done) continue;
      if (ops[i]->status != GENIE_OK) fail(ops[i]->status, "rank ", rank_, ": ", what(i), ": ", ops[i]->detail);
      return i;
    }
    for (size_t i = 0; i < ops.size(); ++i) check_waiting(*ops[i], [&] { return what(i); }, since);
    cv_.wait_for(lk, std::chrono::milliseconds(200));
  }
}

void Fabric::send_end(bool failed) {
  send_loop_->post([this, failed] {
    for (int r = 0; r < size_; ++r) {
      std::shared_ptr<dataplane::Channel> ch;
      {
        std::lock_guard<std::mutex> lk(mu_);
        ch = out_[r];
      }
      if (ch) ch->send(kEnd, failed ? 1 : 0, 0, std::string());
    }
  });
}

std::vector<Fabric::Unclaimed> Fabric::drain() {
  std::unique_lock<std::mutex> lk(mu_);
  while (ends_ < size_ - 1) {
    if (!abort_reason_.empty())
      fail(GENIE_ERR_CANCELLED, abort_reason_, " (rank ", rank_, " was waiting for the other ranks to finish)");
    cv_.wait_for(lk, std::chrono::milliseconds(200));
    // A peer stuck in a wait of its own gives up after stall_timeout and
    // then sends its end: allow for that before giving up here.
    const auto limit = 2 * stall_timeout_ + std::chrono::seconds(1);
    if (ends_ < size_ - 1 && std::chrono::steady_clock::now() - std::max(last_progress_, last_end_) > limit)
      fail(GENIE_ERR_TIMEOUT, "rank ", rank_, " waited ", std::chrono::duration<double>(limit).count(), " s for ",
           size_ - 1 - ends_, " other rank(s) to finish, with no data moving");
  }
  std::vector<Unclaimed> out;
  for (const auto& [key, p] : pending_)
    if (p->arriving && !p->op) out.push_back(Unclaimed{key.first, key.second, p->held_len, p->label});
  return out;
}

void Fabric::abort(const std::string& reason) {
  std::lock_guard<std::mutex> lk(mu_);
  if (abort_reason_.empty()) abort_reason_ = reason;
  cv_.notify_all();
}

uint64_t Fabric::bytes_sent() const {
  std::lock_guard<std::mutex> lk(mu_);
  return sent_;
}
uint64_t Fabric::bytes_staged() const {
  std::lock_guard<std::mutex> lk(mu_);
  return staged_;
}
uint64_t Fabric::bytes_received() const {
  std::lock_guard<std::mutex> lk(mu_);
  return received_;
}

void Fabric::corrupt_next_send(std::function<bool(int, uint64_t)> match) {
  std::lock_guard<std::mutex> lk(mu_);
  corrupt_ = std::move(match);
}

}  // namespace genie::replay
