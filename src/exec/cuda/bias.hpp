// Adds a per-channel bias to an NCHW tensor on the device (conv2d's bias:
// cuDNN's cudnnAddTensor does not take every dtype the kernel does).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.hpp"

namespace genie::cuda {

// y[n, c, i] += bias[c] for y of [outer, channels, inner] elements of `dt`
// (f32, f16, bf16; the sum is rounded once), issued on `s`.
void launch_channel_bias(void* y, const void* bias, DType dt, int64_t outer, int64_t channels, int64_t inner,
                         cudaStream_t s);

}  // namespace genie::cuda
