#include "cluster/events.hpp"

#include <string>
#include <vector>

#include "core/error.hpp"

namespace genie {

uint64_t EventBus::subscribe(uint32_t mask, genie_event_fn fn, void* user) {
  check(fn != nullptr, GENIE_ERR_INVALID_ARGUMENT, "event callback is NULL");
  check(mask != 0, GENIE_ERR_INVALID_ARGUMENT, "event mask is 0: no event would be delivered");
  check((mask & ~static_cast<uint32_t>(GENIE_EVENT_ALL)) == 0, GENIE_ERR_INVALID_ARGUMENT, "event mask 0x",
        std::hex, mask, " has bits outside GENIE_EVENT_ALL (0xff)");
  std::lock_guard<std::mutex> lk(mu_);
  const uint64_t id = next_++;
  Sub s;
  s.mask = mask;
  s.fn = fn;
  s.user = user;
  subs_.emplace(id, s);
  return id;
}

void EventBus::wait_idle(std::unique_lock<std::mutex>& lk, uint64_t id) {
  // A callback may unsubscribe itself: it must not wait for its own return.
  cv_.wait(lk, [&] {
    auto it = subs_.find(id);
    return it == subs_.end() || !it->second.running || it->second.runner == std::this_thread::get_id();
  });
}

void EventBus::unsubscribe(uint64_t id) {
  std::unique_lock<std::mutex> lk(mu_);
  auto it = subs_.find(id);
  check(it != subs_.end() && it->second.fn != nullptr, GENIE_ERR_NOT_FOUND, "no subscription ", id,
        " (unknown, or already ended)");
  it->second.fn = nullptr;  // no new delivery starts
  wait_idle(lk, id);
  it = subs_.find(id);
  if (it != subs_.end() && !it->second.running) subs_.erase(it);
  // Still running: it is this thread's own callback; deliver() erases it.
}

size_t EventBus::deliver(uint64_t id, uint32_t type, const std::string& json) {
  genie_event_fn fn;
  void* user;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = subs_.find(id);
    if (it == subs_.end() || it->second.fn == nullptr || !(it->second.mask & type) || it->second.running)
      return 0;
    it->second.running = true;
    it->second.runner = std::this_thread::get_id();
    fn = it->second.fn;
    user = it->second.user;
  }
  fn(static_cast<genie_event_type_t>(type), json.c_str(), user);
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = subs_.find(id);
    if (it != subs_.end()) {
      it->second.running = false;
      if (it->second.fn == nullptr) subs_.erase(it);  // unsubscribed from inside
    }
  }
  cv_.notify_all();
  return 1;
}

size_t EventBus::publish(uint32_t type, const std::string& json) {
  std::vector<uint64_t> ids;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& [id, s] : subs_)
      if (s.fn && (s.mask & type)) ids.push_back(id);
  }
  size_t n = 0;
  for (uint64_t id : ids) n += deliver(id, type, json);
  return n;
}

size_t EventBus::publish_to(uint64_t id, uint32_t type, const std::string& json) {
  return deliver(id, type, json);
}

void EventBus::clear() {
  std::unique_lock<std::mutex> lk(mu_);
  for (auto& [id, s] : subs_) s.fn = nullptr;
  cv_.wait(lk, [&] {
    for (const auto& [id, s] : subs_)
      if (s.running && s.runner != std::this_thread::get_id()) return false;
    return true;
  });
  for (auto it = subs_.begin(); it != subs_.end();) it = it->second.running ? std::next(it) : subs_.erase(it);
}

size_t EventBus::size() const {
  std::lock_guard<std::mutex> lk(mu_);
  size_t n = 0;
  for (const auto& [id, s] : subs_) n += s.fn != nullptr;
  return n;
}

}  // namespace genie
