// C API: custom operators (docs/custom-ops.md). A registration becomes a
// custom schema in the graph layer (inference, cost) and a CPU kernel in
// the exec layer, both calling back into the vendor's C functions through
// one shared record, whose destroy runs when the last of them lets go.
#include <cmath>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "capi/handles.hpp"
#include "exec/custom_kernels.hpp"
#include "graph/op_schema.hpp"

// What a callback's genie_op_ctx_t points to: one node's call.
struct genie_op_ctx {
  const genie::Attrs* attrs = nullptr;
  std::string error;                               // genie_op_set_error
  std::deque<std::vector<double>> floats_scratch;  // ints read as floats, alive for the call
};

using namespace genie;

namespace {

constexpr int32_t kMaxArity = 64;
constexpr size_t kMaxNameLength = 64;
// The fields of version 1, up to and including `destroy`.
constexpr size_t kDescV1Size = offsetof(genie_op_desc_t, destroy) + sizeof(genie_op_desc_t::destroy);

struct OpRecord {
  std::string name;
  int32_t num_outputs = 1;
  genie_op_infer_fn infer = nullptr;
  genie_op_kernel_fn cpu_kernel = nullptr;
  genie_op_flops_fn flops = nullptr;
  void* user_data = nullptr;
  void (*destroy)(void*) = nullptr;

