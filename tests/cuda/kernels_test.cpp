// Every CUDA kernel of the element-wise, norm, layout, reduce, pool and
// attention groups (src/exec/cuda/kernels) against the CPU kernels, per
// dtype: f32 within 1e-5 relative, f16 within 1e-2, bf16 within 2e-2,
// integers and bools exactly. Inputs are rounded to the dtype under test
// first, so both sides read the same values; the CPU side computes in f32
// as the executor runs it. Also broadcasting, odd and large sizes,
// zero-size tensors, the execution errors (integer division by zero, an
// embedding id out of range) and the fused attention (causal with Sq != Sk,
// Sk = 2048, masks, a fully masked row).
//
// Runs through the loaded plugin (device_backend("cuda")); where it cannot
// load (no GPU, no driver) every test skips and prints why.
#include "exec/cpu/kernels.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/tensor_data.hpp"
#include "exec/backend.hpp"
#include "exec/backend_loader.hpp"

namespace genie {
namespace {

using Host = std::shared_ptr<TensorData>;

constexpr DType kFloats[] = {DType::F32, DType::F16, DType::BF16};

double tolerance(DType t) {
  switch (t) {
    case DType::F16: return 1e-2;
    case DType::BF16: return 2e-2;
    case DType::F32: return 1e-5;
    default: return 0;
  }
}

DType compute_type(DType t) { return is_reduced_float(t) ? DType::F32 : t; }

// A host tensor of `dtype` holding `values` (converted as cast would).
Host make(DType dtype, const Shape& shape, const std::vector<double>& values) {
  auto f = std::make_shared<TensorData>(DType::F32, shape);
  EXPECT_EQ(static_cast<int64_t>(values.size()), f->numel()) << "test bug: values for " << shape_str(shape);
  for (int64_t i = 0; i < f->numel(); ++i)
    f->data<float>()[i] = static_cast<float>(values[static_cast<size_t>(i)]);
  if (dtype == DType::F32) return f;
  if (dtype == DType::I32 || dtype == DType::I64 || dtype == DType::Bool) {
    auto t = std::make_shared<TensorData>(dtype, shape);
    for (int64_t i = 0; i < t->numel(); ++i) {
      // Integers from doubles without undefined behaviour: NaN as 0, saturated.
      const double d = values[static_cast<size_t>(i)];
      const int64_t v = std::isnan(d)  ? 0
                        : d >= 9.2e18  ? INT64_MAX
                        : d <= -9.2e18 ? INT64_MIN
                                       : static_cast<int64_t>(d);
      if (dtype == DType::I32) t->data<int32_t>()[i] = static_cast<int32_t>(v);
      if (dtype == DType::I64) t->data<int64_t>()[i] = v;
      if (dtype == DType::Bool) t->data<uint8_t>()[i] = v != 0;
    }
    return t;
  }
  return convert(*f, dtype);
}

Host random(DType dtype, const Shape& shape, std::mt19937& rng, double lo = -2, double hi = 2) {
  std::vector<double> v(static_cast<size_t>(numel(shape)));
  if (dtype == DType::I32 || dtype == DType::I64) {
    std::uniform_int_distribution<int> d(static_cast<int>(lo), static_cast<int>(hi));
    for (double& x : v) x = d(rng);
  } else if (dtype == DType::Bool) {
    for (double& x : v) x = rng() % 2;
  } else {
    std::uniform_real_distribution<double> d(lo, hi);
    for (double& x : v) x = d(rng);
  }
  return make(dtype, shape, v);
}

struct Output {
  DType dtype;
  Shape shape;
};

class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    // The plugin of this build, unless the environment points elsewhere.
    ::setenv("GENIE_DEVICE_BACKEND_PATH", GENIE_CUDA_PLUGIN_DIR, 0);
    const LoadedBackend& lb = device_backend("cuda");
    if (!lb.backend) GTEST_SKIP() << "the cuda backend is unavailable: " << lb.why_unavailable;
    gpu_ = lb.backend.get();
    queue_ = gpu_->create_queue(0);
  }

