// Placeholders for the kernel groups written under kernels/ (element-wise,
// norms, layout, reductions, pools, attention): weak, empty definitions so
// that the backend links and runs its own groups (matmul, linear, conv2d)
// before those land. The real definitions in kernels/*.cu are strong
// symbols and override these; remove this file once they are all there.
#include "exec/cuda/cuda_kernels.hpp"

namespace genie::cuda {

__attribute__((weak)) void add_elementwise_kernels(KernelTable&) {}
__attribute__((weak)) void add_norm_kernels(KernelTable&) {}
__attribute__((weak)) void add_layout_kernels(KernelTable&) {}
__attribute__((weak)) void add_reduce_kernels(KernelTable&) {}
__attribute__((weak)) void add_pool_kernels(KernelTable&) {}
__attribute__((weak)) void add_attention_kernels(KernelTable&) {}

}  // namespace genie::cuda
