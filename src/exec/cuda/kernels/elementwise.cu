// Elementwise kernels: broadcasting arithmetic and comparisons, unary maps,
// gelu, dropout, where, masked_fill, cast. One grid-stride loop per op over
// the output's elements; broadcast operands are read through an Indexer
// (index_math.hpp). f16/bf16 elements compute in f32.
#include <cmath>
#include <limits>
#include <string>

#include "exec/cuda/kernels/device_util.cuh"

namespace genie::cuda {

namespace {

// --- binary --------------------------------------------------------------

// Signed overflow wraps as two's complement, as in the CPU kernels.
template <class T, class Op>
__device__ __forceinline__ T arith(T a, T b, Op op) {
  if constexpr (kIsFloat<T>) {
    return from_f32<T>(op(to_f32(a), to_f32(b)));
  } else {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(op(static_cast<U>(a), static_cast<U>(b)));
  }
}

struct Plus {
  template <class C>
  __device__ C operator()(C a, C b) const {
    return a + b;
  }
};
struct Minus {
  template <class C>
  __device__ C operator()(C a, C b) const {
    return a - b;
  }
};
struct Times {
  template <class C>
  __device__ C operator()(C a, C b) const {
    return a * b;
  }
};

template <class Op>
struct Arith {
  unsigned long long* error;  // unused
  template <class T>
  __device__ T operator()(T a, T b, int64_t) const {
    return arith(a, b, Op{});
  }
};

// Integer division truncates toward zero, MIN / -1 wraps to MIN, and a zero
// divisor reports the element to the error word (the result is discarded).
struct Divide {
  unsigned long long* error;
  template <class T>
  __device__ T operator()(T a, T b, int64_t i) const {
    if constexpr (kIsFloat<T>) {
      return from_f32<T>(to_f32(a) / to_f32(b));
    } else {
      using U = std::make_unsigned_t<T>;
      if (b == 0) {
        report_error(error, i);
        return 0;
      }
      return b == -1 ? static_cast<T>(U(0) - static_cast<U>(a)) : static_cast<T>(a / b);
    }
  }
};

template <class Cmp>
struct Compare {
  unsigned long long* error;  // unused
  template <class T>
  __device__ uint8_t operator()(T a, T b, int64_t) const {
    if constexpr (kIsFloat<T>) {
      return Cmp{}(to_f32(a), to_f32(b)) ? 1 : 0;
    } else {
      return Cmp{}(a, b) ? 1 : 0;
    }
  }
};
struct Eq {
  template <class C>
  __device__ bool operator()(C a, C b) const {
    return a == b;
  }
};
struct Ne {
  template <class C>
  __device__ bool operator()(C a, C b) const {
    return a != b;
  }
};
struct Lt {
  template <class C>
  __device__ bool operator()(C a, C b) const {
    return a < b;
  }
};
struct Le {
  template <class C>
  __device__ bool operator()(C a, C b) const {
    return a <= b;
  }
};
struct Gt {
  template <class C>
  __device__ bool operator()(C a, C b) const {
    return a > b;
  }
};
struct Ge {
  template <class C>
  __device__ bool operator()(C a, C b) const {
    return a >= b;
  }
};

// out[i] = f(a[.], b[.], i) over the broadcast shape; out is contiguous.
template <class R, class T, class F>
__global__ void binary_kernel(const T* __restrict__ a, const T* __restrict__ b, R* __restrict__ out,
                              int64_t n, Indexer<2> ix, F f) {
  for (int64_t i = grid_start(); i < n; i += grid_stride()) {
    int64_t off[2];
    ix.offsets(i, off);
    out[i] = f(a[off[0]], b[off[1]], i);
  }
}

template <class R, class T, class F>
void launch_binary(const KernelArgs& k, F f) {
  const TensorData& a = *k.in[0];
  const TensorData& b = *k.in[1];
  TensorData& out = *k.out[0];
  const Shape& s = out.shape();
  const Indexer<2> ix =
      make_indexer<2>(s, {broadcast_strides(a.shape(), s), broadcast_strides(b.shape(), s)});
  binary_kernel<R, T><<<blocks_for(out.numel()), kThreads, 0, stream_of(k)>>>(
      dev<T>(a), dev<T>(b), dev<R>(out), out.numel(), ix, f);
  check_launch(k.op.c_str());
}

template <class F>
void arithmetic(const KernelArgs& k) {
  const TensorData& a = *k.in[0];
  expect_dtype(k, *k.in[1], a.dtype());
  expect_dtype(k, *k.out[0], a.dtype());
  if (k.out[0]->numel() == 0) return;
  visit_numeric(k, a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<F, Divide> && !kIsFloat<T>) {
      DeviceErrorWord word(stream_of(k));
      launch_binary<T, T>(k, Divide{word.get()});
      const unsigned long long at = word.read();
      if (at != DeviceErrorWord::kNone)
        fail(GENIE_ERR_INVALID_ARGUMENT, "div: integer division by zero (output element ", at, ")");
    } else {
      launch_binary<T, T>(k, F{nullptr});
    }
  });
}

