// Element types and their conversions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

#include "genie.h"

namespace genie {

enum class DType : int32_t {
  Invalid = GENIE_DTYPE_INVALID,
  F32 = GENIE_DTYPE_F32,
  F16 = GENIE_DTYPE_F16,
  BF16 = GENIE_DTYPE_BF16,
  I32 = GENIE_DTYPE_I32,
  I64 = GENIE_DTYPE_I64,
  Bool = GENIE_DTYPE_BOOL,
};

// Bytes per element; 0 for Invalid.
size_t dtype_size(DType t);
// "f32", "f16", "bf16", "i32", "i64", "bool"; "invalid" otherwise.
const char* dtype_name(DType t);
// Inverse of dtype_name; nullopt for unknown names.
std::optional<DType> dtype_from_name(std::string_view name);
// True for a value of the genie_dtype_t enumeration other than INVALID.
bool dtype_valid(int32_t raw);
// f32, f16, bf16.
inline bool is_float(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}
// Storage types whose arithmetic runs in f32.
inline bool is_reduced_float(DType t) { return t == DType::F16 || t == DType::BF16; }

// IEEE half and bfloat16 conversions (round to nearest even).
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_f32(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace genie