  // Runs `op` on the GPU; returns its outputs on the host.
  std::vector<Host> run_gpu(const std::string& op, const Attrs& attrs, const std::vector<Host>& in,
                            const std::vector<Output>& outs) {
    KernelFn fn = gpu_->find_kernel(op);
    EXPECT_NE(fn, nullptr) << "no cuda kernel for " << op;
    if (!fn) return {};
    std::vector<TensorPtr> din, dout;
    std::vector<const TensorData*> pin;
    std::vector<TensorData*> pout;
    for (const Host& h : in) {
      if (!h) {
        pin.push_back(nullptr);
        continue;
      }
      din.push_back(gpu_->make_tensor(0, h->dtype(), h->shape()));
      if (h->nbytes()) gpu_->copy_from_host(h->bytes(), din.back()->buffer(), 0, h->nbytes(), queue_.get());
      pin.push_back(din.back().get());
    }
    for (const Output& o : outs) {
      dout.push_back(gpu_->make_tensor(0, o.dtype, o.shape));
      pout.push_back(dout.back().get());
    }
    fn(KernelArgs{op, attrs, pin, pout, nullptr, queue_.get()});
    queue_->synchronize();
    std::vector<Host> res;
    for (const TensorPtr& d : dout) {
      auto h = std::make_shared<TensorData>(d->dtype(), d->shape());
      if (h->nbytes()) gpu_->copy_to_host(d->buffer(), 0, h->bytes(), h->nbytes(), queue_.get());
      res.push_back(h);
    }
    queue_->synchronize();
    return res;
  }

  // Runs `op` on the CPU kernels, f16/bf16 computed in f32 as the executor runs them.
  static std::vector<Host> run_cpu(const std::string& op, const Attrs& attrs, const std::vector<Host>& in,
                                   const std::vector<Output>& outs) {
    KernelFn fn = cpu::find_kernel(op);
    EXPECT_NE(fn, nullptr) << "no cpu kernel for " << op;
    std::vector<Host> cin, cout;
    std::vector<const TensorData*> pin;
    std::vector<TensorData*> pout;
    for (const Host& h : in) {
      cin.push_back(h && is_reduced_float(h->dtype()) ? convert(*h, DType::F32) : h);
      pin.push_back(cin.back().get());
    }
    for (const Output& o : outs) {
      cout.push_back(std::make_shared<TensorData>(compute_type(o.dtype), o.shape));
      pout.push_back(cout.back().get());
    }
    fn(KernelArgs{op, attrs, pin, pout, nullptr, nullptr});
    // Stored as the output dtype, as the executor stores it.
    for (size_t i = 0; i < cout.size(); ++i)
      if (is_reduced_float(outs[i].dtype)) cout[i] = convert(*cout[i], outs[i].dtype);
    return cout;
  }

  // Both sides; every output compared within the dtype's tolerance.
  void expect_same(const std::string& op, const Attrs& attrs, const std::vector<Host>& in,
                   const std::vector<Output>& outs, const std::string& what = "") {
    SCOPED_TRACE(op + " " + what);
    const std::vector<Host> want = run_cpu(op, attrs, in, outs);
    const std::vector<Host> got = run_gpu(op, attrs, in, outs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t o = 0; o < got.size(); ++o) compare(*got[o], *want[o]);
  }

  static void compare(const TensorData& got, const TensorData& want) {
    ASSERT_EQ(got.dtype(), want.dtype());
    ASSERT_EQ(got.shape(), want.shape());
    const DType t = got.dtype();
    if (!is_float(t)) {
      ASSERT_EQ(std::memcmp(got.bytes(), want.bytes(), got.nbytes()), 0)
          << dtype_name(t) << " results differ";
      return;
    }
    const Host g = convert(got, DType::F32);
    const Host w = convert(want, DType::F32);
    const double tol = tolerance(t);
    int64_t bad = 0;
    for (int64_t i = 0; i < g->numel(); ++i) {
      const float a = g->data<float>()[i];
      const float b = w->data<float>()[i];
      if (std::isnan(a) && std::isnan(b)) continue;
      if (a == b) continue;  // infinities
      if (!(std::fabs(a - b) <= tol * std::max(1.0, std::fabs(static_cast<double>(b))))) {
        if (++bad <= 5)
          ADD_FAILURE() << dtype_name(t) << " element " << i << " of " << shape_str(got.shape()) << ": gpu "
                        << a << ", cpu " << b;
      }
    }
    ASSERT_EQ(bad, 0) << "elements outside the " << dtype_name(t) << " tolerance " << tol;
  }

