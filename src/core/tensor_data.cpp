#include "core/tensor_data.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/error.hpp"

namespace genie {

namespace {
std::atomic<size_t> g_live{0};
std::atomic<size_t> g_peak{0};
}  // namespace

size_t tensor_bytes_live() { return g_live.load(std::memory_order_relaxed); }
size_t tensor_bytes_peak() { return g_peak.load(std::memory_order_relaxed); }
void tensor_bytes_reset_peak() {
  g_peak.store(g_live.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

TensorData::~TensorData() { g_live.fetch_sub(counted_, std::memory_order_relaxed); }

void TensorData::count_live() {
  counted_ = nbytes_;
  const size_t live = g_live.fetch_add(nbytes_, std::memory_order_relaxed) + nbytes_;
  size_t peak = g_peak.load(std::memory_order_relaxed);
  while (live > peak && !g_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

TensorData::TensorData(DType dtype, Shape shape, Buffer buffer, bool counted)
    : dtype_(dtype), shape_(std::move(shape)), numel_(genie::numel(shape_)), nbytes_(0), buffer_(std::move(buffer)) {
  check(dtype_size(dtype) != 0, GENIE_ERR_INVALID_ARGUMENT, "invalid dtype ", static_cast<int>(dtype));
  nbytes_ = byte_size(shape_, dtype_size(dtype));
  if (buffer_.size() < nbytes_)
    fail(GENIE_ERR_INVALID_ARGUMENT, "a buffer of ", buffer_.size(), " bytes cannot hold tensor ",
         shape_str(shape_), " of ", nbytes_, " bytes");
  if (counted) count_live();
}

TensorData::TensorData(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)), numel_(genie::numel(shape_)) {
  check(dtype_size(dtype) != 0, GENIE_ERR_INVALID_ARGUMENT, "invalid dtype ", static_cast<int>(dtype));
  nbytes_ = byte_size(shape_, dtype_size(dtype));
  try {
    buffer_ = Buffer::host_zeroed(nbytes_);
  } catch (const Error&) {
    fail(GENIE_ERR_OUT_OF_MEMORY, "cannot allocate ", nbytes_, " bytes for tensor ", shape_str(shape_));
  }
  count_live();
}

TensorData::TensorData(DType dtype, Shape shape, Uninitialized)
    : TensorData(dtype, shape, Buffer::host(byte_size(shape, dtype_size(dtype))), true) {}

namespace {

float load_f32(const std::byte* p, DType t, int64_t i) {
  switch (t) {
    case DType::F32: return reinterpret_cast<const float*>(p)[i];
    case DType::F16: return f16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
    case DType::BF16: return bf16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
    case DType::I32: return static_cast<float>(reinterpret_cast<const int32_t*>(p)[i]);
    case DType::I64: return static_cast<float>(reinterpret_cast<const int64_t*>(p)[i]);
    case DType::Bool: return reinterpret_cast<const uint8_t*>(p)[i] ? 1.f : 0.f;
    default: return 0.f;
  }
}

int64_t load_i64(const std::byte* p, DType t, int64_t i) {
  switch (t) {
    case DType::I32: return reinterpret_cast<const int32_t*>(p)[i];
    case DType::I64: return reinterpret_cast<const int64_t*>(p)[i];
    case DType::Bool: return reinterpret_cast<const uint8_t*>(p)[i];
    default: return static_cast<int64_t>(load_f32(p, t, i));
  }
}

}  // namespace

TensorPtr convert(const TensorData& src, DType to) {
  // Every byte is written below: no zero-fill.
  auto out = std::make_shared<TensorData>(to, src.shape(), Buffer::host(byte_size(src.shape(), dtype_size(to))),
                                          true);
  convert_into(src, *out);
  return out;
}

void convert_into(const TensorData& src, TensorData& dst) {
  check(src.host_accessible() && dst.host_accessible(), GENIE_ERR_INTERNAL,
        "convert: device memory reached host code");
  check(src.numel() == dst.numel(), GENIE_ERR_INTERNAL, "convert: ", src.numel(), " elements into ", dst.numel());
  convert_elements(src.bytes(), src.dtype(), dst.bytes(), dst.dtype(), src.numel());
}

void convert_elements(const std::byte* p, DType from, std::byte* q, DType to, int64_t n) {
  if (from == to) {
    if (n > 0) std::memcpy(q, p, static_cast<size_t>(n) * dtype_size(to));
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    switch (to) {
      case DType::F32: reinterpret_cast<float*>(q)[i] = load_f32(p, from, i); break;
      case DType::F16: reinterpret_cast<uint16_t*>(q)[i] = f32_to_f16(load_f32(p, from, i)); break;
      case DType::BF16: reinterpret_cast<uint16_t*>(q)[i] = f32_to_bf16(load_f32(p, from, i)); break;
      case DType::I32: reinterpret_cast<int32_t*>(q)[i] = static_cast<int32_t>(load_i64(p, from, i)); break;
      case DType::I64: reinterpret_cast<int64_t*>(q)[i] = load_i64(p, from, i); break;
      case DType::Bool:
        reinterpret_cast<uint8_t*>(q)[i] =
            is_float(from) ? load_f32(p, from, i) != 0.f : load_i64(p, from, i) != 0;
        break;
      default: fail(GENIE_ERR_INTERNAL, "convert to invalid dtype");
    }
  }
}

}  // namespace genie
