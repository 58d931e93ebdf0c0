// Layout kernels: reshape, flatten, transpose, permute, concat, split, slice, embedding.
#include <algorithm>

#include "exec_cpu_testing.hpp"

namespace genie::cpu::testing {
namespace {

template <class T>
Tensor iota_tensor(const Shape& s) {
  std::vector<T> v(static_cast<size_t>(numel(s)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<T>(i * 3 + 1);
  return make<T>(s, v);
}

// Reference permutation: out[idx] = x[idx permuted back].
template <class T>
std::vector<T> ref_permute(const TensorData& x, const std::vector<int64_t>& perm) {
  Shape os(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) os[i] = x.shape()[perm[i]];
  std::vector<T> r;
  for (int64_t i = 0; i < numel(os); ++i) {
    const auto idx = unravel(i, os);
    std::vector<int64_t> src(perm.size());
    for (size_t d = 0; d < perm.size(); ++d) src[perm[d]] = idx[d];
    int64_t flat = 0;
    for (size_t d = 0; d < src.size(); ++d) flat = flat * x.shape()[d] + src[d];
    r.push_back(x.data<T>()[flat]);
  }
  return r;
}

TEST(Reshape, FlattenAndReshapeCopyInOrder) {
  const Tensor x = iota_tensor<float>({2, 3, 4});
  EXPECT_EQ(values<float>(*run1("reshape", attrs({{"shape", std::vector<int64_t>{4, -1}}}), {x.get()},
                                DType::F32, {4, 6})),
            values<float>(*x));
  EXPECT_EQ(values<float>(*run1("flatten", {}, {x.get()}, DType::F32, {2, 12})), values<float>(*x));
  const Tensor b = iota_tensor<uint8_t>({3, 2});
  EXPECT_EQ(values<uint8_t>(*run1("reshape", {}, {b.get()}, DType::Bool, {6})), values<uint8_t>(*b));
  expect_error([&] { run1("reshape", {}, {x.get()}, DType::F32, {5, 5}); }, GENIE_ERR_SHAPE_MISMATCH);
}

TEST(Permute, EveryElementSize) {
  const std::vector<int64_t> perm{2, 0, 3, 1};
  const Shape s{2, 3, 4, 5};
  const Shape os{4, 2, 5, 3};
  const Attrs at = attrs({{"perm", perm}});
  const Tensor f = iota_tensor<float>(s);
  EXPECT_EQ(values<float>(*run1("permute", at, {f.get()}, DType::F32, os)), ref_permute<float>(*f, perm));
  const Tensor i = iota_tensor<int64_t>(s);
  EXPECT_EQ(values<int64_t>(*run1("permute", at, {i.get()}, DType::I64, os)), ref_permute<int64_t>(*i, perm));
  const Tensor b = iota_tensor<uint8_t>(s);
  EXPECT_EQ(values<uint8_t>(*run1("permute", at, {b.get()}, DType::Bool, os)),
            ref_permute<uint8_t>(*b, perm));
  // Attention's [B, S, H, D] -> [B, H, S, D]: the inner dim stays contiguous.
  const Tensor q = iota_tensor<int32_t>({2, 5, 3, 4});
  EXPECT_EQ(values<int32_t>(*run1("permute", attrs({{"perm", std::vector<int64_t>{0, 2, 1, 3}}}), {q.get()},
                                  DType::I32, {2, 3, 5, 4})),
            ref_permute<int32_t>(*q, {0, 2, 1, 3}));
  expect_error(
      [&] {
        run1("permute", attrs({{"perm", std::vector<int64_t>{0, 0, 1, 2}}}), {f.get()}, DType::F32, s);
      },
      GENIE_ERR_INVALID_ATTRIBUTE);
}

TEST(Transpose, DefaultsSwapTheLastTwoDims) {
  const Tensor x = iota_tensor<float>({2, 3, 4});
  EXPECT_EQ(values<float>(*run1("transpose", {}, {x.get()}, DType::F32, {2, 4, 3})),
            ref_permute<float>(*x, {0, 2, 1}));
  EXPECT_EQ(values<float>(*run1("transpose", attrs({{"dim0", int64_t{0}}, {"dim1", int64_t{-1}}}), {x.get()},
                                DType::F32, {4, 3, 2})),
            ref_permute<float>(*x, {2, 1, 0}));
  const Tensor v = iota_tensor<float>({5});
  EXPECT_EQ(values<float>(*run1("transpose", {}, {v.get()}, DType::F32, {5})), values<float>(*v));
}

TEST(Concat, InnerAxisAndManyInputs) {
  const Tensor a = iota_tensor<float>({2, 1, 3});
  const Tensor b = iota_tensor<float>({2, 2, 3});
  const Tensor c = iota_tensor<float>({2, 3, 3});
  const Tensor r =
      run1("concat", attrs({{"axis", int64_t{1}}}), {a.get(), b.get(), c.get()}, DType::F32, {2, 6, 3});
  std::vector<float> want;
  for (int64_t n = 0; n < 2; ++n)
    for (const Tensor* t : {&a, &b, &c}) {
      const int64_t rows = (*t)->shape()[1];
      for (int64_t i = 0; i < rows * 3; ++i) want.push_back((*t)->data<float>()[n * rows * 3 + i]);
    }
  EXPECT_EQ(values<float>(*r), want);
  // Negative axis = last.
  const Tensor x = make<int64_t>({2, 2}, {1, 2, 3, 4});
  const Tensor y = make<int64_t>({2, 1}, {9, 8});
  EXPECT_EQ(values<int64_t>(
                *run1("concat", attrs({{"axis", int64_t{-1}}}), {x.get(), y.get()}, DType::I64, {2, 3})),
            (std::vector<int64_t>{1, 2, 9, 3, 4, 8}));
  // Axis 0 is plain back-to-back copies; one input is a copy.
  EXPECT_EQ(values<int64_t>(*run1("concat", {}, {x.get(), x.get()}, DType::I64, {4, 2})),
            (std::vector<int64_t>{1, 2, 3, 4, 1, 2, 3, 4}));
  EXPECT_EQ(values<int64_t>(*run1("concat", {}, {x.get()}, DType::I64, {2, 2})), values<int64_t>(*x));
  expect_error([&] { run1("concat", {}, {x.get(), y.get()}, DType::I64, {4, 2}); }, GENIE_ERR_SHAPE_MISMATCH);
}

TEST(Split, InnerAxisIntoUnequalParts) {
  const Tensor x = iota_tensor<float>({2, 5, 2});
  const auto outs =
      run("split", attrs({{"axis", int64_t{1}}, {"sizes", std::vector<int64_t>{1, 3, 1}}}), {x.get()},
          {{DType::F32, {2, 1, 2}}, {DType::F32, {2, 3, 2}}, {DType::F32, {2, 1, 2}}});
  const int64_t starts[] = {0, 1, 4};
  for (size_t p = 0; p < 3; ++p) {
    const int64_t rows = outs[p]->shape()[1];
    std::vector<float> want;
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < 2; ++k) want.push_back(x->data<float>()[(n * 5 + starts[p] + r) * 2 + k]);
    EXPECT_EQ(values<float>(*outs[p]), want) << "part " << p;
  }
  // Split then concat round-trips.
  const auto back = run1("concat", attrs({{"axis", int64_t{1}}}),
                         {outs[0].get(), outs[1].get(), outs[2].get()}, DType::F32, {2, 5, 2});
  EXPECT_EQ(values<float>(*back), values<float>(*x));
}

// Python list slicing as the reference.
std::vector<int64_t> py_slice(int64_t len, int64_t start, int64_t end, int64_t step) {
  auto fix = [len](int64_t i) { return std::clamp(i < 0 ? i + len : i, int64_t{0}, len); };
  std::vector<int64_t> r;
  for (int64_t i = fix(start); i < fix(end); i += step) r.push_back(i);
  return r;
}

TEST(Slice, PythonBoundsAndSteps) {
  const Tensor x = iota_tensor<float>({3, 7, 2});
  struct Case {
    int64_t start, end, step;
  };
  for (const Case& c : {Case{0, 7, 1}, Case{2, 5, 1}, Case{-3, 100, 1}, Case{-100, 4, 2}, Case{1, -1, 3},
                        Case{5, 2, 1}, Case{9, 12, 1}, Case{0, 7, 10}, Case{-1, 7, 1}}) {
    SCOPED_TRACE(::testing::Message() << c.start << ":" << c.end << ":" << c.step);
    const std::vector<int64_t> idx = py_slice(7, c.start, c.end, c.step);
    std::vector<float> want;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t i : idx)
        for (int64_t k = 0; k < 2; ++k) want.push_back(x->data<float>()[(n * 7 + i) * 2 + k]);
    const Attrs at = attrs({{"axis", int64_t{1}}, {"start", c.start}, {"end", c.end}, {"step", c.step}});
    const auto n = static_cast<int64_t>(idx.size());
    EXPECT_EQ(values<float>(*run1("slice", at, {x.get()}, DType::F32, {3, n, 2})), want);
  }
  // Defaults: start 0, end = length; negative axis.
  const Tensor i = make<int64_t>({5}, {10, 11, 12, 13, 14});
  EXPECT_EQ(values<int64_t>(*run1("slice", attrs({{"axis", int64_t{-1}}, {"step", int64_t{2}}}), {i.get()},
                                  DType::I64, {3})),
            (std::vector<int64_t>{10, 12, 14}));
  expect_error(
      [&] {
        run1("slice", attrs({{"axis", int64_t{0}}, {"step", int64_t{0}}}), {i.get()}, DType::I64, {0});
      },
      GENIE_ERR_INVALID_ATTRIBUTE);
}

TEST(Embedding, LooksUpRowsForAnyIdShape) {
  std::mt19937 rng(6);
  const Tensor w = random_f32({10, 4}, rng);
  const Tensor ids32 = make<int32_t>({2, 3}, {0, 9, 3, 3, 7, 1});
  const Tensor ids64 = make<int64_t>({2, 3}, {0, 9, 3, 3, 7, 1});
  std::vector<float> want;
  for (int32_t id : values<int32_t>(*ids32))
    for (int64_t k = 0; k < 4; ++k) want.push_back(w->data<float>()[id * 4 + k]);
  EXPECT_EQ(values<float>(*run1("embedding", {}, {ids32.get(), w.get()}, DType::F32, {2, 3, 4})), want);
  EXPECT_EQ(values<float>(*run1("embedding", {}, {ids64.get(), w.get()}, DType::F32, {2, 3, 4})), want);
  const Tensor scalar = make<int64_t>({}, {5});
  EXPECT_EQ(values<float>(*run1("embedding", {}, {scalar.get(), w.get()}, DType::F32, {4})),
            std::vector<float>(w->data<float>() + 20, w->data<float>() + 24));
}

TEST(Embedding, IdOutsideVocabularyIsAnError) {
  std::mt19937 rng(6);
  const Tensor w = random_f32({10, 4}, rng);
  for (int64_t bad : {int64_t{10}, int64_t{-1}, int64_t{1} << 40}) {
    const Tensor ids = make<int64_t>({3}, {1, bad, 2});
    expect_error(
        [&] {
          run1("embedding", {}, {ids.get(), w.get()}, DType::F32, {3, 4});
        },
        GENIE_ERR_INVALID_ARGUMENT);
  }
  const Tensor ids32 = make<int32_t>({1}, {-5});
  expect_error(
      [&] {
        run1("embedding", {}, {ids32.get(), w.get()}, DType::F32, {1, 4});
      },
      GENIE_ERR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace genie::cpu::testing