  // The error a GPU run throws, checked for its status.
  void expect_error(const std::string& op, const Attrs& attrs, const std::vector<Host>& in,
                    const std::vector<Output>& outs, genie_status_t code) {
    try {
      run_gpu(op, attrs, in, outs);
      ADD_FAILURE() << op << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.detail();
    }
  }

  DeviceBackend* gpu_ = nullptr;
  std::unique_ptr<Queue> queue_;
  std::mt19937 rng_{1234};
};

Attrs attrs(std::initializer_list<std::pair<const char*, AttrValue>> kv) {
  Attrs a;
  for (const auto& [k, v] : kv) a.set(k, v);
  return a;
}

// --- elementwise ---------------------------------------------------------------

TEST_F(CudaKernels, ArithmeticBroadcastsEveryDtype) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{3, 1, 5}, {4, 5}}, {{7}, {7}}, {{2, 3}, {}}, {{1, 9}, {5, 1}}, {{(1 << 20) + 7}, {(1 << 20) + 7}}};
  for (const char* op : {"add", "sub", "mul", "div"}) {
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64}) {
      for (const auto& [sa, sb] : shapes) {
        Host a = random(t, sa, rng_, -50, 50);
        // Divisors away from zero (1..9).
        Host b = std::string(op) == "div" ? random(t, sb, rng_, 1, 9) : random(t, sb, rng_, -50, 50);
        Shape out = sa.size() >= sb.size() ? sa : sb;
        for (size_t i = 0; i < out.size(); ++i) {
          const size_t ia = sa.size() - out.size() + i, ib = sb.size() - out.size() + i;
          const int64_t da = ia < sa.size() ? sa[ia] : 1, db = ib < sb.size() ? sb[ib] : 1;
          out[i] = std::max(da, db);
        }
        expect_same(op, {}, {a, b}, {{t, out}},
                    std::string(dtype_name(t)) + " " + shape_str(sa) + shape_str(sb));
      }
    }
  }
}

TEST_F(CudaKernels, IntegerDivisionTruncatesAndWraps) {
  for (DType t : {DType::I32, DType::I64}) {
    Host a = make(t, {6}, {7, -7, 7, -7, 0, t == DType::I32 ? -2147483648.0 : -9.2233720368547758e18});
    Host b = make(t, {6}, {2, 2, -2, -2, 5, -1});
    expect_same("div", {}, {a, b}, {{t, {6}}}, dtype_name(t));
  }
}

TEST_F(CudaKernels, IntegerDivisionByZeroIsAnExecutionError) {
  for (DType t : {DType::I32, DType::I64}) {
    Host a = random(t, {4, 1000}, rng_, -9, 9);
    Host b = make(t, {1000}, std::vector<double>(1000, 3.0));
    if (t == DType::I32) b->data<int32_t>()[0] = 0;
    if (t == DType::I64) b->data<int64_t>()[0] = 0;
    expect_error("div", {}, {a, b}, {{t, {4, 1000}}}, GENIE_ERR_INVALID_ARGUMENT);
  }
  // The stream stays usable after the error.
  Host a = random(DType::I32, {8}, rng_, 1, 9);
  expect_same("div", {}, {a, a}, {{DType::I32, {8}}}, "after the error");
}

TEST_F(CudaKernels, UnaryMaps) {
  for (DType t : kFloats) {
    Host x = random(t, {3, 1001}, rng_, -6, 6);
    Host pos = random(t, {3, 1001}, rng_, 0.01, 20);
    for (const char* op : {"relu", "silu", "tanh", "sigmoid", "exp", "neg", "abs", "dropout"})
      expect_same(op, {}, {x}, {{t, {3, 1001}}}, dtype_name(t));
    for (const char* op : {"log", "sqrt"}) expect_same(op, {}, {pos}, {{t, {3, 1001}}}, dtype_name(t));
    expect_same("gelu", {}, {x}, {{t, {3, 1001}}}, "erf");
    expect_same("gelu", attrs({{"approximate", std::string("tanh")}}), {x}, {{t, {3, 1001}}}, "tanh");
  }
  for (DType t : {DType::I32, DType::I64}) {
    Host x = random(t, {777}, rng_, -100, 100);
    for (const char* op : {"relu", "neg", "abs", "dropout"})
      expect_same(op, {}, {x}, {{t, {777}}}, dtype_name(t));
  }
  expect_error("gelu", attrs({{"approximate", std::string("cubic")}}), {random(DType::F32, {4}, rng_)},
               {{DType::F32, {4}}}, GENIE_ERR_INVALID_ATTRIBUTE);
}

