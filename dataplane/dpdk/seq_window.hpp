// The receive window of a DPDK session: packets that arrived ahead of a
// gap, held by sequence number in a fixed ring (allocated once per session)
// with a bitmap saying which slots hold one, so that the hot path never
// allocates and the missing runs for a Nack come from a scan of 64-bit
// words. T is what a slot holds (an mbuf in the transport).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "dataplane/dpdk/wire.hpp"

namespace genie::dataplane::dpdk {

template <class T>
class SeqWindow {
 public:
  // Room for `capacity` sequence numbers from base() on (rounded up to a
  // power of two, at least 64).
  explicit SeqWindow(uint32_t capacity)
      : size_(std::bit_ceil(capacity < 64 ? 64u : capacity)),
        items_(size_, nullptr),
        bits_(size_ / 64, 0),
        capacity_(capacity) {}

  // The next sequence number expected: every one below it was taken.
  uint32_t base() const { return base_; }
  void reset(uint32_t base) { base_ = top_ = base; }
  uint32_t capacity() const { return capacity_; }
  // Packets held (all above base()).
  uint32_t held() const { return held_; }
  // One past the highest sequence number held (base() when none).
  uint32_t top() const { return top_; }

  bool in_window(uint32_t seq) const { return seq - base_ < capacity_; }
  bool has(uint32_t seq) const {
    const uint32_t i = seq & (size_ - 1);
    return in_window(seq) && (bits_[i / 64] >> (i % 64) & 1);
  }

  // Holds `item` for `seq`; false (taking nothing) when seq is outside
  // [base, base + capacity) or already held.
  bool put(uint32_t seq, T* item) {
    if (!in_window(seq) || has(seq)) return false;
    const uint32_t i = seq & (size_ - 1);
    items_[i] = item;
    bits_[i / 64] |= uint64_t{1} << (i % 64);
    ++held_;
    if (static_cast<int32_t>(seq + 1 - top_) > 0) top_ = seq + 1;
    return true;
  }

  // The item at base() if it arrived (and base() moves on), else nullptr.
  T* pop_front() {
    if (!has(base_)) return nullptr;
    const uint32_t i = base_ & (size_ - 1);
    T* item = items_[i];
    items_[i] = nullptr;
    bits_[i / 64] &= ~(uint64_t{1} << (i % 64));
    --held_;
    ++base_;
    if (held_ == 0) top_ = base_;
    return item;
  }

  // The runs of sequence numbers missing between base() and top(), at
  // most `max`, lowest first; returns how many.
  size_t missing(SeqRange* out, size_t max) const {
    size_t n = 0;
    uint32_t seq = base_;
    while (n < max && static_cast<int32_t>(top_ - seq) > 0) {
      // Skip what is held, then count what is not.
      while (static_cast<int32_t>(top_ - seq) > 0 && has(seq)) seq += std::min(run(seq, true), top_ - seq);
      if (static_cast<int32_t>(top_ - seq) <= 0) break;
      const uint32_t first = seq;
      while (static_cast<int32_t>(top_ - seq) > 0 && !has(seq)) seq += std::min(run(seq, false), top_ - seq);
      out[n++] = SeqRange{first, seq - first};
    }
    return n;
  }

  // base() moves on past a sequence number taken without being held (it
  // arrived in order with nothing held: put and pop_front at once).
  void skip() {
    ++base_;
    if (held_ == 0) top_ = base_;
  }

  // Hands every held item to fn and empties the window.
  template <class Fn>
  void drain(Fn&& fn) {
    for (uint32_t s = base_; static_cast<int32_t>(top_ - s) > 0; ++s) {
      const uint32_t i = s & (size_ - 1);
      if (bits_[i / 64] >> (i % 64) & 1) fn(items_[i]);
      items_[i] = nullptr;
      bits_[i / 64] &= ~(uint64_t{1} << (i % 64));
    }
    held_ = 0;
    top_ = base_;
  }

 private:
  // How many sequence numbers from seq on (at least 1, within its 64-bit
  // word) are held (held == true) or missing.
  uint32_t run(uint32_t seq, bool held) const {
    const uint32_t i = seq & (size_ - 1);
    uint64_t w = bits_[i / 64] >> (i % 64);
    if (!held) w = ~w;
    const uint32_t left = 64 - i % 64;
    const uint32_t n = static_cast<uint32_t>(std::countr_one(w));
    return n == 0 ? 1 : (n > left ? left : n);
  }

  uint32_t size_;
  std::vector<T*> items_;
  std::vector<uint64_t> bits_;
  uint32_t capacity_;
  uint32_t base_ = 1, top_ = 1;
  uint32_t held_ = 0;
};

}  // namespace genie::dataplane::dpdk
