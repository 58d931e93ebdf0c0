#include "npy.hpp"

#include <cstring>
#include <string_view>

#include "cli.hpp"

namespace genie_cli {
namespace {

struct DescrInfo {
  const char* descr;
  genie_dtype_t dtype;
};

constexpr DescrInfo kDescrs[] = {
    {"<f4", GENIE_DTYPE_F32}, {"<f2", GENIE_DTYPE_F16},  {"<i4", GENIE_DTYPE_I32},
    {"<i8", GENIE_DTYPE_I64}, {"|b1", GENIE_DTYPE_BOOL},
};

constexpr const char* kAccepted = "<f4 (float32), <f2 (float16), <i4 (int32), <i8 (int64), |b1 (bool)";

// The header is a Python dict literal, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// Only that subset of Python is accepted: the three keys, strings, booleans
// and tuples of non-negative integers.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& source) : s_(text), source_(source) {}

  void parse(std::string& descr, bool& fortran_order, std::vector<int64_t>& shape) {
    bool seen_descr = false, seen_order = false, seen_shape = false;
    expect('{');
    while (true) {
      skip_ws();
      if (peek() == '}') break;
      const std::string key = parse_string();
      expect(':');
      skip_ws();
      if (key == "descr") {
        if (seen_descr) fail("'descr' given twice");
        if (peek() == '[') fail("structured arrays (a list descr) are not supported");
        descr = parse_string();
        seen_descr = true;
      } else if (key == "fortran_order") {
        if (seen_order) fail("'fortran_order' given twice");
        fortran_order = parse_bool();
        seen_order = true;
      } else if (key == "shape") {
        if (seen_shape) fail("'shape' given twice");
        shape = parse_tuple();
        seen_shape = true;
      } else {
        fail("unknown header key '" + key + "'");
      }
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}') fail("expected ',' or '}' in the header");
    }
    ++pos_;  // '}'
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected text after the header dict");
    if (!seen_descr || !seen_order || !seen_shape)
      fail("the header must give 'descr', 'fortran_order' and 'shape'");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { failure(source_ + ": bad .npy header: " + what); }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  void expect(char c) {
    skip_ws();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string parse_string() {
    skip_ws();
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a quoted string");
    const size_t start = ++pos_;
    while (pos_ < s_.size() && s_[pos_] != quote) {
      if (s_[pos_] == '\\') fail("escapes in header strings are not supported");
      ++pos_;
    }
    if (pos_ >= s_.size()) fail("unterminated string");
    return std::string(s_.substr(start, pos_++ - start));
  }
  bool parse_bool() {
    if (s_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (s_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    fail("'fortran_order' must be True or False");
  }
  std::vector<int64_t> parse_tuple() {
    std::vector<int64_t> dims;
    expect('(');
    while (true) {
      skip_ws();
      if (peek() == ')') break;
      if (peek() < '0' || peek() > '9') fail("a shape entry is not a non-negative integer");
      int64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (v > (INT64_MAX - 9) / 10) fail("a shape entry is too large");
        v = v * 10 + (s_[pos_++] - '0');
      }
      dims.push_back(v);
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != ')') fail("expected ',' or ')' in the shape");
    }
    ++pos_;  // ')'
    return dims;
  }

  std::string_view s_;
  const std::string& source_;
  size_t pos_ = 0;
};

uint32_t read_le(const std::string& b, size_t at, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(b[at + i])) << (8 * i);
  return v;
}

}  // namespace

const char* npy_descr(genie_dtype_t dtype) {
  for (const DescrInfo& d : kDescrs)
    if (d.dtype == dtype) return d.descr;
  return "(none: bfloat16 has no .npy dtype)";
}

NpyArray parse_npy(const std::string& bytes, const std::string& source) {
  static constexpr char kMagic[] = "\x93NUMPY";
  if (bytes.size() < 10 || bytes.compare(0, 6, kMagic, 6) != 0)
    failure(source + ": not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(bytes[6]);
  if (major < 1 || major > 3)
    failure(source + ": .npy format version " + std::to_string(major) + " is not supported (1, 2 or 3)");
  const size_t len_bytes = major == 1 ? 2 : 4;
  const size_t header_start = 8 + len_bytes;
  if (bytes.size() < header_start) failure(source + ": truncated .npy header");
  const size_t header_len = read_le(bytes, 8, len_bytes);
  if (bytes.size() - header_start < header_len) failure(source + ": truncated .npy header");

  std::string descr;
  bool fortran_order = false;
  NpyArray arr;
  HeaderParser(std::string_view(bytes).substr(header_start, header_len), source)
      .parse(descr, fortran_order, arr.shape);

  for (const DescrInfo& d : kDescrs)
    if (descr == d.descr) arr.dtype = d.dtype;
  if (arr.dtype == GENIE_DTYPE_INVALID) {
    std::string why = source + ": dtype '" + descr + "' is not supported";
    if (!descr.empty() && descr[0] == '>') why += " (big-endian: save it little-endian)";
    failure(why + "; accepted: " + kAccepted);
  }
  if (fortran_order)
    failure(source + ": Fortran-order arrays are not supported (save np.ascontiguousarray(a))");
  if (arr.shape.size() > GENIE_MAX_DIMS)
    failure(source + ": rank " + std::to_string(arr.shape.size()) + " exceeds " +
            std::to_string(GENIE_MAX_DIMS) + " dimensions");

  uint64_t expected = genie_dtype_size(arr.dtype);
  for (int64_t d : arr.shape) {
    if (d != 0 && expected > UINT64_MAX / static_cast<uint64_t>(d))
      failure(source + ": the shape is too large");
    expected *= static_cast<uint64_t>(d);
  }
  const size_t data_start = header_start + header_len;
  const uint64_t have = bytes.size() - data_start;
  if (have != expected)
    failure(source + ": has " + std::to_string(have) + " data bytes, the header promises " +
            std::to_string(expected) + (have < expected ? " (truncated file)" : " (trailing bytes)"));
  arr.data = bytes.substr(data_start);
  if (arr.dtype == GENIE_DTYPE_BOOL)
    for (char c : arr.data)
      if (c != 0 && c != 1) failure(source + ": a bool element is neither 0 nor 1");
  return arr;
}

}  // namespace genie_cli
