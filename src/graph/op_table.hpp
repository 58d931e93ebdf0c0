// The op table (graph/op_table.def): the one list of built-in operators.
#pragma once

#include <string>
#include <vector>

namespace genie {

// The op names of op_table.def, in its order. The schema table
// (op_schema.cpp) checks itself against it when first used.
const std::vector<std::string>& op_table_names();

}  // namespace genie
