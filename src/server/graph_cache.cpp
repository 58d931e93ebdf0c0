#include "server/graph_cache.hpp"

#include <cstring>
#include <functional>

#include "core/error.hpp"

namespace genie {

namespace {

template <class T>
void append(std::string& out, T v) {
  char b[sizeof v];
  std::memcpy(b, &v, sizeof v);
  out.append(b, sizeof v);
}

}  // namespace

GraphCache::GraphCache(size_t max_entries, size_t max_bytes)
    : max_entries_(max_entries), max_bytes_(max_bytes) {}

void GraphCache::set_limits(size_t max_json_bytes, size_t max_nodes, std::string setting) {
  max_json_bytes_ = max_json_bytes;
  max_nodes_ = max_nodes;
  limit_setting_ = std::move(setting);
}

void GraphCache::check_limits(std::string_view json) const {
  check(max_json_bytes_ == 0 || json.size() <= max_json_bytes_, GENIE_ERR_TOO_LARGE, "graph JSON of ",
        json.size(), " bytes: this server parses at most ", max_json_bytes_, " bytes of graph (",
        limit_setting_, ")");
  if (max_nodes_ == 0) return;
  // Every node has an "op" key: an upper bound on the nodes, found without
  // parsing (a scan costs a millisecond or so per ten megabytes).
  size_t ops = 0;
  for (size_t at = json.find("\"op\""); at != std::string_view::npos; at = json.find("\"op\"", at + 4))
    if (++ops > max_nodes_) break;
  check(ops <= max_nodes_, GENIE_ERR_TOO_LARGE, "graph of more than ", max_nodes_,
        " nodes: this server runs at most ", max_nodes_, " nodes per graph (", limit_setting_, ")");
}

size_t GraphCache::KeyHash::operator()(const Key& k) const {
  const size_t a = std::hash<std::string_view>()(k.json);
  const size_t b = std::hash<std::string_view>()(k.bindings);
  return a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2));
}

// Length-prefixed, so that no two different binding lists encode alike
// (binding names come from the network and may hold any byte).
void GraphCache::encode_bindings(const std::vector<std::string>& names, const std::vector<TensorDesc>& descs,
                                 std::string* to) {
  std::string& out = *to;
  out.clear();
  out.reserve(names.size() * 48);
  append(out, static_cast<uint64_t>(names.size()));
  for (const std::string& name : names) {
    append(out, static_cast<uint64_t>(name.size()));
    out += name;
  }
  append(out, static_cast<uint64_t>(descs.size()));
  for (const TensorDesc& d : descs) {
    append(out, static_cast<int32_t>(d.dtype));
    append(out, static_cast<uint64_t>(d.shape.size()));
    for (int64_t dim : d.shape) append(out, dim);
  }
}

std::shared_ptr<const GraphCache::Entry> GraphCache::find(const std::string& json,
                                                          const std::vector<std::string>& names,
                                                          const std::vector<TensorDesc>& descs) {
  encode_bindings(names, descs, &key_);
  // The graph used last, again (a model's next step): comparing it costs
  // less than hashing the text.
  if (!lru_.empty() && lru_.front().bindings == key_ && lru_.front().json == json) {
    ++hits_;
    return lru_.front().entry;
  }
  if (auto it = index_.find(Key{json, key_}); it != index_.end()) {
    ++hits_;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->entry;
  }
  ++misses_;
  return nullptr;
}

std::shared_ptr<const GraphCache::Entry> GraphCache::load(const std::string& json,
                                                          const std::vector<std::string>& names,
                                                          const std::vector<TensorDesc>& descs) const {
  check_limits(json);
  std::unique_ptr<Graph> g = parse(json);
  check(max_nodes_ == 0 || g->nodes().size() <= max_nodes_, GENIE_ERR_TOO_LARGE, "graph of ",
        g->nodes().size(), " nodes: this server runs at most ", max_nodes_, " nodes per graph (",
        limit_setting_, ")");
  std::unordered_map<ValueId, Shape> shapes;
  auto made = std::make_shared<Entry>();
  Entry& e = *made;
  e.order = bind_inputs(*g, names, descs, &shapes);
  g->validate(&shapes);
  e.memory = run_memory(*g);
  e.graph = std::move(g);
  return made;
}

std::unique_ptr<Graph> GraphCache::parse(const std::string& json) const {
  {
    std::lock_guard<std::mutex> lk(parsed_mu_);
    for (auto it = parsed_.begin(); it != parsed_.end(); ++it) {
      if (it->json != json) continue;
      parsed_.splice(parsed_.begin(), parsed_, it);
      ++parses_saved_;
      return std::make_unique<Graph>(*parsed_.front().graph);
    }
  }
  std::unique_ptr<Graph> g = graph_from_json(json.data(), json.size());
  // As put(): a text that would take a large share of the budget is not kept.
  size_t cost = json.size();
  for (const Value& v : g->values())
    if (v.constant) cost += v.constant->nbytes();
  if (max_entries_ != 0 && cost <= max_bytes_ / 4) {
    auto kept = std::make_shared<const Graph>(*g);
    std::lock_guard<std::mutex> lk(parsed_mu_);
    parsed_.push_front(Parsed{json, std::move(kept), cost});
    parsed_bytes_ += cost;
    while (parsed_.size() > kParsedGraphs || parsed_bytes_ > max_bytes_ / 4) {
      parsed_bytes_ -= parsed_.back().cost;
      parsed_.pop_back();
    }
  }
  return g;
}

uint64_t GraphCache::parses_saved() const {
  std::lock_guard<std::mutex> lk(parsed_mu_);
  return parses_saved_;
}

void GraphCache::put(const std::string& json, const std::vector<std::string>& names,
                     const std::vector<TensorDesc>& descs, std::shared_ptr<const Entry> entry) {
  std::string bindings;
  encode_bindings(names, descs, &bindings);
  size_t cost = json.size() + bindings.size();
  for (const Value& v : entry->graph->values())
    if (v.constant) cost += v.constant->nbytes();
  // A graph that would take a large share of the budget would only evict
  // the graphs that do repeat; one kept meanwhile (parsed twice at once) is
  // not kept twice.
  if (max_entries_ == 0 || cost > max_bytes_ / 4 || index_.count(Key{json, bindings})) return;
  while (!lru_.empty() && (lru_.size() >= max_entries_ || bytes_ + cost > max_bytes_)) {
    const Node& last = lru_.back();
    index_.erase(Key{last.json, last.bindings});
    bytes_ -= last.cost;
    lru_.pop_back();
  }
  lru_.push_front(Node{json, std::move(bindings), std::move(entry), cost});
  const Node& n = lru_.front();
  index_.emplace(Key{n.json, n.bindings}, lru_.begin());
  bytes_ += cost;
}

std::shared_ptr<const GraphCache::Entry> GraphCache::get(const std::string& json,
                                                         const std::vector<std::string>& names,
                                                         const std::vector<TensorDesc>& descs) {
  if (std::shared_ptr<const Entry> hit = find(json, names, descs)) return hit;
  std::shared_ptr<const Entry> made = load(json, names, descs);
  put(json, names, descs, made);
  return made;
}

}  // namespace genie
