// Graph deltas: the contract is in graph_delta.hpp.
#include "graph/delta.hpp"

#include <openssl/sha.h>

#include <climits>
#include <cstdint>
#include <functional>

#include "core/error.hpp"

namespace genie::delta {

namespace {

// The JSON text as tokens: structural characters, object keys and leaves
// (strings, numbers, true, false, null), each with its byte range. Two
// documents have the same shape when their token kinds, structural
// characters, keys and the whitespace between tokens are equal: only leaves
// differ. Patching works on the text itself, so the rebuilt text is the
// client's byte for byte (no reprinting).
enum class Kind : uint8_t { Struct, Key, Leaf };
struct Tok {
  Kind kind;
  uint32_t begin, end;
};

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// False on text that is not made of JSON tokens.
bool tokenize(std::string_view t, std::vector<Tok>* out) {
  if (t.size() > UINT32_MAX) return false;
  out->clear();
  size_t i = 0;
  const size_t n = t.size();
  while (true) {
    while (i < n && is_ws(t[i])) ++i;
    if (i == n) break;
    const char c = t[i];
    const auto b = static_cast<uint32_t>(i);
    if (c == '{' || c == '}' || c == '[' || c == ']' || c == ',' || c == ':') {
      out->push_back({Kind::Struct, b, b + 1});
      ++i;
    } else if (c == '"') {
      ++i;
      while (i < n && t[i] != '"') i += t[i] == '\\' ? 2 : 1;
      if (i >= n) return false;
      ++i;
      out->push_back({Kind::Leaf, b, static_cast<uint32_t>(i)});
    } else if (c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n') {
      while (i < n && !is_ws(t[i]) && t[i] != ',' && t[i] != '}' && t[i] != ']' && t[i] != ':' && t[i] != '"')
        ++i;
      out->push_back({Kind::Leaf, b, static_cast<uint32_t>(i)});
    } else {
      return false;
    }
  }
  for (size_t k = 0; k + 1 < out->size(); ++k)
    if ((*out)[k].kind == Kind::Leaf && t[(*out)[k + 1].begin] == ':') (*out)[k].kind = Kind::Key;
  return true;
}

std::string_view text_of(std::string_view t, const Tok& k) { return t.substr(k.begin, k.end - k.begin); }

}  // namespace

std::string digest(std::string_view text) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), md);
  return std::string(reinterpret_cast<const char*>(md), sizeof md);
}

std::string short_hex(std::string_view d) {
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < d.size() && i < 6; ++i) {
    s += hex[static_cast<unsigned char>(d[i]) >> 4];
    s += hex[static_cast<unsigned char>(d[i]) & 15];
  }
  return s;
}

bool diff(std::string_view base_json, std::string_view next_json, std::vector<Patch>* out) {
  std::vector<Tok> a, b;
  if (!tokenize(base_json, &a) || !tokenize(next_json, &b) || a.size() != b.size()) return false;
  std::vector<Patch> patches;
  uint32_t leaf = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].kind != b[i].kind) return false;
    // The whitespace before each token belongs to the shape.
    const uint32_t ga = i ? a[i - 1].end : 0, gb = i ? b[i - 1].end : 0;
    if (base_json.substr(ga, a[i].begin - ga) != next_json.substr(gb, b[i].begin - gb)) return false;
    const std::string_view x = text_of(base_json, a[i]), y = text_of(next_json, b[i]);
    if (a[i].kind != Kind::Leaf) {
      if (x != y) return false;
      continue;
    }
    if (x != y) patches.push_back({leaf, std::string(y)});
    ++leaf;
  }
  const uint32_t ta = a.empty() ? 0 : a.back().end, tb = b.empty() ? 0 : b.back().end;
  if (base_json.substr(ta) != next_json.substr(tb)) return false;
  *out = std::move(patches);
  return true;
}

