// softmax, layer_norm and rms_norm against double references.
#include <cmath>
#include <limits>

#include "exec_cpu_testing.hpp"

namespace genie::cpu::testing {
namespace {

std::vector<double> ref_softmax(const TensorData& x, int64_t axis) {
  const Shape& s = x.shape();
  const std::vector<double> v = as_double(x);
  const int64_t len = s[axis];
  int64_t inner = 1;
  for (size_t d = axis + 1; d < s.size(); ++d) inner *= s[d];
  std::vector<double> r(v.size());
  for (int64_t base = 0; base < x.numel(); ++base) {
    if ((base / inner) % len != 0) continue;  // first element of each softmax line
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < len; ++j) mx = std::max(mx, v[base + j * inner]);
    for (int64_t j = 0; j < len; ++j) sum += std::exp(v[base + j * inner] - mx);
    for (int64_t j = 0; j < len; ++j) r[base + j * inner] = std::exp(v[base + j * inner] - mx) / sum;
  }
  return r;
}

TEST(Softmax, EveryAxis) {
  std::mt19937 rng(4);
  const Tensor x = random_f32({3, 4, 5}, rng, -5.f, 5.f);
  expect_close(*run1("softmax", {}, {x.get()}, DType::F32, {3, 4, 5}), ref_softmax(*x, 2));
  for (int64_t axis : {0, 1, 2, -1, -2, -3}) {
    SCOPED_TRACE(axis);
    expect_close(*run1("softmax", attrs({{"axis", axis}}), {x.get()}, DType::F32, {3, 4, 5}),
                 ref_softmax(*x, axis < 0 ? axis + 3 : axis));
  }
}

TEST(Softmax, LargeValuesAreStable) {
  const Tensor x = make<float>({2, 3}, {1000.f, 1001.f, 1002.f, -1000.f, -1001.f, -1002.f});
  expect_close(*run1("softmax", {}, {x.get()}, DType::F32, {2, 3}), ref_softmax(*x, 1));
}

TEST(Softmax, AllNegativeInfinityLineGivesZeros) {
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor x = make<float>({2, 3}, {-inf, -inf, -inf, 0.f, -inf, 0.f});
  expect_close(*run1("softmax", {}, {x.get()}, DType::F32, {2, 3}), {0, 0, 0, 0.5, 0, 0.5});
  // The same along a non-last axis: column 0 is all -inf.
  const Tensor y = make<float>({2, 2}, {-inf, 1.f, -inf, 1.f});
  expect_close(*run1("softmax", attrs({{"axis", int64_t{0}}}), {y.get()}, DType::F32, {2, 2}),
               {0, 0.5, 0, 0.5});
}

std::vector<double> ref_norm(const TensorData& x, const TensorData* w, const TensorData* b, double eps,
                             bool rms) {
  const int64_t d = x.shape().back();
  const std::vector<double> v = as_double(x);
  std::vector<double> r(v.size());
  for (int64_t row = 0; row < x.numel() / d; ++row) {
    const double* p = v.data() + row * d;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i) mean += p[i];
    mean = rms ? 0.0 : mean / d;
    for (int64_t i = 0; i < d; ++i) var += (p[i] - mean) * (p[i] - mean);
    const double rstd = 1 / std::sqrt(var / d + eps);
    for (int64_t i = 0; i < d; ++i)
      r[row * d + i] =
          (p[i] - mean) * rstd * (w ? w->data<float>()[i] : 1.0) + (b ? b->data<float>()[i] : 0.0);
  }
  return r;
}

TEST(LayerNorm, OptionalWeightAndBias) {
  std::mt19937 rng(8);
  const Tensor x = random_f32({2, 3, 37}, rng, -3.f, 5.f);
  const Tensor w = random_f32({37}, rng);
  const Tensor b = random_f32({37}, rng);
  const Shape s = x->shape();
  expect_close(*run1("layer_norm", {}, {x.get(), w.get(), b.get()}, DType::F32, s),
               ref_norm(*x, w.get(), b.get(), 1e-5, false));
  expect_close(*run1("layer_norm", {}, {x.get(), nullptr, nullptr}, DType::F32, s),
               ref_norm(*x, nullptr, nullptr, 1e-5, false));
  expect_close(*run1("layer_norm", {}, {x.get(), w.get(), nullptr}, DType::F32, s),
               ref_norm(*x, w.get(), nullptr, 1e-5, false));
  expect_close(*run1("layer_norm", {}, {x.get(), nullptr, b.get()}, DType::F32, s),
               ref_norm(*x, nullptr, b.get(), 1e-5, false));
  expect_close(*run1("layer_norm", attrs({{"eps", 0.5}}), {x.get(), w.get(), b.get()}, DType::F32, s),
               ref_norm(*x, w.get(), b.get(), 0.5, false));
}

TEST(LayerNorm, LargeOffsetDoesNotCancel) {
  std::mt19937 rng(12);
  const Tensor x = random_f32({4, 768}, rng, 1000.f, 1001.f);
  expect_close(*run1("layer_norm", {}, {x.get()}, DType::F32, {4, 768}),
               ref_norm(*x, nullptr, nullptr, 1e-5, false), 2e-3, 2e-3);
}

TEST(LayerNorm, ConstantRowGivesBias) {
  const Tensor x = make<float>({1, 4}, {3.f, 3.f, 3.f, 3.f});
  const Tensor b = make<float>({4}, {1.f, 2.f, 3.f, 4.f});
  expect_close(*run1("layer_norm", {}, {x.get(), nullptr, b.get()}, DType::F32, {1, 4}), {1, 2, 3, 4});
}

TEST(RmsNorm, WithAndWithoutWeight) {
  std::mt19937 rng(13);
  const Tensor x = random_f32({5, 19}, rng, -2.f, 2.f);
  const Tensor w = random_f32({19}, rng);
  expect_close(*run1("rms_norm", {}, {x.get(), w.get()}, DType::F32, {5, 19}),
               ref_norm(*x, w.get(), nullptr, 1e-6, true));
  expect_close(*run1("rms_norm", {}, {x.get(), nullptr}, DType::F32, {5, 19}),
               ref_norm(*x, nullptr, nullptr, 1e-6, true));
  expect_close(*run1("rms_norm", attrs({{"eps", 0.25}}), {x.get()}, DType::F32, {5, 19}),
               ref_norm(*x, nullptr, nullptr, 0.25, true));
}

TEST(RmsNorm, WrongWeightLengthIsRefused) {
  std::mt19937 rng(14);
  const Tensor x = random_f32({2, 8}, rng);
  const Tensor w = random_f32({7}, rng);
  expect_error(
      [&] {
        run1("rms_norm", {}, {x.get(), w.get()}, DType::F32, {2, 8});
      },
      GENIE_ERR_SHAPE_MISMATCH);
}

}  // namespace
}  // namespace genie::cpu::testing
