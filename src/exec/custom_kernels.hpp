// Kernels of custom ops (docs/custom-ops.md), by device kind and op name.
//
// A device backend resolves them through its own find_kernel, after its
// built-in kernels: custom_kernel_entry(kind, op) is the KernelFn to hand
// out. KernelFn is a plain function pointer, so the entry looks the
// registration up again by args.op when called, holding it for the call:
// an op unregistered meanwhile finishes the calls in progress first.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "exec/kernel.hpp"

namespace genie {

using CustomKernel = std::function<void(const KernelArgs& args)>;

// Registers the kernel of custom op `op` on devices of kind `kind`
// ("cpu"). Throws Error(INVALID_ARGUMENT) if one is registered already,
// Error(UNSUPPORTED) for a kind without an entry (custom_kernel_entry).
void add_custom_kernel(const std::string& kind, const std::string& op, std::shared_ptr<const CustomKernel> k);
// Removes the kernels of `op` on every kind.
void remove_custom_kernels(const std::string& op);
// The kernel of `op` for `kind`, nullptr if none.
std::shared_ptr<const CustomKernel> find_custom_kernel(const std::string& kind, const std::string& op);
// The KernelFn a backend of `kind` returns for custom op `op`; nullptr if
// `op` has no kernel for that kind.
KernelFn custom_kernel_entry(const std::string& kind, const std::string& op);

}  // namespace genie
