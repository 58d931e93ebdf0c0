// TEMPORARY, for building the kernel groups on their own: weak definitions
// of what the backend proper (backend.cpp, queue.cpp, the BLAS and cuDNN
// groups) defines, so that the plugin links before that work is merged.
// The strong definitions replace these; delete this file at that merge.
#include "exec/cuda/cuda_kernels.hpp"

namespace genie::cuda {

__attribute__((weak)) cudaStream_t stream_of(const KernelArgs& a) {
  fail(GENIE_ERR_UNSUPPORTED, "cuda kernel '", a.op, "': no CUDA queue in this build");
}

__attribute__((weak)) void check_cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  fail(e == cudaErrorMemoryAllocation ? GENIE_ERR_OUT_OF_MEMORY : GENIE_ERR_INTERNAL, what, ": ",
       cudaGetErrorString(e));
}

__attribute__((weak)) void add_blas_kernels(KernelTable&) {}
__attribute__((weak)) void add_conv_kernels(KernelTable&) {}

}  // namespace genie::cuda
