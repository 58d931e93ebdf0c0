// Elementwise kernels: broadcasting arithmetic and comparisons, unary maps,
// where, masked_fill, cast.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <type_traits>

#include "exec/cpu/kernel_util.hpp"
#include "exec/cpu/vec_math.hpp"

namespace genie::cpu {

namespace {

template <class T>
using Unsigned = std::make_unsigned_t<T>;

// Signed overflow is undefined behaviour, so integer arithmetic wraps as two's
// complement instead (C++20 defines the conversion back to the signed type).
template <class Op>
struct Wrapping {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return T(Op{}(Unsigned<T>(a), Unsigned<T>(b)));
    } else {
      return Op{}(a, b);
    }
  }
};

struct Div {
  // Integer division truncates toward zero; MIN / -1 wraps to MIN. Zero
  // divisors are refused before the loop.
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return b == -1 ? T(Unsigned<T>(0) - Unsigned<T>(a)) : T(a / b);
    } else {
      return a / b;
    }
  }
};

// out = op(a, b) with NumPy broadcasting; out is contiguous with the broadcast shape.
template <class R, class T, class Op>
void binary_map(const KernelArgs& k, const TensorData& a, const TensorData& b, TensorData& out, Op op) {
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  R* po = out.data<R>();
  if (a.shape() == b.shape()) {
    parallel_elements(k, out.numel(), kGrainCheap, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) po[i] = op(pa[i], pb[i]);
    });
    return;
  }
  const Shape& s = out.shape();
  const auto loop =
      make_loop<3>(s, {strides_of(s), broadcast_strides(a.shape(), s), broadcast_strides(b.shape(), s)});
  parallel_rows(k, loop, kGrainCheap, [&](const auto& off, int64_t n, const auto& st) {
    // The output's innermost stride is 1. Spelling out the common input
    // strides keeps index arithmetic out of the loops (and lets -O3 vectorise them).
    R* o = po + off[0];
    const T* x = pa + off[1];
    const T* y = pb + off[2];
    if (st[1] == 1 && st[2] == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = op(x[i], y[i]);
    } else if (st[1] == 1 && st[2] == 0) {
      const T yv = *y;
      for (int64_t i = 0; i < n; ++i) o[i] = op(x[i], yv);
    } else if (st[1] == 0 && st[2] == 1) {
      const T xv = *x;
      for (int64_t i = 0; i < n; ++i) o[i] = op(xv, y[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) o[i] = op(x[i * st[1]], y[i * st[2]]);
    }
  });
}

template <class Op>
void arithmetic(const KernelArgs& a) {
  const TensorData& x = *a.in[0];
  const TensorData& y = *a.in[1];
  expect_dtype(a, y, x.dtype());
  expect_dtype(a, *a.out[0], x.dtype());
  visit_numeric(a, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<Op, Div> && std::is_integral_v<T>) {
      // Broadcasting only repeats elements, so every divisor is used once the output is non-empty.
      const T* d = y.data<T>();
      for (int64_t i = 0, n = a.out[0]->numel() ? y.numel() : 0; i < n; ++i)
        if (d[i] == 0)
          fail(GENIE_ERR_INVALID_ARGUMENT, "div: integer division by zero (divisor element ", i, ")");
    }
    binary_map<T, T>(a, x, y, *a.out[0], Op{});
  });
}

template <class Op>
void compare(const KernelArgs& a) {
  const TensorData& x = *a.in[0];
  expect_dtype(a, *a.in[1], x.dtype());
  expect_dtype(a, *a.out[0], DType::Bool);
  visit_dtype(a, x.dtype(),
              [&](auto tag) { binary_map<uint8_t, decltype(tag)>(a, x, *a.in[1], *a.out[0], Op{}); });
}