template <class Cmp>
void compare(const KernelArgs& k) {
  const TensorData& a = *k.in[0];
  expect_dtype(k, *k.in[1], a.dtype());
  expect_dtype(k, *k.out[0], DType::Bool);
  if (k.out[0]->numel() == 0) return;
  visit_any(k, a.dtype(), [&](auto tag) { launch_binary<uint8_t, decltype(tag)>(k, Compare<Cmp>{nullptr}); });
}

// --- unary ---------------------------------------------------------------

struct Relu {
  template <class C>
  __device__ C operator()(C x) const {
    return x < C(0) ? C(0) : x;  // NaN passes through, as in PyTorch
  }
};
struct Neg {
  template <class C>
  __device__ C operator()(C x) const {
    if constexpr (std::is_integral_v<C>) {
      return static_cast<C>(std::make_unsigned_t<C>(0) - static_cast<std::make_unsigned_t<C>>(x));
    } else {
      return -x;
    }
  }
};
struct Abs {
  template <class C>
  __device__ C operator()(C x) const {
    if constexpr (std::is_integral_v<C>) {
      return x < 0 ? Neg{}(x) : x;
    } else {
      return fabsf(x);
    }
  }
};
struct Silu {
  __device__ float operator()(float x) const { return x / (1.f + expf(-x)); }
};
struct Sigmoid {
  __device__ float operator()(float x) const { return 1.f / (1.f + expf(-x)); }
};
struct Tanh {
  __device__ float operator()(float x) const { return tanhf(x); }
};
struct Exp {
  __device__ float operator()(float x) const { return expf(x); }
};
struct Log {
  __device__ float operator()(float x) const { return logf(x); }
};
struct Sqrt {
  __device__ float operator()(float x) const { return sqrtf(x); }
};
struct GeluErf {
  __device__ float operator()(float x) const { return 0.5f * x * (1.f + erff(x * 0.70710678118654752f)); }
};
struct GeluTanh {
  __device__ float operator()(float x) const {
    const float k = 0.79788456080286536f;  // sqrt(2/pi)
    return 0.5f * x * (1.f + tanhf(k * (x + 0.044715f * x * x * x)));
  }
};

// Float elements go through f32; integers use Op's integer overload.
template <class T, class Op>
__global__ void unary_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n, Op op) {
  for (int64_t i = grid_start(); i < n; i += grid_stride()) {
    if constexpr (kIsFloat<T>) {
      y[i] = from_f32<T>(op(to_f32(x[i])));
    } else {
      y[i] = op(x[i]);
    }
  }
}

template <class T, class Op>
void launch_unary(const KernelArgs& k, Op op) {
  const int64_t n = k.out[0]->numel();
  if (n == 0) return;
  unary_kernel<T><<<blocks_for(n), kThreads, 0, stream_of(k)>>>(dev<T>(*k.in[0]), dev<T>(*k.out[0]), n, op);
  check_launch(k.op.c_str());
}

