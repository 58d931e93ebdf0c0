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
    t->ctx->tensor_io(t->ref, [&] { t->ref.write(offset, src, nbytes); });
  });
}

genie_status_t genie_tensor_read(const genie_tensor_t* tensor, size_t offset, void* dst, size_t nbytes) {
  return guard([&] {
    const TensorObj* t = live<TensorObj>(tensor);
    t->ctx->check_live();
    check_range(t, offset, nbytes, dst, "dst");
    t->ctx->tensor_io(t->ref, [&] { t->ref.read(offset, dst, nbytes); });
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

genie_status_t genie_tensor_set_semantics(genie_tensor_t* tensor, genie_phase_t phase, genie_tensor_role_t role,
                                          int32_t layer) {
  return guard([&] {
    const TensorObj* t = live<TensorObj>(tensor);
    check(phase >= GENIE_PHASE_UNKNOWN && phase <= GENIE_PHASE_BACKWARD, GENIE_ERR_INVALID_ARGUMENT, "phase ",
          static_cast<int>(phase), " is not a genie_phase_t");
    check(role >= GENIE_TENSOR_ROLE_UNSPECIFIED && role <= GENIE_TENSOR_ROLE_OUTPUT, GENIE_ERR_INVALID_ARGUMENT,
          "role ", static_cast<int>(role), " is not a genie_tensor_role_t");
    // The wire's layer field has 16 bits, and its largest value means "unknown".
    check(layer >= -1 && layer < static_cast<int32_t>(dataplane::SemanticTag::kNoLayer),
          GENIE_ERR_INVALID_ARGUMENT, "layer ", layer, " is outside -1..",
          dataplane::SemanticTag::kNoLayer - 1);
    t->ref.set_semantics({static_cast<Phase>(phase), static_cast<TensorRole>(role), layer});
  });
}

genie_status_t genie_tensor_get_semantics(const genie_tensor_t* tensor, genie_phase_t* phase,
                                          genie_tensor_role_t* role, int32_t* layer) {
  return guard([&] {
    const TensorSemantics s = live<TensorObj>(tensor)->ref.semantics();
    if (phase) *phase = static_cast<genie_phase_t>(s.phase);
    if (role) *role = static_cast<genie_tensor_role_t>(s.role);
    if (layer) *layer = s.layer;
  });
}

}  // extern "C"
