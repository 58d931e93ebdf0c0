// Moving tensors between the devices of this process, through their
// backends: within one backend by its device-to-device copy, between two
// backends through host memory (a backend whose memory is host memory
// reads or writes the other side directly).
#pragma once

#include <cstddef>

#include "exec/backend.hpp"

namespace genie {

// A copy of `src`, which lives on `from`, on device `to` (a new tensor
// even when the two are the same device). Synchronous. Throws the
// backends' errors (OUT_OF_MEMORY naming the device).
TensorPtr copy_tensor(const TensorPtr& src, DeviceRef from, DeviceRef to);

// Host bytes into / out of a tensor of `device` (`t` lives there; the
// range is checked by the caller). Host-accessible tensors are copied
// directly, whatever `device` says.
void write_tensor(DeviceRef device, TensorData& t, size_t offset, const void* src, size_t n);
void read_tensor(DeviceRef device, const TensorData& t, size_t offset, void* dst, size_t n);

}  // namespace genie
