// conv2d and the pools against direct-loop double references.
#include <cmath>
#include <limits>

#include "exec_cpu_testing.hpp"

namespace genie::cpu::testing {
namespace {

struct ConvCase {
  Shape x, w;
  int64_t groups;
  std::vector<int64_t> stride, padding, dilation;
  bool bias;
};

int64_t conv_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

std::vector<double> ref_conv(const TensorData& x, const TensorData& w, const TensorData* bias,
                             const ConvCase& c, const Shape& os) {
  const int64_t n = x.shape()[0], ch = x.shape()[1], h = x.shape()[2], wd = x.shape()[3];
  const int64_t o = w.shape()[0], cg = w.shape()[1], kh = w.shape()[2], kw = w.shape()[3];
  const int64_t og = o / c.groups;
  std::vector<double> r;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t oh = 0; oh < os[2]; ++oh)
        for (int64_t ow = 0; ow < os[3]; ++ow) {
          double s = bias ? bias->data<float>()[oc] : 0.0;
          const int64_t g = oc / og;
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t i = 0; i < kh; ++i)
              for (int64_t j = 0; j < kw; ++j) {
                const int64_t ih = oh * c.stride[0] - c.padding[0] + i * c.dilation[0];
                const int64_t iw = ow * c.stride[1] - c.padding[1] + j * c.dilation[1];
                if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
                s += double{x.data<float>()[((b * ch + g * cg + ic) * h + ih) * wd + iw]} *
                     w.data<float>()[((oc * cg + ic) * kh + i) * kw + j];
              }
          r.push_back(s);
        }
  return r;
}

class Conv2d : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv2d, MatchesDirectConvolution) {
  const ConvCase& c = GetParam();
  std::mt19937 rng(31);
  const Tensor x = random_f32(c.x, rng);
  const Tensor w = random_f32(c.w, rng);
  const Tensor b = random_f32({c.w[0]}, rng);
  const Shape os{c.x[0], c.w[0], conv_out(c.x[2], c.w[2], c.stride[0], c.padding[0], c.dilation[0]),
                 conv_out(c.x[3], c.w[3], c.stride[1], c.padding[1], c.dilation[1])};
  const Attrs at =
      attrs({{"groups", c.groups}, {"stride", c.stride}, {"padding", c.padding}, {"dilation", c.dilation}});
  const TensorData* bias = c.bias ? b.get() : nullptr;
  expect_close(*run1("conv2d", at, {x.get(), w.get(), bias}, DType::F32, os), ref_conv(*x, *w, bias, c, os));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Conv2d,
    ::testing::Values(ConvCase{{2, 3, 7, 6}, {4, 3, 3, 3}, 1, {1, 1}, {0, 0}, {1, 1}, false},   // valid
                      ConvCase{{2, 3, 7, 6}, {4, 3, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1}, true},    // same, bias
                      ConvCase{{1, 3, 9, 8}, {5, 3, 3, 2}, 1, {2, 3}, {1, 2}, {1, 1}, true},    // strides
                      ConvCase{{1, 2, 11, 10}, {3, 2, 3, 3}, 1, {1, 2}, {2, 1}, {2, 3}, true},  // dilation
                      ConvCase{{2, 4, 6, 6}, {6, 2, 3, 3}, 2, {1, 1}, {1, 1}, {1, 1}, true},    // 2 groups
                      ConvCase{{1, 4, 5, 5}, {4, 1, 3, 3}, 4, {2, 2}, {1, 1}, {1, 1}, false},   // depthwise
                      ConvCase{{2, 6, 5, 4}, {8, 6, 1, 1}, 1, {1, 1}, {0, 0}, {1, 1}, true},    // pointwise
                      ConvCase{{1, 4, 5, 4}, {6, 2, 1, 1}, 2, {1, 1}, {0, 0}, {1, 1}, false},   // grouped 1x1
                      ConvCase{{1, 2, 5, 5}, {3, 2, 1, 1}, 1, {2, 2}, {1, 1}, {1, 1}, true},    // 1x1, padded
                      ConvCase{
                          {1, 1, 3, 3}, {2, 1, 5, 5}, 1, {1, 1}, {2, 2}, {1, 1}, true}));  // kernel > input

TEST(Conv2d, InconsistentShapesAreRefused) {
  std::mt19937 rng(1);
  const Tensor x = random_f32({1, 3, 5, 5}, rng);
  const Tensor w = random_f32({4, 2, 3, 3}, rng);  // 3 channels do not match 2 per group
  expect_error(
      [&] {
        run1("conv2d", {}, {x.get(), w.get()}, DType::F32, {1, 4, 3, 3});
      },
      GENIE_ERR_SHAPE_MISMATCH);
}

// Pool reference over explicit windows; avg divides by the window clipped to
// the padded input (PyTorch count_include_pad=True).
std::vector<double> ref_pool(const TensorData& x, const Shape& os, bool is_max, std::vector<int64_t> k,
                             std::vector<int64_t> s, std::vector<int64_t> p) {
  const int64_t h = x.shape()[2], w = x.shape()[3];
  std::vector<double> r;
  for (int64_t plane = 0; plane < os[0] * os[1]; ++plane)
    for (int64_t oh = 0; oh < os[2]; ++oh)
      for (int64_t ow = 0; ow < os[3]; ++ow) {
        double acc = is_max ? -INFINITY : 0.0;
        int64_t count = 0;
        for (int64_t i = oh * s[0] - p[0]; i < oh * s[0] - p[0] + k[0]; ++i)
          for (int64_t j = ow * s[1] - p[1]; j < ow * s[1] - p[1] + k[1]; ++j) {
            if (i >= h + p[0] || j >= w + p[1]) continue;
            ++count;
            if (i < 0 || i >= h || j < 0 || j >= w) continue;  // a padded zero
            const double v = x.data<float>()[(plane * h + i) * w + j];
            acc = is_max ? std::max(acc, v) : acc + v;
          }
        r.push_back(is_max ? acc : acc / count);
      }
  return r;
}

