// CPU kernels: one function per operator, looked up by op name.
//
// The executor allocates outputs with the inferred dtype and shape before the
// call. Kernels see f32, i32, i64 and bool tensors only: the executor converts
// f16/bf16 inputs to f32 before the call and f32 results back to the declared
// storage type after it (f16/bf16 storage with f32 compute). Kernels run on an
// executor worker thread, may be called concurrently for different nodes, and
// must not keep pointers to their arguments after returning. The large ones
// split their rows (heads, elements) over `par` when it is given: the result
// is the same bits as the serial loop.
#pragma once

#include <string>

#include "exec/kernel.hpp"

namespace genie::cpu {

// The CPU kernels take the device-neutral kernel arguments (exec/kernel.hpp).
using genie::KernelArgs;
using genie::KernelFn;

// nullptr when no CPU kernel exists for `op`.
KernelFn find_kernel(const std::string& op);

}  // namespace genie::cpu
