#include "config.hpp"

#include <cjson/cJSON.h>

#include <algorithm>
#include <iterator>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "chakra.hpp"
#include "core/error.hpp"

namespace genie::replay {

const char* algo_name(Algo a) {
  switch (a) {
    case Algo::Ring: return "ring";
    case Algo::Direct: return "direct";
    case Algo::HalvingDoubling: return "halvingDoubling";
    case Algo::DoubleBinaryTree: return "doubleBinaryTree";
  }
  return "?";
}

namespace {

using JsonPtr = std::unique_ptr<cJSON, void (*)(cJSON*)>;

JsonPtr load_json(const std::string& path, const char* what) {
  const std::string text = read_whole_file(path, std::string(what) + " file");
  JsonPtr j(cJSON_Parse(text.c_str()), &cJSON_Delete);
  if (!j || !cJSON_IsObject(j.get())) fail(GENIE_ERR_PARSE, what, " file ", path, ": not a JSON object");
  return j;
}

Algo parse_algo(const std::string& path, const char* key, const std::string& s) {
  // ASTRA-sim's spellings, and a few obvious ones.
  if (s == "ring" || s == "oneRing" || s == "Ring") return Algo::Ring;
  if (s == "direct" || s == "oneDirect" || s == "Direct") return Algo::Direct;
  if (s == "halvingDoubling" || s == "oneHalvingDoubling" || s == "halving-doubling" || s == "hd")
    return Algo::HalvingDoubling;
  if (s == "doubleBinaryTree" || s == "double-binary-tree" || s == "dbt") return Algo::DoubleBinaryTree;
  fail(GENIE_ERR_PARSE, "system file ", path, ": ", key, ": unknown implementation '", s,
       "' (ring, direct, halvingDoubling, doubleBinaryTree)");
}

void read_algos(const std::string& path, cJSON* root, const char* key, std::vector<Algo>* out) {
  cJSON* v = cJSON_GetObjectItemCaseSensitive(root, key);
  if (!v) return;
  if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0)
    fail(GENIE_ERR_PARSE, "system file ", path, ": ", key, " must be a non-empty list of implementations");
  out->clear();
  cJSON* e;
  cJSON_ArrayForEach(e, v) {
    if (!cJSON_IsString(e)) fail(GENIE_ERR_PARSE, "system file ", path, ": ", key, " holds a non-string");
    out->push_back(parse_algo(path, key, e->valuestring));
  }
}

int read_count(const std::string& path, cJSON* root, const char* key, int fallback) {
  cJSON* v = cJSON_GetObjectItemCaseSensitive(root, key);
  if (!v) return fallback;
  if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > 4096 ||
      v->valuedouble != std::floor(v->valuedouble))
    fail(GENIE_ERR_PARSE, "system file ", path, ": ", key, " must be an integer in 1..4096");
  return v->valueint;
}

}  // namespace

int Topology::ranks() const {
  long long n = 1;
  for (int d : dims) n = std::min(n * d, 1LL << 30);  // load_topology refuses more than 65536
  return static_cast<int>(n);
}

