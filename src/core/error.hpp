// Internal error type. Thrown anywhere inside the C++ core; converted to a
// genie_status_t plus the thread-local detail message at the C boundary
// (src/capi/). Never escapes the library.
#pragma once

#include <exception>
#include <sstream>
#include <string>
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

// Concatenates its arguments with operator<< into one message.
template <class... Parts>
std::string cat(Parts&&... parts) {
  std::ostringstream os;
  (os << ... << std::forward<Parts>(parts));
  return os.str();
}

// Throws Error(code, message made of parts).
template <class... Parts>
[[noreturn]] void fail(genie_status_t code, Parts&&... parts) {
  throw Error(code, cat(std::forward<Parts>(parts)...));
}

// Throws Error(code, ...) unless cond holds.
template <class... Parts>
void check(bool cond, genie_status_t code, Parts&&... parts) {
  if (!cond) fail(code, std::forward<Parts>(parts)...);
}

}  // namespace genie