TEST_F(CudaKernels, ComparisonsGiveBools) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::Bool}) {
    // Integers and bools take few distinct values, so equality happens;
    // for floats b is a's first row, so that row compares equal.
    Host a = random(t, {4, 33}, rng_, -2, 2);
    Host b = random(t, {33}, rng_, -2, 2);
    if (is_float(t)) {
      b = std::make_shared<TensorData>(t, Shape{33});
      std::memcpy(b->bytes(), a->bytes(), b->nbytes());
    }
    for (const char* op : {"eq", "ne", "lt", "le", "gt", "ge"})
      expect_same(op, {}, {a, b}, {{DType::Bool, {4, 33}}}, dtype_name(t));
  }
}

TEST_F(CudaKernels, WhereAndMaskedFillBroadcast) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::Bool}) {
    Host c = random(DType::Bool, {5, 1, 7}, rng_);
    Host a = random(t, {6, 7}, rng_, -9, 9);
    Host b = random(t, {1}, rng_, -9, 9);
    expect_same("where", {}, {c, a, b}, {{t, {5, 6, 7}}}, dtype_name(t));
    Host x = random(t, {5, 6, 7}, rng_, -9, 9);
    Host m = random(DType::Bool, {6, 1}, rng_);
    expect_same("masked_fill", attrs({{"value", -3.5}}), {x, m}, {{t, {5, 6, 7}}}, dtype_name(t));
  }
}

TEST_F(CudaKernels, CastBetweenEveryPair) {
  const DType all[] = {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::Bool};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> special = {0,     -0.0,  3.7,   -3.7, 0.5, -0.5, 1e10,
                                       -1e10, 65504, 70000, nan,  255, -129, 1};
  for (DType from : all) {
    Host x = make(from, {static_cast<int64_t>(special.size())}, special);
    Host r = random(from, {4099}, rng_, -300, 300);
    for (DType to : all) {
      const Attrs a = attrs({{"dtype", std::string(dtype_name(to))}});
      // The CPU cast sees f32 for f16/bf16 on either side; its f32 result is
      // then stored as the target type, as the executor stores it.
      for (const Host& in : {x, r}) {
        SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + dtype_name(to));
        const std::vector<Host> got = run_gpu("cast", a, {in}, {{to, in->shape()}});
        const std::vector<Host> want = run_cpu(
            "cast", attrs({{"dtype", std::string(dtype_name(compute_type(to)))}}), {in}, {{to, in->shape()}});
        ASSERT_EQ(got.size(), 1u);
        // Conversions are exact operations: compare bit for bit (NaN as NaN).
        const Host g = is_float(to) ? convert(*got[0], DType::F32) : got[0];
        const Host w = is_float(to) ? convert(*want[0], DType::F32) : want[0];
        for (int64_t i = 0; i < g->numel(); ++i) {
          if (is_float(to)) {
            const float gv = g->data<float>()[i], wv = w->data<float>()[i];
            ASSERT_TRUE(gv == wv || (std::isnan(gv) && std::isnan(wv)))
                << i << ": gpu " << gv << ", cpu " << wv;
          } else {
            ASSERT_EQ(
                std::memcmp(g->bytes() + i * dtype_size(to), w->bytes() + i * dtype_size(to), dtype_size(to)),
                0)
                << "element " << i;
          }
        }
      }
    }
  }
}

// --- norms -------------------------------------------------------------------------

TEST_F(CudaKernels, SoftmaxOverAnyAxis) {
  for (DType t : kFloats) {
    Host x = random(t, {3, 5, 7}, rng_, -8, 8);
    for (int64_t axis : {-1, 0, 1, 2}) expect_same("softmax", attrs({{"axis", axis}}), {x}, {{t, {3, 5, 7}}});
    Host row = random(t, {2, 5000}, rng_, -20, 20);
    expect_same("softmax", {}, {row}, {{t, {2, 5000}}}, "long rows");
    Host col = random(t, {4097, 3}, rng_, -5, 5);
    expect_same("softmax", attrs({{"axis", int64_t{0}}}), {col}, {{t, {4097, 3}}}, "long columns");
    Host one = random(t, {9, 1}, rng_);
    expect_same("softmax", {}, {one}, {{t, {9, 1}}}, "rows of one");
  }
}