SystemConfig load_system(const std::string& path) {
  JsonPtr j = load_json(path, "system");
  SystemConfig s;
  s.path = path;
  read_algos(path, j.get(), "all-reduce-implementation", &s.all_reduce);
  read_algos(path, j.get(), "all-gather-implementation", &s.all_gather);
  read_algos(path, j.get(), "reduce-scatter-implementation", &s.reduce_scatter);
  read_algos(path, j.get(), "all-to-all-implementation", &s.all_to_all);
  s.chunks = read_count(path, j.get(), "preferred-dataset-splits", 1);
  s.active_chunks = read_count(path, j.get(), "active-chunks-per-dimension", 1);
  if (cJSON* p = cJSON_GetObjectItemCaseSensitive(j.get(), "scheduling-policy")) {
    if (!cJSON_IsString(p) || (std::strcmp(p->valuestring, "LIFO") != 0 && std::strcmp(p->valuestring, "FIFO") != 0))
      fail(GENIE_ERR_PARSE, "system file ", path, ": scheduling-policy must be \"LIFO\" or \"FIFO\"");
    s.scheduling_policy = p->valuestring;
  }
  if (cJSON* g = cJSON_GetObjectItemCaseSensitive(j.get(), "genie-segment-bytes")) {
    if (!cJSON_IsNumber(g) || g->valuedouble < 4096 || g->valuedouble > double(1 << 30) ||
        g->valuedouble != std::floor(g->valuedouble))
      fail(GENIE_ERR_PARSE, "system file ", path, ": genie-segment-bytes must be an integer in 4096..1073741824");
    s.segment_bytes = static_cast<uint64_t>(g->valuedouble);
  }
  if (cJSON* d = cJSON_GetObjectItemCaseSensitive(j.get(), "endpoint-delay"); cJSON_IsNumber(d))
    s.endpoint_delay_ns = d->valuedouble;
  static const std::pair<const char*, CollType> kCustom[] = {
      {"all-reduce-implementation-custom", CollType::AllReduce},
      {"all-gather-implementation-custom", CollType::AllGather},
      {"reduce-scatter-implementation-custom", CollType::ReduceScatter},
      {"all-to-all-implementation-custom", CollType::AllToAll}};
  for (const auto& [key, type] : kCustom) {
    cJSON* v = cJSON_GetObjectItemCaseSensitive(j.get(), key);
    if (!v) continue;
    // ASTRA-sim's rule: one entry, whatever the dimensions (the traces
    // cover them all).
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 1 || !cJSON_IsString(cJSON_GetArrayItem(v, 0)) ||
        !*cJSON_GetArrayItem(v, 0)->valuestring)
      fail(GENIE_ERR_PARSE, "system file ", path, ": ", key,
           " must be a list of one trace prefix (PREFIX of PREFIX.<rank>.et)");
    s.custom[type] = cJSON_GetArrayItem(v, 0)->valuestring;
  }
  if (cJSON_GetObjectItemCaseSensitive(j.get(), "per-node-custom-implementation"))
    fail(GENIE_ERR_UNSUPPORTED, "system file ", path,
         ": per-node-custom-implementation is not supported by replay (the *-implementation-custom keys are)");
  return s;
}

Topology load_topology(const std::string& path) {
  JsonPtr j = load_json(path, "logical topology");
  Topology t;
  t.path = path;
  cJSON* dims = cJSON_GetObjectItemCaseSensitive(j.get(), "logical-dims");
  if (!cJSON_IsArray(dims) || cJSON_GetArraySize(dims) == 0)
    fail(GENIE_ERR_PARSE, "logical topology file ", path, ": needs \"logical-dims\": a non-empty list");
  cJSON* e;
  cJSON_ArrayForEach(e, dims) {
    // ASTRA-sim writes the sizes as strings ("4"); numbers are accepted too.
    long v = -1;
    if (cJSON_IsString(e)) {
      char* end = nullptr;
      v = std::strtol(e->valuestring, &end, 10);
      if (end == e->valuestring || *end) v = -1;
    } else if (cJSON_IsNumber(e) && e->valuedouble == std::floor(e->valuedouble)) {
      v = static_cast<long>(e->valuedouble);
    }
    if (v < 1 || v > 65536)
      fail(GENIE_ERR_PARSE, "logical topology file ", path, ": logical-dims entries must be integers in 1..65536");
    t.dims.push_back(static_cast<int>(v));
  }
  if (t.ranks() > 65536) fail(GENIE_ERR_PARSE, "logical topology file ", path, ": more than 65536 ranks");
  return t;
}

