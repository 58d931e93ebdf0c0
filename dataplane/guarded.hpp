// Running an owner's callback from a transport: nothing may unwind through
// libuv (or a transport's own threads).
#pragma once

#include <exception>
#include <string>

#include "core/error.hpp"

namespace genie::dataplane {

// Runs fn(). Returns false, with the status and detail to close with, when
// it threw: a genie::Error's own, GENIE_ERR_INTERNAL naming `what` for
// anything else.
template <class Fn>
bool guarded(Fn&& fn, genie_status_t* status, std::string* detail, const char* what) {
  try {
    fn();
    return true;
  } catch (const Error& e) {
    *status = e.code();
    *detail = e.detail();
  } catch (const std::exception& e) {
    *status = GENIE_ERR_INTERNAL;
    *detail = cat(what, " threw: ", e.what());
  } catch (...) {
    *status = GENIE_ERR_INTERNAL;
    *detail = cat(what, " threw a non-standard exception");
  }
  return false;
}

}  // namespace genie::dataplane