template <class Op>
void float_unary(const KernelArgs& k) {
  expect_dtype(k, *k.out[0], k.in[0]->dtype());
  visit_float(k, k.in[0]->dtype(), [&](auto tag) { launch_unary<decltype(tag)>(k, Op{}); });
}

template <class Op>
void numeric_unary(const KernelArgs& k) {
  expect_dtype(k, *k.out[0], k.in[0]->dtype());
  visit_numeric(k, k.in[0]->dtype(), [&](auto tag) { launch_unary<decltype(tag)>(k, Op{}); });
}

void gelu(const KernelArgs& k) {
  const std::string mode = k.attrs.get_string("approximate", "none");
  if (mode == "none") return float_unary<GeluErf>(k);
  if (mode == "tanh") return float_unary<GeluTanh>(k);
  fail(GENIE_ERR_INVALID_ATTRIBUTE, "gelu: approximate must be \"none\" or \"tanh\", got \"", mode, "\"");
}

// Inference-time dropout is the identity: a device copy.
void dropout(const KernelArgs& k) {
  expect_dtype(k, *k.out[0], k.in[0]->dtype());
  if (k.out[0]->nbytes() == 0) return;
  check_cuda(cudaMemcpyAsync(k.out[0]->bytes(), k.in[0]->bytes(), k.out[0]->nbytes(),
                             cudaMemcpyDeviceToDevice, stream_of(k)),
             "dropout");
}

// --- cast ----------------------------------------------------------------