std::string apply(std::string_view base_json, const std::vector<Patch>& patches) {
  for (size_t i = 1; i < patches.size(); ++i)
    check(patches[i].leaf > patches[i - 1].leaf, GENIE_ERR_PROTOCOL,
          "graph delta: patches are not in increasing leaf order (leaf ", patches[i].leaf, " after ",
          patches[i - 1].leaf, ")");
  std::vector<Tok> toks, one;
  check(tokenize(base_json, &toks), GENIE_ERR_PROTOCOL, "graph delta: the base graph is not JSON text");
  std::string out;
  out.reserve(base_json.size() + 64);
  size_t copied = 0, next = 0;
  uint32_t leaf = 0;
  for (const Tok& t : toks) {
    if (next == patches.size()) break;
    if (t.kind != Kind::Leaf) continue;
    if (patches[next].leaf == leaf) {
      const std::string& v = patches[next].json;
      check(tokenize(v, &one) && one.size() == 1 && one[0].kind == Kind::Leaf && one[0].begin == 0 &&
                one[0].end == v.size(),
            GENIE_ERR_PROTOCOL, "graph delta: patch of leaf ", leaf,
            " is not one JSON string, number, true, false or null");
      out.append(base_json.substr(copied, t.begin - copied));
      out.append(v);
      copied = t.end;
      ++next;
    }
    ++leaf;
  }
  check(next == patches.size(), GENIE_ERR_PROTOCOL, "graph delta: leaf ",
        next < patches.size() ? patches[next].leaf : 0, " is beyond the base graph's leaves");
  out.append(base_json.substr(copied));
  return out;
}

// --- BaseTable ----------------------------------------------------------------

std::shared_ptr<const std::string> BaseTable::find(const std::string& d) {
  auto it = index_.find(d);
  if (it == index_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->text;
}

void BaseTable::put(const std::string& d, std::shared_ptr<const std::string> text) {
  if (find(d)) return;
  if (text->size() > max_bytes_ / 4) return;  // one text would crowd out the rest
  bytes_ += text->size();
  lru_.push_front({d, std::move(text)});
  index_[d] = lru_.begin();
  while (lru_.size() > max_entries_ || bytes_ > max_bytes_) {
    bytes_ -= lru_.back().text->size();
    index_.erase(lru_.back().digest);
    lru_.pop_back();
  }
}

// --- DeltaEncoder -------------------------------------------------------------

Encoded DeltaEncoder::encode(const std::string& json) {
  std::lock_guard<std::mutex> lk(mu_);
  Encoded e;
  // A few bases: comparing the texts (lengths first) costs less than
  // hashing this one.
  for (auto it = bases_.begin(); it != bases_.end(); ++it) {
    if (*it->text == json) {  // sent before as it is: nothing changed
      e.is_delta = true;
      e.base_digest = it->digest;
      e.digest = it->digest;
      e.text = it->text;
      bases_.splice(bases_.begin(), bases_, it);
      return e;
    }
  }
  Base b{std::make_shared<const std::string>(json), std::make_shared<const std::string>(digest(json))};
  // The most recent bases are the likely ones (the previous decode step).
  size_t tried = 0;
  for (auto it = bases_.begin(); it != bases_.end() && tried < 2; ++it, ++tried) {
    std::vector<Patch> patches;
    if (!diff(*it->text, json, &patches)) continue;
    size_t patch_bytes = 0;
    for (const Patch& p : patches) patch_bytes += p.json.size() + 8;
    if (patch_bytes * 4 > json.size()) break;  // not worth a delta
    e.is_delta = true;
    e.base_digest = it->digest;
    e.digest = b.digest;
    e.patches = std::move(patches);
    break;
  }
  if (!e.is_delta) e.digest = b.digest;
  e.text = b.text;
  remember(std::move(b));
  return e;
}

void DeltaEncoder::remember(Base b) {
  bases_.push_front(std::move(b));
  while (bases_.size() > kMaxBases) bases_.pop_back();
}

void DeltaEncoder::forget(const std::string& d) {
  std::lock_guard<std::mutex> lk(mu_);
  std::erase_if(bases_, [&](const Base& b) { return *b.digest == d; });
}

}  // namespace genie::delta
