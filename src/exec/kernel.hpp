// What a device backend's kernel is called with: one function per operator,
// looked up by op name (DeviceBackend::find_kernel).
//
// The executor allocates outputs on the kernel's device with the inferred
// dtype and shape before the call; their bytes are undefined and the kernel
// writes every one. Kernels run on an executor worker thread, may be called
// concurrently for different nodes, and must not keep pointers to their
// arguments after returning.
#pragma once

#include <string>
#include <vector>

#include "core/tensor_data.hpp"
#include "exec/parallel.hpp"
#include "graph/attrs.hpp"

namespace genie {

class Queue;

struct KernelArgs {
  const std::string& op;
  const Attrs& attrs;
  // One per schema input slot; nullptr for an omitted optional input.
  const std::vector<const TensorData*>& in;
  const std::vector<TensorData*>& out;
  // Where independent parts of host work may run at once; nullptr: serially.
  const Parallel* par = nullptr;
  // The device queue to issue work on (a device backend's stream); nullptr
  // for backends whose kernels finish their work before returning (CPU).
  Queue* queue = nullptr;
};

using KernelFn = void (*)(const KernelArgs& args);

}  // namespace genie