// Float to integer truncates toward zero; NaN gives 0 and values past the
// range saturate (as the CPU kernels do); anything to bool is != 0.
template <class To, class From>
__device__ __forceinline__ To convert_value(From v) {
  if constexpr (std::is_same_v<To, uint8_t>) {
    if constexpr (kIsFloat<From>) {
      return to_f32(v) != 0.f ? 1 : 0;
    } else {
      return v != From(0) ? 1 : 0;
    }
  } else if constexpr (kIsFloat<From> && kIsFloat<To>) {
    return from_f32<To>(to_f32(v));
  } else if constexpr (kIsFloat<From>) {
    const float f = to_f32(v);
    if (f != f) return 0;
    if (f <= static_cast<float>(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
    if (f >= static_cast<float>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(f);
  } else if constexpr (kIsFloat<To>) {
    return from_f32<To>(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

template <class To, class From>
__global__ void cast_kernel(const From* __restrict__ x, To* __restrict__ y, int64_t n) {
  for (int64_t i = grid_start(); i < n; i += grid_stride()) y[i] = convert_value<To>(x[i]);
}

void cast(const KernelArgs& k) {
  const TensorData& x = *k.in[0];
  TensorData& out = *k.out[0];
  if (x.numel() != out.numel())
    fail(GENIE_ERR_SHAPE_MISMATCH, "cast: ", shape_str(x.shape()), " into ", shape_str(out.shape()));
  const int64_t n = out.numel();
  if (n == 0) return;
  visit_any(k, x.dtype(), [&](auto from_tag) {
    using From = decltype(from_tag);
    visit_any(k, out.dtype(), [&](auto to_tag) {
      using To = decltype(to_tag);
      cast_kernel<To, From><<<blocks_for(n), kThreads, 0, stream_of(k)>>>(dev<From>(x), dev<To>(out), n);
      check_launch("cast");
    });
  });
}

// --- where, masked_fill --------------------------------------------------

template <class T>
__global__ void where_kernel(const uint8_t* __restrict__ c, const T* __restrict__ a, const T* __restrict__ b,
                             T* __restrict__ out, int64_t n, Indexer<3> ix) {
  for (int64_t i = grid_start(); i < n; i += grid_stride()) {
    int64_t off[3];
    ix.offsets(i, off);
    out[i] = c[off[0]] ? a[off[1]] : b[off[2]];
  }
}

void where(const KernelArgs& k) {
  const TensorData& c = *k.in[0];
  const TensorData& a = *k.in[1];
  const TensorData& b = *k.in[2];
  TensorData& out = *k.out[0];
  expect_dtype(k, c, DType::Bool);
  expect_dtype(k, b, a.dtype());
  expect_dtype(k, out, a.dtype());
  const int64_t n = out.numel();
  if (n == 0) return;
  const Shape& s = out.shape();
  const Indexer<3> ix = make_indexer<3>(
      s, {broadcast_strides(c.shape(), s), broadcast_strides(a.shape(), s), broadcast_strides(b.shape(), s)});
  visit_any(k, a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    where_kernel<T><<<blocks_for(n), kThreads, 0, stream_of(k)>>>(dev<uint8_t>(c), dev<T>(a), dev<T>(b),
                                                                  dev<T>(out), n, ix);
    check_launch("where");
  });
}

template <class T>
__global__ void masked_fill_kernel(const T* __restrict__ x, const uint8_t* __restrict__ mask,
                                   T* __restrict__ out, int64_t n, Indexer<1> ix, T value) {
  for (int64_t i = grid_start(); i < n; i += grid_stride()) out[i] = mask[ix.offset(i)] ? value : x[i];
}

void masked_fill(const KernelArgs& k) {
  const TensorData& x = *k.in[0];
  const TensorData& mask = *k.in[1];
  TensorData& out = *k.out[0];
  expect_dtype(k, mask, DType::Bool);
  expect_dtype(k, out, x.dtype());
  if (!k.attrs.has("value")) fail(GENIE_ERR_INVALID_ATTRIBUTE, "masked_fill: attribute 'value' is required");
  const double value = k.attrs.get_float("value", 0.0);
  const int64_t n = out.numel();
  if (n == 0) return;
  const Shape& s = out.shape();
  const Indexer<1> ix = make_indexer<1>(s, {broadcast_strides(mask.shape(), s)});
  visit_any(k, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // The fill value converts on the host as cast would convert it.
    T v{};
    if constexpr (std::is_same_v<T, __half>) {
      v = __float2half_rn(static_cast<float>(value));
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      v = __float2bfloat16_rn(static_cast<float>(value));
    } else if constexpr (std::is_same_v<T, uint8_t>) {
      v = value != 0.0 ? 1 : 0;
    } else if constexpr (std::is_integral_v<T>) {
      v = value != value                                                ? T(0)
          : value <= static_cast<double>(std::numeric_limits<T>::min()) ? std::numeric_limits<T>::min()
          : value >= static_cast<double>(std::numeric_limits<T>::max()) ? std::numeric_limits<T>::max()
                                                                        : static_cast<T>(value);
    } else {
      v = static_cast<T>(value);
    }
    masked_fill_kernel<T>
        <<<blocks_for(n), kThreads, 0, stream_of(k)>>>(dev<T>(x), dev<uint8_t>(mask), dev<T>(out), n, ix, v);
    check_launch("masked_fill");
  });
}

}  // namespace

void add_elementwise_kernels(KernelTable& t) {
  t["add"] = arithmetic<Arith<Plus>>;
  t["sub"] = arithmetic<Arith<Minus>>;
  t["mul"] = arithmetic<Arith<Times>>;
  t["div"] = arithmetic<Divide>;
  t["eq"] = compare<Eq>;
  t["ne"] = compare<Ne>;
  t["lt"] = compare<Lt>;
  t["le"] = compare<Le>;
  t["gt"] = compare<Gt>;
  t["ge"] = compare<Ge>;
  t["relu"] = numeric_unary<Relu>;
  t["neg"] = numeric_unary<Neg>;
  t["abs"] = numeric_unary<Abs>;
  t["silu"] = float_unary<Silu>;
  t["sigmoid"] = float_unary<Sigmoid>;
  t["tanh"] = float_unary<Tanh>;
  t["exp"] = float_unary<Exp>;
  t["log"] = float_unary<Log>;
  t["sqrt"] = float_unary<Sqrt>;
  t["gelu"] = gelu;
  t["dropout"] = dropout;
  t["cast"] = cast;
  t["where"] = where;
  t["masked_fill"] = masked_fill;
}

}  // namespace genie::cuda
