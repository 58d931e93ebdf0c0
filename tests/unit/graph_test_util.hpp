// Helpers shared by the graph_* unit tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"
#include "graph/graph.hpp"

namespace genie::testing {

// Passes when f throws genie::Error with `code` and a detail containing
// `needle`; the failure message shows what happened instead.
template <class F>
::testing::AssertionResult fails_with(F&& f, genie_status_t code, const std::string& needle = "") {
  try {
    f();
  } catch (const Error& e) {
    if (e.code() != code)
      return ::testing::AssertionFailure()
             << "status " << e.code() << " instead of " << code << ": " << e.detail();
    if (e.detail().find(needle) == std::string::npos)
      return ::testing::AssertionFailure() << "detail \"" << e.detail() << "\" lacks \"" << needle << "\"";
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "no error thrown";
}

inline TensorPtr tensor(DType dtype, Shape shape) {
  return std::make_shared<TensorData>(dtype, std::move(shape));
}

}  // namespace genie::testing
