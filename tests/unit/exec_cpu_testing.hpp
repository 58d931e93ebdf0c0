// Helpers for the CPU kernel tests: building tensors, running one kernel, and
// comparing against references the tests compute independently in double.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/tensor_data.hpp"
#include "exec/cpu/kernels.hpp"
#include "graph/attrs.hpp"

namespace genie::cpu::testing {

using Tensor = std::unique_ptr<TensorData>;

template <class T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::F32;
  if constexpr (std::is_same_v<T, int32_t>) return DType::I32;
  if constexpr (std::is_same_v<T, int64_t>) return DType::I64;
  if constexpr (std::is_same_v<T, uint8_t>) return DType::Bool;
}

template <class T>
Tensor make(const Shape& shape, const std::vector<T>& values) {
  Tensor t = std::make_unique<TensorData>(dtype_of<T>(), shape);
  EXPECT_EQ(static_cast<int64_t>(values.size()), t->numel())
      << "test bug: value count for " << shape_str(shape);
  for (int64_t i = 0; i < t->numel(); ++i) t->data<T>()[i] = values[i];
  return t;
}

inline Tensor random_f32(const Shape& shape, std::mt19937& rng, float lo = -1.f, float hi = 1.f) {
  auto t = std::make_unique<TensorData>(DType::F32, shape);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] = dist(rng);
  return t;
}

template <class T>
std::vector<T> values(const TensorData& t) {
  return {t.data<T>(), t.data<T>() + t.numel()};
}

// Values of a f32 tensor widened to double, for references.
inline std::vector<double> as_double(const TensorData& t) {
  return {t.data<float>(), t.data<float>() + t.numel()};
}

inline Attrs attrs(std::initializer_list<std::pair<std::string, AttrValue>> kv) {
  Attrs a;
  for (const auto& [k, v] : kv) a.set(k, v);
  return a;
}

struct OutSpec {
  DType dtype;
  Shape shape;
};

// Runs `op` on `in` into freshly allocated outputs; throws what the kernel throws.
inline std::vector<Tensor> run(const std::string& op, const Attrs& at,
                               const std::vector<const TensorData*>& in, const std::vector<OutSpec>& outs) {
  KernelFn fn = find_kernel(op);
  if (!fn) throw std::runtime_error("no cpu kernel for " + op);
  std::vector<Tensor> owned;
  std::vector<TensorData*> out;
  for (const OutSpec& o : outs) {
    owned.push_back(std::make_unique<TensorData>(o.dtype, o.shape));
    out.push_back(owned.back().get());
  }
  fn(KernelArgs{op, at, in, out});
  return owned;
}

inline Tensor run1(const std::string& op, const Attrs& at, const std::vector<const TensorData*>& in,
                   DType dtype, const Shape& shape) {
  return std::move(run(op, at, in, {{dtype, shape}})[0]);
}

// Element-by-element comparison of a f32 result with a double reference.
inline void expect_close(const TensorData& got, const std::vector<double>& want, double rtol = 1e-4,
                         double atol = 1e-5) {
  ASSERT_EQ(got.dtype(), DType::F32);
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  int failures = 0;
  for (size_t i = 0; i < want.size() && failures < 10; ++i) {
    const double g = got.data<float>()[i];
    const bool same_nan = std::isnan(g) && std::isnan(want[i]);
    const bool same_inf = std::isinf(g) && g == want[i];
    if (same_nan || same_inf || std::fabs(g - want[i]) <= atol + rtol * std::fabs(want[i])) continue;
    ++failures;
    ADD_FAILURE() << "element " << i << ": got " << g << ", want " << want[i];
  }
}

// Row-major multi-index of flat index i.
inline std::vector<int64_t> unravel(int64_t i, const Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    idx[d] = i % s[d];
    i /= s[d];
  }
  return idx;
}

// Flat index into a tensor of shape `in` broadcast to the rank of `idx`
// (right-aligned; size-1 dims always read index 0).
inline int64_t broadcast_index(const std::vector<int64_t>& idx, const Shape& in) {
  int64_t flat = 0;
  const size_t lead = idx.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) flat = flat * in[d] + (in[d] == 1 ? 0 : idx[lead + d]);
  return flat;
}

// Expects fn() to throw genie::Error with `code`.
template <class Fn>
void expect_error(Fn&& fn, genie_status_t code) {
  try {
    fn();
    ADD_FAILURE() << "expected genie::Error " << code;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.detail();
    EXPECT_FALSE(e.detail().empty());
  }
}

}  // namespace genie::cpu::testing
