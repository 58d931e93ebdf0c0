// Softmax, layer_norm and rms_norm.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "exec/cpu/kernel_util.hpp"
#include "exec/cpu/vec_math.hpp"

namespace genie::cpu {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Σ f(x[i]) for i < n, four lanes at a time; tail lanes read `pad`, which the
// caller picks so that f(pad) adds nothing.
template <class F>
float sum_lanes(const float* x, int64_t n, float pad, F f) {
  vec::F4 acc = {};
  for (int64_t i = 0; i < n; i += vec::kLanes) acc += f(vec::load(x + i, n - i, pad));
  return vec::sum(acc);
}

}  // namespace

void softmax_row(const float* x, float* y, int64_t n) {
  vec::F4 m = vec::splat(kNegInf);
  for (int64_t i = 0; i < n; i += vec::kLanes) {
    const vec::F4 v = vec::load(x + i, n - i, kNegInf);
    m = v > m ? v : m;
  }
  const float mx = vec::max(m);
  if (mx == kNegInf) {
    std::fill(y, y + n, 0.f);
    return;
  }
  vec::F4 sum = {};
  for (int64_t i = 0; i < n; i += vec::kLanes) {
    const vec::F4 e = vec::exp(vec::load(x + i, n - i, kNegInf) - mx);  // padding adds e^-inf = 0
    sum += e;
    vec::store(y + i, e, n - i);
  }
  const float inv = 1.f / vec::sum(sum);
  for (int64_t i = 0; i < n; i += vec::kLanes) vec::store(y + i, vec::load(y + i, n - i, 0.f) * inv, n - i);
}

namespace {

void softmax(const KernelArgs& a) {
  const TensorData& x = *a.in[0];
  TensorData& out = *a.out[0];
  expect_dtype(a, x, DType::F32);
  expect_dtype(a, out, DType::F32);
  const Shape& s = x.shape();
  if (x.numel() == 0) return;
  const auto rank = static_cast<int64_t>(s.size());
  // A rank-0 tensor is a one-element row.
  const size_t axis = rank == 0 ? 0 : static_cast<size_t>(normalize_axis(a.attrs.get_int("axis", -1), rank));
  const int64_t len = rank == 0 ? 1 : s[axis];
  const int64_t outer = dims_product(s, 0, axis);
  const int64_t inner = rank == 0 ? 1 : dims_product(s, axis + 1, s.size());
  const float* px = x.data<float>();
  float* py = out.data<float>();
  // Rows (and, for an inner axis, outer slices) are independent: split them.
  const int64_t grain = (kGrainNorm + len * inner - 1) / (len * inner);
  if (inner == 1) {
    parallel_for(a, outer, grain, [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) softmax_row(px + o * len, py + o * len, len);
    });
    return;
  }
  // Softmax across rows of `inner` contiguous values: every pass streams whole
  // rows, with one running max and sum per column.
  parallel_for(a, outer, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> mx(inner), inv(inner);
    for (int64_t o = begin; o < end; ++o) {
      const float* xo = px + o * len * inner;
      float* yo = py + o * len * inner;
      std::fill(mx.begin(), mx.end(), kNegInf);
      for (int64_t j = 0; j < len; ++j)
        for (int64_t i = 0; i < inner; ++i) mx[i] = std::max(mx[i], xo[j * inner + i]);
      // A column of -inf only: exp(-inf - 0) = 0 everywhere, then zeros below.
      for (float& m : mx) m = m == kNegInf ? 0.f : m;
      std::fill(inv.begin(), inv.end(), 0.f);
      for (int64_t j = 0; j < len; ++j)
        for (int64_t i = 0; i < inner; ++i) inv[i] += yo[j * inner + i] = std::exp(xo[j * inner + i] - mx[i]);
      for (float& v : inv) v = v > 0.f ? 1.f / v : 0.f;
      for (int64_t j = 0; j < len; ++j)
        for (int64_t i = 0; i < inner; ++i) yo[j * inner + i] *= inv[i];
    }
  });
}