struct Relu {
  // Written so that NaN passes through, as in PyTorch.
  template <class T>
  T operator()(T x) const {
    return x < T(0) ? T(0) : x;
  }
};
struct Neg {
  template <class T>
  T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      return T(Unsigned<T>(0) - Unsigned<T>(x));
    } else {
      return -x;
    }
  }
};
struct Abs {
  template <class T>
  T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      return x < 0 ? Neg{}(x) : x;
    } else {
      return std::fabs(x);
    }
  }
};
struct Log {
  float operator()(float x) const { return std::log(x); }
};
struct Sqrt {
  float operator()(float x) const { return std::sqrt(x); }
};

template <class T, class Op>
void unary_map(const KernelArgs& a, int64_t grain, const TensorData& x, TensorData& out, Op op) {
  const T* px = x.data<T>();
  T* po = out.data<T>();
  parallel_elements(a, out.numel(), grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) po[i] = op(px[i]);
  });
}

template <class Op>
void float_unary(const KernelArgs& a) {
  expect_dtype(a, *a.in[0], DType::F32);
  expect_dtype(a, *a.out[0], DType::F32);
  unary_map<float>(a, kGrainDear, *a.in[0], *a.out[0], Op{});
}

template <class Op>
void numeric_unary(const KernelArgs& a) {
  expect_dtype(a, *a.out[0], a.in[0]->dtype());
  visit_numeric(a, a.in[0]->dtype(),
                [&](auto tag) { unary_map<decltype(tag)>(a, kGrainCheap, *a.in[0], *a.out[0], Op{}); });
}

// The transcendental maps run four lanes at a time (vec_math.hpp).
template <vec::F4 (*F)(vec::F4)>
void vec_unary(const KernelArgs& a) {
  expect_dtype(a, *a.in[0], DType::F32);
  expect_dtype(a, *a.out[0], DType::F32);
  const float* x = a.in[0]->data<float>();
  float* y = a.out[0]->data<float>();
  // Ranges start at multiples of kSplitAlign, so the lanes group as in one pass.
  parallel_elements(a, a.out[0]->numel(), kGrainDear, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; i += vec::kLanes)
      vec::store(y + i, F(vec::load(x + i, end - i, 0.f)), end - i);
  });
}

void gelu(const KernelArgs& a) {
  const std::string mode = a.attrs.get_string("approximate", "none");
  if (mode == "none") return vec_unary<vec::gelu_erf>(a);
  if (mode == "tanh") return vec_unary<vec::gelu_tanh>(a);
  fail(GENIE_ERR_INVALID_ATTRIBUTE, "gelu: approximate must be \"none\" or \"tanh\", got \"", mode, "\"");
}

// Inference-time dropout is the identity.
void dropout(const KernelArgs& a) {
  expect_dtype(a, *a.out[0], a.in[0]->dtype());
  std::memcpy(a.out[0]->bytes(), a.in[0]->bytes(), a.out[0]->nbytes());
}

