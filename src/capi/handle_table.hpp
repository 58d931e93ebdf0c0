// The values behind the opaque C handles. A handle is not the address of its
// object: it encodes the object's kind, the slot that holds it in a table of
// that kind, and the slot's generation. Destroying an object empties its slot
// and bumps the generation, so a handle used after its destroy no longer
// matches the slot — even when the allocator has placed a new object at the
// old address, or the slot holds a new object — and the call gets
// GENIE_ERR_INVALID_HANDLE without touching freed memory. A slot whose
// generation is used up is retired, so no value is ever handed out twice.
//
// Layout of a handle value (64 bits): [kind:4][generation:34][slot:26].
// Kind is never 0, so no handle is NULL, and the top bits make every handle a
// non-canonical address: a handle never equals a real pointer, and a stray
// pointer passed as a handle is refused by its kind bits.
//
// Lookups take no lock: two dependent loads and a compare. Inserts and
// removes take the table's mutex (they allocate and free anyway).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/error.hpp"

namespace genie {

static_assert(sizeof(uintptr_t) == 8, "handle values need 64-bit pointers");

enum class HandleKind : uint64_t { Config = 1, Context, Tensor, Graph, Future, Server, ServerConfig };

namespace handle_bits {
constexpr unsigned kSlotBits = 26, kGenBits = 34;
constexpr uint64_t kSlotMask = (uint64_t{1} << kSlotBits) - 1;
constexpr uint64_t kGenMask = (uint64_t{1} << kGenBits) - 1;
constexpr unsigned kKindShift = kSlotBits + kGenBits;
constexpr uint64_t kind_of(uint64_t h) { return h >> kKindShift; }
constexpr uint64_t slot_of(uint64_t h) { return h & kSlotMask; }
constexpr uint64_t gen_of(uint64_t h) { return (h >> kSlotBits) & kGenMask; }
}  // namespace handle_bits

// The live objects of one kind, owned by the table until removed.
// Thread-safe. A caller that destroys a handle while another thread is still
// inside a call with it races, as with free(); everything else is safe.
template <class T, HandleKind K>
class HandleTable {
 public:
  // The table of this kind. Never destroyed: a handle may be released by a
  // static destructor that runs after this one would have.
  static HandleTable& instance() {
    static HandleTable* t = new HandleTable();
    return *t;
  }

  // Takes `obj` and returns its new handle value. Throws OUT_OF_MEMORY when
  // every slot of the kind is in use.
  uint64_t insert(std::unique_ptr<T> obj) {
    std::lock_guard<std::mutex> lk(mu_);
    uint64_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else {
      check(next_ <= handle_bits::kSlotMask, GENIE_ERR_OUT_OF_MEMORY, "too many live handles of one kind");
      slot = next_;
      std::atomic<Slot*>& page = pages_[slot >> kPageBits];
      if (page.load(std::memory_order_relaxed) == nullptr)
        page.store(new Slot[kPageSize], std::memory_order_release);
      ++next_;
    }
    Slot& s = at(slot);
    const uint64_t h =
        (static_cast<uint64_t>(K) << handle_bits::kKindShift) | (s.next_gen << handle_bits::kSlotBits) | slot;
    s.obj.store(obj.release(), std::memory_order_seq_cst);
    s.handle.store(h, std::memory_order_seq_cst);
    return h;
  }

  // The live object of handle `h`, or null (another kind, never issued, or
  // already removed).
  T* find(uint64_t h) const noexcept {
    if (handle_bits::kind_of(h) != static_cast<uint64_t>(K)) return nullptr;
    const uint64_t slot = handle_bits::slot_of(h);
    const Slot* page = pages_[slot >> kPageBits].load(std::memory_order_acquire);
    if (page == nullptr) return nullptr;
    const Slot& s = page[slot & (kPageSize - 1)];
    // Object first, then the handle: a slot emptied and refilled in between
    // no longer shows `h`, so the object read is never another handle's.
    T* obj = s.obj.load(std::memory_order_seq_cst);
    return s.handle.load(std::memory_order_seq_cst) == h ? obj : nullptr;
  }

  // Whether `h` is of this kind (live or not): tells a destroyed handle
  // from one of another kind in error messages.
  static bool is_kind(uint64_t h) noexcept { return handle_bits::kind_of(h) == static_cast<uint64_t>(K); }

  // Empties the slot of `h` and hands its object back; null if `h` is not
  // live (so a second destroy of the same handle does nothing).
  std::unique_ptr<T> remove(uint64_t h) noexcept {
    if (!is_kind(h)) return nullptr;
    std::lock_guard<std::mutex> lk(mu_);
    const uint64_t slot = handle_bits::slot_of(h);
    if (slot >= next_) return nullptr;
    Slot& s = at(slot);
    if (s.handle.load(std::memory_order_relaxed) != h) return nullptr;
    s.handle.store(0, std::memory_order_seq_cst);
    std::unique_ptr<T> obj(s.obj.exchange(nullptr, std::memory_order_seq_cst));
    if (s.next_gen < handle_bits::kGenMask) {
      ++s.next_gen;
      free_.push_back(slot);  // reused at once: the free list never grows past the peak of live objects
    }
    return obj;
  }

 private:
  static constexpr unsigned kPageBits = 13;
  static constexpr uint64_t kPageSize = uint64_t{1} << kPageBits;
  static constexpr uint64_t kPages = (handle_bits::kSlotMask + 1) >> kPageBits;

  struct Slot {
    std::atomic<uint64_t> handle{0};  // the live handle, 0 when empty
    std::atomic<T*> obj{nullptr};
    uint64_t next_gen = 0;  // generation of the next object here; under mu_
  };

  HandleTable() = default;
  Slot& at(uint64_t slot) const {
    return pages_[slot >> kPageBits].load(std::memory_order_relaxed)[slot & (kPageSize - 1)];
  }

  mutable std::mutex mu_;
  uint64_t next_ = 0;           // slots ever used; under mu_
  std::vector<uint64_t> free_;  // empty slots to reuse; under mu_
  // Pages are allocated on first use and kept for the life of the process
  // (reachable from here), so a lookup never reads freed memory.
  std::atomic<Slot*> pages_[kPages] = {};
};

}  // namespace genie