TEST_F(CudaKernels, LayerAndRmsNorm) {
  for (DType t : kFloats) {
    for (int64_t d : {1, 64, 4097}) {
      Host x = random(t, {5, d}, rng_, -3, 3);
      Host w = random(t, {d}, rng_, 0.5, 1.5);
      Host b = random(t, {d}, rng_, -1, 1);
      expect_same("layer_norm", {}, {x, w, b}, {{t, {5, d}}}, "weight and bias");
      expect_same("layer_norm", attrs({{"eps", 1e-3}}), {x, nullptr, nullptr}, {{t, {5, d}}}, "plain");
      expect_same("layer_norm", {}, {x, w, nullptr}, {{t, {5, d}}}, "weight only");
      expect_same("rms_norm", {}, {x, w}, {{t, {5, d}}}, "weight");
      expect_same("rms_norm", {}, {x, nullptr}, {{t, {5, d}}}, "plain");
    }
  }
}

// --- layout --------------------------------------------------------------------------

TEST_F(CudaKernels, LayoutOpsEveryElementSize) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::Bool}) {
    SCOPED_TRACE(dtype_name(t));
    Host x = random(t, {2, 3, 4, 5}, rng_, -9, 9);
    expect_same("reshape", attrs({{"shape", std::vector<int64_t>{6, 20}}}), {x}, {{t, {6, 20}}});
    expect_same("flatten", {}, {x}, {{t, {2, 60}}});
    expect_same("transpose", {}, {x}, {{t, {2, 3, 5, 4}}});
    expect_same("transpose", attrs({{"dim0", int64_t{0}}, {"dim1", int64_t{2}}}), {x}, {{t, {4, 3, 2, 5}}});
    expect_same("permute", attrs({{"perm", std::vector<int64_t>{3, 1, 0, 2}}}), {x}, {{t, {5, 3, 2, 4}}});
    expect_same("slice", attrs({{"axis", int64_t{3}}, {"start", int64_t{-4}}, {"step", int64_t{2}}}), {x},
                {{t, {2, 3, 4, 2}}});
    expect_same("slice", attrs({{"axis", int64_t{1}}, {"start", int64_t{1}}, {"end", int64_t{100}}}), {x},
                {{t, {2, 2, 4, 5}}});
    Host y = random(t, {2, 1, 4, 5}, rng_, -9, 9);
    Host z = random(t, {2, 7, 4, 5}, rng_, -9, 9);
    expect_same("concat", attrs({{"axis", int64_t{1}}}), {x, y, z}, {{t, {2, 11, 4, 5}}});
    expect_same("concat", attrs({{"axis", int64_t{-1}}}), {x, x}, {{t, {2, 3, 4, 10}}});
    expect_same("split", attrs({{"axis", int64_t{2}}, {"sizes", std::vector<int64_t>{1, 3}}}), {x},
                {{t, {2, 3, 1, 5}}, {t, {2, 3, 3, 5}}});
  }
  Host big = random(DType::F16, {33, 1025, 7}, rng_);
  expect_same("permute", attrs({{"perm", std::vector<int64_t>{2, 0, 1}}}), {big},
              {{DType::F16, {7, 33, 1025}}}, "large");
}

TEST_F(CudaKernels, EmbeddingLooksUpRows) {
  for (DType ids_t : {DType::I32, DType::I64}) {
    for (DType t : kFloats) {
      Host w = random(t, {50, 33}, rng_);
      Host ids = random(ids_t, {3, 7}, rng_, 0, 49);
      expect_same("embedding", {}, {ids, w}, {{t, {3, 7, 33}}},
                  std::string(dtype_name(ids_t)) + dtype_name(t));
    }
    Host w = random(DType::F32, {50, 8}, rng_);
    for (double bad : {50.0, -1.0}) {
      Host ids = make(ids_t, {4}, {1, 2, bad, 3});
      expect_error("embedding", {}, {ids, w}, {{DType::F32, {4, 8}}}, GENIE_ERR_INVALID_ARGUMENT);
    }
  }
}

