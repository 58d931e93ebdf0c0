// The data plane of one rank: a channel to every other rank over a Genie
// transport (dataplane/registry.hpp, by name), and receives matched by
// (source rank, key). A payload whose receive is already posted lands in
// the receiver's buffer directly; one that arrives first is held until its
// receive is posted.
//
// Threads: every method may be called from any thread except the loop's;
// send()/recv() block the caller. A wait that sees no byte move for
// `stall_timeout` is reported as a deadlock (Error(GENIE_ERR_TIMEOUT)
// naming what it waited for); abort() makes every wait fail at once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "control/auth.hpp"
#include "control/loop_thread.hpp"
#include "dataplane/transport.hpp"

namespace genie::replay {

// Maps --backend to a transport name: tcp, dpdk, rdma (ucx), or auto (ucx
// where the plugin loads and either every rank runs on this host
// (`same_host`: the local launch) or an RDMA device has an active port; else
// tcp). `why` says what auto skipped. Throws Error(INVALID_ARGUMENT) for an unknown backend and the
// registry's error for an explicit one that cannot be had.
std::string resolve_backend(const std::string& backend, bool same_host, std::string* why);

class Fabric {
 public:
  struct Op;  // one send or receive in flight
  using OpPtr = std::shared_ptr<Op>;

  // `token`: the run's secret; an incoming channel that does not present it
  // in its first frame is closed, and never counts as a rank.
  Fabric(const std::string& transport, int rank, int size, const std::string& bind_host,
         std::chrono::milliseconds stall_timeout, std::string token = {});
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  const std::string& transport_name() const { return transport_name_; }
  std::string address() const { return address_; }  // where peers connect
  int rank() const { return rank_; }
  int size() const { return size_; }

  // Connects to every peer (addrs[r] for rank r) and waits until every peer
  // has connected here too.
  void connect_all(const std::vector<std::string>& addrs);

  // Starts a send of [data, data + len) to `peer` under `key`; the bytes
  // must stay untouched until wait() returns. `label` travels with the
  // bytes, so that the receiver can name the sender's node should no
  // receive take them.
  OpPtr isend(int peer, uint64_t key, const void* data, uint64_t len, std::string label = {});
  // Posts a receive of exactly `len` bytes from `peer` under `key` into dst.
  OpPtr irecv(int peer, uint64_t key, void* dst, uint64_t len);
  // Waits for an op; `what` describes it for a deadlock or failure report.
  // A receive from a peer whose end (send_end) has arrived before any of
  // the message fails at once: the traces disagree (or, where the peer
  // stopped on a failure, it is cancelled).
  void wait(const OpPtr& op, const std::function<std::string()>& what);
  // Waits until one of `ops` is done; returns its index (what(i) describes
  // op i). Each op is checked as wait() checks it.
  size_t wait_any(const std::vector<OpPtr>& ops, const std::function<std::string(size_t)>& what);

  // The end of a run. send_end() tells every peer that nothing more comes
  // from this rank (after every send: channels are ordered, so the peer has
  // seen all of this rank's messages once it sees the end); drain() waits
  // for every peer's end (failing on abort, or after twice the stall
  // timeout with nothing moving: a peer stuck in a wait reports its own
  // deadlock first) and returns the messages that arrived and that no
  // receive took.
  struct Unclaimed {
    int src;
    uint64_t key;
    uint64_t len;
    std::string label;  // the sender's
  };
  void send_end(bool failed = false);
  std::vector<Unclaimed> drain();

  // Makes every present and future wait fail with `reason`.
  void abort(const std::string& reason);

  // Bytes sent and received so far.
  uint64_t bytes_sent() const;
  // Bytes that arrived before their receive was posted: held, then copied
  // into the receive's buffer (one copy more than the rest).
  uint64_t bytes_staged() const;
  uint64_t bytes_received() const;

  // Test hook: the next send whose key satisfies `match` has one byte of
  // its payload flipped on the wire (the sender's buffer is untouched).
  void corrupt_next_send(std::function<bool(int peer, uint64_t key)> match);

 private:
  struct Pending;
  // A Hello's message is the run's token (compared in constant time; empty
  // when the run has none).
  bool presents_token(const std::string& msg) const {
    return token_.empty() ? msg.empty() : mac_equal(msg, token_);
  }
  void on_data(int src, const dataplane::FrameHeader& h, std::string&& label, dataplane::PayloadSink* sink);
  void progress();
  void check_waiting(const Op& op, const std::function<std::string()>& what,
                     std::chrono::steady_clock::time_point since);
  dataplane::ChannelHandlers handlers(int peer_hint);

  std::string transport_name_;
  int rank_;
  int size_;
  std::chrono::milliseconds stall_timeout_;
  std::string token_;
  std::shared_ptr<dataplane::Transport> transport_;
  // Receives run on one loop thread (the listener's channels), sends on
  // another (the channels this rank connects), so that a rank reads and
  // writes at the same time, as a ring step needs.
  std::unique_ptr<LoopThread> loop_;       // incoming channels
  std::unique_ptr<LoopThread> send_loop_;  // outgoing channels
  std::shared_ptr<dataplane::Listener> listener_;
  // Incoming channels that have not said Hello (loop thread only).
  static constexpr size_t kMaxStrangers = 64;
  static constexpr std::chrono::seconds kHelloWithin{10};
  static constexpr uint32_t kMaxMessage = 64 << 10;  // a frame's message: a Hello's token, a send's label
  struct Stranger {
    std::weak_ptr<dataplane::Channel> ch;
    std::shared_ptr<int> peer;  // its rank once it said Hello
    std::chrono::steady_clock::time_point at;
  };
  std::vector<Stranger> strangers_;
  std::string address_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<dataplane::Channel>> out_;  // by peer; loop thread after connect
  std::vector<std::shared_ptr<dataplane::Channel>> in_;
  int connected_out_ = 0;
  int connected_in_ = 0;
  std::string connect_error_;
  std::map<std::pair<int, uint64_t>, std::shared_ptr<Pending>> pending_;
  std::chrono::steady_clock::time_point last_progress_;
  std::string abort_reason_;
  uint64_t sent_ = 0, received_ = 0, staged_ = 0;
  int ends_ = 0;  // peers whose end arrived
  std::vector<int> ended_;  // by peer: 0 not yet, 1 finished, 2 stopped on a failure
  std::chrono::steady_clock::time_point last_end_{};
  std::function<bool(int, uint64_t)> corrupt_;
};

}  // namespace genie::replay
