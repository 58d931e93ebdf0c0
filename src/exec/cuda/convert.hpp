// Element conversion on the device (DeviceBackend::convert): f32, f16, bf16,
// i32, i64 and bool in any direction, with the host's rules
// (core/tensor_data.hpp): f16/bf16 round to nearest even, float to int
// truncates toward zero, anything to bool is != 0.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.hpp"

namespace genie::cuda {

// Issues the conversion of `n` elements on `s`; throws Error for a dtype
// it does not know or a failed launch.
void launch_convert(const void* src, DType from, void* dst, DType to, int64_t n, cudaStream_t s);

}  // namespace genie::cuda