  OpRecord() = default;
  OpRecord(const OpRecord&) = delete;
  OpRecord& operator=(const OpRecord&) = delete;
  ~OpRecord() {
    if (destroy) destroy(user_data);
  }
};
using RecordPtr = std::shared_ptr<const OpRecord>;

// Serialises register/unregister, so that the schema and the kernel of one
// op come and go together.
std::mutex& registration_mutex() {
  static std::mutex* m = new std::mutex;
  return *m;
}

void check_name(const char* name) {
  check(name != nullptr, GENIE_ERR_INVALID_ARGUMENT, "op name is NULL");
  const size_t n = std::strlen(name);
  check(n > 0, GENIE_ERR_INVALID_ARGUMENT, "op name is empty");
  if (n > kMaxNameLength)  // not check(): its arguments are built even when it passes
    fail(GENIE_ERR_INVALID_ARGUMENT, "op name '", std::string(name, kMaxNameLength), "...' is longer than ",
         kMaxNameLength, " characters");
  const auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  check(alpha(name[0]), GENIE_ERR_INVALID_ARGUMENT, "op name '", name, "' must start with a letter");
  for (size_t i = 0; i < n; ++i) {
    const char c = name[i];
    const bool ok = alpha(c) || (c >= '0' && c <= '9') || c == '_' || c == '.';
    if (!ok) {
      const auto byte = static_cast<unsigned>(static_cast<unsigned char>(c));
      fail(GENIE_ERR_INVALID_ARGUMENT, "op name '", name, "' has an invalid character at offset ", i,
           (c > ' ' && c < 127) ? cat(" ('", c, "')") : cat(" (byte ", byte, ")"),
           ": use letters, digits, '_' and '.'");
    }
    check(c != '.' || (name[i + 1] != '.' && name[i + 1] != '\0'), GENIE_ERR_INVALID_ARGUMENT, "op name '",
          name, "' has an empty part ('..' or a trailing '.')");
  }
}

// The desc as version 1 sees it: a shorter struct's missing fields are
// zero; a longer one is accepted only if what this library does not know
// is zero.
genie_op_desc_t read_desc(const genie_op_desc_t* desc) {
  check(desc != nullptr, GENIE_ERR_INVALID_ARGUMENT, "desc is NULL");
  const size_t size = desc->struct_size;
  check(size >= kDescV1Size, GENIE_ERR_INVALID_ARGUMENT, "desc->struct_size is ", size,
        ": set it to sizeof(genie_op_desc_t) (", sizeof(genie_op_desc_t), ")");
  if (size > sizeof(genie_op_desc_t)) {
    const auto* extra = reinterpret_cast<const unsigned char*>(desc) + sizeof(genie_op_desc_t);
    for (size_t i = 0; i < size - sizeof(genie_op_desc_t); ++i)
      check(extra[i] == 0, GENIE_ERR_VERSION_MISMATCH, "desc->struct_size is ", size, ", larger than this ",
            "library's genie_op_desc_t (", sizeof(genie_op_desc_t), ") and the fields it does not know are ",
            "set: the program was built against a newer genie.h");
  }
  genie_op_desc_t d{};
  std::memcpy(&d, desc, std::min(size, sizeof d));
  return d;
}

genie_op_tensor_t type_view(const ValueType& t) {
  genie_op_tensor_t v{};
  v.dtype = static_cast<genie_dtype_t>(t.dtype);
  v.ndim = static_cast<uint32_t>(std::min<size_t>(t.shape.size(), GENIE_MAX_DIMS));
  for (uint32_t i = 0; i < v.ndim; ++i) v.shape[i] = t.shape[i];
  return v;
}

genie_op_tensor_t data_view(const TensorData* t) {
  if (t == nullptr) return genie_op_tensor_t{};
  genie_op_tensor_t v = type_view(ValueType{t->dtype(), t->shape()});
  v.data = const_cast<std::byte*>(t->bytes());  // inputs are documented read-only
  v.nbytes = t->nbytes();
  int64_t stride = 1;
  for (uint32_t i = v.ndim; i-- > 0;) {
    v.strides[i] = stride;
    stride *= v.shape[i];
  }
  return v;
}

// Turns a callback's failure into the Error the node reports.
[[noreturn]] void callback_failed(const char* what, genie_status_t st, const genie_op_ctx& c) {
  const std::string why = !c.error.empty() ? c.error : cat("returned ", genie_status_str(st));
  if (st > 0)
    fail(GENIE_ERR_INTERNAL, what, " returned the non-error status ", st, " (a callback returns GENIE_OK or ",
         "a negative GENIE_ERR_* code)", c.error.empty() ? "" : ": ", c.error);
  fail(st, what, " failed: ", why);
}

std::vector<ValueType> run_infer(const OpRecord& r, const std::vector<ValueType>& in, const Attrs& attrs) {
  std::vector<genie_op_tensor_t> iv;
  for (const ValueType& t : in) iv.push_back(type_view(t));
  std::vector<genie_op_tensor_t> ov(static_cast<size_t>(r.num_outputs));
  genie_op_ctx c;
  c.attrs = &attrs;
  const genie_status_t st = r.infer(&c, iv.data(), iv.size(), ov.data(), ov.size(), r.user_data);
  if (st != GENIE_OK) callback_failed("inference", st, c);
  std::vector<ValueType> out;
  for (size_t i = 0; i < ov.size(); ++i) {
    const genie_op_tensor_t& o = ov[i];
    check(dtype_valid(o.dtype), GENIE_ERR_INVALID_ARGUMENT, "inference gave output ", i, " no valid dtype (",
          static_cast<int>(o.dtype), ")");
    check(o.ndim <= GENIE_MAX_DIMS, GENIE_ERR_INVALID_ARGUMENT, "inference gave output ", i, " rank ", o.ndim,
          " (at most ", GENIE_MAX_DIMS, ")");
    Shape s(o.shape, o.shape + o.ndim);
    for (int64_t d : s) {
      if (d < 0)
        fail(GENIE_ERR_INVALID_ARGUMENT, "inference gave output ", i, " shape ", shape_str(s),
             " with a negative dimension");
    }
    out.push_back(ValueType{static_cast<DType>(o.dtype), std::move(s)});
  }
  return out;
}

void run_kernel(const OpRecord& r, const KernelArgs& a) {
  std::vector<genie_op_tensor_t> iv, ov;
  for (const TensorData* t : a.in) {
    check(t == nullptr || t->host_accessible(), GENIE_ERR_INTERNAL, "cpu kernel given device memory");
    iv.push_back(data_view(t));
  }
  for (TensorData* t : a.out) ov.push_back(data_view(t));
  genie_op_ctx c;
  c.attrs = &a.attrs;
  const genie_status_t st = r.cpu_kernel(&c, iv.data(), iv.size(), ov.data(), ov.size(), r.user_data);
  if (st != GENIE_OK) callback_failed("kernel", st, c);
}

double run_flops(const OpRecord& r, const std::vector<ValueType>& in, const std::vector<ValueType>& out,
                 const Attrs& attrs) {
  std::vector<genie_op_tensor_t> iv, ov;
  for (const ValueType& t : in) iv.push_back(type_view(t));
  for (const ValueType& t : out) ov.push_back(type_view(t));
  genie_op_ctx c;
  c.attrs = &attrs;
  const double f = r.flops(&c, iv.data(), iv.size(), ov.data(), ov.size(), r.user_data);
  return std::isfinite(f) ? f : -1;
}

const AttrValue& attr_of(const genie_op_ctx_t* ctx, const char* name) {
  check(ctx != nullptr && ctx->attrs != nullptr, GENIE_ERR_INVALID_ARGUMENT, "ctx is NULL");
  check(name != nullptr, GENIE_ERR_INVALID_ARGUMENT, "attribute name is NULL");
  auto it = ctx->attrs->all().find(name);
  check(it != ctx->attrs->all().end(), GENIE_ERR_NOT_FOUND, "the node has no attribute '", name, "'");
  return it->second;
}

template <class T>
const T& attr_as(const genie_op_ctx_t* ctx, const char* name, AttrType want) {
  const AttrValue& v = attr_of(ctx, name);
  const T* p = std::get_if<T>(&v);
  check(p != nullptr, GENIE_ERR_INVALID_ATTRIBUTE, "attribute '", name, "' is ", attr_type_name(attr_type(v)),
        ", not ", attr_type_name(want));
  return *p;
}

}  // namespace

