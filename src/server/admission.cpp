#include "server/admission.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace genie {

std::string source_of(const std::string& peer) {
  std::string a = peer;
  if (!a.empty() && a.front() == '[') {
    const size_t close = a.find(']');
    if (close != std::string::npos) a = a.substr(1, close - 1);
  } else if (std::count(a.begin(), a.end(), ':') == 1) {
    a = a.substr(0, a.find(':'));
  }
  if (a.rfind("::ffff:", 0) == 0 && a.find('.') != std::string::npos) a = a.substr(7);
  return a;
}

std::string Admission::admit(const std::string& source, genie_status_t* status, Clock::time_point now) {
  *status = GENIE_ERR_AUTH;
  auto b = backoff_.find(source);
  if (b != backoff_.end() && now < b->second.refused_until) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(b->second.refused_until - now);
    return cat(b->second.failures, " failed authentications from ", source,
               ": connections from it are refused for ", left.count() + 1, " ms more");
  }
  refill(now);
  if (global_allowance_ < 1 && good_.count(source) == 0) {
    const auto wait_ms = static_cast<int64_t>((1 - global_allowance_) * 1000 / kGlobalFailuresPerSecond) + 1;
    return cat(
        "too many failed authentications on this server from all sources: connections from addresses "
        "that have not authenticated lately are refused for ",
        wait_ms, " ms more");
  }
  *status = GENIE_ERR_CONNECTION;
  if (max_connections_ > 0 && total_ >= static_cast<size_t>(max_connections_))
    return cat("the server has ", total_, " connections, its limit (genie serve --max-connections)");
  int& mine = per_source_[source];
  if (max_per_source_ > 0 && mine >= max_per_source_) {
    return cat(
        source, " has ", max_per_source_,
        " connections to this server, the limit per address (genie serve --max-connections-per-source)");
  }
  ++mine;
  ++total_;
  *status = GENIE_OK;
  return {};
}

void Admission::vouch(const std::string& source) {
  auto it = per_source_.find(source);
  if (it == per_source_.end()) return;
  if (--it->second <= 0) per_source_.erase(it);
}

void Admission::release(const std::string& source, bool per_source) {
  if (total_ > 0) --total_;
  if (per_source) vouch(source);
}

void Admission::refill(Clock::time_point now) {
  if (refilled_ == Clock::time_point{}) refilled_ = now;
  const double s = std::chrono::duration<double>(now - refilled_).count();
  if (s <= 0) return;
  global_allowance_ = std::min(kGlobalFailureBurst, global_allowance_ + s * kGlobalFailuresPerSecond);
  refilled_ = now;
}

int64_t Admission::auth_failed(const std::string& source, Clock::time_point now) {
  refill(now);
  global_allowance_ = std::max(global_allowance_ - 1, -kGlobalFailureBurst);
  good_.erase(source);
  auto it = backoff_.find(source);
  if (it == backoff_.end()) {
    forget_stale(now);
    it = backoff_.emplace(source, Backoff{}).first;
  } else if (now - it->second.last_failure > std::chrono::milliseconds(kForgetMs)) {
    it->second = Backoff{};
  }
  Backoff& b = it->second;
  ++b.failures;
  b.last_failure = now;
  if (b.failures <= kFreeAuthFailures) return 0;
  const int doublings = std::min(b.failures - kFreeAuthFailures - 1, 20);
  const int64_t ms = std::min<int64_t>(kFirstBackoffMs << doublings, kMaxBackoffMs);
  b.refused_until = now + std::chrono::milliseconds(ms);
  return ms;
}

void Admission::auth_succeeded(const std::string& source, Clock::time_point now) {
  backoff_.erase(source);
  if (good_.size() >= kMaxRecords && good_.count(source) == 0) {
    auto oldest = std::min_element(good_.begin(), good_.end(),
                                   [](const auto& a, const auto& b) { return a.second < b.second; });
    good_.erase(oldest);
  }
  good_[source] = now;
}

void Admission::forget_stale(Clock::time_point now) {
  if (backoff_.size() < kMaxRecords) return;
  auto oldest = backoff_.end();
  for (auto it = backoff_.begin(); it != backoff_.end();) {
    if (now - it->second.last_failure > std::chrono::milliseconds(kForgetMs) &&
        now >= it->second.refused_until) {
      it = backoff_.erase(it);
      continue;
    }
    if (oldest == backoff_.end() || it->second.last_failure < oldest->second.last_failure) oldest = it;
    ++it;
  }
  if (backoff_.size() >= kMaxRecords && oldest != backoff_.end()) backoff_.erase(oldest);
}

}  // namespace genie
