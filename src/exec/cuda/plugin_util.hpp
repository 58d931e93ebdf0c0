// Helpers the CUDA plugin needs from libgenie's core, written inline here:
// the plugin is linked with -Wl,--no-undefined against the headers alone
// (exec/backend.hpp), so out-of-line core functions (dtype_size, numel,
// shape_str, Attrs::get_int, Device::str, ...) are out of its reach.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/shape.hpp"
#include "graph/attrs.hpp"

namespace genie::cuda {

// Bytes per element; 0 for Invalid.
inline size_t elem_size(DType t) {
  switch (t) {
    case DType::F32:
    case DType::I32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::I64: return 8;
    case DType::Bool: return 1;
    default: return 0;
  }
}

inline const char* type_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::Bool: return "bool";
    default: return "invalid";
  }
}

inline int64_t elements(const Shape& s, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t n = 1;
  for (size_t i = from; i < s.size() && i < to; ++i) n *= s[i];
  return n;
}

inline std::string shape_text(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// Attribute getters over Attrs::all() (the map is inline, the getters are not).
inline int64_t attr_int(const Attrs& a, const std::string& key, int64_t def) {
  auto it = a.all().find(key);
  if (it == a.all().end()) return def;
  const int64_t* v = std::get_if<int64_t>(&it->second);
  check(v != nullptr, GENIE_ERR_INVALID_ATTRIBUTE, "attribute '", key, "' must be an int");
  return *v;
}

inline std::vector<int64_t> attr_ints(const Attrs& a, const std::string& key, std::vector<int64_t> def) {
  auto it = a.all().find(key);
  if (it == a.all().end()) return def;
  const auto* v = std::get_if<std::vector<int64_t>>(&it->second);
  check(v != nullptr, GENIE_ERR_INVALID_ATTRIBUTE, "attribute '", key, "' must be ints");
  return *v;
}

// A pair attribute (stride, padding, ...) as {rows, cols}.
inline std::array<int64_t, 2> attr_pair(const Attrs& a, const std::string& op, const std::string& key,
                                        std::array<int64_t, 2> def) {
  const std::vector<int64_t> v = attr_ints(a, key, {def[0], def[1]});
  check(v.size() == 2, GENIE_ERR_INVALID_ATTRIBUTE, op, ": attribute '", key, "' must have 2 entries");
  return {v[0], v[1]};
}

}  // namespace genie::cuda
