// reduce_sum, reduce_mean, reduce_max over any set of axes.
#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "exec/cpu/kernel_util.hpp"

namespace genie::cpu {

namespace {

enum class Reduction { Sum, Mean, Max };

// Where each input element lands: the output's strides laid over the input's
// dims, 0 along reduced axes.
std::vector<int64_t> output_strides(const KernelArgs& a) {
  const Shape& xs = a.in[0]->shape();
  const auto rank = static_cast<int64_t>(xs.size());
  const std::vector<int64_t> axes = a.attrs.get_ints("axes", {});
  // No list, or an empty one, means all axes (as in PyTorch).
  std::vector<bool> reduced(xs.size(), axes.empty());
  for (int64_t axis : axes) {
    const auto d = static_cast<size_t>(normalize_axis(axis, rank));
    check(!reduced[d], GENIE_ERR_INVALID_ATTRIBUTE, a.op, ": axis ", axis, " appears twice in axes");
    reduced[d] = true;
  }
  Shape kept = xs;
  for (size_t d = 0; d < xs.size(); ++d)
    if (reduced[d]) kept[d] = 1;
  if (numel(kept) != a.out[0]->numel())
    fail(GENIE_ERR_SHAPE_MISMATCH, a.op, ": output ", shape_str(a.out[0]->shape()),
         " does not match the reduction of ", shape_str(xs));
  std::vector<int64_t> st = strides_of(kept);
  for (size_t d = 0; d < xs.size(); ++d)
    if (reduced[d]) st[d] = 0;
  return st;
}

// acc[out index] = combine(acc[out index], x) for every element of x.
template <class T, class Acc, class Combine>
void accumulate(const TensorData& x, const std::vector<int64_t>& out_strides, Acc* acc, Combine combine) {
  const T* px = x.data<T>();
  const Shape& s = x.shape();
  for_each_row(make_loop<2>(s, {strides_of(s), out_strides}),
               [&](const auto& off, int64_t n, const auto& st) {
                 const T* xr = px + off[0];
                 Acc* ar = acc + off[1];
                 if (st[1] == 0) {
                   Acc r = *ar;
                   for (int64_t i = 0; i < n; ++i) r = combine(r, xr[i * st[0]]);
                   *ar = r;
                 } else {
                   for (int64_t i = 0; i < n; ++i) ar[i * st[1]] = combine(ar[i * st[1]], xr[i * st[0]]);
                 }
               });
}

template <Reduction R>
void reduce(const KernelArgs& a) {
  const TensorData& x = *a.in[0];
  TensorData& out = *a.out[0];
  expect_dtype(a, out, x.dtype());
  if (R == Reduction::Mean) expect_dtype(a, x, DType::F32);
  const std::vector<int64_t> out_strides = output_strides(a);
  const int64_t n_out = out.numel();
  visit_numeric(a, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* po = out.data<T>();
    if constexpr (R == Reduction::Max) {
      if (x.numel() == 0 && n_out > 0)
        fail(GENIE_ERR_INVALID_ARGUMENT, a.op, ": maximum over an empty axis of ", shape_str(x.shape()));
      std::fill(po, po + n_out, std::numeric_limits<T>::lowest());
      // NaN wins, as in PyTorch.
      accumulate<T>(x, out_strides, po, [](T m, T v) { return v > m || v != v ? v : m; });
    } else {
      // Floats sum in double; integers in 64-bit unsigned, which wraps rather
      // than overflowing into undefined behaviour.
      using Acc = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;
      std::vector<Acc> acc(n_out, Acc{0});
      accumulate<T>(x, out_strides, acc.data(), [](Acc s, T v) { return s + static_cast<Acc>(v); });
      // Mean divides by the reduced element count; 0/0 gives NaN for an empty axis, as in NumPy.
      const double count = n_out ? static_cast<double>(x.numel()) / static_cast<double>(n_out) : 1.0;
      for (int64_t i = 0; i < n_out; ++i)
        po[i] = R == Reduction::Mean ? static_cast<T>(static_cast<double>(acc[i]) / count)
                                     : static_cast<T>(acc[i]);
    }
  });
}

}  // namespace

void add_reduce_kernels(KernelTable& t) {
  t["reduce_sum"] = reduce<Reduction::Sum>;
  t["reduce_mean"] = reduce<Reduction::Mean>;
  t["reduce_max"] = reduce<Reduction::Max>;
}

}  // namespace genie::cpu