extern "C" {

genie_status_t genie_op_register(const genie_op_desc_t* desc) {
  return guard([&] {
    const genie_op_desc_t d = read_desc(desc);
    check_name(d.name);
    const std::string name = d.name;
    check(d.min_inputs >= 0 && d.min_inputs <= kMaxArity, GENIE_ERR_INVALID_ARGUMENT, "op '", name,
          "': min_inputs ", d.min_inputs, " is outside 0..", kMaxArity);
    check(d.max_inputs == -1 || (d.max_inputs >= d.min_inputs && d.max_inputs <= kMaxArity),
          GENIE_ERR_INVALID_ARGUMENT, "op '", name, "': max_inputs ", d.max_inputs, " must be -1 (variadic) or ",
          "within min_inputs (", d.min_inputs, ")..", kMaxArity);
    check(d.num_outputs >= 1 && d.num_outputs <= kMaxArity, GENIE_ERR_INVALID_ARGUMENT, "op '", name,
          "': num_outputs ", d.num_outputs, " is outside 1..", kMaxArity);
    check(d.infer != nullptr, GENIE_ERR_INVALID_ARGUMENT, "op '", name, "': the infer callback is NULL");
    check(d.cpu_kernel != nullptr, GENIE_ERR_INVALID_ARGUMENT, "op '", name, "': the cpu_kernel callback is NULL");
    check(d.cuda_kernel == nullptr, GENIE_ERR_UNSUPPORTED, "op '", name, "': cuda_kernel must be NULL: this ",
          "version has no CUDA kernels for custom ops (docs/custom-ops.md)");

    auto rec = std::make_shared<OpRecord>();
    rec->name = name;
    rec->num_outputs = d.num_outputs;
    rec->infer = d.infer;
    rec->cpu_kernel = d.cpu_kernel;
    rec->flops = d.flops;
    auto schema = std::make_shared<OpSchema>();
    schema->name = name;
    schema->min_inputs = d.min_inputs;
    schema->max_inputs = d.max_inputs;
    schema->min_outputs = schema->max_outputs = d.num_outputs;
    schema->custom = true;
    const RecordPtr r = rec;
    schema->infer = [r](const std::vector<ValueType>& in, const Attrs& a) { return run_infer(*r, in, a); };
    if (d.flops)
      schema->flops = [r](const std::vector<ValueType>& in, const std::vector<ValueType>& out, const Attrs& a) {
        return run_flops(*r, in, out, a);
      };
    auto kernel = std::make_shared<const CustomKernel>([r](const KernelArgs& a) { run_kernel(*r, a); });

    std::lock_guard lk(registration_mutex());
    add_custom_op(std::move(schema));
    try {
      add_custom_kernel("cpu", name, std::move(kernel));
    } catch (...) {
      remove_custom_op(name);
      throw;
    }
    // Only now does Genie own user_data: every failure above left it alone.
    rec->user_data = d.user_data;
    rec->destroy = d.destroy;
  });
}

genie_status_t genie_op_unregister(const char* name) {
  return guard([&] {
    check(name != nullptr, GENIE_ERR_INVALID_ARGUMENT, "name is NULL");
    std::lock_guard lk(registration_mutex());
    if (!remove_custom_op(name)) {
      check(find_builtin_op(name) == nullptr, GENIE_ERR_NOT_FOUND, "'", name,
            "' is a built-in op: only custom ops can be unregistered");
      fail(GENIE_ERR_NOT_FOUND, "no custom op named '", name, "' is registered");
    }
    remove_custom_kernels(name);
  });
}

int genie_op_is_registered(const char* name) {
  if (name == nullptr) return 0;
  try {
    OpSchemaPtr s = find_op(name);
    return s && s->custom ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

genie_status_t genie_op_attr_int(const genie_op_ctx_t* ctx, const char* name, int64_t* out) {
  return guard([&] {
    const int64_t& v = attr_as<int64_t>(ctx, name, AttrType::Int);
    check_out(out, "out");
    *out = v;
  });
}

genie_status_t genie_op_attr_float(const genie_op_ctx_t* ctx, const char* name, double* out) {
  return guard([&] {
    const AttrValue& v = attr_of(ctx, name);
    check_out(out, "out");
    if (const auto* i = std::get_if<int64_t>(&v)) {
      *out = static_cast<double>(*i);
      return;
    }
    *out = attr_as<double>(ctx, name, AttrType::Float);
  });
}

genie_status_t genie_op_attr_string(const genie_op_ctx_t* ctx, const char* name, const char** out) {
  return guard([&] {
    const std::string& v = attr_as<std::string>(ctx, name, AttrType::String);
    check_out(out, "out");
    *out = v.c_str();
  });
}

genie_status_t genie_op_attr_ints(const genie_op_ctx_t* ctx, const char* name, const int64_t** out,
                                  size_t* out_len) {
  return guard([&] {
    const auto& v = attr_as<std::vector<int64_t>>(ctx, name, AttrType::Ints);
    check_out(out, "out");
    check_out(out_len, "out_len");
    *out = v.data();
    *out_len = v.size();
  });
}

genie_status_t genie_op_attr_floats(const genie_op_ctx_t* ctx, const char* name, const double** out,
                                    size_t* out_len) {
  return guard([&] {
    const AttrValue& v = attr_of(ctx, name);
    check_out(out, "out");
    check_out(out_len, "out_len");
    if (const auto* ints = std::get_if<std::vector<int64_t>>(&v)) {
      // The scratch list belongs to the call; a deque keeps earlier arrays in place.
      auto& scratch = const_cast<genie_op_ctx_t*>(ctx)->floats_scratch;
      scratch.emplace_back(ints->begin(), ints->end());
      *out = scratch.back().data();
      *out_len = scratch.back().size();
      return;
    }
    const auto& f = attr_as<std::vector<double>>(ctx, name, AttrType::Floats);
    *out = f.data();
    *out_len = f.size();
  });
}

genie_status_t genie_op_set_error(genie_op_ctx_t* ctx, const char* message) {
  return guard([&] {
    check(ctx != nullptr, GENIE_ERR_INVALID_ARGUMENT, "ctx is NULL");
    check(message != nullptr, GENIE_ERR_INVALID_ARGUMENT, "message is NULL");
    ctx->error = message;
  });
}

}  // extern "C"
