// The names of a graph's inputs and outputs, read from its JSON text.
//
// genie.h has no call that lists a graph's inputs or outputs, so the tool
// reads them from the JSON it already gave genie_graph_from_json (which has
// checked it): the "inputs" array in declaration order and the "outputs"
// array in mark order (docs/graph-format.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace genie_cli {

struct GraphIo {
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
};

// Throws CliError (failure) if the text does not have that structure.
GraphIo graph_io_names(std::string_view json, const std::string& source);

}  // namespace genie_cli
