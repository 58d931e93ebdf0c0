// The CPU kernel registry's listing (find_kernel is in kernels.hpp).
#pragma once

#include <string>
#include <vector>

namespace genie::cpu {

// The ops that have a CPU kernel, sorted (checked against the op table,
// src/graph/op_table.def, by tests/unit/exec_op_table_test.cpp).
std::vector<std::string> kernel_names();

}  // namespace genie::cpu
