// NCHW convolution (im2col + BLAS) and pooling.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "exec/cpu/kernel_util.hpp"

namespace genie::cpu {

namespace {

// A pair attribute (stride, padding, ...) as {rows, cols}.
std::array<int64_t, 2> pair_attr(const KernelArgs& a, const char* key, std::array<int64_t, 2> def) {
  const std::vector<int64_t> v = a.attrs.get_ints(key, {def[0], def[1]});
  if (v.size() != 2) fail(GENIE_ERR_INVALID_ATTRIBUTE, a.op, ": attribute '", key, "' must have 2 entries");
  return {v[0], v[1]};
}

void expect_nchw(const KernelArgs& a, const TensorData& t, const char* what) {
  expect_dtype(a, t, DType::F32);
  if (t.shape().size() != 4)
    fail(GENIE_ERR_SHAPE_MISMATCH, a.op, ": ", what, " must be [N, C, H, W], got ", shape_str(t.shape()));
}

// One spatial axis of a convolution: output position o reads input positions
// o·stride − pad + tap·dilation.
struct Axis {
  int64_t in, out, kernel, stride, pad, dilation;
};

// Output positions [lo, hi) whose input position for `tap` lies inside the input.
std::pair<int64_t, int64_t> valid_range(const Axis& ax, int64_t tap) {
  const int64_t shift = tap * ax.dilation - ax.pad;  // input = o·stride + shift
  const int64_t lo = shift >= 0 ? 0 : (-shift + ax.stride - 1) / ax.stride;
  const int64_t hi = ax.in - shift > 0 ? (ax.in - shift + ax.stride - 1) / ax.stride : 0;
  return {std::min(lo, ax.out), std::clamp(hi, std::min(lo, ax.out), ax.out)};
}

// Unfolds x [channels, H, W] into col [channels·kh·kw, Ho·Wo], zeros for padding.
void im2col(const float* x, int64_t channels, const Axis& h, const Axis& w, float* col) {
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t ki = 0; ki < h.kernel; ++ki) {
      const auto [oh_lo, oh_hi] = valid_range(h, ki);
      for (int64_t kj = 0; kj < w.kernel; ++kj, col += h.out * w.out) {
        const auto [ow_lo, ow_hi] = valid_range(w, kj);
        const int64_t w_shift = kj * w.dilation - w.pad;
        std::fill(col, col + oh_lo * w.out, 0.f);
        for (int64_t oh = oh_lo; oh < oh_hi; ++oh) {
          const float* src = x + (c * h.in + oh * h.stride + ki * h.dilation - h.pad) * w.in + w_shift;
          float* dst = col + oh * w.out;
          std::fill(dst, dst + ow_lo, 0.f);
          if (w.stride == 1) {
            std::copy(src + ow_lo, src + ow_hi, dst + ow_lo);
          } else {
            for (int64_t ow = ow_lo; ow < ow_hi; ++ow) dst[ow] = src[ow * w.stride];
          }
          std::fill(dst + ow_hi, dst + w.out, 0.f);
        }
        std::fill(col + oh_hi * w.out, col + h.out * w.out, 0.f);
      }
    }
  }
}

