// The loopback transport ("loopback"), a plugin: channels between two loops
// of one process, in memory, with no socket. It exists to prove the
// transport seam (and for tests): the control plane runs its data
// connections over it when GENIE_TRANSPORT=loopback and the server offers
// it, which only a server in the same process can.
//
// Addresses are "host:port" names in a process-wide table of listeners
// (port 0 picks a free number). A frame goes into the peer's inbox and wakes
// the peer's loop (uv_async_send); the peer hands it to its on_frame and
// copies the payload straight from the sender's buffer into the sink: one
// copy, no staging (zero_copy). The sender's `done` runs once the peer has
// taken the frame (GENIE_OK) or closed without taking it
// (GENIE_ERR_CONNECTION), so its payload stays valid until then. put/get
// copy between regions registered in this process.
#include <algorithm>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <vector>

#include "core/error.hpp"
#include "dataplane/async_channel.hpp"
#include "dataplane/guarded.hpp"
#include "dataplane/plugin.hpp"

namespace genie::dataplane::loopback {
namespace {

constexpr const char* kName = "loopback";
const TransportHost* g_host = nullptr;

template <class... Parts>
void say(LogLevel level, Parts&&... parts) {
  if (g_host != nullptr) g_host->log(level, cat(std::forward<Parts>(parts)...));
}

template <class Fn>
void guarded_log(Fn&& fn, const char* what) {
  genie_status_t st = GENIE_OK;
  std::string detail;
  if (!guarded(std::forward<Fn>(fn), &st, &detail, what))
    say(LogLevel::Error, "loopback: ", what, ": ", detail);
}

// A frame on its way: the sender's payload is read in place.
struct Frame {
  FrameHeader h;
  std::string msg;
  const char* payload = nullptr;
  std::shared_ptr<void> keep;
  Channel::Done done;
};

// A frame back to its sender: taken (GENIE_OK) or dropped.
struct Ack {
  Channel::Done done;
  std::shared_ptr<void> keep;
  genie_status_t status;
};

class Endpoint;

// What the two ends of one channel share; `mu` guards all of it. Side 0
// connected, side 1 was accepted.
struct Link {
  enum class State { Pending, Accepted, Refused };
  struct Side {
    Endpoint* ep = nullptr;  // while its wake-up handle is open
    std::deque<Frame> inbox;
    std::deque<Ack> acks;
    bool closed = false;
  };
  std::mutex mu;
  State state = State::Pending;
  std::string refused;
  Side side[2];
};

class Endpoint;
class LoopListener;

// The process's listeners by address, and its registered regions.
struct Table {
  std::mutex mu;
  std::map<std::string, LoopListener*> listeners;
  int next_port = 1;
  std::map<uint64_t, uint64_t> regions;  // address -> length
};

Table& table() {
  static Table* t = new Table;  // never destroyed: endpoints may outlive static destruction
  return *t;
}

// The table's name for an address: "host:port", or "[v6]:port" when the
// host has colons (the form Listener::address() reports and connect()
// takes, brackets or not).
std::string canonical(const std::string& address, int* port_out = nullptr) {
  std::string host;
  int port = 0;
  split_address(address, &host, &port);
  if (host.empty()) fail(GENIE_ERR_INVALID_ARGUMENT, "loopback address '", address, "' has no host part");
  if (port_out != nullptr) *port_out = port;
  return host.find(':') != std::string::npos ? cat('[', host, "]:", port) : cat(host, ':', port);
}

void wake(Link::Side& s);

class Endpoint final : public AsyncChannel<Endpoint> {
 public:
  Endpoint(uv_loop_t* loop, std::shared_ptr<Link> link, int me, uint32_t max_message,
           ChannelHandlers handlers, std::string peer)
      : AsyncChannel(g_host, "loopback", loop, std::move(handlers), std::move(peer)),
        link_(std::move(link)),
        me_(me),
        max_message_(max_message) {}

