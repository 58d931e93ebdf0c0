// Helpers shared by the control layer's tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"

namespace genie {

// genie_status_str lives in the C API layer, above these tests' layers.
inline std::string status_name(genie_status_t s) { return "status " + std::to_string(s); }

// Runs f, expecting genie::Error with `code`; returns its detail.
template <class F>
std::string expect_error(genie_status_t code, F&& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << status_name(e.code()) << ": " << e.detail();
    return e.detail();
  }
  ADD_FAILURE() << "expected " << status_name(code) << ", nothing was thrown";
  return {};
}

}  // namespace genie
