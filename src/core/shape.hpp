// Shapes and checked size arithmetic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace genie {

using Shape = std::vector<int64_t>;

// Largest tensor byte size Genie accepts (2^48): anything larger is a
// corrupted or hostile dimension, refused before allocation.
constexpr uint64_t kMaxTensorBytes = uint64_t{1} << 48;

// Product of dims; throws Error(TOO_LARGE) on overflow past kMaxTensorBytes
// elements and Error(INVALID_ARGUMENT) for a negative dimension.
int64_t numel(const Shape& s);
// numel(s) * elem_size, checked against kMaxTensorBytes (Error TOO_LARGE).
size_t byte_size(const Shape& s, size_t elem_size);
// "[2, 3, 4]".
std::string shape_str(const Shape& s);
// Row-major strides in elements.
std::vector<int64_t> strides_of(const Shape& s);
// Normalises a possibly negative axis into [0, rank); throws
// Error(INVALID_ATTRIBUTE) naming `what` when out of range.
int64_t normalize_axis(int64_t axis, int64_t rank, const char* what = "axis");

}  // namespace genie