  // Loop thread: opens the wake-up handle and takes the self reference.
  void start(bool established) {
    established_ = established;
    open_handle();
    std::lock_guard<std::mutex> lk(link_->mu);
    link_->side[me_].ep = this;
    if (!link_->side[me_].inbox.empty() || !link_->side[me_].acks.empty() ||
        link_->state != Link::State::Pending)
      uv_async_send(&async_);
  }

  void set_connect(Transport::ConnectFn cb) { connect_cb_ = std::move(cb); }
  // The connect could not even start: closes with the reason, which
  // connect's callback reports.
  void fail_connect(const std::string& detail) {
    connect_failed_ = detail;
    close(GENIE_ERR_CONNECTION, detail);
  }

  void wake_self() { uv_async_send(&async_); }

  void send(uint16_t type, uint64_t request_id, uint32_t flags, std::string msg, const void* payload,
            uint64_t payload_len, std::shared_ptr<void> keep, Done done) override {
    auto refuse = [&](genie_status_t st) {
      if (done) guarded_log([&] { done(st); }, "send done");
    };
    if (closing_ || !established_) return refuse(GENIE_ERR_CONNECTION);
    if (payload_len > 0 && payload == nullptr) return refuse(GENIE_ERR_INVALID_ARGUMENT);
    if (msg.size() > max_message_) return refuse(GENIE_ERR_TOO_LARGE);
    Frame f;
    f.h.type = type;
    f.h.flags = flags;
    f.h.msg_len = static_cast<uint32_t>(msg.size());
    f.h.request_id = request_id;
    f.h.payload_len = payload_len;
    f.msg = std::move(msg);
    f.payload = static_cast<const char*>(payload);
    f.keep = std::move(keep);
    f.done = std::move(done);
    std::vector<Frame> frames;
    frames.push_back(std::move(f));
    if (cork_depth_ > 0) {
      corked_.push_back(std::move(frames.front()));
      return;
    }
    enqueue(std::move(frames));
  }

  void cork() override { ++cork_depth_; }
  void uncork() override {
    if (cork_depth_ == 0 || --cork_depth_ > 0 || corked_.empty() || closing_) return;
    enqueue(std::exchange(corked_, {}));
  }

  void close(genie_status_t status, const std::string& detail) override {
    if (closing_) return;
    closing_ = true;
    close_status_ = status;
    close_detail_ = detail;
    // What was held by cork() goes out first, as TCP writes it at close.
    if (!corked_.empty()) {
      if (established_) {
        enqueue(std::exchange(corked_, {}), true);
      } else {
        for (Frame& f : std::exchange(corked_, {}))
          if (f.done) guarded_log([&] { f.done(GENIE_ERR_CONNECTION); }, "send done");
      }
    }
    {
      // Frames the peer sent that this side will never take go back.
      std::lock_guard<std::mutex> lk(link_->mu);
      Link::Side& mine = link_->side[me_];
      Link::Side& theirs = link_->side[1 - me_];
      mine.closed = true;
      for (Frame& f : mine.inbox)
        theirs.acks.push_back({std::move(f.done), std::move(f.keep), GENIE_ERR_CONNECTION});
      mine.inbox.clear();
      wake(theirs);
    }
    wake_self();  // on_close runs from the loop, never inside close()
  }

  bool closed() const override { return closing_; }
  std::string peer() const override { return peer_; }

  void put(const std::shared_ptr<MemoryRegion>& local, uint64_t local_offset, const MemoryDescriptor& remote,
           uint64_t remote_offset, uint64_t length, RmaDone done) override {
    rma(true, local, local_offset, remote, remote_offset, length, std::move(done));
  }
  void get(const std::shared_ptr<MemoryRegion>& local, uint64_t local_offset, const MemoryDescriptor& remote,
           uint64_t remote_offset, uint64_t length, RmaDone done) override {
    rma(false, local, local_offset, remote, remote_offset, length, std::move(done));
  }

 private:
  friend class AsyncChannel<Endpoint>;  // on_wake, on_teardown, release_before_close
  void on_wake() { process(); }

