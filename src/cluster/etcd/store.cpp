// The etcd v3 membership store (cluster/membership.hpp), a plugin
// (cluster/store_plugin.hpp): entries are keys /genie/<cluster>/nodes/<id>
// whose values are the nodes' JSON, written under etcd leases; create is a
// transaction that writes only if the key's create revision is 0 (absent);
// a watch is a thread that holds one /v3/watch stream from a revision and,
// when the stream breaks (etcd restarting, a partition), opens another
// from the revision after the last event it delivered. What it may have
// missed meanwhile, and revisions compacted before it read them (etcd
// cancels such a watch with compact_revision), it reports with a Resync
// event at the start of the next stream: the caller lists again
// (cluster/member_cache.hpp).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "cluster/etcd/gateway.hpp"
#include "cluster/store_plugin.hpp"
#include "core/error.hpp"

namespace genie::etcd {

namespace {

// One past the last key with `prefix` (etcd's range_end for a prefix).
std::string prefix_end(std::string p) {
  while (!p.empty()) {
    if (static_cast<unsigned char>(p.back()) < 0xff) {
      p.back() = static_cast<char>(p.back() + 1);
      return p;
    }
    p.pop_back();
  }
  return std::string(1, '\0');
}

std::string json_of(const Json& j) {
  std::unique_ptr<char, void (*)(void*)> text(cJSON_PrintUnformatted(j.get()), cJSON_free);
  check(text != nullptr, GENIE_ERR_OUT_OF_MEMORY, "etcd: a request could not be encoded");
  return text.get();
}

Json object() {
  Json j(cJSON_CreateObject());
  check(j != nullptr, GENIE_ERR_OUT_OF_MEMORY, "etcd: no memory for a request");
  return j;
}

void add_string(cJSON* o, const char* name, const std::string& v) { cJSON_AddStringToObject(o, name, v.c_str()); }

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 255) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

class EtcdStore final : public MembershipStore {
 public:
  EtcdStore(const StoreHost& host, const StoreOptions& o)
      : host_(host), cluster_(o.cluster), gw_(o.endpoints, o.timeout_ms), prefix_("/genie/" + o.cluster + "/nodes/") {
    check(valid_name(cluster_), GENIE_ERR_INVALID_ARGUMENT, "cluster name '", cluster_,
          "' may hold only [A-Za-z0-9._-] (1..255)");
    // One read now: an etcd that cannot be reached is an error at start,
    // naming its endpoints.
    list();
  }

  ~EtcdStore() override {
    std::vector<uint64_t> ids;
    {
      std::lock_guard<std::mutex> lk(mu_);
      for (const auto& [id, w] : watches_) ids.push_back(id);
    }
    for (uint64_t id : ids) unwatch(id);
  }

  uint64_t grant(int64_t ttl_ms) override {
    check(ttl_ms > 0, GENIE_ERR_INVALID_ARGUMENT, "lease TTL ", ttl_ms, " ms must be positive");
    Json req = object();
    cJSON_AddNumberToObject(req.get(), "TTL", static_cast<double>((ttl_ms + 999) / 1000));
    Json r = gw_.call("/v3/lease/grant", json_of(req));
    const int64_t id = int_field(r.get(), "ID");
    check(id > 0, GENIE_ERR_PROTOCOL, "etcd granted no lease: ", json_of(r));
    return static_cast<uint64_t>(id);
  }

  void renew(uint64_t lease) override {
    Json req = object();
    add_string(req.get(), "ID", std::to_string(lease));
    Json r = gw_.call("/v3/lease/keepalive", json_of(req));
    const cJSON* result = cJSON_GetObjectItemCaseSensitive(r.get(), "result");
    // An expired lease is kept alive with TTL 0 (absent in JSON).
    check(int_field(result, "TTL") > 0, GENIE_ERR_NOT_FOUND, "etcd lease ", lease, " has expired");
  }

  void revoke(uint64_t lease) override {
    Json req = object();
    add_string(req.get(), "ID", std::to_string(lease));
    try {
      gw_.call("/v3/lease/revoke", json_of(req));
    } catch (const Error& e) {
      if (e.code() != GENIE_ERR_NOT_FOUND) throw;
    }
  }

