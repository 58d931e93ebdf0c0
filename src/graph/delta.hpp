// Graph deltas: a graph's JSON text given as a base text both sides hold and
// the leaves that differ (docs/protocol.md, Graph deltas).
//
// A decode loop submits the same graph step after step: at most the bound
// shapes, a scalar attribute or a small constant change. Its JSON document
// then has the same shape as the last one sent (same object keys in the same
// order, same array lengths), and only some leaves (numbers, strings, bools)
// differ. The client names the base by the SHA-256 of its text and sends
// those leaves; the server replaces them in its copy of the base text, so
// both sides hold the same new text byte for byte, and its hash proves it.
//
// BaseTable is the server's store of texts by hash; DeltaEncoder is the
// client's memory of texts sent. Neither is thread-safe on its own:
// DeltaEncoder locks inside, BaseTable lives on the server's loop thread.
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

namespace genie::delta {

// SHA-256 of `text` (32 bytes).
std::string digest(std::string_view text);
// The first bytes of a digest in hex, for messages.
std::string short_hex(std::string_view digest);

struct Patch {
  uint32_t leaf = 0;
  std::string json;  // the new leaf, as JSON text
};

// Leaves of `next_json` that differ from `base_json`, depth-first, when the
// two documents have the same shape; false when they do not (or either does
// not parse).
bool diff(std::string_view base_json, std::string_view next_json, std::vector<Patch>* out);

// The text `patches` (in strictly increasing leaf order, each a JSON leaf)
// make of `base_json`: the base text with those leaves replaced. Throws
// Error(PROTOCOL) naming the bad patch.
std::string apply(std::string_view base_json, const std::vector<Patch>& patches);

// The server's base texts, by digest: the most recently used first, bounded
// in entries and bytes.
class BaseTable {
 public:
  static constexpr size_t kDefaultEntries = 256;
  static constexpr size_t kDefaultBytes = size_t{64} << 20;
  explicit BaseTable(size_t max_entries = kDefaultEntries, size_t max_bytes = kDefaultBytes)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}

  // Null when unknown.
  std::shared_ptr<const std::string> find(const std::string& digest);
  void put(const std::string& digest, std::shared_ptr<const std::string> text);
  size_t size() const { return lru_.size(); }

 private:
  struct Entry {
    std::string digest;
    std::shared_ptr<const std::string> text;
  };
  const size_t max_entries_;
  const size_t max_bytes_;
  std::list<Entry> lru_;
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  size_t bytes_ = 0;
};

// What the client sends for one graph text.
// Digests are shared with the encoder's memory, so that sending a graph
// sent before copies none.
struct Encoded {
  bool is_delta = false;
  std::shared_ptr<const std::string> base_digest;  // delta: the base it patches
  std::shared_ptr<const std::string> digest;       // SHA-256 of the graph text
  std::vector<Patch> patches;
  std::shared_ptr<const std::string> text;  // the graph text (shared with the memory)
};

// The client's memory of the graph texts it sent (a few, most recent first).
class DeltaEncoder {
 public:
  static constexpr size_t kMaxBases = 8;

  // A delta against a text sent before when one has the same shape and the
  // patches are much smaller than the text; otherwise a full submission.
  // Either way `json` is remembered as a base (the server keeps it too).
  Encoded encode(const std::string& json);
  // The server does not hold this base (any more): never use it again.
  void forget(const std::string& digest);

 private:
  struct Base {
    std::shared_ptr<const std::string> text;
    std::shared_ptr<const std::string> digest;
  };
  void remember(Base b);

  std::mutex mu_;
  std::list<Base> bases_;
};

}  // namespace genie::delta
