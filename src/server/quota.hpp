// What a server's tensors may hold: a memory budget for the whole server
// and quotas per session (bytes, tensors, graphs in flight), checked before
// anything is allocated or run (docs/security.md, "Quotas and the memory
// budget"). A graph in flight reserves the bytes its outputs and
// intermediates need and the tensors of its outputs until it completes;
// its outputs then count as the session's tensors.
//
// Thread-safe: the loop thread admits and adds; a reservation may end on
// any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace genie {

class Session;

struct SessionQuota {
  uint64_t max_bytes = 0;    // 0: the server's budget
  uint64_t max_tensors = 0;  // 0: kDefaultTensors
  uint64_t max_graphs = 0;   // 0: kDefaultGraphs
  static constexpr uint64_t kDefaultTensors = 65536;
  static constexpr uint64_t kDefaultGraphs = 256;
};

// What a session holds and has reserved (members of Session).
struct SessionUsage {
  std::atomic<uint64_t> bytes{0};             // its tensors on this server
  std::atomic<uint64_t> reserved_bytes{0};    // its graphs in flight
  std::atomic<uint64_t> reserved_tensors{0};  // their outputs
  std::atomic<uint64_t> graphs{0};            // graphs in flight
};

class MemoryGate {
 public:
  // `budget` 0: the default (core/memory.hpp). `held` is the server's count
  // of tensor bytes held (ServerCounters::tensor_bytes).
  MemoryGate(uint64_t budget, SessionQuota quota, const std::atomic<uint64_t>& held, std::string where);

  uint64_t budget() const { return budget_; }
  const SessionQuota& quota() const { return quota_; }
  uint64_t reserved() const { return reserved_.load(std::memory_order_relaxed); }

  // What is being admitted, for an error's detail ("tensor f32[4, 4] of
  // 64 bytes"): called only when something is refused, so that admitting
  // costs no formatting.
  using Describe = std::function<std::string()>;

  // Throws Error(OUT_OF_MEMORY) unless session `s` may take `bytes` more
  // bytes in `tensors` more tensors (and one more graph in flight when
  // `graph`): the detail names what(), the quota or budget passed, the use
  // and the limit.
  void admit(const Session& s, uint64_t bytes, uint64_t tensors, bool graph, const Describe& what) const;

  // Holds bytes, tensors and one graph in flight for session `s` until
  // destroyed.
  class Reservation {
    struct Key {};  // only MemoryGate makes one

   public:
    Reservation(Key, MemoryGate& gate, const std::shared_ptr<Session>& s, uint64_t bytes, uint64_t tensors,
                bool graph = true);
    ~Reservation() { release(); }
    // Ends it now (idempotent): a graph's completion releases it before its
    // outputs join the session, wherever the last reference ends up.
    void release();
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;

   private:
    friend class MemoryGate;
    MemoryGate& gate_;
    std::weak_ptr<Session> session_;
    uint64_t bytes_, tensors_;
    bool graph_;  // counted as a graph in flight
    bool released_ = false;
  };
  // admit(..., graph = true), then reserve: for as long as the caller holds
  // it (hold: in its scope, for work done before it returns).
  std::shared_ptr<Reservation> reserve(const std::shared_ptr<Session>& s, uint64_t bytes, uint64_t tensors,
                                       const Describe& what);
  Reservation hold(const std::shared_ptr<Session>& s, uint64_t bytes, uint64_t tensors, const Describe& what);
  // Bytes (and `tensors`, 0 by default; no graph in flight), for buffers
  // the server stages for session `s` (a tensor forwarded to or from a
  // worker, an input given inside a submission). Any thread.
  std::shared_ptr<Reservation> charge(const std::shared_ptr<Session>& s, uint64_t bytes,
                                      const Describe& what, uint64_t tensors = 0);

 private:
  const uint64_t budget_;
  const SessionQuota quota_;
  const std::atomic<uint64_t>& held_;
  const std::string where_;  // "server NODE", for details
  std::atomic<uint64_t> reserved_{0};
};

}  // namespace genie