  void create(const std::string& id, const std::string& value, uint64_t lease) override {
    const std::string key = key_of(id);
    Json req = object();
    cJSON* cmp = cJSON_AddArrayToObject(req.get(), "compare");
    cJSON* c = cJSON_CreateObject();
    add_string(c, "key", b64(key));
    add_string(c, "target", "CREATE");
    add_string(c, "result", "EQUAL");
    add_string(c, "create_revision", "0");
    cJSON_AddItemToArray(cmp, c);
    cJSON* ok = cJSON_AddArrayToObject(req.get(), "success");
    cJSON* op = cJSON_CreateObject();
    cJSON_AddItemToObject(op, "request_put", put_request(key, value, lease).release());
    cJSON_AddItemToArray(ok, op);
    Json r = gw_.call("/v3/kv/txn", json_of(req));
    check(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r.get(), "succeeded")), GENIE_ERR_INVALID_ARGUMENT,
          "node id '", id, "' is already registered by a live node in cluster '", cluster_, "' (etcd at ",
          gw_.endpoints_text(), ", key ", key,
          "): give this server another node id, or wait for the other's lease to expire");
  }

  void put(const std::string& id, const std::string& value, uint64_t lease) override {
    gw_.call("/v3/kv/put", json_of(put_request(key_of(id), value, lease)));
  }

  void remove(const std::string& id) override {
    Json req = object();
    add_string(req.get(), "key", b64(key_of(id)));
    gw_.call("/v3/kv/deleterange", json_of(req));
  }

  MemberSnapshot list() override {
    Json req = object();
    add_string(req.get(), "key", b64(prefix_));
    add_string(req.get(), "range_end", b64(prefix_end(prefix_)));
    Json r = gw_.call("/v3/kv/range", json_of(req));
    MemberSnapshot s;
    s.revision = int_field(cJSON_GetObjectItemCaseSensitive(r.get(), "header"), "revision");
    const cJSON* kvs = cJSON_GetObjectItemCaseSensitive(r.get(), "kvs");
    const cJSON* kv = nullptr;
    cJSON_ArrayForEach(kv, kvs) {
      const std::string key = unb64(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(kv, "key")));
      if (key.rfind(prefix_, 0) != 0) continue;
      s.members.push_back({key.substr(prefix_.size()),
                           unb64(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(kv, "value"))),
                           int_field(kv, "mod_revision")});
    }
    return s;
  }

  uint64_t watch(int64_t from_revision, MemberWatchFn fn) override {
    check(fn != nullptr, GENIE_ERR_INVALID_ARGUMENT, "a watch needs a callback");
    auto w = std::make_shared<Watch>();
    w->fn = std::move(fn);
    w->next = std::max<int64_t>(from_revision, 1);
    std::lock_guard<std::mutex> lk(mu_);
    const uint64_t id = next_watch_++;
    w->thread = std::thread([this, w] { run(*w); });
    watches_[id] = w;
    return id;
  }

  void unwatch(uint64_t watch_id) override {
    std::shared_ptr<Watch> w;
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = watches_.find(watch_id);
      if (it == watches_.end()) return;
      w = it->second;
      watches_.erase(it);
    }
    {
      std::lock_guard<std::mutex> lk(w->mu);
      w->stop = true;
    }
    w->cv.notify_all();
    if (w->thread.get_id() == std::this_thread::get_id())
      w->thread.detach();  // from its own callback: it ends after it
    else
      w->thread.join();
  }

  std::string describe() const override {
    return cat("etcd at ", gw_.endpoints_text(), " (cluster '", cluster_, "')");
  }

 private:
  struct Watch {
    MemberWatchFn fn;
    int64_t next = 1;  // the first revision not delivered yet
    // The next stream starts with a Resync (the last one broke or was
    // compacted away); the watch thread only.
    bool resync_due = false;
    std::atomic<bool> stop{false};
    std::mutex mu;
    std::condition_variable cv;
    std::thread thread;
  };

  std::string key_of(const std::string& id) const {
    check(valid_name(id), GENIE_ERR_INVALID_ARGUMENT, "member id '", id, "' may hold only [A-Za-z0-9._-] (1..255)");
    return prefix_ + id;
  }

  Json put_request(const std::string& key, const std::string& value, uint64_t lease) const {
    Json p = object();
    add_string(p.get(), "key", b64(key));
    add_string(p.get(), "value", b64(value));
    add_string(p.get(), "lease", std::to_string(lease));
    return p;
  }

  // A watch's thread: one stream at a time, resumed after each break.
  void run(Watch& w) {
    int failures = 0;
    while (!w.stop) {
      Json req = object();
      cJSON* c = cJSON_AddObjectToObject(req.get(), "create_request");
      add_string(c, "key", b64(prefix_));
      add_string(c, "range_end", b64(prefix_end(prefix_)));
      add_string(c, "start_revision", std::to_string(w.next));
      try {
        gw_.stream("/v3/watch", json_of(req), [&](const cJSON* msg) { return on_message(w, msg, failures); },
                   w.stop);
      } catch (const std::exception& e) {
        w.resync_due = true;
        if (failures++ == 0)
          host_.log(LogLevel::Warn, cat("etcd: the membership watch broke (", e.what(),
                                        "); serving from the last view and retrying"));
      }
      // Back off a little (at most 1 s), waking at once for unwatch.
      std::unique_lock<std::mutex> lk(w.mu);
      w.cv.wait_for(lk, std::chrono::milliseconds(std::min(100 * (failures + 1), 1000)), [&] { return w.stop.load(); });
    }
  }

  bool on_message(Watch& w, const cJSON* msg, int& failures) {
    const cJSON* result = cJSON_GetObjectItemCaseSensitive(msg, "result");
    if (result == nullptr) return !w.stop;
    if (failures > 0) {
      host_.log(LogLevel::Info, "etcd: the membership watch is back");
      failures = 0;
    }
    const int64_t compacted = int_field(result, "compact_revision");
    if (compacted > 0) {
      // etcd no longer has what came between: resume where it can, and
      // have the caller list again.
      host_.log(LogLevel::Warn, cat("etcd: revisions before ", compacted,
                                    " were compacted before the membership watch read them; listing again"));
      w.next = std::max(w.next, compacted);
      w.resync_due = true;
      return false;
    }
    if (w.resync_due) {
      const int64_t now = int_field(cJSON_GetObjectItemCaseSensitive(result, "header"), "revision");
      // A restored or wiped etcd: its history is not the one watched, and
      // a watch from our revision would wait for one it may never reach.
      const bool went_back = now > 0 && now + 1 < w.next;
      if (went_back) w.next = now + 1;
      try {
        w.fn(MemberEvent{MemberEvent::Kind::Resync, {}, {}, now});
      } catch (const std::exception& x) {
        host_.log(LogLevel::Warn,
                  cat("etcd: the membership watch's Resync failed (", x.what(), "); retrying"));
        failures = 1;
        return false;
      }
      w.resync_due = false;
      if (went_back) return false;
    }
    const cJSON* ev = nullptr;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItemCaseSensitive(result, "events")) {
      if (w.stop) return false;
      const cJSON* kv = cJSON_GetObjectItemCaseSensitive(ev, "kv");
      const cJSON* type = cJSON_GetObjectItemCaseSensitive(ev, "type");
      MemberEvent e;
      e.kind = cJSON_IsString(type) && std::string(type->valuestring) == "DELETE" ? MemberEvent::Kind::Delete
                                                                                 : MemberEvent::Kind::Put;
      const std::string key = unb64(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(kv, "key")));
      e.revision = int_field(kv, "mod_revision");
      if (e.revision >= w.next) w.next = e.revision + 1;
      if (key.rfind(prefix_, 0) != 0) continue;
      e.id = key.substr(prefix_.size());
      if (e.kind == MemberEvent::Kind::Put)
        e.value = unb64(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(kv, "value")));
      try {
        w.fn(e);
      } catch (const std::exception& x) {
        host_.log(LogLevel::Error, cat("etcd: a membership watch callback threw: ", x.what()));
      }
    }
    return !w.stop;
  }

  const StoreHost host_;
  const std::string cluster_;
  Gateway gw_;
  const std::string prefix_;
  std::mutex mu_;
  std::map<uint64_t, std::shared_ptr<Watch>> watches_;
  uint64_t next_watch_ = 1;
};

}  // namespace

}  // namespace genie::etcd

extern "C" __attribute__((visibility("default"))) const GenieStorePlugin* genie_store_plugin(void) {
  static const GenieStorePlugin plugin{
      genie::kStoreAbiVersion, "etcd",
      [](const genie::StoreHost* host, const genie::StoreOptions* opts) -> genie::MembershipStore* {
        return std::make_unique<genie::etcd::EtcdStore>(*host, *opts).release();
      }};
  return &plugin;
}
