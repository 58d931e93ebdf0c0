#include "server/quota.hpp"

#include <utility>

#include "core/error.hpp"
#include "core/memory.hpp"
#include "server/session.hpp"

namespace genie {

MemoryGate::MemoryGate(uint64_t budget, SessionQuota quota, const std::atomic<uint64_t>& held,
                       std::string where)
    : budget_(budget ? budget : default_memory_budget(read_host_memory())),
      quota_{quota.max_bytes ? quota.max_bytes : budget_,
             quota.max_tensors ? quota.max_tensors : SessionQuota::kDefaultTensors,
             quota.max_graphs ? quota.max_graphs : SessionQuota::kDefaultGraphs},
      held_(held),
      where_(std::move(where)) {}

void MemoryGate::admit(const Session& s, uint64_t bytes, uint64_t tensors, bool graph,
                       const Describe& what) const {
  const SessionUsage& u = s.usage;
  const uint64_t graphs = u.graphs.load(std::memory_order_relaxed);
  if (graph && graphs >= quota_.max_graphs)
    fail(GENIE_ERR_OUT_OF_MEMORY, what(), ": session quota of graphs in flight: ", "this session has ",
         graphs, " graphs in flight on ", where_, ", its quota is ", quota_.max_graphs,
         " (genie serve --session-max-graphs, GENIE_SESSION_MAX_GRAPHS)");
  // (No tensor: nothing to count, and the session's table is the loop
  // thread's.)
  const uint64_t have_tensors =
      tensors == 0 ? 0 : s.num_tensors() + u.reserved_tensors.load(std::memory_order_relaxed);
  if (tensors > quota_.max_tensors || have_tensors > quota_.max_tensors - tensors)
    fail(GENIE_ERR_OUT_OF_MEMORY, what(), ": session tensor quota: ", tensors, " more tensors on ", where_,
         " with ", have_tensors, " held or due, past its quota of ", quota_.max_tensors,
         " tensors (genie serve --session-max-tensors, GENIE_SESSION_MAX_TENSORS)");
  // The server's budget first: past it, no quota matters.
  const uint64_t held = held_.load(std::memory_order_relaxed),
                 reserved = reserved_.load(std::memory_order_relaxed);
  const uint64_t all = held + reserved;
  if (bytes > budget_ || all > budget_ - bytes)
    fail(GENIE_ERR_OUT_OF_MEMORY, what(), ": memory budget: ", bytes, " more bytes on ", where_, " with ",
         held, " held by all sessions and ", reserved, " reserved by graphs in flight, past its budget of ",
         budget_, " bytes (genie serve --memory-budget, GENIE_MEMORY_BUDGET)");
  const uint64_t have =
      u.bytes.load(std::memory_order_relaxed) + u.reserved_bytes.load(std::memory_order_relaxed);
  if (bytes > quota_.max_bytes || have > quota_.max_bytes - bytes)
    fail(GENIE_ERR_OUT_OF_MEMORY, what(), ": session byte quota: ", bytes, " more bytes on ", where_,
         " with ", have, " held or reserved by this session, past its quota of ", quota_.max_bytes,
         " bytes (genie serve --session-max-bytes, GENIE_SESSION_MAX_BYTES)");
}

std::shared_ptr<MemoryGate::Reservation> MemoryGate::reserve(const std::shared_ptr<Session>& s,
                                                             uint64_t bytes, uint64_t tensors,
                                                             const Describe& what) {
  admit(*s, bytes, tensors, true, what);
  return std::make_shared<Reservation>(Reservation::Key{}, *this, s, bytes, tensors);
}

MemoryGate::Reservation MemoryGate::hold(const std::shared_ptr<Session>& s, uint64_t bytes, uint64_t tensors,
                                         const Describe& what) {
  admit(*s, bytes, tensors, true, what);
  return Reservation(Reservation::Key{}, *this, s, bytes, tensors);
}

std::shared_ptr<MemoryGate::Reservation> MemoryGate::charge(const std::shared_ptr<Session>& s, uint64_t bytes,
                                                            const Describe& what, uint64_t tensors) {
  admit(*s, bytes, tensors, false, what);
  return std::make_shared<Reservation>(Reservation::Key{}, *this, s, bytes, tensors, false);
}

MemoryGate::Reservation::Reservation(Key, MemoryGate& gate, const std::shared_ptr<Session>& s, uint64_t bytes,
                                     uint64_t tensors, bool graph)
    : gate_(gate), session_(s), bytes_(bytes), tensors_(tensors), graph_(graph) {
  gate_.reserved_.fetch_add(bytes_, std::memory_order_relaxed);
  s->usage.reserved_bytes.fetch_add(bytes_, std::memory_order_relaxed);
  s->usage.reserved_tensors.fetch_add(tensors_, std::memory_order_relaxed);
  if (graph_) s->usage.graphs.fetch_add(1, std::memory_order_relaxed);
}

void MemoryGate::Reservation::release() {
  if (std::exchange(released_, true)) return;
  gate_.reserved_.fetch_sub(bytes_, std::memory_order_relaxed);
  if (auto s = session_.lock()) {
    s->usage.reserved_bytes.fetch_sub(bytes_, std::memory_order_relaxed);
    s->usage.reserved_tensors.fetch_sub(tensors_, std::memory_order_relaxed);
    if (graph_) s->usage.graphs.fetch_sub(1, std::memory_order_relaxed);
  }
}

}  // namespace genie
