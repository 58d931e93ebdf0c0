// The other servers of a cluster on etcd as workers: the contract is in
// cluster_peers.hpp.
#include "server/cluster_peers.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "cluster/types.hpp"
#include "control/client.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "dataplane/transport.hpp"
#include "server/master.hpp"
#include "server/multinode.hpp"

namespace genie {

namespace {

constexpr int64_t kFirstRetryMs = 500;
constexpr int64_t kMaxRetryMs = 10000;

double positive(const cJSON* o, const char* key, bool required) {
  const cJSON* v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!v) {
    check(!required, GENIE_ERR_PROTOCOL, "the registered profile has no '", key, "'");
    return 0;
  }
  check(cJSON_IsNumber(v), GENIE_ERR_PROTOCOL, "the registered profile's '", key, "' is not a number");
  const double d = v->valuedouble;
  check(std::isfinite(d) && (d > 0 || (!required && d == 0)), GENIE_ERR_INVALID_ARGUMENT,
        "the registered profile's '", key, "' is ", d, " (a positive, finite number is needed)");
  return d;
}

}  // namespace

std::string profile_to_json(const sched::DeviceProfile& p) {
  JsonPtr j = json_object();
  cJSON_AddStringToObject(j.get(), "device", p.device.empty() ? "cpu:0" : p.device.c_str());
  cJSON_AddNumberToObject(j.get(), "peak_flops", p.peak_flops);
  cJSON_AddNumberToObject(j.get(), "vector_flops", p.vector_flops);
  cJSON_AddNumberToObject(j.get(), "mem_bw_bytes_per_s", p.mem_bw_bytes_per_s);
  cJSON_AddNumberToObject(j.get(), "mem_capacity_bytes", static_cast<double>(p.mem_capacity_bytes));
  cJSON_AddNumberToObject(j.get(), "mem_budget_bytes", static_cast<double>(p.mem_budget_bytes));
  cJSON_AddNumberToObject(j.get(), "op_overhead_s", p.op_overhead_s);
  return json_text(j.get());
}

sched::DeviceProfile profile_from_json(const std::string& member_value) {
  JsonPtr j = json_parse(member_value, "a server's registered value");
  const cJSON* o = cJSON_GetObjectItemCaseSensitive(j.get(), "profile");
  check(cJSON_IsObject(o), GENIE_ERR_PROTOCOL, "the registered value has no 'profile' object");
  const cJSON* dev = cJSON_GetObjectItemCaseSensitive(o, "device");
  check(cJSON_IsString(dev), GENIE_ERR_PROTOCOL, "the registered profile has no 'device'");
  sched::DeviceProfile p;
  p.device = dev->valuestring;
  // Servers offer their CPU to each other, as workers do to a master.
  check(p.device == "cpu:0", GENIE_ERR_INVALID_ARGUMENT, "the registered profile is of device '", p.device,
        "' (servers offer cpu:0 to each other)");
  p.peak_flops = positive(o, "peak_flops", true);
  p.vector_flops = positive(o, "vector_flops", false);
  p.mem_bw_bytes_per_s = positive(o, "mem_bw_bytes_per_s", true);
  p.mem_capacity_bytes = static_cast<uint64_t>(positive(o, "mem_capacity_bytes", false));
  p.mem_budget_bytes = static_cast<uint64_t>(positive(o, "mem_budget_bytes", false));
  p.op_overhead_s = positive(o, "op_overhead_s", false);
  return p;
}

ClusterPeers::ClusterPeers(ClusterMaster& cluster, MultiNode& multinode)
    : cluster_(cluster), multinode_(multinode) {
  thread_ = std::thread([this] { run(); });
  cluster_.follow_servers([this](const std::string& id, const std::string& value) {
    std::lock_guard<std::mutex> lk(mu_);
    pending_[id] = Pending{value, Clock::now(), 0};
    cv_.notify_one();
  });
}

