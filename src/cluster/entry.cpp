#include "cluster/entry.hpp"

#include <algorithm>

#include "cluster/store_plugin.hpp"
#include "cluster/types.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "dataplane/transport.hpp"

namespace genie {

namespace {

// FNV-1a: the same order in every build and process.
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

std::shared_ptr<MembershipStore> open_cluster_store(const Config& cfg) {
  check(!cfg.etcd_endpoints.empty(), GENIE_ERR_INVALID_ARGUMENT,
        "no etcd endpoints: set them with genie_config_set_etcd_endpoints or GENIE_ETCD_ENDPOINTS");
  return open_membership_store(
      "etcd", StoreOptions{cfg.etcd_endpoints, cfg.cluster, std::min<int64_t>(cfg.timeout_ms, 5000)});
}

std::string members_json(MembershipStore& store, const std::string& cluster) {
  const MemberSnapshot s = store.list();
  JsonPtr o = json_object();
  cJSON_AddStringToObject(o.get(), "store", store.describe().c_str());
  cJSON_AddStringToObject(o.get(), "cluster", cluster.c_str());
  cJSON_AddNumberToObject(o.get(), "revision", static_cast<double>(s.revision));
  JsonPtr list = json_array();
  for (const MemberEntry& m : s.members) {
    JsonPtr j;
    try {
      j = json_parse(m.value, "a member's status");
      check(cJSON_IsObject(j.get()), GENIE_ERR_PROTOCOL, "a member's status is not a JSON object");
    } catch (const Error& e) {
      j = json_object();
      cJSON_AddStringToObject(j.get(), "error", e.detail().c_str());
    }
    cJSON_DeleteItemFromObjectCaseSensitive(j.get(), "id");
    cJSON_AddStringToObject(j.get(), "id", m.id.c_str());
    cJSON_AddNumberToObject(j.get(), "revision", static_cast<double>(m.revision));
    cJSON_AddItemToArray(list.get(), j.release());
  }
  cJSON_AddItemToObject(o.get(), "members", list.release());
  return json_text(o.get());
}

std::vector<EntryServer> entry_servers(const Config& cfg, const std::string& client_node) {
  std::shared_ptr<MembershipStore> store = open_cluster_store(cfg);
  struct Ranked {
    EntryServer server;
    int health;
    uint64_t rank;
  };
  std::vector<Ranked> found;
  for (const MemberEntry& m : store->list().members) {
    try {
      JsonPtr j = json_parse(m.value, "a member's status");
      const NodeStatus n = node_from_json(j.get());
      if (n.role != GENIE_NODE_ROLE_SERVER || n.listen.empty()) continue;
      EntryServer s{m.id, {}, 0, 0};
      dataplane::split_address(n.listen, &s.host, &s.port);
      const cJSON* ttl = cJSON_GetObjectItemCaseSensitive(j.get(), "lease_ttl_ms");
      if (cJSON_IsNumber(ttl) && ttl->valuedouble >= 1000 && ttl->valuedouble <= 3600000)
        s.lease_ttl_ms = static_cast<int64_t>(ttl->valuedouble);
      if (s.host.empty() || s.port <= 0) continue;
      found.push_back({std::move(s), static_cast<int>(n.health), fnv1a(cat(client_node, "/", m.id))});
    } catch (const Error& e) {
      log(LogLevel::Warn, "cluster: member ", m.id, " of ", store->describe(), " skipped: ", e.detail());
    }
  }
  check(!found.empty(), GENIE_ERR_NOT_FOUND, "no Genie server is registered in ", store->describe(),
        ": start one with genie serve --etcd ... --cluster ", cfg.cluster);
  std::sort(found.begin(), found.end(), [](const Ranked& a, const Ranked& b) {
    return a.health != b.health ? a.health < b.health : a.rank < b.rank;
  });
  std::vector<EntryServer> out;
  for (Ranked& r : found) out.push_back(std::move(r.server));
  return out;
}

}  // namespace genie
