// matmul and linear against a naive double reference.
#include "exec_cpu_testing.hpp"

namespace genie::cpu::testing {
namespace {

// Element (i, j) of the matrix `batch` of a stored tensor viewed as
// [batches..., rows, cols], read through an optional transpose.
double at(const TensorData& t, int64_t batch, int64_t i, int64_t j, bool trans) {
  const Shape& s = t.shape();
  const int64_t rows = s[s.size() - 2], cols = s.back();
  const int64_t r = trans ? j : i, c = trans ? i : j;
  return t.data<float>()[batch * rows * cols + r * cols + c];
}

// Reference batched product for rank >= 2 operands with broadcast batch dims.
std::vector<double> ref_matmul(const TensorData& a, const TensorData& b, bool ta, bool tb, const Shape& out) {
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  const int64_t m = ta ? sa.back() : sa[sa.size() - 2];
  const int64_t k = ta ? sa[sa.size() - 2] : sa.back();
  const int64_t n = tb ? sb[sb.size() - 2] : sb.back();
  const Shape batch(out.begin(), out.end() - 2);
  const Shape batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
  std::vector<double> r;
  for (int64_t bi = 0; bi < numel(batch); ++bi) {
    const auto idx = unravel(bi, batch);
    const int64_t ba = broadcast_index(idx, batch_a), bb = broadcast_index(idx, batch_b);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += at(a, ba, i, p, ta) * at(b, bb, p, j, tb);
        r.push_back(s);
      }
  }
  return r;
}

struct MatmulCase {
  Shape a, b, out;
  bool ta, tb;
};

class Matmul : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(Matmul, MatchesReference) {
  const MatmulCase& c = GetParam();
  std::mt19937 rng(5);
  const Tensor a = random_f32(c.a, rng);
  const Tensor b = random_f32(c.b, rng);
  const Attrs at = attrs({{"transpose_a", int64_t{c.ta}}, {"transpose_b", int64_t{c.tb}}});
  expect_close(*run1("matmul", at, {a.get(), b.get()}, DType::F32, c.out),
               ref_matmul(*a, *b, c.ta, c.tb, c.out));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Matmul,
    ::testing::Values(MatmulCase{{5, 7}, {7, 3}, {5, 3}, false, false},
                      MatmulCase{{7, 5}, {7, 3}, {5, 3}, true, false},
                      MatmulCase{{5, 7}, {3, 7}, {5, 3}, false, true},
                      MatmulCase{{7, 5}, {3, 7}, {5, 3}, true, true},
                      MatmulCase{{4, 5, 7}, {4, 7, 3}, {4, 5, 3}, false, false},        // same batch
                      MatmulCase{{2, 1, 5, 7}, {3, 7, 6}, {2, 3, 5, 6}, false, false},  // broadcast both
                      MatmulCase{{2, 1, 7, 5}, {3, 6, 7}, {2, 3, 5, 6}, true, true},    // ... transposed
                      MatmulCase{{4, 5, 7}, {7, 3}, {4, 5, 3}, false, false},           // shared b
                      MatmulCase{{4, 5, 7}, {3, 7}, {4, 5, 3}, false, true},            // shared bᵀ
                      MatmulCase{{4, 7, 5}, {7, 3}, {4, 5, 3}, true, false},            // shared b, aᵀ
                      MatmulCase{{5, 7}, {4, 7, 3}, {4, 5, 3}, false, false},           // shared a
                      MatmulCase{{1, 5, 7}, {4, 7, 3}, {4, 5, 3}, false, false},
                      MatmulCase{{3, 64, 96}, {3, 96, 80}, {3, 64, 80}, false, false},  // BLAS blocking
                      MatmulCase{{2, 5, 0}, {2, 0, 3}, {2, 5, 3}, false, false},        // k = 0: zeros
                      MatmulCase{{0, 5, 7}, {7, 3}, {0, 5, 3}, false, false}));         // empty batch

TEST(Matmul, OneDimensionalOperandsDropTheirDim) {
  std::mt19937 rng(9);
  const Tensor v = random_f32({7}, rng);
  const Tensor m = random_f32({7, 3}, rng);
  const Tensor mb = random_f32({2, 7, 3}, rng);
  const Tensor w = random_f32({7}, rng);
  const Tensor am = random_f32({4, 7}, rng);

  auto dot = [](const TensorData& x, int64_t xo, int64_t xs, const TensorData& y, int64_t yo, int64_t ys,
                int64_t k) {
    double s = 0;
    for (int64_t p = 0; p < k; ++p) s += double{x.data<float>()[xo + p * xs]} * y.data<float>()[yo + p * ys];
    return s;
  };
  // [7] @ [7, 3] -> [3]
  std::vector<double> want;
  for (int64_t j = 0; j < 3; ++j) want.push_back(dot(*v, 0, 1, *m, j, 3, 7));
  expect_close(*run1("matmul", {}, {v.get(), m.get()}, DType::F32, {3}), want);
  // [7] @ [2, 7, 3] -> [2, 3]
  want.clear();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t j = 0; j < 3; ++j) want.push_back(dot(*v, 0, 1, *mb, b * 21 + j, 3, 7));
  expect_close(*run1("matmul", {}, {v.get(), mb.get()}, DType::F32, {2, 3}), want);
  // [4, 7] @ [7] -> [4]
  want.clear();
  for (int64_t i = 0; i < 4; ++i) want.push_back(dot(*am, i * 7, 1, *w, 0, 1, 7));
  expect_close(*run1("matmul", {}, {am.get(), w.get()}, DType::F32, {4}), want);
  // [7] @ [7] -> []; the transpose flags do not apply to 1-D operands.
  const Attrs trans = attrs({{"transpose_a", int64_t{1}}, {"transpose_b", int64_t{1}}});
  expect_close(*run1("matmul", trans, {v.get(), w.get()}, DType::F32, {}), {dot(*v, 0, 1, *w, 0, 1, 7)});
  // [4, 7]ᵀ is not valid with a [7] vector, but [7, 4]ᵀ @ [7] is [4].
  const Tensor at7 = random_f32({7, 4}, rng);
  want.clear();
  for (int64_t i = 0; i < 4; ++i) want.push_back(dot(*at7, i, 4, *w, 0, 1, 7));
  expect_close(*run1("matmul", attrs({{"transpose_a", int64_t{1}}}), {at7.get(), w.get()}, DType::F32, {4}),
               want);
}

