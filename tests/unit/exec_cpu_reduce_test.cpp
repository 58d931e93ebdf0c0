// reduce_sum, reduce_mean, reduce_max against double references.
#include <cmath>
#include <limits>

#include "exec_cpu_testing.hpp"

namespace genie::cpu::testing {
namespace {

enum class Kind { Sum, Mean, Max };

// Reference over the given (normalised) axes; returns values in kept-dims order.
std::vector<double> ref_reduce(const TensorData& x, const std::vector<int64_t>& axes, Kind kind) {
  const Shape& s = x.shape();
  Shape kept = s;
  for (int64_t a : axes) kept[a] = 1;
  const std::vector<double> v = as_double(x);
  std::vector<double> acc(static_cast<size_t>(numel(kept)), kind == Kind::Max ? -INFINITY : 0.0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t o = broadcast_index(unravel(i, s), kept);
    acc[o] = kind == Kind::Max ? std::max(acc[o], v[i]) : acc[o] + v[i];
  }
  if (kind == Kind::Mean)
    for (double& a : acc) a /= static_cast<double>(x.numel()) / static_cast<double>(acc.size());
  return acc;
}

struct ReduceCase {
  std::vector<int64_t> axes;  // as given to the kernel
  std::vector<int64_t> normalised;
  bool keepdims;
  Shape out;
};

class Reduce : public ::testing::TestWithParam<ReduceCase> {};

TEST_P(Reduce, SumMeanMaxMatchReference) {
  const ReduceCase& c = GetParam();
  std::mt19937 rng(17);
  const Tensor x = random_f32({3, 4, 5, 2}, rng, -3.f, 3.f);
  Attrs at = attrs({{"keepdims", int64_t{c.keepdims}}});
  if (!c.axes.empty()) at.set("axes", c.axes);
  expect_close(*run1("reduce_sum", at, {x.get()}, DType::F32, c.out),
               ref_reduce(*x, c.normalised, Kind::Sum));
  expect_close(*run1("reduce_mean", at, {x.get()}, DType::F32, c.out),
               ref_reduce(*x, c.normalised, Kind::Mean));
  expect_close(*run1("reduce_max", at, {x.get()}, DType::F32, c.out),
               ref_reduce(*x, c.normalised, Kind::Max));
}

INSTANTIATE_TEST_SUITE_P(Axes, Reduce,
                         ::testing::Values(ReduceCase{{3}, {3}, false, {3, 4, 5}},          // innermost
                                           ReduceCase{{0}, {0}, false, {4, 5, 2}},          // outermost
                                           ReduceCase{{1}, {1}, true, {3, 1, 5, 2}},        // middle, kept
                                           ReduceCase{{-1, 1}, {3, 1}, false, {3, 5}},      // two, negative
                                           ReduceCase{{0, 2}, {0, 2}, true, {1, 4, 1, 2}},  // alternating
                                           ReduceCase{{1, 2}, {1, 2}, false, {3, 2}},       // adjacent
                                           ReduceCase{{}, {0, 1, 2, 3}, false, {}},         // default: all
                                           ReduceCase{{}, {0, 1, 2, 3}, true, {1, 1, 1, 1}}));  // all, kept

TEST(Reduce, IntegersSumAndMax) {
  const Tensor x = make<int32_t>({2, 3}, {1, -5, 3, 4, 2, -6});
  const Attrs rows = attrs({{"axes", std::vector<int64_t>{1}}});
  EXPECT_EQ(values<int32_t>(*run1("reduce_sum", rows, {x.get()}, DType::I32, {2})),
            (std::vector<int32_t>{-1, 0}));
  EXPECT_EQ(values<int32_t>(*run1("reduce_max", rows, {x.get()}, DType::I32, {2})),
            (std::vector<int32_t>{3, 4}));
  const Tensor y = make<int64_t>({3}, {std::numeric_limits<int64_t>::min(), -1, -2});
  EXPECT_EQ(values<int64_t>(*run1("reduce_max", {}, {y.get()}, DType::I64, {})), (std::vector<int64_t>{-1}));
  EXPECT_EQ(values<int64_t>(*run1("reduce_sum", {}, {y.get()}, DType::I64, {})),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::max() - 2}));  // wraps
}

TEST(Reduce, MaxPropagatesNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = make<float>({2, 3}, {1.f, nan, 2.f, -1.f, -2.f, -3.f});
  const Tensor r = run1("reduce_max", attrs({{"axes", std::vector<int64_t>{1}}}), {x.get()}, DType::F32, {2});
  EXPECT_TRUE(std::isnan(r->data<float>()[0]));
  EXPECT_EQ(r->data<float>()[1], -1.f);
}

TEST(Reduce, EmptyAxes) {
  const Tensor x = make<float>({2, 0}, {});
  const Attrs inner = attrs({{"axes", std::vector<int64_t>{1}}});
  expect_close(*run1("reduce_sum", inner, {x.get()}, DType::F32, {2}), {0, 0});
  const Tensor mean = run1("reduce_mean", inner, {x.get()}, DType::F32, {2});
  EXPECT_TRUE(std::isnan(mean->data<float>()[0]));
  expect_error([&] { run1("reduce_max", inner, {x.get()}, DType::F32, {2}); }, GENIE_ERR_INVALID_ARGUMENT);
  // Reducing the non-empty axis of an empty tensor is an empty result, not an error.
  EXPECT_EQ(
      run1("reduce_max", attrs({{"axes", std::vector<int64_t>{0}}}), {x.get()}, DType::F32, {0})->numel(), 0);
}

TEST(Reduce, DuplicateAxesAreRefused) {
  std::mt19937 rng(2);
  const Tensor x = random_f32({2, 3}, rng);
  expect_error(
      [&] {
        run1("reduce_sum", attrs({{"axes", std::vector<int64_t>{1, -1}}}), {x.get()}, DType::F32, {2});
      },
      GENIE_ERR_INVALID_ATTRIBUTE);
}

}  // namespace
}  // namespace genie::cpu::testing
