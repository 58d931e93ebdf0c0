// NCHW pooling: max_pool2d, avg_pool2d (padded zeros counted, as PyTorch's
// count_include_pad), adaptive_avg_pool2d, adaptive_max_pool2d. One thread
// per output element; the windows come from index_math.hpp.
#include <array>
#include <cmath>

#include "exec/cuda/kernels/device_util.cuh"

namespace genie::cuda {

namespace {

struct PoolGeometry {
  int64_t planes, h, w, oh, ow;
  int64_t kh, kw, sh, sw, ph, pw;  // unused by adaptive pools
};

template <class T, bool kMax, bool kAdaptive>
__global__ void pool_kernel(const T* __restrict__ x, T* __restrict__ out, PoolGeometry g) {
  const int64_t n = g.planes * g.oh * g.ow;
  for (int64_t i = grid_start(); i < n; i += grid_stride()) {
    const int64_t plane = i / (g.oh * g.ow);
    const int64_t rest = i - plane * g.oh * g.ow;
    const int64_t oy = rest / g.ow;
    const int64_t ox = rest - oy * g.ow;
    const Window wy = kAdaptive ? adaptive_window(oy, g.h, g.oh) : pool_window(oy, g.h, g.kh, g.sh, g.ph);
    const Window wx = kAdaptive ? adaptive_window(ox, g.w, g.ow) : pool_window(ox, g.w, g.kw, g.sw, g.pw);
    const T* p = x + plane * g.h * g.w;
    float r = kMax ? -INFINITY : 0.f;
    for (int64_t y = wy.begin; y < wy.end; ++y)
      for (int64_t xx = wx.begin; xx < wx.end; ++xx) {
        const float v = to_f32(p[y * g.w + xx]);
        r = kMax ? MaxOp{}(r, v) : r + v;
      }
    out[i] = from_f32<T>(kMax ? r : r / static_cast<float>(wy.divisor * wx.divisor));
  }
}

std::array<int64_t, 2> pair_attr(const KernelArgs& k, const char* key, std::array<int64_t, 2> def) {
  const std::vector<int64_t> v = k.attrs.get_ints(key, {def[0], def[1]});
  if (v.size() != 2) fail(GENIE_ERR_INVALID_ATTRIBUTE, k.op, ": attribute '", key, "' must have 2 entries");
  return {v[0], v[1]};
}

// Pools map each (n, c) plane of the input to the same plane of the output.
PoolGeometry planes(const KernelArgs& k) {
  const TensorData& x = *k.in[0];
  const TensorData& out = *k.out[0];
  expect_dtype(k, out, x.dtype());
  const Shape& xs = x.shape();
  const Shape& os = out.shape();
  if (xs.size() != 4 || os.size() != 4 || os[0] != xs[0] || os[1] != xs[1])
    fail(GENIE_ERR_SHAPE_MISMATCH, k.op, ": output ", shape_str(os), " does not match input ", shape_str(xs),
         " (both [N, C, H, W])");
  return {xs[0] * xs[1], xs[2], xs[3], os[2], os[3], 0, 0, 1, 1, 0, 0};
}

template <bool kMax, bool kAdaptive>
void launch(const KernelArgs& k, const PoolGeometry& g) {
  const int64_t n = g.planes * g.oh * g.ow;
  if (n == 0) return;
  visit_float(k, k.in[0]->dtype(), [&](auto tag) {
    using T = decltype(tag);
    pool_kernel<T, kMax, kAdaptive>
        <<<blocks_for(n), kThreads, 0, stream_of(k)>>>(dev<T>(*k.in[0]), dev<T>(*k.out[0]), g);
    check_launch(k.op.c_str());
  });
}

template <bool kMax>
void pool2d(const KernelArgs& k) {
  PoolGeometry g = planes(k);
  if (!k.attrs.has("kernel")) fail(GENIE_ERR_INVALID_ATTRIBUTE, k.op, ": attribute 'kernel' is required");
  const auto kernel = pair_attr(k, "kernel", {1, 1});
  const auto stride = pair_attr(k, "stride", kernel);
  const auto pad = pair_attr(k, "padding", {0, 0});
  if (kernel[0] <= 0 || kernel[1] <= 0 || stride[0] <= 0 || stride[1] <= 0 || pad[0] < 0 || pad[1] < 0)
    fail(GENIE_ERR_INVALID_ATTRIBUTE, k.op, ": kernel and stride must be positive, padding non-negative");
  g.kh = kernel[0], g.kw = kernel[1], g.sh = stride[0], g.sw = stride[1], g.ph = pad[0], g.pw = pad[1];
  launch<kMax, false>(k, g);
}

template <bool kMax>
void adaptive_pool2d(const KernelArgs& k) {
  const PoolGeometry g = planes(k);
  if (!k.attrs.has("output_size"))
    fail(GENIE_ERR_INVALID_ATTRIBUTE, k.op, ": attribute 'output_size' is required");
  const auto size = pair_attr(k, "output_size", {1, 1});
  if (size[0] != g.oh || size[1] != g.ow)
    fail(GENIE_ERR_SHAPE_MISMATCH, k.op, ": output ", shape_str(k.out[0]->shape()),
         " does not match output_size");
  launch<kMax, true>(k, g);
}

}  // namespace

void add_pool_kernels(KernelTable& t) {
  t["max_pool2d"] = pool2d<true>;
  t["avg_pool2d"] = pool2d<false>;
  t["adaptive_max_pool2d"] = adaptive_pool2d<true>;
  t["adaptive_avg_pool2d"] = adaptive_pool2d<false>;
}

}  // namespace genie::cuda