// Shared by layer_norm and rms_norm: x viewed as rows of its last dim, with
// optional per-column weight and bias of that length.
struct RowNorm {
  const float* x;
  float* y;
  int64_t rows;
  int64_t d;
  const float* weight;
  const float* bias;
  float eps;
};

RowNorm row_norm_args(const KernelArgs& a, bool has_bias, double default_eps) {
  const TensorData& x = *a.in[0];
  TensorData& out = *a.out[0];
  expect_dtype(a, x, DType::F32);
  expect_dtype(a, out, DType::F32);
  const Shape& s = x.shape();
  check(!s.empty(), GENIE_ERR_SHAPE_MISMATCH, a.op, ": input must have rank >= 1");
  RowNorm r{x.data<float>(),
            out.data<float>(),
            dims_product(s, 0, s.size() - 1),
            s.back(),
            nullptr,
            nullptr,
            static_cast<float>(a.attrs.get_float("eps", default_eps))};
  auto param = [&](size_t slot, const char* what) -> const float* {
    const TensorData* t = optional_input(a, slot);
    if (!t) return nullptr;
    expect_dtype(a, *t, DType::F32);
    if (t->numel() != r.d)
      fail(GENIE_ERR_SHAPE_MISMATCH, a.op, ": ", what, " ", shape_str(t->shape()),
           " does not match the last dim ", r.d);
    return t->data<float>();
  };
  r.weight = param(1, "weight");
  if (has_bias) r.bias = param(2, "bias");
  return r;
}

// y = (x − shift)·scale·weight + bias over one row.
void normalize_row(const RowNorm& r, const float* x, float* y, float shift, float scale) {
  for (int64_t i = 0; i < r.d; i += vec::kLanes) {
    vec::F4 v = (vec::load(x + i, r.d - i, 0.f) - shift) * scale;
    if (r.weight) v *= vec::load(r.weight + i, r.d - i, 0.f);
    if (r.bias) v += vec::load(r.bias + i, r.d - i, 0.f);
    vec::store(y + i, v, r.d - i);
  }
}

// Rows are independent: split them.
template <class F>
void for_rows(const KernelArgs& a, const RowNorm& r, F&& f) {
  parallel_for(a, r.rows, (kGrainNorm + r.d - 1) / std::max<int64_t>(r.d, 1),
               [&](int64_t begin, int64_t end) {
                 for (int64_t row = begin; row < end; ++row) f(row);
               });
}

void layer_norm(const KernelArgs& a) {
  const RowNorm r = row_norm_args(a, true, 1e-5);
  const auto d = static_cast<float>(r.d);
  for_rows(a, r, [&](int64_t row) {
    const float* x = r.x + row * r.d;
    const float mean = sum_lanes(x, r.d, 0.f, [](vec::F4 v) { return v; }) / d;
    // Two passes: the variance of centred values does not cancel catastrophically.
    const float var = sum_lanes(x, r.d, mean, [mean](vec::F4 v) { return (v - mean) * (v - mean); }) / d;
    normalize_row(r, x, r.y + row * r.d, mean, 1.f / std::sqrt(var + r.eps));
  });
}

void rms_norm(const KernelArgs& a) {
  const RowNorm r = row_norm_args(a, false, 1e-6);
  const auto d = static_cast<float>(r.d);
  for_rows(a, r, [&](int64_t row) {
    const float* x = r.x + row * r.d;
    const float mean_square = sum_lanes(x, r.d, 0.f, [](vec::F4 v) { return v * v; }) / d;
    normalize_row(r, x, r.y + row * r.d, 0.f, 1.f / std::sqrt(mean_square + r.eps));
  });
}

}  // namespace

void add_norm_kernels(KernelTable& t) {
  t["softmax"] = softmax;
  t["layer_norm"] = layer_norm;
  t["rms_norm"] = rms_norm;
}

}  // namespace genie::cpu
