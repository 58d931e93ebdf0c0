// Structural hash: FNV-1a over a canonical byte stream of the graph, then a
// final avalanche so that nearby streams spread over all 64 bits. The stream
// refers to values by position (the n-th input, the n-th constant, slot s of
// node n), never by name or id, so the hash survives renaming and a JSON
// round trip (which regroups values by kind).
#include <cmath>
#include <cstring>
#include <limits>

#include "graph/graph.hpp"

namespace genie {

namespace {

class Fnv1a {
 public:
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) byte(static_cast<uint8_t>(v >> (8 * i)));  // fixed little-endian order
  }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void f64(double d) {
    if (std::isnan(d)) d = std::numeric_limits<double>::quiet_NaN();  // JSON keeps no NaN payload
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    u64(bits);
  }
  void str(const std::string& s) {
    u64(s.size());
    for (char c : s) byte(static_cast<uint8_t>(c));
  }
  void ints(const std::vector<int64_t>& v) {
    u64(v.size());
    for (int64_t x : v) i64(x);
  }
  uint64_t digest() const {
    uint64_t z = h_;  // splitmix64 finaliser
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  void byte(uint8_t b) { h_ = (h_ ^ b) * 0x100000001b3ull; }
  uint64_t h_ = 0xcbf29ce484222325ull;
};

}  // namespace

uint64_t Graph::structural_hash() const {
  Fnv1a h;
  h.str("genie.graph/1");

  // Position of each input and constant among values of its kind.
  std::vector<int64_t> ordinal(values_.size(), 0);
  int64_t n_inputs = 0, n_constants = 0;
  for (size_t i = 0; i < values_.size(); ++i) {
    if (values_[i].kind == ValueKind::Input) ordinal[i] = n_inputs++;
    if (values_[i].kind == ValueKind::Constant) ordinal[i] = n_constants++;
  }
  auto ref = [&](const std::string& name) {
    const ValueId v = name.empty() ? kNone : find_value(name);
    if (name.empty()) {
      h.u64(0);
    } else if (v == kNone) {
      h.u64(1);  // dangling: differs from every resolved edge
    } else if (values_[v].kind == ValueKind::Input) {
      h.u64(2);
      h.i64(ordinal[v]);
    } else if (values_[v].kind == ValueKind::Constant) {
      h.u64(3);
      h.i64(ordinal[v]);
    } else {
      h.u64(4);
      h.i64(values_[v].producer);
      h.i64(values_[v].producer_slot);
    }
  };

  for (const ValueKind kind : {ValueKind::Input, ValueKind::Constant}) {
    h.i64(kind == ValueKind::Input ? n_inputs : n_constants);
    for (const Value& v : values_)
      if (v.kind == kind) {
        h.i64(static_cast<int64_t>(v.dtype));
        h.ints(v.shape);
        h.i64(static_cast<int64_t>(v.role));
      }
  }

  h.u64(nodes_.size());
  for (const Node& n : nodes_) {
    h.str(n.op);
    h.u64(n.input_names.size());
    for (const std::string& in : n.input_names) ref(in);
    h.u64(n.outputs.size());
    for (ValueId out : n.outputs) h.i64(static_cast<int64_t>(values_[out].role));
    h.u64(n.attrs.all().size());
    for (const auto& [key, value] : n.attrs.all()) {
      h.str(key);
      h.u64(value.index());
      if (auto* i = std::get_if<int64_t>(&value)) h.i64(*i);
      if (auto* d = std::get_if<double>(&value)) h.f64(*d);
      if (auto* s = std::get_if<std::string>(&value)) h.str(*s);
      if (auto* is = std::get_if<std::vector<int64_t>>(&value)) h.ints(*is);
      if (auto* ds = std::get_if<std::vector<double>>(&value)) {
        h.u64(ds->size());
        for (double d : *ds) h.f64(d);
      }
    }
    h.i64(static_cast<int64_t>(n.ann.phase));
    h.str(n.ann.module_path);
    h.i64(n.ann.layer);
    h.i64(static_cast<int64_t>(n.ann.modality));
  }

  h.u64(output_names_.size());
  for (const std::string& out : output_names_) ref(out);
  return h.digest();
}

}  // namespace genie
