// The waits for workers' stages: the contract is in stage_waits.hpp.
#include "server/stage_waits.hpp"

#include <algorithm>
#include <vector>

#include "core/error.hpp"

namespace genie {

StageWaits::StageWaits(size_t max_per_session)
    : max_per_session_(std::max<size_t>(max_per_session, 1)), timer_([this] { run(); }) {}

StageWaits::~StageWaits() {
  stop();
  timer_.join();
}

uint64_t StageWaits::add(uint64_t session, Clock::time_point deadline, Expire expire,
                         const std::string& what) {
  std::lock_guard<std::mutex> lk(mu_);
  check(!stopping_, GENIE_ERR_SHUTDOWN, what, ": not sent, the server is stopping");
  size_t& n = per_session_[session];
  if (n >= max_per_session_)
    fail(GENIE_ERR_OUT_OF_MEMORY, what, ": not sent, this session has ", n,
         " stages waiting on workers already, the most one session may have at once "
         "(GENIE_SESSION_MAX_STAGES); it can be submitted again once one of them "
         "completes or reaches its deadline");
  ++n;
  const uint64_t id = next_id_++;
  waits_.emplace(id, Wait{session, deadline, std::move(expire)});
  const bool earliest = by_deadline_.empty() || deadline < by_deadline_.begin()->first;
  by_deadline_.emplace(deadline, id);
  if (earliest) cv_.notify_one();
  return id;
}

StageWaits::Expire StageWaits::take(std::unordered_map<uint64_t, Wait>::iterator it) {
  Wait& w = it->second;
  auto range = by_deadline_.equal_range(w.deadline);
  for (auto d = range.first; d != range.second; ++d)
    if (d->second == it->first) {
      by_deadline_.erase(d);
      break;
    }
  if (auto s = per_session_.find(w.session); s != per_session_.end() && --s->second == 0)
    per_session_.erase(s);
  Expire e = std::move(w.expire);
  waits_.erase(it);
  return e;
}

bool StageWaits::finish(uint64_t id) {
  Expire dropped;  // destroyed outside the lock
  std::lock_guard<std::mutex> lk(mu_);
  auto it = waits_.find(id);
  if (it == waits_.end()) return false;
  dropped = take(it);
  return true;
}

void StageWaits::stop() {
  std::vector<Expire> ended;
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
    while (!waits_.empty()) ended.push_back(take(waits_.begin()));
  }
  cv_.notify_all();
  for (Expire& e : ended) e(true);
}

size_t StageWaits::waiting(uint64_t session) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = per_session_.find(session);
  return it == per_session_.end() ? 0 : it->second;
}

void StageWaits::run() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!stopping_) {
    if (by_deadline_.empty()) {
      cv_.wait(lk);
      continue;
    }
    const Clock::time_point next = by_deadline_.begin()->first;
    if (Clock::now() < next) {
      cv_.wait_until(lk, next);
      continue;
    }
    Expire e = take(waits_.find(by_deadline_.begin()->second));
    lk.unlock();
    e(false);
    e = nullptr;
    lk.lock();
  }
}

}  // namespace genie