TEST(Matmul, MismatchedInnerDimIsRefused) {
  std::mt19937 rng(1);
  const Tensor a = random_f32({2, 3}, rng);
  const Tensor b = random_f32({4, 5}, rng);
  expect_error([&] { run1("matmul", {}, {a.get(), b.get()}, DType::F32, {2, 5}); }, GENIE_ERR_SHAPE_MISMATCH);
}

std::vector<double> ref_linear(const TensorData& x, const TensorData& w, const TensorData* bias) {
  const int64_t in = x.shape().back(), features = w.shape()[0], rows = x.numel() / std::max<int64_t>(in, 1);
  std::vector<double> r;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t o = 0; o < features; ++o) {
      double s = bias ? bias->data<float>()[o] : 0.0;
      for (int64_t p = 0; p < in; ++p) s += double{x.data<float>()[i * in + p]} * w.data<float>()[o * in + p];
      r.push_back(s);
    }
  return r;
}

TEST(Linear, WithAndWithoutBias) {
  std::mt19937 rng(21);
  const Tensor x = random_f32({2, 3, 10}, rng);
  const Tensor w = random_f32({6, 10}, rng);
  const Tensor b = random_f32({6}, rng);
  expect_close(*run1("linear", {}, {x.get(), w.get(), b.get()}, DType::F32, {2, 3, 6}),
               ref_linear(*x, *w, b.get()));
  expect_close(*run1("linear", {}, {x.get(), w.get(), nullptr}, DType::F32, {2, 3, 6}),
               ref_linear(*x, *w, nullptr));
  // The optional slot may also be left off entirely.
  expect_close(*run1("linear", {}, {x.get(), w.get()}, DType::F32, {2, 3, 6}), ref_linear(*x, *w, nullptr));
  const Tensor v = random_f32({10}, rng);
  expect_close(*run1("linear", {}, {v.get(), w.get(), b.get()}, DType::F32, {6}),
               ref_linear(*v, *w, b.get()));
}

TEST(Linear, GptSizedProjection) {
  std::mt19937 rng(22);
  const Tensor x = random_f32({128, 96}, rng);
  const Tensor w = random_f32({288, 96}, rng);
  const Tensor b = random_f32({288}, rng);
  expect_close(*run1("linear", {}, {x.get(), w.get(), b.get()}, DType::F32, {128, 288}),
               ref_linear(*x, *w, b.get()));
}

TEST(Linear, EmptyInnerDimGivesBias) {
  const Tensor x = make<float>({2, 0}, {});
  const Tensor w = make<float>({3, 0}, {});
  const Tensor b = make<float>({3}, {1.f, 2.f, 3.f});
  expect_close(*run1("linear", {}, {x.get(), w.get(), b.get()}, DType::F32, {2, 3}), {1, 2, 3, 1, 2, 3});
}

}  // namespace
}  // namespace genie::cpu::testing