ClusterPeers::~ClusterPeers() {
  cluster_.follow_servers(nullptr);
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
  std::vector<std::string> ids;
  for (const auto& [id, p] : joined_) ids.push_back(id);
  for (const std::string& id : ids) drop(id, "this server is stopping");
}

void ClusterPeers::run() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    auto next = pending_.end();
    for (auto it = pending_.begin(); it != pending_.end(); ++it)
      if (next == pending_.end() || it->second.due < next->second.due) next = it;
    if (next == pending_.end()) {
      cv_.wait(lk);
      continue;
    }
    if (next->second.due > Clock::now()) {
      cv_.wait_until(lk, next->second.due);
      continue;
    }
    const std::string id = next->first;
    Pending word = std::move(next->second);
    pending_.erase(next);
    lk.unlock();
    bool done = true;
    try {
      done = apply(id, word.value);
    } catch (const std::exception& e) {
      log(LogLevel::Error, "cluster: following server ", id, " failed: ", e.what());
    }
    lk.lock();
    // A newer word on this server arrived meanwhile: it is the one to apply.
    if (!done && !stop_ && !pending_.count(id)) {
      word.backoff_ms = word.backoff_ms == 0 ? kFirstRetryMs : std::min(word.backoff_ms * 2, kMaxRetryMs);
      word.due = Clock::now() + std::chrono::milliseconds(word.backoff_ms);
      pending_[id] = std::move(word);
    }
  }
}

bool ClusterPeers::apply(const std::string& id, const std::string& value) {
  if (value.empty()) {
    drop(id,
         "its key left the cluster store: its lease expired (the server died or was cut off from etcd) or it "
         "stopped; it is used again once it registers again");
    return true;
  }
  NodeStatus st;
  sched::DeviceProfile profile;
  std::string host;
  int port = 0;
  try {
    st = node_from_json(json_parse(value, "a server's registered value").get());
    profile = profile_from_json(value);
    dataplane::split_address(st.listen, &host, &port);
    check(port > 0 && !host.empty(), GENIE_ERR_PROTOCOL, "its listen address '", st.listen,
          "' is not host:port");
  } catch (const Error& e) {
    log(LogLevel::Warn, "cluster: server ", id,
        " is not used: its registration does not say how: ", e.detail());
    drop(id, cat("its registration could not be used: ", e.detail()));
    return true;
  }
  auto it = joined_.find(id);
  if (it != joined_.end() && it->second->listen == st.listen) {
    // Its value changed (health, GPUs), or it registered again: the session
    // there still serves unless it was lost meanwhile.
    try {
      if (multinode_.client_of(id)->connected()) return true;
    } catch (const Error&) {
    }
  }
  if (it == joined_.end() && joined_.size() >= kMaxPeers) {
    log(LogLevel::Warn, "cluster: server ", id, " is not used for placement: this server already places on ",
        kMaxPeers, " others");
    return true;
  }
  if (it != joined_.end()) drop(id, "it registered again");
  auto peer = std::make_unique<Peer>();
  peer->listen = st.listen;
  try {
    multinode_.join(id, host, port, {profile}, peer.get());
  } catch (const Error& e) {
    log(LogLevel::Warn, "cluster: server ", id, " at ", st.listen, " could not be added for placement (",
        e.detail(), "); trying again while its key lives");
    return false;
  }
  log(LogLevel::Info, "cluster: server ", id, " at ", st.listen, " added: stages may be placed there");
  joined_[id] = std::move(peer);
  return true;
}

void ClusterPeers::drop(const std::string& id, const std::string& why) {
  auto it = joined_.find(id);
  if (it == joined_.end()) return;
  // Its client goes with the last reference to it (a graph still using it
  // keeps it until it ends); dropping may block on a goodbye: this thread.
  if (multinode_.leave(it->second.get(), why))
    log(LogLevel::Info, "cluster: server ", id, " no longer used for placement: ", why);
  joined_.erase(it);
}

}  // namespace genie