  static bool fits(uint64_t offset, uint64_t length, uint64_t size) {
    return offset <= size && length <= size - offset;
  }

  void rma(bool put, const std::shared_ptr<MemoryRegion>& local, uint64_t local_offset,
           const MemoryDescriptor& remote, uint64_t remote_offset, uint64_t length, RmaDone done) {
    genie_status_t st = GENIE_OK;
    std::string detail;
    const char* op = put ? "put" : "get";
    if (closing_ || !established_) {
      st = GENIE_ERR_CONNECTION;
      detail = cat("loopback ", op, ": the channel is ", closing_ ? "closed" : "not connected");
    } else if (!local || local->descriptor().transport != kName || remote.transport != kName) {
      st = GENIE_ERR_INVALID_ARGUMENT;
      detail =
          cat("loopback ", op, ": both regions must be registered with the loopback transport (remote is '",
              remote.transport, "')");
    } else if (!fits(local_offset, length, local->size()) || !fits(remote_offset, length, remote.length)) {
      st = GENIE_ERR_INVALID_ARGUMENT;
      detail =
          cat("loopback ", op, ": ", length, " bytes at local offset ", local_offset, " / remote offset ",
              remote_offset, " fall outside the regions (", local->size(), " and ", remote.length, " bytes)");
    } else {
      // The copy happens under the table's lock, so the peer cannot
      // unregister its region in the middle of it.
      Table& t = table();
      std::lock_guard<std::mutex> lk(t.mu);
      auto it = t.regions.find(remote.address);
      if (it == t.regions.end() || it->second < remote.length) {
        st = GENIE_ERR_INVALID_ARGUMENT;
        detail = cat("loopback ", op, ": the remote region at 0x", std::hex, remote.address,
                     " is not registered (any more)");
      } else if (length > 0) {
        char* mine = static_cast<char*>(local->data()) + local_offset;
        char* theirs = reinterpret_cast<char*>(static_cast<uintptr_t>(remote.address)) + remote_offset;
        std::memmove(put ? theirs : mine, put ? mine : theirs, length);
      }
    }
    // Completions run from the loop, after the call returned.
    later_.push_back([done = std::move(done), st, detail] {
      if (done) guarded_log([&] { done(st, detail); }, "rma done");
    });
    wake_self();
  }

  // Loop thread: hands frames to the peer, or fails them if it has closed.
  // `closing`: from close(), which has begun already.
  void enqueue(std::vector<Frame> frames, bool closing = false) {
    if (closing_ && !closing) {
      for (Frame& f : frames)
        if (f.done) guarded_log([&] { f.done(GENIE_ERR_CONNECTION); }, "send done");
      return;
    }
    bool refused = false;
    {
      std::lock_guard<std::mutex> lk(link_->mu);
      Link::Side& theirs = link_->side[1 - me_];
      if (theirs.closed) {
        refused = true;
      } else {
        for (Frame& f : frames) theirs.inbox.push_back(std::move(f));
        inflight_ += frames.size();
        wake(theirs);
      }
    }
    if (refused) {
      for (Frame& f : frames)
        if (f.done) guarded_log([&] { f.done(GENIE_ERR_CONNECTION); }, "send done");
      if (!closing) close(GENIE_ERR_CONNECTION, cat("connection to ", peer_, " closed by the peer"));
    }
  }