void conv2d(const KernelArgs& a) {
  const TensorData& x = *a.in[0];
  const TensorData& wt = *a.in[1];
  const TensorData* bias = optional_input(a, 2);
  TensorData& out = *a.out[0];
  expect_nchw(a, x, "input");
  expect_nchw(a, wt, "weight");
  expect_nchw(a, out, "output");
  const Shape& xs = x.shape();
  const Shape& ws = wt.shape();
  const Shape& os = out.shape();
  const int64_t groups = a.attrs.get_int("groups", 1);
  const auto stride = pair_attr(a, "stride", {1, 1});
  const auto pad = pair_attr(a, "padding", {0, 0});
  const auto dil = pair_attr(a, "dilation", {1, 1});
  const Axis h{xs[2], os[2], ws[2], stride[0], pad[0], dil[0]};
  const Axis w{xs[3], os[3], ws[3], stride[1], pad[1], dil[1]};
  auto out_len = [](const Axis& ax) {
    return (ax.in + 2 * ax.pad - ax.dilation * (ax.kernel - 1) - 1) / ax.stride + 1;
  };
  const bool ok = groups > 0 && stride[0] > 0 && stride[1] > 0 && dil[0] > 0 && dil[1] > 0 && pad[0] >= 0 &&
                  pad[1] >= 0 && xs[1] == ws[1] * groups && ws[0] % groups == 0 && os[0] == xs[0] &&
                  os[1] == ws[0] && h.out == out_len(h) && w.out == out_len(w);
  if (!ok)
    fail(GENIE_ERR_SHAPE_MISMATCH, "conv2d: input ", shape_str(xs), ", weight ", shape_str(ws),
         " and output ", shape_str(os), " do not fit the attributes");

  const int64_t n_batch = xs[0], channels = xs[1], out_channels = ws[0];
  const int64_t group_in = ws[1], group_out = out_channels / groups;
  const int64_t taps = group_in * h.kernel * w.kernel;  // GEMM inner dimension
  const int64_t plane_in = h.in * w.in, plane_out = h.out * w.out;
  float* po = out.data<float>();
  float beta = 0.f;
  if (bias) {
    expect_dtype(a, *bias, DType::F32);
    if (bias->numel() != out_channels)
      fail(GENIE_ERR_SHAPE_MISMATCH, "conv2d: bias ", shape_str(bias->shape()), " does not match ",
           out_channels, " output channels");
    // Seeding the output with the bias lets the GEMM add it (beta = 1).
    for (int64_t n = 0; n < n_batch; ++n)
      for (int64_t o = 0; o < out_channels; ++o)
        std::fill_n(po + (n * out_channels + o) * plane_out, plane_out, bias->data<float>()[o]);
    beta = 1.f;
  }
  // A 1x1 kernel with unit stride and no padding reads the input as its own im2col matrix.
  const bool pointwise =
      h.kernel == 1 && w.kernel == 1 && h.stride == 1 && w.stride == 1 && h.pad == 0 && w.pad == 0;
  std::vector<float> col(pointwise ? 0 : static_cast<size_t>(taps * plane_out));
  for (int64_t n = 0; n < n_batch; ++n) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* xg = x.data<float>() + (n * channels + g * group_in) * plane_in;
      if (!pointwise) im2col(xg, group_in, h, w, col.data());
      gemm(false, false, group_out, plane_out, taps, 1.f, wt.data<float>() + g * group_out * taps, taps,
           pointwise ? xg : col.data(), plane_out, beta, po + (n * out_channels + g * group_out) * plane_out,
           plane_out);
    }
  }
}

// Max propagates NaN, as in PyTorch.
inline float max_nan(float m, float v) { return v > m || v != v ? v : m; }

// Max or sum of plane[h0:h1, w0:w1] (row length `width`).
template <bool kMax>
float window(const float* plane, int64_t width, int64_t h0, int64_t h1, int64_t w0, int64_t w1) {
  float r = kMax ? -std::numeric_limits<float>::infinity() : 0.f;
  for (int64_t i = h0; i < h1; ++i)
    for (int64_t j = w0; j < w1; ++j) r = kMax ? max_nan(r, plane[i * width + j]) : r + plane[i * width + j];
  return r;
}

// Pools map each (n, c) plane of the input to the same plane of the output.
void check_planes(const KernelArgs& a) {
  expect_nchw(a, *a.in[0], "input");
  expect_nchw(a, *a.out[0], "output");
  const Shape& xs = a.in[0]->shape();
  const Shape& os = a.out[0]->shape();
  if (os[0] != xs[0] || os[1] != xs[1])
    fail(GENIE_ERR_SHAPE_MISMATCH, a.op, ": output ", shape_str(os), " does not match input ", shape_str(xs));
}

