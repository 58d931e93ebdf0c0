// Parsed and validated graphs of recent submissions, for `genie serve`.
//
// A client running a model submits the same graph again and again with new
// data. Parsing its JSON, binding and validating it costs more than running
// a tiny graph, so the server keeps the result keyed by the exact graph JSON
// and the bindings (names, dtypes and shapes, in the order sent): what
// validation depends on. A validated graph is immutable and shared
// (shared_ptr<const Graph>) by every run of it, across sessions: it holds no
// session's data. The cache is bounded in entries and in bytes (the JSON and
// the graph's constants); the least recently used entry goes first. Not
// thread-safe, but for load(): the server looks up and keeps entries on its
// loop thread, and parses large graphs elsewhere (load) so that its loop
// never waits for a parse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "exec/run_memory.hpp"
#include "graph/binding.hpp"
#include "graph/graph.hpp"

namespace genie {

class GraphCache {
 public:
  struct Entry {
    std::shared_ptr<const Graph> graph;  // validated with the bound shapes
    std::vector<size_t> order;           // bind_inputs: binding index of each graph input
    RunMemory memory;                    // what a run of it holds (run_memory)
  };

  static constexpr size_t kDefaultEntries = 64;
  static constexpr size_t kDefaultBytes = size_t{64} << 20;

  explicit GraphCache(size_t max_entries = kDefaultEntries, size_t max_bytes = kDefaultBytes);

  // The graph of `json` bound as names[i] -> a tensor described by descs[i]:
  // from the cache, or parsed (graph_from_json), bound (bind_inputs) and
  // validated now and kept. Throws what those throw; a failure is not kept.
  // The entry is shared with the cache: a hit copies nothing.
  std::shared_ptr<const Entry> get(const std::string& json, const std::vector<std::string>& names,
                                   const std::vector<TensorDesc>& descs);
  // get() in its three steps, for a caller that parses elsewhere: the
  // cached entry, or null (counted as a hit or a miss); the entry parsed,
  // bound and validated now (throws as get(); any thread, concurrently with
  // anything but set_limits); and keeping an entry that load() made.
  std::shared_ptr<const Entry> find(const std::string& json, const std::vector<std::string>& names,
                                    const std::vector<TensorDesc>& descs);
  std::shared_ptr<const Entry> load(const std::string& json, const std::vector<std::string>& names,
                                    const std::vector<TensorDesc>& descs) const;
  void put(const std::string& json, const std::vector<std::string>& names,
           const std::vector<TensorDesc>& descs, std::shared_ptr<const Entry> entry);

  // Bounds on a graph parsed here (0: none): its JSON's bytes and its
  // nodes. Checked before parsing (the nodes by counting "op" keys, which
  // every node has) and after; past one, get(), load() and check_limits() throw
  // Error(TOO_LARGE) naming the limit and `setting`, the option that
  // raises it.
  void set_limits(size_t max_json_bytes, size_t max_nodes, std::string setting);
  void check_limits(std::string_view json) const;
  size_t max_json_bytes() const { return max_json_bytes_; }

  size_t size() const { return lru_.size(); }
  size_t bytes() const { return bytes_; }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }
  // Misses that copied a graph parsed before instead of parsing its JSON.
  uint64_t parses_saved() const;

  // Graphs kept as parsed (before binding), by their JSON text: a graph
  // submitted again with other shapes (a decode loop's growing KV cache:
  // a miss above) is copied and validated, not parsed again.
  static constexpr size_t kParsedGraphs = 8;

 private:
  struct Key {
    std::string_view json;
    std::string_view bindings;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  struct Node {
    std::string json;
    std::string bindings;  // encode_bindings()
    std::shared_ptr<const Entry> entry;
    size_t cost = 0;
  };

  // Into *out (its buffer reused from one lookup to the next).
  static void encode_bindings(const std::vector<std::string>& names, const std::vector<TensorDesc>& descs,
                              std::string* out);

  const size_t max_entries_;
  const size_t max_bytes_;
  size_t max_json_bytes_ = 0;
  size_t max_nodes_ = 0;
  std::string limit_setting_;
  std::list<Node> lru_;  // most recent first; nodes never move, so keys may view them
  std::unordered_map<Key, std::list<Node>::iterator, KeyHash> index_;
  size_t bytes_ = 0;
  std::string key_;  // the bindings of the lookup under way
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;

  // The graph of `json` as parsed: a copy of one kept, or parsed now (and
  // kept when small enough). Any thread.
  std::unique_ptr<Graph> parse(const std::string& json) const;
  mutable std::mutex parsed_mu_;
  // Most recent first, at most kParsedGraphs and a quarter of max_bytes_
  // (their JSON and constants) in all.
  struct Parsed {
    std::string json;
    std::shared_ptr<const Graph> graph;
    size_t cost = 0;
  };
  mutable std::list<Parsed> parsed_;
  mutable size_t parsed_bytes_ = 0;
  mutable uint64_t parses_saved_ = 0;
};

}  // namespace genie
