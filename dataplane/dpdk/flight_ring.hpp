// A DPDK session's packets in flight, oldest first, in a ring allocated
// once per session (the send window bounds how many there are): pushing,
// popping and indexing never touch the heap, and the slots stay in the
// cache from one window to the next (a deque allocates and frees a chunk
// every few packets).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace genie::dataplane::dpdk {

template <class T>
class FlightRing {
 public:
  // Room for `capacity` items (rounded up to a power of two).
  explicit FlightRing(uint32_t capacity) : items_(std::bit_ceil(capacity < 1 ? 1u : capacity)) {}

  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  size_t capacity() const { return items_.size(); }
  T& operator[](size_t i) { return items_[(head_ + i) & (items_.size() - 1)]; }
  T& front() { return (*this)[0]; }
  T& back() { return (*this)[n_ - 1]; }

  // The caller keeps size() below capacity() (the window does).
  void push_back(T v) {
    (*this)[n_] = std::move(v);
    ++n_;
  }
  void pop_front() {
    front() = T();  // lets go of what the slot held now, not a lap later
    head_ = (head_ + 1) & (items_.size() - 1);
    --n_;
  }
  void clear() {
    while (n_ > 0) pop_front();
  }

 private:
  std::vector<T> items_;
  size_t head_ = 0;
  size_t n_ = 0;
};

}  // namespace genie::dataplane::dpdk
