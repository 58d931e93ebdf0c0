// Elementwise CPU kernels against plain double references.
#include <cmath>
#include <limits>

#include "exec_cpu_testing.hpp"

namespace genie::cpu::testing {
namespace {

// Reference for a broadcasting binary op on f32 tensors.
template <class F>
std::vector<double> ref_binary(const TensorData& a, const TensorData& b, const Shape& out, F f) {
  std::vector<double> r(static_cast<size_t>(numel(out)));
  for (size_t i = 0; i < r.size(); ++i) {
    const auto idx = unravel(static_cast<int64_t>(i), out);
    r[i] = f(static_cast<double>(a.data<float>()[broadcast_index(idx, a.shape())]),
             static_cast<double>(b.data<float>()[broadcast_index(idx, b.shape())]));
  }
  return r;
}

TEST(CpuKernels, EveryDocumentedOperatorHasAKernel) {
  for (const char* op : {"matmul",
                         "linear",
                         "add",
                         "sub",
                         "mul",
                         "div",
                         "relu",
                         "silu",
                         "tanh",
                         "sigmoid",
                         "exp",
                         "log",
                         "sqrt",
                         "neg",
                         "abs",
                         "gelu",
                         "dropout",
                         "eq",
                         "ne",
                         "lt",
                         "le",
                         "gt",
                         "ge",
                         "where",
                         "masked_fill",
                         "cast",
                         "softmax",
                         "layer_norm",
                         "rms_norm",
                         "embedding",
                         "reshape",
                         "transpose",
                         "permute",
                         "flatten",
                         "concat",
                         "split",
                         "slice",
                         "reduce_sum",
                         "reduce_mean",
                         "reduce_max",
                         "attention",
                         "conv2d",
                         "max_pool2d",
                         "avg_pool2d",
                         "adaptive_avg_pool2d",
                         "adaptive_max_pool2d"})
    EXPECT_NE(find_kernel(op), nullptr) << op;
  EXPECT_EQ(find_kernel("no_such_op"), nullptr);
}

struct BinaryCase {
  Shape a, b, out;
};

class Arithmetic : public ::testing::TestWithParam<BinaryCase> {};

TEST_P(Arithmetic, MatchesReferenceWithBroadcasting) {
  const BinaryCase& c = GetParam();
  std::mt19937 rng(7);
  const Tensor a = random_f32(c.a, rng);
  const Tensor b = random_f32(c.b, rng, 0.5f, 2.f);  // divisors away from zero
  const Attrs none;
  expect_close(*run1("add", none, {a.get(), b.get()}, DType::F32, c.out),
               ref_binary(*a, *b, c.out, [](double x, double y) { return x + y; }));
  expect_close(*run1("sub", none, {a.get(), b.get()}, DType::F32, c.out),
               ref_binary(*a, *b, c.out, [](double x, double y) { return x - y; }));
  expect_close(*run1("mul", none, {a.get(), b.get()}, DType::F32, c.out),
               ref_binary(*a, *b, c.out, [](double x, double y) { return x * y; }));
  expect_close(*run1("div", none, {a.get(), b.get()}, DType::F32, c.out),
               ref_binary(*a, *b, c.out, [](double x, double y) { return x / y; }));
}

INSTANTIATE_TEST_SUITE_P(Shapes, Arithmetic,
                         ::testing::Values(BinaryCase{{2, 3, 4}, {2, 3, 4}, {2, 3, 4}},  // same shape
                                           BinaryCase{{2, 1, 3}, {4, 1}, {2, 4, 3}},     // both broadcast
                                           BinaryCase{{}, {2, 3}, {2, 3}},               // scalar a
                                           BinaryCase{{2, 3}, {}, {2, 3}},               // scalar b
                                           BinaryCase{{}, {}, {}},                       // scalar both
                                           BinaryCase{{3, 1}, {1, 5}, {3, 5}},           // outer product
                                           BinaryCase{{5, 1, 1, 7}, {1, 6, 3, 1}, {5, 6, 3, 7}},
                                           BinaryCase{{4, 5}, {5}, {4, 5}},     // row vector
                                           BinaryCase{{4, 1}, {4, 6}, {4, 6}},  // column vector
                                           BinaryCase{{0, 3}, {3}, {0, 3}}));   // empty

TEST(Arithmetic, IntegersWrapAndTruncate) {
  const Attrs none;
  const Tensor a = make<int32_t>(
      {2, 3}, {7, -7, 9, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min(), 0});
  const Tensor b = make<int32_t>({3}, {2, 2, -4});
  EXPECT_EQ(values<int32_t>(*run1("div", none, {a.get(), b.get()}, DType::I32, {2, 3})),
            (std::vector<int32_t>{3, -3, -2, std::numeric_limits<int32_t>::max() / 2,
                                  std::numeric_limits<int32_t>::min() / 2, 0}));
  EXPECT_EQ(values<int32_t>(*run1("add", none, {a.get(), b.get()}, DType::I32, {2, 3})),
            (std::vector<int32_t>{9, -5, 5, std::numeric_limits<int32_t>::min() + 1,
                                  std::numeric_limits<int32_t>::min() + 2, -4}));
  EXPECT_EQ(values<int32_t>(*run1("sub", none, {a.get(), b.get()}, DType::I32, {2, 3})),
            (std::vector<int32_t>{5, -9, 13, std::numeric_limits<int32_t>::max() - 2,
                                  std::numeric_limits<int32_t>::max() - 1, 4}));

  const Tensor big = make<int64_t>({3}, {std::numeric_limits<int64_t>::min(), 6, -6});
  const Tensor minus_one = make<int64_t>({1}, {-1});
  EXPECT_EQ(values<int64_t>(*run1("div", none, {big.get(), minus_one.get()}, DType::I64, {3})),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), -6, 6}));
  EXPECT_EQ(values<int64_t>(*run1("mul", none, {big.get(), minus_one.get()}, DType::I64, {3})),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), -6, 6}));
}

