// Subscribers to cluster events and their delivery.
//
// publish() runs each matching callback in turn on the calling thread (the
// context's loop thread). unsubscribe() guarantees that the callback never
// runs after it returns: it waits for a delivery in progress on another
// thread, and does not wait when called from that very delivery (a callback
// may end its own subscription).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>

#include "genie.h"

namespace genie {

class EventBus {
 public:
  // Throws INVALID_ARGUMENT for a NULL fn or a bad mask.
  uint64_t subscribe(uint32_t mask, genie_event_fn fn, void* user);
  // Throws NOT_FOUND for an unknown id.
  void unsubscribe(uint64_t id);
  // Delivers one event to every subscriber whose mask has `type`; returns
  // how many callbacks ran.
  size_t publish(uint32_t type, const std::string& json);
  // Delivers only to subscription `id` (if it still exists and wants it).
  size_t publish_to(uint64_t id, uint32_t type, const std::string& json);
  // Ends every subscription (context shutdown): waits for deliveries in
  // progress on other threads.
  void clear();
  size_t size() const;

 private:
  struct Sub {
    uint32_t mask;
    genie_event_fn fn;
    void* user;
    bool running = false;
    std::thread::id runner;
  };
  size_t deliver(uint64_t id, uint32_t type, const std::string& json);
  void wait_idle(std::unique_lock<std::mutex>& lk, uint64_t id);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Sub> subs_;
  uint64_t next_ = 1;
};

}  // namespace genie