// --- reductions --------------------------------------------------------------------------

TEST_F(CudaKernels, ReductionsOverAxes) {
  const std::vector<std::pair<std::vector<int64_t>, Shape>> cases = {
      {{}, {}}, {{0}, {5, 6, 7}}, {{-1}, {4, 5, 6}}, {{1, 3}, {4, 6}}, {{0, 2}, {5, 7}}};
  for (const char* op : {"reduce_sum", "reduce_mean", "reduce_max"}) {
    std::vector<DType> types(std::begin(kFloats), std::end(kFloats));
    if (std::string(op) != "reduce_mean") types.insert(types.end(), {DType::I32, DType::I64});
    for (DType t : types) {
      Host x = random(t, {4, 5, 6, 7}, rng_, -9, 9);
      for (const auto& [axes, out] : cases) {
        Attrs a;
        if (!axes.empty()) a.set("axes", axes);
        expect_same(op, a, {x}, {{t, out}}, dtype_name(t));
      }
      Attrs keep = attrs({{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{1}}});
      expect_same(op, keep, {x}, {{t, {4, 1, 6, 7}}}, "keepdims");
      Host longrow = random(t, {3, 100003}, rng_, -9, 9);
      expect_same(op, attrs({{"axes", std::vector<int64_t>{1}}}), {longrow}, {{t, {3}}}, "long rows");
    }
  }
  expect_error("reduce_max", attrs({{"axes", std::vector<int64_t>{0}}}), {random(DType::F32, {0, 3}, rng_)},
               {{DType::F32, {3}}}, GENIE_ERR_INVALID_ARGUMENT);
}

// --- pools ---------------------------------------------------------------------------------

TEST_F(CudaKernels, PoolsMatchPyTorchWindows) {
  for (DType t : kFloats) {
    Host x = random(t, {2, 3, 11, 9}, rng_, -5, 5);
    const Attrs k3 = attrs({{"kernel", std::vector<int64_t>{3, 3}},
                            {"stride", std::vector<int64_t>{2, 2}},
                            {"padding", std::vector<int64_t>{1, 1}}});
    expect_same("max_pool2d", k3, {x}, {{t, {2, 3, 6, 5}}}, dtype_name(t));
    expect_same("avg_pool2d", k3, {x}, {{t, {2, 3, 6, 5}}}, dtype_name(t));
    const Attrs k2 = attrs({{"kernel", std::vector<int64_t>{2, 3}}});
    expect_same("max_pool2d", k2, {x}, {{t, {2, 3, 5, 3}}}, "default stride");
    expect_same("avg_pool2d", k2, {x}, {{t, {2, 3, 5, 3}}}, "default stride");
    for (const Shape& os : {Shape{2, 3, 1, 1}, Shape{2, 3, 4, 3}, Shape{2, 3, 13, 20}}) {
      const Attrs a = attrs({{"output_size", std::vector<int64_t>{os[2], os[3]}}});
      expect_same("adaptive_avg_pool2d", a, {x}, {{t, os}}, shape_str(os));
      expect_same("adaptive_max_pool2d", a, {x}, {{t, os}}, shape_str(os));
    }
  }
}

// --- attention -------------------------------------------------------------------------------

