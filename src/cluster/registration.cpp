#include "cluster/registration.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/log.hpp"

namespace genie {

Registration::Registration(std::shared_ptr<MembershipStore> store, std::string id,
                           std::function<std::string()> value, int64_t ttl_ms)
    : store_(std::move(store)), id_(std::move(id)), value_(std::move(value)), ttl_ms_(ttl_ms) {
  lease_ = store_->grant(ttl_ms_);
  written_ = value_();
  try {
    store_->create(id_, written_, lease_);
  } catch (...) {
    try {
      store_->revoke(lease_);
    } catch (const std::exception&) {
    }
    throw;
  }
  log(LogLevel::Info, "cluster: node ", id_, " registered in ", store_->describe(), " (lease TTL ", ttl_ms_,
      " ms)");
  thread_ = std::thread([this] { run(); });
}

Registration::~Registration() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  try {
    store_->revoke(lease_);
  } catch (const std::exception& e) {
    log(LogLevel::Warn, "cluster: node ", id_, " could not leave ", store_->describe(), " at once (", e.what(),
        "): its entry goes when its lease expires");
  }
}

void Registration::run() {
  const auto period = std::chrono::milliseconds(std::max<int64_t>(ttl_ms_ / 3, 100));
  std::unique_lock<std::mutex> lk(mu_);
  while (!cv_.wait_for(lk, period, [&] { return stop_; })) {
    lk.unlock();
    tick();
    lk.lock();
  }
}

void Registration::tick() {
  try {
    bool fresh = false;
    try {
      store_->renew(lease_);
    } catch (const Error& e) {
      if (e.code() != GENIE_ERR_NOT_FOUND) throw;
      // Expired while the store was out of reach (or this process was
      // stopped): register again, unless another node took the id.
      lease_ = store_->grant(ttl_ms_);
      fresh = true;
    }
    const std::string v = value_();
    if (fresh) {
      store_->create(id_, v, lease_);
      log(LogLevel::Warn, "cluster: node ", id_, "'s lease had expired: registered again in ",
          store_->describe());
    } else if (v != written_) {
      store_->put(id_, v, lease_);
    }
    written_ = v;
    if (unreachable_) log(LogLevel::Info, "cluster: ", store_->describe(), " reachable again");
    unreachable_ = false;
  } catch (const std::exception& e) {
    if (!unreachable_)
      log(LogLevel::Warn, "cluster: node ", id_, " cannot renew its registration (", e.what(),
          "): serving on, from the last view of the cluster; retrying every ", ttl_ms_ / 3, " ms");
    unreachable_ = true;
  }
}

}  // namespace genie
