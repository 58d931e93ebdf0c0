// Mbufs taken from a pool a batch at a time (rte_pktmbuf_alloc_bulk: one
// call into the mempool per batch instead of one per packet) and handed out
// one by one on the polling thread. The pool may run dry in the middle of a
// burst: a batch is all or nothing, so smaller ones are tried, down to one
// mbuf. ensure(n) says beforehand whether n mbufs are in hand, so that a
// packet is built only when everything it needs is there and nothing
// half-built has to be undone. Pool is a small adapter (MempoolSource in
// the transport, a counting fake in the tests).
#pragma once

#include <rte_mbuf.h>

#include <algorithm>

namespace genie::dataplane::dpdk {

template <class Pool>
class MbufStash {
 public:
  static constexpr unsigned kBatch = 32;

  MbufStash() = default;
  explicit MbufStash(Pool pool) : pool_(pool) {}
  MbufStash(const MbufStash&) = delete;
  MbufStash& operator=(const MbufStash&) = delete;
  ~MbufStash() { release(); }

  void set_pool(Pool pool) {
    release();
    pool_ = pool;
  }

  // True when at least n (<= kBatch) mbufs are in hand, taking more from
  // the pool if needed.
  bool ensure(unsigned n) {
    while (n_ < n)
      if (!refill()) return false;
    return true;
  }

  // One mbuf, or nullptr when the pool is empty.
  rte_mbuf* take() {
    if (n_ == 0 && !refill()) return nullptr;
    return items_[--n_];
  }

  // Every mbuf in hand goes back to the pool.
  void release() {
    if (n_ > 0) pool_.free_bulk(items_, n_);
    n_ = 0;
  }

  unsigned held() const { return n_; }

 private:
  bool refill() {
    for (unsigned want = std::min(kCap - n_, kBatch); want > 0; want /= 2)
      if (pool_.alloc_bulk(items_ + n_, want)) {
        n_ += want;
        return true;
      }
    return false;
  }

  static constexpr unsigned kCap = 2 * kBatch;
  Pool pool_{};
  rte_mbuf* items_[kCap] = {};
  unsigned n_ = 0;
};

// A DPDK mempool of packet mbufs.
struct MempoolSource {
  rte_mempool* mp = nullptr;
  bool alloc_bulk(rte_mbuf** out, unsigned n) { return rte_pktmbuf_alloc_bulk(mp, out, n) == 0; }
  void free_bulk(rte_mbuf** m, unsigned n) { rte_pktmbuf_free_bulk(m, n); }
};

}  // namespace genie::dataplane::dpdk