// Float to integer truncates toward zero; NaN gives 0 and values past the
// range saturate, where a plain cast would be undefined behaviour.
template <class To>
To saturating_int(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
  if (v >= static_cast<double>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
  return static_cast<To>(v);
}

template <class To, class From>
To convert_value(From v) {
  if constexpr (std::is_same_v<To, uint8_t>) {
    return v != From(0);  // bool
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    return saturating_int<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

void cast(const KernelArgs& a) {
  const TensorData& x = *a.in[0];
  TensorData& out = *a.out[0];
  visit_dtype(a, x.dtype(), [&](auto from_tag) {
    using From = decltype(from_tag);
    visit_dtype(a, out.dtype(), [&](auto to_tag) {
      using To = decltype(to_tag);
      const From* px = x.data<From>();
      To* po = out.data<To>();
      parallel_elements(a, out.numel(), kGrainCheap, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) po[i] = convert_value<To>(px[i]);
      });
    });
  });
}

void where(const KernelArgs& a) {
  const TensorData& cond = *a.in[0];
  const TensorData& x = *a.in[1];
  const TensorData& y = *a.in[2];
  TensorData& out = *a.out[0];
  expect_dtype(a, cond, DType::Bool);
  expect_dtype(a, y, x.dtype());
  expect_dtype(a, out, x.dtype());
  visit_dtype(a, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const uint8_t* pc = cond.data<uint8_t>();
    const T* px = x.data<T>();
    const T* py = y.data<T>();
    T* po = out.data<T>();
    const Shape& s = out.shape();
    const auto loop = make_loop<4>(s, {strides_of(s), broadcast_strides(cond.shape(), s),
                                       broadcast_strides(x.shape(), s), broadcast_strides(y.shape(), s)});
    parallel_rows(a, loop, kGrainCheap, [&](const auto& off, int64_t n, const auto& st) {
      T* o = po + off[0];
      const uint8_t* c = pc + off[1];
      const T* xr = px + off[2];
      const T* yr = py + off[3];
      for (int64_t i = 0; i < n; ++i) o[i] = c[i * st[1]] ? xr[i * st[2]] : yr[i * st[3]];
    });
  });
}

void masked_fill(const KernelArgs& a) {
  const TensorData& x = *a.in[0];
  const TensorData& mask = *a.in[1];
  TensorData& out = *a.out[0];
  expect_dtype(a, mask, DType::Bool);
  expect_dtype(a, out, x.dtype());
  if (!a.attrs.has("value")) fail(GENIE_ERR_INVALID_ATTRIBUTE, "masked_fill: attribute 'value' is required");
  const double value = a.attrs.get_float("value", 0.0);
  visit_dtype(a, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T v = convert_value<T>(value);
    const T* px = x.data<T>();
    const uint8_t* pm = mask.data<uint8_t>();
    T* po = out.data<T>();
    const Shape& s = out.shape();
    const auto loop = make_loop<2>(s, {strides_of(s), broadcast_strides(mask.shape(), s)});
    // x and out share one contiguous layout, so operand 0's offsets serve both.
    parallel_rows(a, loop, kGrainCheap, [&](const auto& off, int64_t n, const auto& st) {
      const T* xr = px + off[0];
      const uint8_t* m = pm + off[1];
      T* o = po + off[0];
      if (st[1] == 0) {
        if (*m)
          std::fill(o, o + n, v);
        else
          std::copy(xr, xr + n, o);
      } else {
        for (int64_t i = 0; i < n; ++i) o[i] = m[i * st[1]] ? v : xr[i];
      }
    });
  });
}

}  // namespace

void add_elementwise_kernels(KernelTable& t) {
  t["add"] = arithmetic<Wrapping<std::plus<>>>;
  t["sub"] = arithmetic<Wrapping<std::minus<>>>;
  t["mul"] = arithmetic<Wrapping<std::multiplies<>>>;
  t["div"] = arithmetic<Div>;
  t["eq"] = compare<std::equal_to<>>;
  t["ne"] = compare<std::not_equal_to<>>;
  t["lt"] = compare<std::less<>>;
  t["le"] = compare<std::less_equal<>>;
  t["gt"] = compare<std::greater<>>;
  t["ge"] = compare<std::greater_equal<>>;
  t["relu"] = numeric_unary<Relu>;
  t["neg"] = numeric_unary<Neg>;
  t["abs"] = numeric_unary<Abs>;
  t["silu"] = vec_unary<vec::silu>;
  t["sigmoid"] = vec_unary<vec::sigmoid>;
  t["tanh"] = vec_unary<vec::tanh>;
  t["exp"] = vec_unary<vec::exp>;
  t["log"] = float_unary<Log>;
  t["sqrt"] = float_unary<Sqrt>;
  t["gelu"] = gelu;
  t["dropout"] = dropout;
  t["cast"] = cast;
  t["where"] = where;
  t["masked_fill"] = masked_fill;
}

}  // namespace genie::cpu
