// libFuzzer harness: graph JSON import (graph/json.cpp), then validation and
// the structural hash, as a server does with a submitted graph. Bad input
// must end in genie::Error (PARSE, INVALID_ARGUMENT, TOO_LARGE, ...), never a
// crash, undefined behaviour (out-of-range numbers cast to integers) or a
// leak.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/error.hpp"
#include "graph/graph.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    std::unique_ptr<genie::Graph> g = genie::graph_from_json(reinterpret_cast<const char*>(data), size);
    g->validate();
    (void)g->structural_hash();
    // What is written back must read again.
    const std::string again = genie::graph_to_json(*g);
    (void)genie::graph_from_json(again.data(), again.size());
  } catch (const genie::Error&) {
  }
  return 0;
}