TEST(Arithmetic, IntegerDivisionByZeroIsAnError) {
  const Tensor a = make<int32_t>({2, 2}, {1, 2, 3, 4});
  const Tensor b = make<int32_t>({2}, {1, 0});
  expect_error([&] { run1("div", {}, {a.get(), b.get()}, DType::I32, {2, 2}); }, GENIE_ERR_INVALID_ARGUMENT);
  const Tensor a64 = make<int64_t>({1}, {5});
  const Tensor z64 = make<int64_t>({}, {0});
  expect_error([&] { run1("div", {}, {a64.get(), z64.get()}, DType::I64, {1}); }, GENIE_ERR_INVALID_ARGUMENT);
}

TEST(Arithmetic, FloatDivisionByZeroFollowsIeee) {
  const Tensor a = make<float>({3}, {1.f, -1.f, 0.f});
  const Tensor b = make<float>({1}, {0.f});
  const Tensor r = run1("div", {}, {a.get(), b.get()}, DType::F32, {3});
  EXPECT_EQ(r->data<float>()[0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(r->data<float>()[1], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(r->data<float>()[2]));
}

TEST(Compare, AllSixWithBroadcastingGiveBool) {
  const Tensor a = make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor b = make<float>({3}, {2, 2, 5});
  auto cmp = [&](const char* op) {
    return values<uint8_t>(*run1(op, {}, {a.get(), b.get()}, DType::Bool, {2, 3}));
  };
  EXPECT_EQ(cmp("eq"), (std::vector<uint8_t>{0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(cmp("ne"), (std::vector<uint8_t>{1, 0, 1, 1, 1, 1}));
  EXPECT_EQ(cmp("lt"), (std::vector<uint8_t>{1, 0, 1, 0, 0, 0}));
  EXPECT_EQ(cmp("le"), (std::vector<uint8_t>{1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(cmp("gt"), (std::vector<uint8_t>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(cmp("ge"), (std::vector<uint8_t>{0, 1, 0, 1, 1, 1}));

  const Tensor i = make<int64_t>({3, 1}, {1, 2, 3});
  const Tensor j = make<int64_t>({1, 2}, {2, 3});
  EXPECT_EQ(values<uint8_t>(*run1("lt", {}, {i.get(), j.get()}, DType::Bool, {3, 2})),
            (std::vector<uint8_t>{1, 1, 0, 1, 0, 0}));
  const Tensor p = make<uint8_t>({2}, {0, 1});
  const Tensor q = make<uint8_t>({2, 1}, {1, 0});
  EXPECT_EQ(values<uint8_t>(*run1("eq", {}, {p.get(), q.get()}, DType::Bool, {2, 2})),
            (std::vector<uint8_t>{0, 1, 1, 0}));
}

TEST(Unary, FloatOpsMatchReference) {
  std::mt19937 rng(11);
  const Tensor x = random_f32({3, 17}, rng, -4.f, 4.f);
  const Tensor pos = random_f32({3, 17}, rng, 0.01f, 9.f);
  auto check = [&](const char* op, const Tensor& in, double (*f)(double), const Attrs& at = {}) {
    SCOPED_TRACE(op);
    std::vector<double> want;
    for (double v : as_double(*in)) want.push_back(f(v));
    expect_close(*run1(op, at, {in.get()}, DType::F32, in->shape()), want);
  };
  check("relu", x, [](double v) { return v > 0 ? v : 0.0; });
  check("silu", x, [](double v) { return v / (1 + std::exp(-v)); });
  check("sigmoid", x, [](double v) { return 1 / (1 + std::exp(-v)); });
  check("tanh", x, [](double v) { return std::tanh(v); });
  check("exp", x, [](double v) { return std::exp(v); });
  check("neg", x, [](double v) { return -v; });
  check("abs", x, [](double v) { return std::fabs(v); });
  check("log", pos, [](double v) { return std::log(v); });
  check("sqrt", pos, [](double v) { return std::sqrt(v); });
  check(
      "dropout", x, [](double v) { return v; }, attrs({{"p", 0.3}}));
  check("gelu", x, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); });
  check(
      "gelu", x, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); },
      attrs({{"approximate", std::string("none")}}));
  check(
      "gelu", x,
      [](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); },
      attrs({{"approximate", std::string("tanh")}}));
}

// The transcendental kernels use their own vectorised approximations, so they
// are checked tightly (relative error only) across the whole float range,
// including tiny inputs, overflow, underflow and a length that is not a
// multiple of the vector width.
TEST(Unary, TranscendentalsAreAccurateAcrossTheRange) {
  std::vector<float> v;
  for (float x = -100.f; x <= 100.f; x += 0.37f) v.push_back(x);
  for (float x :
       {1e-7f, -1e-7f, 1e-3f, -2e-3f, 0.6249f, -0.6251f, 0.f, -0.f, 88.7f, 88.8f, -87.3f, -87.4f, -104.f})
    v.push_back(x);
  const Tensor x = make<float>({static_cast<int64_t>(v.size())}, v);
  auto check = [&](const char* op, double (*f)(double), double rtol) {
    SCOPED_TRACE(op);
    std::vector<double> want;
    for (double e : as_double(*x)) {
      const double r = f(e);
      want.push_back(std::fabs(r) < std::numeric_limits<float>::min() ? 0.0 : r);  // no denormals
    }
    const Tensor got = run1(op, {}, {x.get()}, DType::F32, x->shape());
    for (size_t i = 0; i < want.size(); ++i) {
      const double g = got->data<float>()[i];
      if (std::isinf(want[i]) || want[i] > std::numeric_limits<float>::max()) {
        EXPECT_TRUE(std::isinf(g) && g > 0) << "x = " << v[i];
      } else if (std::fabs(want[i]) < 1e-30) {
        EXPECT_LT(std::fabs(g), 1e-30) << "x = " << v[i];
      } else {
        EXPECT_LE(std::fabs(g - want[i]), rtol * std::fabs(want[i])) << "x = " << v[i] << ", got " << g;
      }
    }
  };
  check(
      "exp", [](double e) { return std::exp(e); }, 3e-7);
  check(
      "tanh", [](double e) { return std::tanh(e); }, 1e-6);
  check(
      "sigmoid", [](double e) { return 1 / (1 + std::exp(-e)); }, 1e-6);
  check(
      "silu", [](double e) { return e / (1 + std::exp(-e)); }, 1e-6);
  auto gelu_tanh = [](double e) {
    return 0.5 * e * (1 + std::tanh(std::sqrt(2 / M_PI) * (e + 0.044715 * e * e * e)));
  };
  SCOPED_TRACE("gelu tanh");
  const Tensor g =
      run1("gelu", attrs({{"approximate", std::string("tanh")}}), {x.get()}, DType::F32, x->shape());
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_NEAR(g->data<float>()[i], gelu_tanh(v[i]), 1e-6 + 1e-5 * std::fabs(gelu_tanh(v[i])))
        << "x = " << v[i];
}

TEST(Unary, NanPropagates) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = make<float>({5}, {nan, 1.f, nan, -1.f, nan});
  for (const char* op : {"exp", "tanh", "sigmoid", "silu", "gelu", "relu", "log", "sqrt"}) {
    const Tensor r = run1(op, {}, {x.get()}, DType::F32, {5});
    EXPECT_TRUE(std::isnan(r->data<float>()[0]) && std::isnan(r->data<float>()[2]) &&
                std::isnan(r->data<float>()[4]))
        << op;
    EXPECT_FALSE(std::isnan(r->data<float>()[1])) << op;
  }
}

TEST(Unary, ExtremeInputsStayFinite) {
  const Tensor x = make<float>({4}, {-100.f, 100.f, -1e30f, 1e30f});
  const Tensor s = run1("sigmoid", {}, {x.get()}, DType::F32, {4});
  expect_close(*s, {0.0, 1.0, 0.0, 1.0});
  const Tensor r = run1("relu", {}, {x.get()}, DType::F32, {4});
  EXPECT_EQ(values<float>(*r), (std::vector<float>{0.f, 100.f, 0.f, 1e30f}));
}

TEST(Unary, IntegerReluNegAbs) {
  const int32_t lo = std::numeric_limits<int32_t>::min();
  const Tensor x = make<int32_t>({5}, {-3, 0, 4, lo, 7});
  EXPECT_EQ(values<int32_t>(*run1("relu", {}, {x.get()}, DType::I32, {5})),
            (std::vector<int32_t>{0, 0, 4, 0, 7}));
  EXPECT_EQ(values<int32_t>(*run1("neg", {}, {x.get()}, DType::I32, {5})),
            (std::vector<int32_t>{3, 0, -4, lo, -7}));
  EXPECT_EQ(values<int32_t>(*run1("abs", {}, {x.get()}, DType::I32, {5})),
            (std::vector<int32_t>{3, 0, 4, lo, 7}));
  const Tensor y = make<int64_t>({2}, {-9, 9});
  EXPECT_EQ(values<int64_t>(*run1("abs", {}, {y.get()}, DType::I64, {2})), (std::vector<int64_t>{9, 9}));
}

TEST(Unary, GeluRejectsUnknownApproximation) {
  const Tensor x = make<float>({1}, {1.f});
  expect_error(
      [&] {
        run1("gelu", attrs({{"approximate", std::string("fast")}}), {x.get()}, DType::F32, {1});
      },
      GENIE_ERR_INVALID_ATTRIBUTE);
}

TEST(Unary, FloatOnlyKernelRefusesIntegers) {
  const Tensor x = make<int64_t>({2}, {1, 2});
  expect_error([&] { run1("exp", {}, {x.get()}, DType::I64, {2}); }, GENIE_ERR_DTYPE_MISMATCH);
}

TEST(Where, BroadcastsAllThreeOperands) {
  const Tensor cond = make<uint8_t>({2, 1, 3}, {1, 0, 1, 0, 1, 0});
  const Tensor a = make<float>({4, 1}, {10, 20, 30, 40});
  const Tensor b = make<float>({}, {-1});
  const Tensor r = run1("where", {}, {cond.get(), a.get(), b.get()}, DType::F32, {2, 4, 3});
  std::vector<double> want;
  for (int64_t i = 0; i < 24; ++i) {
    const auto idx = unravel(i, {2, 4, 3});
    want.push_back(cond->data<uint8_t>()[broadcast_index(idx, cond->shape())] ? 10.0 * (idx[1] + 1) : -1.0);
  }
  expect_close(*r, want);

  const Tensor ci = make<uint8_t>({3}, {0, 1, 0});
  const Tensor ai = make<int64_t>({3}, {1, 2, 3});
  const Tensor bi = make<int64_t>({3}, {-1, -2, -3});
  EXPECT_EQ(values<int64_t>(*run1("where", {}, {ci.get(), ai.get(), bi.get()}, DType::I64, {3})),
            (std::vector<int64_t>{-1, 2, -3}));
}

TEST(MaskedFill, BroadcastMaskAndIntegerValue) {
  std::mt19937 rng(3);
  const Tensor x = random_f32({2, 3, 4}, rng);
  const Tensor mask = make<uint8_t>({3, 1}, {1, 0, 1});
  const Tensor r =
      run1("masked_fill", attrs({{"value", -1e9}}), {x.get(), mask.get()}, DType::F32, {2, 3, 4});
  std::vector<double> want = as_double(*x);
  for (int64_t i = 0; i < 24; ++i)
    if (mask->data<uint8_t>()[unravel(i, {2, 3, 4})[1]]) want[i] = -1e9;
  expect_close(*r, want);

  const Tensor mask_elem = make<uint8_t>({4}, {0, 1, 1, 0});
  const Tensor r2 =
      run1("masked_fill", attrs({{"value", 2.5}}), {x.get(), mask_elem.get()}, DType::F32, {2, 3, 4});
  want = as_double(*x);
  for (int64_t i = 0; i < 24; ++i)
    if (mask_elem->data<uint8_t>()[i % 4]) want[i] = 2.5;
  expect_close(*r2, want);

  const Tensor xi = make<int32_t>({2, 2}, {1, 2, 3, 4});
  const Tensor mi = make<uint8_t>({2, 2}, {0, 1, 1, 0});
  EXPECT_EQ(values<int32_t>(*run1("masked_fill", attrs({{"value", int64_t{-7}}}), {xi.get(), mi.get()},
                                  DType::I32, {2, 2})),
            (std::vector<int32_t>{1, -7, -7, 4}));
  expect_error(
      [&] {
        run1("masked_fill", {}, {xi.get(), mi.get()}, DType::I32, {2, 2});
      },
      GENIE_ERR_INVALID_ATTRIBUTE);
}

TEST(Cast, FloatToIntegerTruncatesAndSaturates) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = make<float>({7}, {2.7f, -2.7f, 0.5f, -0.5f, 3e9f, -3e9f, nan});
  const int32_t hi = std::numeric_limits<int32_t>::max(), lo = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(
      values<int32_t>(*run1("cast", attrs({{"dtype", std::string("i32")}}), {x.get()}, DType::I32, {7})),
      (std::vector<int32_t>{2, -2, 0, 0, hi, lo, 0}));
  EXPECT_EQ(
      values<int64_t>(*run1("cast", attrs({{"dtype", std::string("i64")}}), {x.get()}, DType::I64, {7})),
      (std::vector<int64_t>{2, -2, 0, 0, 3000000000, -3000000000, 0}));
}

TEST(Cast, ToBoolIsNonZero) {
  const Tensor x = make<float>({4}, {0.f, -0.f, 0.1f, -3.f});
  EXPECT_EQ(
      values<uint8_t>(*run1("cast", attrs({{"dtype", std::string("bool")}}), {x.get()}, DType::Bool, {4})),
      (std::vector<uint8_t>{0, 0, 1, 1}));
  const Tensor i = make<int64_t>({3}, {0, 5, -1});
  EXPECT_EQ(
      values<uint8_t>(*run1("cast", attrs({{"dtype", std::string("bool")}}), {i.get()}, DType::Bool, {3})),
      (std::vector<uint8_t>{0, 1, 1}));
}

TEST(Cast, BetweenIntegerAndFloatTypes) {
  const Tensor b = make<uint8_t>({3}, {1, 0, 1});
  EXPECT_EQ(values<int32_t>(*run1("cast", {}, {b.get()}, DType::I32, {3})), (std::vector<int32_t>{1, 0, 1}));
  EXPECT_EQ(values<float>(*run1("cast", {}, {b.get()}, DType::F32, {3})),
            (std::vector<float>{1.f, 0.f, 1.f}));
  const Tensor i = make<int64_t>({3}, {-5, 1LL << 33, 7});
  EXPECT_EQ(values<float>(*run1("cast", {}, {i.get()}, DType::F32, {3})),
            (std::vector<float>{-5.f, 8589934592.f, 7.f}));
  // i64 to i32 keeps the low 32 bits, as PyTorch does.
  EXPECT_EQ(values<int32_t>(*run1("cast", {}, {i.get()}, DType::I32, {3})), (std::vector<int32_t>{-5, 0, 7}));
  const Tensor j = make<int32_t>({2}, {-3, 4});
  EXPECT_EQ(values<int64_t>(*run1("cast", {}, {j.get()}, DType::I64, {2})), (std::vector<int64_t>{-3, 4}));
  const Tensor f = make<float>({2}, {1.5f, -2.f});
  EXPECT_EQ(values<float>(*run1("cast", {}, {f.get()}, DType::F32, {2})), (std::vector<float>{1.5f, -2.f}));
}

}  // namespace
}  // namespace genie::cpu::testing