  // Loop thread, on every wake-up.
  void process() {
    std::deque<Ack> acks;
    Link::State state;
    std::string refused;
    {
      std::lock_guard<std::mutex> lk(link_->mu);
      acks.swap(link_->side[me_].acks);
      state = link_->state;
      refused = link_->refused;
    }
    for (Ack& a : acks) {
      --inflight_;
      if (a.done) guarded_log([&] { a.done(a.status); }, "send done");
    }
    for (auto& fn : std::exchange(later_, {})) fn();
    if (!established_ && !closing_ && state != Link::State::Pending) {
      if (state == Link::State::Accepted) {
        established_ = true;
        if (auto cb = std::exchange(connect_cb_, nullptr))
          guarded_log([&] { cb(GENIE_OK, {}); }, "connect callback");
      } else {
        fail_connect(cat("cannot connect to ", peer_, ": ", refused));
      }
    }
    while (established_ && !closing_) {
      Frame f;
      bool peer_closed = false;
      {
        std::lock_guard<std::mutex> lk(link_->mu);
        Link::Side& mine = link_->side[me_];
        peer_closed = link_->side[1 - me_].closed;
        if (mine.inbox.empty()) {
          if (!peer_closed) break;
        } else {
          f = std::move(mine.inbox.front());
          mine.inbox.pop_front();
          peer_closed = false;
        }
      }
      if (peer_closed) {
        close(GENIE_ERR_CONNECTION, cat("connection to ", peer_, " closed by the peer"));
        break;
      }
      deliver(f);
      std::lock_guard<std::mutex> lk(link_->mu);
      Link::Side& theirs = link_->side[1 - me_];
      theirs.acks.push_back({std::move(f.done), std::move(f.keep), GENIE_OK});
      wake(theirs);
    }
    if (closing_) maybe_finish();
  }

  // Messages arrive allocated by the sender (this process): the limit only
  // refuses them, as a socket transport's would.
  void set_max_message(uint32_t bytes) override { max_message_ = bytes; }

  // One frame from the peer: its header and message to on_frame, its
  // payload from the sender's buffer into the sink.
  void deliver(Frame& f) {
    if (f.msg.size() > max_message_) {
      return close(GENIE_ERR_PROTOCOL,
                   cat(frame_type_label(handlers_.types, f.h.type), " message of ", f.msg.size(),
                       " bytes exceeds the maximum message size of ", max_message_, " bytes"));
    }
    if (handlers_.types.accepts != nullptr && !handlers_.types.accepts(f.h.type))
      return close(GENIE_ERR_PROTOCOL, cat("unknown message type ", f.h.type));
    PayloadSink sink;
    genie_status_t st = GENIE_OK;
    std::string detail;
    if (handlers_.on_frame &&
        !guarded([&] { sink = handlers_.on_frame(f.h, std::move(f.msg)); }, &st, &detail, "on_frame"))
      return close(st, detail);
    if (closing_ || f.h.payload_len == 0) return;
    if (sink.dst == nullptr) {
      return close(GENIE_ERR_PROTOCOL, cat("the ", f.h.payload_len, "-byte payload of a ",
                                           frame_type_label(handlers_.types, f.h.type), " frame (request ",
                                           f.h.request_id, ") was refused"));
    }
    std::memcpy(sink.dst, f.payload, f.h.payload_len);
    if (sink.done && !guarded([&] { sink.done(); }, &st, &detail, "payload done")) close(st, detail);
  }

  // The owner's loop is being torn down: close, take the acks already here,
  // and finish without waiting for the rest, which would come back to a
  // loop that no longer runs (the teardown closes every handle left, and an
  // endpoint whose handle closed without it would never let go of itself).
  void on_teardown() {
    close(GENIE_ERR_SHUTDOWN, "event loop stopped");
    process();
    inflight_ = 0;
    maybe_finish();
  }

  // Closing: once every frame this side sent has come back, the handle
  // closes and on_close runs last.
  void maybe_finish() {
    if (finished_ || inflight_ > 0) return;
    finished_ = true;
    {
      std::lock_guard<std::mutex> lk(link_->mu);
      link_->side[me_].ep = nullptr;
    }
    close_handle();
  }

  // Completions still waiting for a wake-up run before on_close.
  void release_before_close() {
    for (auto& fn : std::exchange(later_, {})) fn();
  }