TEST_F(CudaKernels, AttentionFusedAgainstCpu) {
  for (DType t : kFloats) {
    SCOPED_TRACE(dtype_name(t));
    Host q = random(t, {2, 3, 5, 64}, rng_, -1, 1);
    Host k = random(t, {2, 3, 37, 64}, rng_, -1, 1);
    Host v = random(t, {2, 3, 37, 48}, rng_, -1, 1);
    expect_same("attention", {}, {q, k, v, nullptr}, {{t, {2, 3, 5, 48}}}, "plain, Dv != D");
    expect_same("attention", attrs({{"causal", int64_t{1}}}), {q, k, v, nullptr}, {{t, {2, 3, 5, 48}}},
                "causal, Sq < Sk");
    expect_same("attention", attrs({{"scale", 0.3}}), {q, k, v, nullptr}, {{t, {2, 3, 5, 48}}}, "scale");
    // Sq > Sk: the first queries see no key and give zeros.
    Host q2 = random(t, {1, 40, 16}, rng_, -1, 1);
    Host k2 = random(t, {1, 9, 16}, rng_, -1, 1);
    Host v2 = random(t, {1, 9, 16}, rng_, -1, 1);
    expect_same("attention", attrs({{"causal", int64_t{1}}}), {q2, k2, v2, nullptr}, {{t, {1, 40, 16}}},
                "causal, Sq > Sk");
    // A bool mask broadcast over batch and heads, one row fully masked.
    Host mask = random(DType::Bool, {1, 1, 5, 37}, rng_);
    for (int64_t j = 0; j < 37; ++j) mask->data<uint8_t>()[2 * 37 + j] = 0;
    expect_same("attention", {}, {q, k, v, mask}, {{t, {2, 3, 5, 48}}}, "bool mask");
    expect_same("attention", attrs({{"causal", int64_t{1}}}), {q, k, v, mask}, {{t, {2, 3, 5, 48}}},
                "bool mask, causal");
    Host bias = random(t, {37}, rng_, -2, 2);
    expect_same("attention", {}, {q, k, v, bias}, {{t, {2, 3, 5, 48}}}, "additive mask");
    // Head dim 128 needs more than 48 KiB of shared memory.
    Host q3 = random(t, {2, 17, 128}, rng_, -1, 1);
    Host k3 = random(t, {2, 70, 128}, rng_, -1, 1);
    expect_same("attention", attrs({{"causal", int64_t{1}}}), {q3, k3, k3, nullptr}, {{t, {2, 17, 128}}},
                "head dim 128");
  }
}

TEST_F(CudaKernels, AttentionLongCausalSequence) {
  for (DType t : kFloats) {
    Host q = random(t, {2, 2048, 64}, rng_, -1, 1);
    Host k = random(t, {2, 2048, 64}, rng_, -1, 1);
    Host v = random(t, {2, 2048, 64}, rng_, -1, 1);
    expect_same("attention", attrs({{"causal", int64_t{1}}}), {q, k, v, nullptr}, {{t, {2, 2048, 64}}},
                std::string("prefill ") + dtype_name(t));
    Host q1 = random(t, {2, 1, 64}, rng_, -1, 1);
    expect_same("attention", attrs({{"causal", int64_t{1}}}), {q1, k, v, nullptr}, {{t, {2, 1, 64}}},
                std::string("decode ") + dtype_name(t));
  }
}

// --- zero-size tensors ---------------------------------------------------------------------------

TEST_F(CudaKernels, ZeroSizeTensorsLaunchNothing) {
  const DType t = DType::F16;
  Host e = random(t, {0, 5}, rng_);
  expect_same("add", {}, {e, random(t, {5}, rng_)}, {{t, {0, 5}}});
  expect_same("gelu", {}, {e}, {{t, {0, 5}}});
  expect_same("softmax", {}, {e}, {{t, {0, 5}}});
  expect_same("layer_norm", {}, {e, nullptr, nullptr}, {{t, {0, 5}}});
  expect_same("cast", attrs({{"dtype", std::string("f32")}}), {e}, {{DType::F32, {0, 5}}});
  expect_same("transpose", {}, {e}, {{t, {5, 0}}});
  expect_same("concat", {}, {e, random(t, {2, 5}, rng_)}, {{t, {2, 5}}});
  expect_same("reduce_sum", attrs({{"axes", std::vector<int64_t>{0}}}), {e}, {{t, {5}}});
  expect_same("reduce_sum", attrs({{"axes", std::vector<int64_t>{1}}}), {e}, {{t, {0}}});
  expect_same("embedding", {}, {random(DType::I64, {0}, rng_), random(t, {4, 3}, rng_)}, {{t, {0, 3}}});
  expect_same("attention", {},
              {random(t, {2, 0, 8}, rng_), random(t, {2, 4, 8}, rng_), random(t, {2, 4, 8}, rng_), nullptr},
              {{t, {2, 0, 8}}});
  // No keys: every row attends to nothing and gives zeros.
  expect_same("attention", {},
              {random(t, {1, 3, 8}, rng_), random(t, {1, 0, 8}, rng_), random(t, {1, 0, 8}, rng_), nullptr},
              {{t, {1, 3, 8}}});
}

}  // namespace
}  // namespace genie
