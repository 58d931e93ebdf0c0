#include "exec/backend.hpp"

#include "core/error.hpp"

namespace genie {

void DeviceBackend::check_device(int device) const {
  const size_t n = devices().size();
  check(device >= 0 && static_cast<size_t>(device) < n, GENIE_ERR_INVALID_ARGUMENT, "device ", kind(), ":",
        device, " does not exist (the ", kind(), " backend has ", n, " device(s))");
}

TensorPtr DeviceBackend::make_tensor(int device, DType dtype, const Shape& shape) {
  check(dtype_size(dtype) != 0, GENIE_ERR_INVALID_ARGUMENT, "invalid dtype ", static_cast<int>(dtype));
  const size_t nbytes = byte_size(shape, dtype_size(dtype));
  return std::make_shared<TensorData>(dtype, shape, allocate(device, nbytes), true);
}

}  // namespace genie
