// Helpers shared by the control layer's tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "graph/graph.hpp"
#include "server/server.hpp"

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

// x [256, 256] times itself n times over: a graph long enough to be still
// running while a test stops a server or closes a client.
inline std::string slow_graph(int n) {
  Graph g("slow");
  g.add_input("x", DType::F32, {256, 256});
  std::string prev = "x";
  for (int i = 0; i < n; ++i) {
    const std::string next = "m" + std::to_string(i);
    g.add_node("matmul", "mm" + std::to_string(i), {prev, "x"}, {next});
    prev = next;
  }
  g.mark_output(prev);
  return graph_to_json(g);
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