// Calls f(input plane, output plane) for every (n, c).
template <class F>
void for_each_plane(const KernelArgs& a, F f) {
  const Shape& xs = a.in[0]->shape();
  const Shape& os = a.out[0]->shape();
  for (int64_t p = 0; p < xs[0] * xs[1]; ++p)
    f(a.in[0]->data<float>() + p * xs[2] * xs[3], a.out[0]->data<float>() + p * os[2] * os[3]);
}

template <bool kMax>
void pool2d(const KernelArgs& a) {
  check_planes(a);
  if (!a.attrs.has("kernel")) fail(GENIE_ERR_INVALID_ATTRIBUTE, a.op, ": attribute 'kernel' is required");
  const auto kernel = pair_attr(a, "kernel", {1, 1});
  const auto stride = pair_attr(a, "stride", kernel);
  const auto pad = pair_attr(a, "padding", {0, 0});
  if (kernel[0] <= 0 || kernel[1] <= 0 || stride[0] <= 0 || stride[1] <= 0 || pad[0] < 0 || pad[1] < 0)
    fail(GENIE_ERR_INVALID_ATTRIBUTE, a.op, ": kernel and stride must be positive, padding non-negative");
  const Shape& xs = a.in[0]->shape();
  const Shape& os = a.out[0]->shape();
  const int64_t height = xs[2], width = xs[3];
  for_each_plane(a, [&](const float* in, float* out) {
    for (int64_t oh = 0; oh < os[2]; ++oh) {
      const int64_t hs = oh * stride[0] - pad[0], he = hs + kernel[0];
      for (int64_t ow = 0; ow < os[3]; ++ow) {
        const int64_t ws = ow * stride[1] - pad[1], we = ws + kernel[1];
        const float r = window<kMax>(in, width, std::max<int64_t>(hs, 0), std::min(he, height),
                                     std::max<int64_t>(ws, 0), std::min(we, width));
        // Padded zeros count towards the average (count_include_pad), but
        // nothing past the padding does, exactly as PyTorch divides.
        out[oh * os[3] + ow] = kMax ? r
                                    : r / static_cast<float>((std::min(he, height + pad[0]) - hs) *
                                                             (std::min(we, width + pad[1]) - ws));
      }
    }
  });
}

template <bool kMax>
void adaptive_pool2d(const KernelArgs& a) {
  check_planes(a);
  if (!a.attrs.has("output_size"))
    fail(GENIE_ERR_INVALID_ATTRIBUTE, a.op, ": attribute 'output_size' is required");
  const Shape& xs = a.in[0]->shape();
  const Shape& os = a.out[0]->shape();
  const auto size = pair_attr(a, "output_size", {1, 1});
  if (size[0] != os[2] || size[1] != os[3])
    fail(GENIE_ERR_SHAPE_MISMATCH, a.op, ": output ", shape_str(os), " does not match output_size");
  const int64_t height = xs[2], width = xs[3];
  for_each_plane(a, [&](const float* in, float* out) {
    for (int64_t oh = 0; oh < os[2]; ++oh) {
      // PyTorch's bins: [floor(i·H/oh), ceil((i+1)·H/oh)).
      const int64_t h0 = oh * height / os[2], h1 = ((oh + 1) * height + os[2] - 1) / os[2];
      for (int64_t ow = 0; ow < os[3]; ++ow) {
        const int64_t w0 = ow * width / os[3], w1 = ((ow + 1) * width + os[3] - 1) / os[3];
        const float r = window<kMax>(in, width, h0, h1, w0, w1);
        out[oh * os[3] + ow] = kMax ? r : r / static_cast<float>((h1 - h0) * (w1 - w0));
      }
    }
  });
}

}  // namespace

void add_conv_kernels(KernelTable& t) {
  t["conv2d"] = conv2d;
  t["max_pool2d"] = pool2d<true>;
  t["avg_pool2d"] = pool2d<false>;
  t["adaptive_max_pool2d"] = adaptive_pool2d<true>;
  t["adaptive_avg_pool2d"] = adaptive_pool2d<false>;
}

}  // namespace genie::cpu
