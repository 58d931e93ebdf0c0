// Internal error type. Thrown anywhere inside the C++ core; converted to a
// genie_status_t plus the thread-local detail message at the C boundary
// (src/capi/). Never escapes the library.
#pragma once

#include <charconv>
#include <exception>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "genie.h"

namespace genie {

class Error : public std::exception {
 public:
  Error(genie_status_t code, std::string detail)
      : code_(code), detail_(std::move(detail)) {}
  genie_status_t code() const noexcept { return code_; }
  const std::string& detail() const noexcept { return detail_; }
  const char* what() const noexcept override { return detail_.c_str(); }

 private:
  genie_status_t code_;
  std::string detail_;
};

namespace cat_detail {

// Parts that cat() appends itself, exactly as operator<< would write them:
// text, a char, and integers other than bool and the character types.
template <class T>
inline constexpr bool kPlainInteger =
    std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char> &&
    !std::is_same_v<T, signed char> && !std::is_same_v<T, unsigned char> && !std::is_same_v<T, wchar_t> &&
    !std::is_same_v<T, char8_t> && !std::is_same_v<T, char16_t> && !std::is_same_v<T, char32_t>;
template <class T>
inline constexpr bool kPlain =
    std::is_convertible_v<const T&, std::string_view> || std::is_same_v<T, char> || kPlainInteger<T>;

template <class T>
void append(std::string& s, const T& part) {
  if constexpr (std::is_same_v<T, char>) {
    s.push_back(part);
  } else if constexpr (kPlainInteger<T>) {
    char buf[24];
    s.append(buf, std::to_chars(buf, buf + sizeof buf, part).ptr);
  } else if constexpr (std::is_pointer_v<T>) {
    if (part != nullptr) s.append(part);  // a null C string adds nothing (a stream would stop there)
  } else {
    s.append(std::string_view(part));
  }
}

}  // namespace cat_detail

// Appends text and integers to `s` as cat() writes them, in a buffer the
// caller may reuse (a lookup key built on a hot path).
template <class... Parts>
void append_to(std::string& s, const Parts&... parts) {
  static_assert((cat_detail::kPlain<Parts> && ...), "append_to takes text and integers");
  (cat_detail::append(s, parts), ...);
}

// Concatenates its arguments with operator<< into one message. Text and
// integers alone (most messages, and the names built on hot paths) skip
// the stream, whose construction costs more than the rest.
template <class... Parts>
std::string cat(Parts&&... parts) {
  if constexpr ((cat_detail::kPlain<std::remove_cvref_t<Parts>> && ...)) {
    std::string s;
    append_to(s, parts...);
    return s;
  } else {
    std::ostringstream os;
    (os << ... << std::forward<Parts>(parts));
    return os.str();
  }
}

// Throws Error(code, message made of parts).
template <class... Parts>
[[noreturn]] void fail(genie_status_t code, Parts&&... parts) {
  throw Error(code, cat(std::forward<Parts>(parts)...));
}

// Throws Error(code, ...) unless cond holds. The parts are evaluated either
// way: where one builds a string (shape_str, Device::str, cat ...), write
// `if (!cond) fail(...)` instead, so that the check costs nothing when it
// passes (tensor constructors and kernels run it on every call).
template <class... Parts>
void check(bool cond, genie_status_t code, Parts&&... parts) {
  if (!cond) fail(code, std::forward<Parts>(parts)...);
}

}  // namespace genie