  std::shared_ptr<Link> link_;
  const int me_;
  uint32_t max_message_;  // set_max_message may change it (loop thread)
  uint64_t inflight_ = 0;  // frames handed to the peer, not yet acknowledged
  int cork_depth_ = 0;
  std::vector<Frame> corked_;
  std::vector<std::function<void()>> later_;  // completions for the next wake-up
};

void wake(Link::Side& s) {
  if (s.ep != nullptr) s.ep->wake_self();
}

class LoopListener final : public Listener, public std::enable_shared_from_this<LoopListener> {
 public:
  LoopListener(uv_loop_t* loop, ChannelOptions options, Transport::ConnectionFn on_connection)
      : loop_(loop), options_(options), on_connection_(std::move(on_connection)) {}

  void start(const std::string& address) {
    int port = 0;
    const std::string name = canonical(address, &port);
    const std::string host = name.substr(0, name.rfind(':'));  // as connect() will name it ("[v6]")
    Table& t = table();
    {
      std::lock_guard<std::mutex> lk(t.mu);
      if (port == 0) {
        while (t.listeners.count(cat(host, ':', t.next_port)) != 0) t.next_port = t.next_port % 65535 + 1;
        port = t.next_port;
        t.next_port = t.next_port % 65535 + 1;
      }
      address_ = cat(host, ':', port);
      if (t.listeners.count(address_) != 0)
        fail(GENIE_ERR_IO, "cannot listen on loopback address ", address_, ": address already in use");
      const int rc =
          uv_async_init(loop_, &async_, [](uv_async_t* a) { static_cast<LoopListener*>(a->data)->take(); });
      if (rc != 0) fail(GENIE_ERR_INTERNAL, "uv_async_init: ", uv_strerror(rc));
      async_.data = this;
      t.listeners[address_] = this;
    }
    self_ = shared_from_this();
    std::weak_ptr<LoopListener> weak = self_;
    hook_ = g_host->add_close_hook(loop_, [weak] {
      if (auto l = weak.lock()) l->close();
    });
  }

  // Any thread, under the table's lock: a connect() for this listener.
  void offer(std::shared_ptr<Link> link) {
    pending_.push_back(std::move(link));
    uv_async_send(&async_);
  }

  std::string address() const override { return closing_ ? std::string() : address_; }

  std::shared_ptr<Channel> accept(ChannelHandlers handlers) override {
    if (!current_) fail(GENIE_ERR_INVALID_ARGUMENT, "Listener::accept outside on_connection, or twice");
    std::shared_ptr<Link> link = std::move(current_);
    current_ = nullptr;
    auto ep = std::make_shared<Endpoint>(loop_, link, 1, options_.max_message, std::move(handlers),
                                         cat(address_, "#", ++accepted_));
    ep->start(true);
    std::lock_guard<std::mutex> lk(link->mu);
    link->state = Link::State::Accepted;
    wake(link->side[0]);
    return ep;
  }

  void close() override {
    if (closing_ || !self_) return;
    closing_ = true;
    std::vector<std::shared_ptr<Link>> left;
    {
      Table& t = table();
      std::lock_guard<std::mutex> lk(t.mu);
      t.listeners.erase(address_);
      left.swap(pending_);
    }
    for (auto& link : left) refuse(*link, "the listener closed");
    g_host->remove_close_hook(loop_, hook_);
    uv_close(reinterpret_cast<uv_handle_t*>(&async_), [](uv_handle_t* h) {
      std::shared_ptr<LoopListener> self = std::move(static_cast<LoopListener*>(h->data)->self_);
    });
  }

 private:
  static void refuse(Link& link, const std::string& why) {
    std::lock_guard<std::mutex> lk(link.mu);
    link.state = Link::State::Refused;
    link.refused = why;
    wake(link.side[0]);
  }

