// C API: tensors.
#include <algorithm>

#include "capi/handles.hpp"

using namespace genie;

namespace {

Shape shape_from(const int64_t* shape, size_t ndim) {
  check(ndim <= GENIE_MAX_DIMS, GENIE_ERR_INVALID_ARGUMENT, "ndim ", ndim, " exceeds GENIE_MAX_DIMS (",
        GENIE_MAX_DIMS, ")");
  check(ndim == 0 || shape != nullptr, GENIE_ERR_INVALID_ARGUMENT, "shape is NULL with ndim ", ndim);
  Shape s(shape, shape + ndim);
  for (size_t i = 0; i < ndim; ++i)
    if (s[i] < 0) fail(GENIE_ERR_INVALID_ARGUMENT, "dimension ", i, " of ", shape_str(s), " is negative");
  return s;
}

void check_range(const TensorObj* t, size_t offset, size_t nbytes, const void* buf, const char* what) {
  check(buf != nullptr || nbytes == 0, GENIE_ERR_INVALID_ARGUMENT, what, " is NULL");
  const size_t size = t->ref.nbytes();
  check(offset <= size && nbytes <= size - offset, GENIE_ERR_SIZE_MISMATCH, "range [", offset, ", ", offset,
        " + ", nbytes, ") exceeds the tensor's ", size, " bytes");
}

}  // namespace

extern "C" {

genie_status_t genie_tensor_alloc(genie_context_t* ctx, genie_dtype_t dtype, const int64_t* shape,
                                  size_t ndim, const char* device, genie_tensor_t** out) {
  return guard([&] {
    Context& c = *live<ContextObj>(ctx)->impl;
    check_out(out, "out");
    check(dtype_valid(dtype), GENIE_ERR_INVALID_ARGUMENT, "dtype ", static_cast<int>(dtype),
          " is not a genie_dtype_t");
    Shape s = shape_from(shape, ndim);
    c.check_live();
    auto h = std::make_unique<TensorObj>();
    h->ref = c.alloc(static_cast<DType>(dtype), std::move(s), device, &h->device);
    h->ctx = c.shared_from_this();
    *out = publish(std::move(h));
  });
}

void genie_tensor_destroy(genie_tensor_t* tensor) { retire<TensorObj>(tensor); }

genie_status_t genie_tensor_write(genie_tensor_t* tensor, size_t offset, const void* src, size_t nbytes) {
  return guard([&] {
    TensorObj* t = live<TensorObj>(tensor);
    t->ctx->check_live();
    check_range(t, offset, nbytes, src, "src");
    t->ref.write(offset, src, nbytes);
  });
}

genie_status_t genie_tensor_read(const genie_tensor_t* tensor, size_t offset, void* dst, size_t nbytes) {
  return guard([&] {
    const TensorObj* t = live<TensorObj>(tensor);
    t->ctx->check_live();
    check_range(t, offset, nbytes, dst, "dst");
    t->ref.read(offset, dst, nbytes);
  });
}

genie_status_t genie_tensor_info(const genie_tensor_t* tensor, genie_dtype_t* dtype, int64_t* shape,
                                 size_t* ndim, size_t* nbytes) {
  return guard([&] {
    const TensorRef& d = live<TensorObj>(tensor)->ref;
    if (dtype) *dtype = static_cast<genie_dtype_t>(d.dtype());
    if (shape) std::copy(d.shape().begin(), d.shape().end(), shape);
    if (ndim) *ndim = d.shape().size();
    if (nbytes) *nbytes = d.nbytes();
  });
}

const char* genie_tensor_device(const genie_tensor_t* tensor) {
  const TensorObj* t = find<TensorObj>(tensor);
  return t == nullptr ? nullptr : t->device.c_str();
}

}  // extern "C"
