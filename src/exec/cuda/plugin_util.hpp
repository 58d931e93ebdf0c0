// Small helpers of the CUDA plugin over libgenie's core types. The plugin
// compiles in the core sources it uses (dtype, shape, attrs: see
// CMakeLists.txt) and reaches nothing else of libgenie.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/shape.hpp"
#include "graph/attrs.hpp"

namespace genie::cuda {

inline int64_t elements(const Shape& s, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t n = 1;
  for (size_t i = from; i < s.size() && i < to; ++i) n *= s[i];
  return n;
}

// A pair attribute (stride, padding, ...) as {rows, cols}.
inline std::array<int64_t, 2> attr_pair(const Attrs& a, const std::string& op, const std::string& key,
                                        std::array<int64_t, 2> def) {
  const std::vector<int64_t> v = a.get_ints(key, {def[0], def[1]});
  check(v.size() == 2, GENIE_ERR_INVALID_ATTRIBUTE, op, ": attribute '", key, "' must have 2 entries");
  return {v[0], v[1]};
}

}  // namespace genie::cuda