  // Loop thread: the connections offered since the last wake-up.
  void take() {
    if (closing_) return;
    std::vector<std::shared_ptr<Link>> links;
    {
      std::lock_guard<std::mutex> lk(table().mu);
      links.swap(pending_);
    }
    for (auto& link : links) {
      bool gone;
      {
        std::lock_guard<std::mutex> lk(link->mu);
        gone = link->side[0].closed;
      }
      if (gone || closing_) {
        refuse(*link, gone ? "the connecting side closed" : "the listener closed");
        continue;
      }
      current_ = link;
      try {
        if (on_connection_) on_connection_(*this);
      } catch (const std::exception& e) {
        say(LogLevel::Error, "loopback listener ", address_, ": on_connection threw: ", e.what());
      }
      if (current_) {
        current_ = nullptr;
        refuse(*link, "not accepted");
      }
    }
  }

  uv_loop_t* loop_;
  ChannelOptions options_;
  Transport::ConnectionFn on_connection_;
  std::string address_;
  uv_async_t async_{};
  std::shared_ptr<LoopListener> self_;  // until the handle has closed
  uint64_t hook_ = 0;
  bool closing_ = false;
  uint64_t accepted_ = 0;
  std::shared_ptr<Link> current_;               // inside on_connection, before accept()
  std::vector<std::shared_ptr<Link>> pending_;  // under the table's lock
};

class Region final : public MemoryRegion {
 public:
  Region(void* data, MemoryDescriptor d) : MemoryRegion(data, std::move(d)) {
    Table& t = table();
    std::lock_guard<std::mutex> lk(t.mu);
    t.regions[descriptor().address] = descriptor().length;
  }
  ~Region() override {
    Table& t = table();
    std::lock_guard<std::mutex> lk(t.mu);
    t.regions.erase(descriptor().address);
  }
};

class LoopbackTransport final : public Transport {
 public:
  LoopbackTransport() {
    caps_.name = kName;
    caps_.reliable = true;
    caps_.ordered = true;
    caps_.zero_copy = true;  // from the sender's buffer straight into the sink
    caps_.gpu_memory = false;
    caps_.rma = true;
    caps_.max_message = std::numeric_limits<uint32_t>::max();
  }

  const Capabilities& capabilities() const override { return caps_; }

  std::shared_ptr<MemoryRegion> register_memory(void* data, uint64_t length, MemoryKind kind,
                                                int32_t device) override {
    MemoryDescriptor d =
        describe_host_memory(kName, "copies within host memory only", data, length, kind, device);
    {
      Table& t = table();
      std::lock_guard<std::mutex> lk(t.mu);
      check(t.regions.count(d.address) == 0, GENIE_ERR_INVALID_ARGUMENT, "memory at ", data,
            " is already registered with the loopback transport");
    }
    return std::make_shared<Region>(data, std::move(d));
  }

  std::shared_ptr<Listener> listen(uv_loop_t* loop, const std::string& address, const ChannelOptions& options,
                                   ConnectionFn on_connection) override {
    auto l = std::make_shared<LoopListener>(loop, options, std::move(on_connection));
    l->start(address);
    return l;
  }

  std::shared_ptr<Channel> connect(uv_loop_t* loop, const std::string& address, const ChannelOptions& options,
                                   ChannelHandlers handlers, ConnectFn on_connected) override {
    const std::string target = canonical(address);
    auto link = std::make_shared<Link>();
    auto ep = std::make_shared<Endpoint>(loop, link, 0, options.max_message, std::move(handlers), target);
    ep->set_connect(std::move(on_connected));
    ep->start(false);
    bool found = false;
    {
      Table& t = table();
      std::lock_guard<std::mutex> lk(t.mu);
      auto it = t.listeners.find(target);
      if (it != t.listeners.end()) {
        it->second->offer(link);
        found = true;
      }
    }
    if (!found)
      ep->fail_connect(cat("cannot connect to ", target,
                           ": no loopback listener there (loopback reaches only "
                           "listeners in this process)"));
    return ep;
  }

 private:
  Capabilities caps_;
};

Transport* create(const TransportHost* host) {
  g_host = host;
  return new LoopbackTransport();
}

}  // namespace
}  // namespace genie::dataplane::loopback

GENIE_TRANSPORT_PLUGIN("loopback", genie::dataplane::loopback::create)
