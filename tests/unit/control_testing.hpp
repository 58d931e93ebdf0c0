// Helpers shared by the control layer's tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "control/server.hpp"
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

// A server on a free port of 127.0.0.1 with one executor thread, offering
// `data_transports` besides TCP.
inline std::unique_ptr<Server> start_server_offering(const std::string& node_id,
                                                     std::vector<std::string> data_transports) {
  ServerOptions o;
  o.port = 0;
  o.num_threads = 1;
  o.node_id = node_id;
  o.data_transports = std::move(data_transports);
  return std::make_unique<Server>(o);
}

}  // namespace genie
