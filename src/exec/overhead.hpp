// The executor's own cost per node, for the scheduler's device profile.
#pragma once

#include "exec/executor.hpp"

namespace genie {

// The executor's own cost per node (scheduling, output allocation, the
// run's hand-off to the pool, amortised), which calibrate_local_cpu (below
// the executor) cannot see: the best of a few runs of a 16-node chain of
// relu over 64 floats, per node. The scheduler's DeviceProfile::op_overhead_s
// of this server's CPU. Blocks about a millisecond; throws only if the
// executor fails the chain.
double measure_node_overhead(Executor& exec);

}  // namespace genie
