// A server's own entry in a shared membership store (etcd): registered
// once with a lease (create-if-absent), then kept alive from a thread of
// its own, off the server's loop, so that a slow or lost store never
// stalls serving (docs/cluster.md, "A cluster on etcd").
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "cluster/membership.hpp"

namespace genie {

class Registration {
 public:
  // Registers `id` with value() under a new lease of `ttl_ms`. Throws
  // INVALID_ARGUMENT when a live node holds `id`, and the store's errors
  // (CONNECTION naming its endpoints). Then, every third of the TTL, it
  // renews the lease and writes value() again when it has changed. When
  // the store cannot be reached it keeps trying (the key lives on until its
  // TTL runs out); when the lease has expired meanwhile it registers again.
  // `value` runs on the registration's thread.
  Registration(std::shared_ptr<MembershipStore> store, std::string id, std::function<std::string()> value,
               int64_t ttl_ms);
  // Stops renewing and revokes the lease: the entry goes at once.
  ~Registration();
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;

 private:
  void run();
  void tick();

  const std::shared_ptr<MembershipStore> store_;
  const std::string id_;
  const std::function<std::string()> value_;
  const int64_t ttl_ms_;
  uint64_t lease_ = 0;
  std::string written_;
  bool unreachable_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace genie