TEST(Pool2d, MaxAndAvgWithStrideAndPadding) {
  std::mt19937 rng(41);
  const Tensor x = random_f32({2, 3, 7, 8}, rng);
  struct Case {
    std::vector<int64_t> k, s, p;
  };
  for (const Case& c :
       {Case{{2, 2}, {2, 2}, {0, 0}}, Case{{3, 3}, {2, 2}, {1, 1}}, Case{{3, 2}, {1, 2}, {1, 0}},
        Case{{2, 3}, {3, 1}, {1, 1}}, Case{{5, 5}, {3, 3}, {2, 2}}}) {
    SCOPED_TRACE(::testing::Message() << "kernel " << c.k[0] << "x" << c.k[1] << " stride " << c.s[0] << "x"
                                      << c.s[1] << " pad " << c.p[0] << "x" << c.p[1]);
    const Shape os{2, 3, (7 + 2 * c.p[0] - c.k[0]) / c.s[0] + 1, (8 + 2 * c.p[1] - c.k[1]) / c.s[1] + 1};
    const Attrs at = attrs({{"kernel", c.k}, {"stride", c.s}, {"padding", c.p}});
    expect_close(*run1("max_pool2d", at, {x.get()}, DType::F32, os), ref_pool(*x, os, true, c.k, c.s, c.p));
    expect_close(*run1("avg_pool2d", at, {x.get()}, DType::F32, os), ref_pool(*x, os, false, c.k, c.s, c.p));
  }
  // Stride defaults to the kernel.
  const Shape os{2, 3, 3, 4};
  expect_close(
      *run1("avg_pool2d", attrs({{"kernel", std::vector<int64_t>{2, 2}}}), {x.get()}, DType::F32, os),
      ref_pool(*x, os, false, {2, 2}, {2, 2}, {0, 0}));
}

TEST(Pool2d, MaxIgnoresPaddingForNegativeInputs) {
  // All inputs negative: a padded zero must never win the max.
  const Tensor x = make<float>({1, 1, 2, 2}, {-4.f, -3.f, -2.f, -1.f});
  const Attrs at = attrs({{"kernel", std::vector<int64_t>{2, 2}},
                          {"stride", std::vector<int64_t>{1, 1}},
                          {"padding", std::vector<int64_t>{1, 1}}});
  expect_close(*run1("max_pool2d", at, {x.get()}, DType::F32, {1, 1, 3, 3}),
               {-4, -3, -3, -2, -1, -1, -2, -1, -1});
  // The average of the corner window counts three padded zeros.
  expect_close(*run1("avg_pool2d", at, {x.get()}, DType::F32, {1, 1, 3, 3}),
               {-1, -7.0 / 4, -0.75, -6.0 / 4, -10.0 / 4, -1, -0.5, -3.0 / 4, -0.25});
}

std::vector<double> ref_adaptive(const TensorData& x, int64_t oh_n, int64_t ow_n, bool is_max) {
  const int64_t planes = x.shape()[0] * x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  std::vector<double> r;
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t oh = 0; oh < oh_n; ++oh)
      for (int64_t ow = 0; ow < ow_n; ++ow) {
        const auto h0 = static_cast<int64_t>(std::floor(double(oh) * h / oh_n));
        const auto h1 = static_cast<int64_t>(std::ceil(double(oh + 1) * h / oh_n));
        const auto w0 = static_cast<int64_t>(std::floor(double(ow) * w / ow_n));
        const auto w1 = static_cast<int64_t>(std::ceil(double(ow + 1) * w / ow_n));
        double acc = is_max ? -INFINITY : 0.0;
        for (int64_t i = h0; i < h1; ++i)
          for (int64_t j = w0; j < w1; ++j) {
            const double v = x.data<float>()[(p * h + i) * w + j];
            acc = is_max ? std::max(acc, v) : acc + v;
          }
        r.push_back(is_max ? acc : acc / double((h1 - h0) * (w1 - w0)));
      }
  return r;
}

TEST(AdaptivePool2d, NonDivisibleAndUpsampledSizes) {
  std::mt19937 rng(51);
  const Tensor x = random_f32({2, 3, 7, 5}, rng);
  for (auto [oh, ow] : {std::pair<int64_t, int64_t>{3, 2}, {7, 5}, {1, 1}, {4, 3}, {9, 8}}) {
    SCOPED_TRACE(::testing::Message() << oh << "x" << ow);
    const Attrs at = attrs({{"output_size", std::vector<int64_t>{oh, ow}}});
    const Shape os{2, 3, oh, ow};
    expect_close(*run1("adaptive_avg_pool2d", at, {x.get()}, DType::F32, os),
                 ref_adaptive(*x, oh, ow, false));
    expect_close(*run1("adaptive_max_pool2d", at, {x.get()}, DType::F32, os), ref_adaptive(*x, oh, ow, true));
  }
}

}  // namespace
}  // namespace genie::cpu::testing
