#include "core/shape.hpp"

#include "core/error.hpp"

namespace genie {

int64_t numel(const Shape& s) {
  uint64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) fail(GENIE_ERR_INVALID_ARGUMENT, "negative dimension ", d, " in shape ", shape_str(s));
    if (d == 0) return 0;
  }
  for (int64_t d : s) {
    if (!(static_cast<uint64_t>(d) <= kMaxTensorBytes && n <= kMaxTensorBytes / static_cast<uint64_t>(d)))
      fail(GENIE_ERR_TOO_LARGE, "shape ", shape_str(s), " has too many elements");
    n *= static_cast<uint64_t>(d);
  }
  return static_cast<int64_t>(n);
}

size_t byte_size(const Shape& s, size_t elem_size) {
  const uint64_t n = static_cast<uint64_t>(numel(s));
  if (!(elem_size == 0 || n <= kMaxTensorBytes / elem_size))
    fail(GENIE_ERR_TOO_LARGE, "shape ", shape_str(s), " needs more than 2^48 bytes");
  return static_cast<size_t>(n * elem_size);
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

int64_t normalize_axis(int64_t axis, int64_t rank, const char* what) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  check(a >= 0 && a < rank, GENIE_ERR_INVALID_ATTRIBUTE, what, " ", axis, " out of range for rank ", rank);
  return a;
}

}  // namespace genie