Topology load_network(const std::string& path) {
  const std::string text = read_whole_file(path, "network file");
  std::vector<std::string> lines;
  for (size_t at = 0; at <= text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(at, end - at);
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    lines.push_back(std::move(line));
    at = end + 1;
  }
  auto trim = [](std::string s) {
    const size_t b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos) return std::string();
    return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
  };
  auto bad = [&](const std::string& why) {
    fail(GENIE_ERR_PARSE, "network file ", path, ": npus_count ", why,
         " (replay reads the NPUs per dimension from it: npus_count: [ 4, 2 ] or a list of - N lines)");
  };
  Topology t;
  t.path = path;
  std::vector<std::string> items;
  bool found = false;
  for (size_t i = 0; i < lines.size() && !found; ++i) {
    const std::string l = trim(lines[i]);
    if (l.rfind("npus_count", 0) != 0) continue;
    std::string rest = trim(l.substr(10));
    if (rest.empty() || rest[0] != ':') continue;
    found = true;
    rest = trim(rest.substr(1));
    if (rest.empty()) {  // a block list
      for (size_t j = i + 1; j < lines.size(); ++j) {
        const std::string item = trim(lines[j]);
        if (item.empty()) continue;
        if (item[0] != '-') break;
        items.push_back(trim(item.substr(1)));
      }
    } else if (rest[0] == '[') {  // a flow list, perhaps over several lines
      std::string flow = rest.substr(1);
      for (size_t j = i + 1; flow.find(']') == std::string::npos && j < lines.size(); ++j) flow += "," + lines[j];
      const size_t close = flow.find(']');
      if (close == std::string::npos) bad("has no closing ]");
      flow.resize(close);
      for (size_t at = 0; at <= flow.size();) {
        size_t comma = flow.find(',', at);
        if (comma == std::string::npos) comma = flow.size();
        if (std::string item = trim(flow.substr(at, comma - at)); !item.empty()) items.push_back(item);
        at = comma + 1;
      }
    } else {
      items.push_back(rest);
    }
  }
  if (!found) fail(GENIE_ERR_PARSE, "network file ", path, ": no npus_count (replay reads the NPUs per dimension from it)");
  if (items.empty()) bad("is empty");
  for (const std::string& item : items) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (end == item.c_str() || *end || v < 1 || v > 65536) bad(cat("holds '", item, "', not an integer in 1..65536"));
    t.dims.push_back(static_cast<int>(v));
  }
  if (t.ranks() > 65536) bad("gives more than 65536 NPUs");
  return t;
}

uint32_t CommGroups::index(const std::string& id) const {
  auto it = groups.find(id);
  return it == groups.end() ? 0 : static_cast<uint32_t>(std::distance(groups.begin(), it)) + 1;
}

CommGroups load_comm_groups(const std::string& path, int ranks) {
  JsonPtr j = load_json(path, "communicator group");
  CommGroups g;
  g.path = path;
  cJSON* e;
  cJSON_ArrayForEach(e, j.get()) {
    const std::string id = e->string;
    if (!cJSON_IsArray(e) || cJSON_GetArraySize(e) == 0)
      fail(GENIE_ERR_PARSE, "communicator group file ", path, ": group '", id, "' must be a non-empty list of ranks");
    std::vector<int> members;
    cJSON* r;
    cJSON_ArrayForEach(r, e) {
      if (!cJSON_IsNumber(r) || r->valuedouble != std::floor(r->valuedouble) || r->valuedouble < 0 ||
          r->valuedouble >= ranks)
        fail(GENIE_ERR_PARSE, "communicator group file ", path, ": group '", id, "' holds something other than a rank ",
             "of this run (0..", ranks - 1, ")");
      const int rank = static_cast<int>(r->valuedouble);
      if (std::find(members.begin(), members.end(), rank) != members.end())
        fail(GENIE_ERR_PARSE, "communicator group file ", path, ": group '", id, "' names rank ", rank, " twice");
      members.push_back(rank);
    }
    if (!g.groups.emplace(id, std::move(members)).second)
      fail(GENIE_ERR_PARSE, "communicator group file ", path, ": group '", id, "' is defined twice");
  }
  if (g.groups.empty()) fail(GENIE_ERR_PARSE, "communicator group file ", path, ": no groups");
  if (g.groups.size() > 255)
    fail(GENIE_ERR_UNSUPPORTED, "communicator group file ", path, ": ", g.groups.size(), " groups, replay takes up to 255");
  return g;
}

MemoryConfig load_memory(const std::string& path) {
  JsonPtr j = load_json(path, "remote memory");
  MemoryConfig m;
  m.path = path;
  if (cJSON* t = cJSON_GetObjectItemCaseSensitive(j.get(), "memory-type")) {
    if (!cJSON_IsString(t)) fail(GENIE_ERR_PARSE, "remote memory file ", path, ": memory-type must be a string");
    m.type = t->valuestring;
  }
  if (m.type != "NO_MEMORY_EXPANSION")
    fail(GENIE_ERR_UNSUPPORTED, "remote memory file ", path, ": memory-type ", m.type,
         " is not supported by replay (only NO_MEMORY_EXPANSION)");
  return m;
}

}  // namespace genie::replay
