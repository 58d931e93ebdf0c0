// What traces from the wild carry and replay works around before it checks
// them (executor.hpp, validate_trace): the dependencies of traces converted
// from PyTorch execution traces (control dependencies on nodes the file
// does not have, on the node itself, in cycles) and their CPU-side
// collective nodes, which have no comm_type. Each repair adds a warning
// with its count to Trace::warnings.
#pragma once

#include <string>

#include "chakra.hpp"

namespace genie::replay {

// --control-deps.
enum class ControlDeps {
  Repair,  // follow them; drop dangling and self ones, break cycles (default)
  Ignore,  // follow data dependencies only, as Chakra's reference feeder does
  Strict,  // follow them; refuse a dangling or self dependency or a cycle
};
// "repair", "ignore", "strict"; false for anything else.
bool parse_control_deps(const std::string& s, ControlDeps* out);

// Repairs `t` in place under `mode`:
//  - a COMM_COLL_NODE with no comm_type and a true is_cpu_op (the CPU side
//    of a collective, as PyTorch's converter writes it) becomes a compute
//    node (a timed wait of its duration), in every mode;
//  - Ignore: control dependencies are dropped;
//  - Repair and Ignore: a dependency (data or control) on a node the file
//    does not have, or on the node itself, is dropped; each remaining cycle
//    is broken by dropping one of its dependencies (a control-only one
//    where the cycle has one), and the warning names the cycle's nodes;
//  - Strict: nothing else (validate_trace refuses what is wrong).
void repair_trace(Trace& t, ControlDeps mode);

}  // namespace genie::replay
