#include "dataplane/loop_hooks.hpp"

#include <exception>
#include <map>
#include <mutex>
#include <vector>

#include "core/log.hpp"

namespace genie::dataplane {
namespace {

struct Table {
  std::mutex mu;
  std::map<uv_loop_t*, std::map<uint64_t, std::function<void()>>> hooks;
  uint64_t next = 1;
};

thread_local uint64_t tls_frames_received = 0;

Table& table() {
  static Table* t = new Table;  // never destroyed: hooks may be removed during static destruction
  return *t;
}

}  // namespace

uint64_t add_close_hook(uv_loop_t* loop, std::function<void()> fn) {
  Table& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  const uint64_t id = t.next++;
  t.hooks[loop].emplace(id, std::move(fn));
  return id;
}

void remove_close_hook(uv_loop_t* loop, uint64_t id) {
  Table& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  auto it = t.hooks.find(loop);
  if (it == t.hooks.end()) return;
  it->second.erase(id);
  if (it->second.empty()) t.hooks.erase(it);
}

void run_close_hooks(uv_loop_t* loop) {
  // Hooks remove themselves (or others) and may add new ones: iterate over a
  // snapshot of ids, calling a copy of each function outside the lock.
  Table& t = table();
  std::vector<uint64_t> ids;
  {
    std::lock_guard<std::mutex> lk(t.mu);
    auto it = t.hooks.find(loop);
    if (it == t.hooks.end()) return;
    for (const auto& [id, fn] : it->second) ids.push_back(id);
  }
  for (uint64_t id : ids) {
    std::function<void()> fn;
    {
      std::lock_guard<std::mutex> lk(t.mu);
      auto it = t.hooks.find(loop);
      if (it == t.hooks.end()) return;
      auto h = it->second.find(id);
      if (h == it->second.end()) continue;
      fn = h->second;
    }
    if (!fn) continue;
    try {
      fn();
    } catch (const std::exception& e) {
      log(LogLevel::Error, "loop close hook threw: ", e.what());
    } catch (...) {
      log(LogLevel::Error, "loop close hook threw a non-standard exception");
    }
  }
}

void clear_close_hooks(uv_loop_t* loop) {
  Table& t = table();
  std::lock_guard<std::mutex> lk(t.mu);
  t.hooks.erase(loop);
}

uint64_t frames_received_here() { return tls_frames_received; }

void note_frame_received() { ++tls_frames_received; }

}  // namespace genie::dataplane
