#include "graph/op_schema.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <type_traits>

#include "core/error.hpp"
#include "graph/op_table.hpp"

namespace genie {

namespace {

using In = std::vector<ValueType>;
using Out = std::vector<ValueType>;

// ---------------------------------------------------------------------------
// Checks shared by the inference functions. Messages name the input slot as
// docs/operators.md does ("a", "weight", ...); the caller adds the node.
// ---------------------------------------------------------------------------

bool present(const ValueType& t) { return t.dtype != DType::Invalid; }

int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  check(!__builtin_mul_overflow(a, b, &r), GENIE_ERR_TOO_LARGE, "size overflows: ", a, " * ", b);
  return r;
}

int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  check(!__builtin_add_overflow(a, b, &r), GENIE_ERR_TOO_LARGE, "size overflows: ", a, " + ", b);
  return r;
}

void expect_float(const ValueType& t, const char* what) {
  check(is_float(t.dtype), GENIE_ERR_DTYPE_MISMATCH, what, " must be float (f32, f16, bf16), got ",
        dtype_name(t.dtype));
}

bool is_int(DType d) { return d == DType::I32 || d == DType::I64; }

void expect_numeric(const ValueType& t, const char* what) {
  check(is_float(t.dtype) || is_int(t.dtype), GENIE_ERR_DTYPE_MISMATCH, what,
        " must be float or int (f32, f16, bf16, i32, i64), got ", dtype_name(t.dtype));
}

void expect_same_dtype(const ValueType& a, const char* an, const ValueType& b, const char* bn) {
  check(a.dtype == b.dtype, GENIE_ERR_DTYPE_MISMATCH, an, " and ", bn, " must have the same dtype, got ",
        dtype_name(a.dtype), " and ", dtype_name(b.dtype));
}

void expect_rank(const ValueType& t, const char* what, size_t rank) {
  if (t.shape.size() != rank)
    fail(GENIE_ERR_SHAPE_MISMATCH, what, " must have rank ", rank, ", got ", shape_str(t.shape));
}

void expect_min_rank(const ValueType& t, const char* what, size_t rank) {
  if (t.shape.size() < rank)
    fail(GENIE_ERR_SHAPE_MISMATCH, what, " must have rank >= ", rank, ", got ", shape_str(t.shape));
}

// An optional per-channel parameter such as a norm weight or a bias: same
// dtype as `ref`, shape [n].
void expect_vector(const ValueType& t, const char* what, const ValueType& ref, const char* ref_name,
                   int64_t n) {
  if (!present(t)) return;
  expect_same_dtype(ref, ref_name, t, what);
  if (t.shape != Shape{n})
    fail(GENIE_ERR_SHAPE_MISMATCH, what, " must have shape [", n, "], got ", shape_str(t.shape));
}

// Whether `from` broadcasts to exactly `to` (a mask to the tensor it masks).
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  return true;
}

bool flag_attr(const Attrs& attrs, const char* key) {
  const int64_t v = attrs.get_int(key, 0);
  check(v == 0 || v == 1, GENIE_ERR_INVALID_ATTRIBUTE, "attribute '", key, "' must be 0 or 1, got ", v);
  return v == 1;
}

template <class T>
T required(const Attrs& attrs, const char* key) {
  check(attrs.has(key), GENIE_ERR_INVALID_ATTRIBUTE, "required attribute '", key, "' is missing");
  if constexpr (std::is_same_v<T, int64_t>) return attrs.get_int(key, 0);
  if constexpr (std::is_same_v<T, double>) return attrs.get_float(key, 0);
  if constexpr (std::is_same_v<T, std::string>) return attrs.get_string(key, "");
  if constexpr (std::is_same_v<T, std::vector<int64_t>>) return attrs.get_ints(key, {});
}

// ints[2] attributes of the NCHW ops, each entry >= min.
std::vector<int64_t> pair_attr(const Attrs& attrs, const char* key, const std::vector<int64_t>& def,
                               int64_t min) {
  std::vector<int64_t> v = attrs.get_ints(key, def);
  check(v.size() == 2, GENIE_ERR_INVALID_ATTRIBUTE, "attribute '", key, "' must have 2 entries, got ",
        v.size());
  for (int64_t e : v)
    check(e >= min, GENIE_ERR_INVALID_ATTRIBUTE, "attribute '", key, "' entries must be >= ", min, ", got ",
          e);
  return v;
}

Out one(DType dtype, Shape shape) { return {ValueType{dtype, std::move(shape)}}; }

// ---------------------------------------------------------------------------
// Inference, one function per operator family.
// ---------------------------------------------------------------------------

Out infer_matmul(const In& in, const Attrs& attrs) {
  const ValueType &a = in[0], &b = in[1];
  expect_float(a, "a");
  expect_same_dtype(a, "a", b, "b");
  expect_min_rank(a, "a", 1);
  expect_min_rank(b, "b", 1);
  Shape sa = a.shape, sb = b.shape;
  if (flag_attr(attrs, "transpose_a") && sa.size() >= 2) std::swap(sa[sa.size() - 1], sa[sa.size() - 2]);
  if (flag_attr(attrs, "transpose_b") && sb.size() >= 2) std::swap(sb[sb.size() - 1], sb[sb.size() - 2]);
  const bool a_vec = sa.size() == 1, b_vec = sb.size() == 1;
  if (a_vec) sa.insert(sa.begin(), 1);
  if (b_vec) sb.push_back(1);
  if (sa[sa.size() - 1] != sb[sb.size() - 2])
    fail(GENIE_ERR_SHAPE_MISMATCH, "inner dimensions differ: a ", shape_str(a.shape), " (as ", shape_str(sa),
         ") and b ", shape_str(b.shape), " (as ", shape_str(sb), ")");
  Shape out = broadcast_shapes(Shape(sa.begin(), sa.end() - 2), Shape(sb.begin(), sb.end() - 2));
  if (!a_vec) out.push_back(sa[sa.size() - 2]);
  if (!b_vec) out.push_back(sb.back());
  return one(a.dtype, out);
}

Out infer_linear(const In& in, const Attrs&) {
  const ValueType &x = in[0], &w = in[1];
  expect_float(x, "x");
  expect_same_dtype(x, "x", w, "weight");
  expect_min_rank(x, "x", 1);
  expect_rank(w, "weight", 2);
  if (x.shape.back() != w.shape[1])
    fail(GENIE_ERR_SHAPE_MISMATCH, "x ", shape_str(x.shape), " has last dimension ", x.shape.back(),
         " but weight ", shape_str(w.shape), " expects ", w.shape[1]);
  expect_vector(in[2], "bias", x, "x", w.shape[0]);
  Shape out(x.shape.begin(), x.shape.end() - 1);
  out.push_back(w.shape[0]);
  return one(x.dtype, out);
}

Out infer_arith(const In& in, const Attrs&) {
  expect_numeric(in[0], "a");
  expect_same_dtype(in[0], "a", in[1], "b");
  return one(in[0].dtype, broadcast_shapes(in[0].shape, in[1].shape));
}

Out infer_compare(const In& in, const Attrs&) {
  expect_same_dtype(in[0], "a", in[1], "b");
  return one(DType::Bool, broadcast_shapes(in[0].shape, in[1].shape));
}

Out infer_unary_float(const In& in, const Attrs&) {
  expect_float(in[0], "x");
  return {in[0]};
}

Out infer_unary_numeric(const In& in, const Attrs&) {
  expect_numeric(in[0], "x");
  return {in[0]};
}

Out infer_gelu(const In& in, const Attrs& attrs) {
  expect_float(in[0], "x");
  const std::string mode = attrs.get_string("approximate", "none");
  check(mode == "none" || mode == "tanh", GENIE_ERR_INVALID_ATTRIBUTE,
        "attribute 'approximate' must be \"none\" or \"tanh\", got \"", mode, "\"");
  return {in[0]};
}

Out infer_dropout(const In& in, const Attrs& attrs) {
  const double p = attrs.get_float("p", 0.5);
  check(p >= 0.0 && p < 1.0, GENIE_ERR_INVALID_ATTRIBUTE, "attribute 'p' must be in [0, 1), got ", p);
  return {in[0]};
}

Out infer_where(const In& in, const Attrs&) {
  const ValueType &cond = in[0], &a = in[1], &b = in[2];
  check(cond.dtype == DType::Bool, GENIE_ERR_DTYPE_MISMATCH, "cond must be bool, got ",
        dtype_name(cond.dtype));
  expect_same_dtype(a, "a", b, "b");
  return one(a.dtype, broadcast_shapes(broadcast_shapes(cond.shape, a.shape), b.shape));
}

Out infer_masked_fill(const In& in, const Attrs& attrs) {
  const ValueType &x = in[0], &mask = in[1];
  check(mask.dtype == DType::Bool, GENIE_ERR_DTYPE_MISMATCH, "mask must be bool, got ",
        dtype_name(mask.dtype));
  if (!broadcasts_to(mask.shape, x.shape))
    fail(GENIE_ERR_SHAPE_MISMATCH, "mask ", shape_str(mask.shape), " does not broadcast to x ",
         shape_str(x.shape));
  required<double>(attrs, "value");
  return {x};
}

Out infer_cast(const In& in, const Attrs& attrs) {
  const std::string name = required<std::string>(attrs, "dtype");
  const auto to = dtype_from_name(name);
  check(to.has_value(), GENIE_ERR_INVALID_ATTRIBUTE, "attribute 'dtype' must be one of f32, f16, bf16, i32, ",
        "i64, bool, got \"", name, "\"");
  return one(*to, in[0].shape);
}

Out infer_softmax(const In& in, const Attrs& attrs) {
  expect_float(in[0], "x");
  normalize_axis(attrs.get_int("axis", -1), static_cast<int64_t>(in[0].shape.size()));
  return {in[0]};
}

// layer_norm (x, weight, bias) and rms_norm (x, weight): over the last dim.
Out infer_norm(const In& in, const Attrs& attrs) {
  const ValueType& x = in[0];
  expect_float(x, "x");
  expect_min_rank(x, "x", 1);
  const double eps = attrs.get_float("eps", 1e-5);
  check(eps >= 0.0 && std::isfinite(eps), GENIE_ERR_INVALID_ATTRIBUTE,
        "attribute 'eps' must be finite and >= 0, got ", eps);
  expect_vector(in[1], "weight", x, "x", x.shape.back());
  if (in.size() > 2) expect_vector(in[2], "bias", x, "x", x.shape.back());
  return {x};
}

Out infer_embedding(const In& in, const Attrs&) {
  const ValueType &ids = in[0], &w = in[1];
  check(is_int(ids.dtype), GENIE_ERR_DTYPE_MISMATCH, "ids must be int (i32, i64), got ",
        dtype_name(ids.dtype));
  expect_float(w, "weight");
  expect_rank(w, "weight", 2);
  Shape out = ids.shape;
  out.push_back(w.shape[1]);
  return one(w.dtype, out);
}

Out infer_reshape(const In& in, const Attrs& attrs) {
  const ValueType& x = in[0];
  Shape out = required<std::vector<int64_t>>(attrs, "shape");
  size_t wildcards = 0;
  for (int64_t d : out) {
    check(d >= -1, GENIE_ERR_INVALID_ATTRIBUTE, "attribute 'shape' entries must be >= -1, got ", d);
    wildcards += d == -1;
  }
  if (wildcards > 1)
    fail(GENIE_ERR_INVALID_ATTRIBUTE, "attribute 'shape' ", shape_str(out), " has more than one -1");
  const int64_t n = numel(x.shape);
  if (wildcards == 1) {
    Shape known = out;
    std::replace(known.begin(), known.end(), int64_t{-1}, int64_t{1});
    const int64_t k = numel(known);
    if (k == 0)
      fail(GENIE_ERR_INVALID_ATTRIBUTE, "attribute 'shape' ", shape_str(out),
           ": -1 is ambiguous next to a zero dimension");
    if (n % k != 0)
      fail(GENIE_ERR_SHAPE_MISMATCH, "cannot reshape x ", shape_str(x.shape), " (", n, " elements) to ",
           shape_str(out));
    *std::find(out.begin(), out.end(), int64_t{-1}) = n / k;
  }
  if (numel(out) != n)
    fail(GENIE_ERR_SHAPE_MISMATCH, "cannot reshape x ", shape_str(x.shape), " (", n, " elements) to ",
         shape_str(out));
  return one(x.dtype, out);
}

Out infer_transpose(const In& in, const Attrs& attrs) {
  const ValueType& x = in[0];
  expect_min_rank(x, "x", 1);
  const auto rank = static_cast<int64_t>(x.shape.size());
  const int64_t d0 = normalize_axis(attrs.get_int("dim0", -2), rank, "dim0");
  const int64_t d1 = normalize_axis(attrs.get_int("dim1", -1), rank, "dim1");
  Shape out = x.shape;
  std::swap(out[d0], out[d1]);
  return one(x.dtype, out);
}

Out infer_permute(const In& in, const Attrs& attrs) {
  const ValueType& x = in[0];
  const auto perm = required<std::vector<int64_t>>(attrs, "perm");
  const auto rank = static_cast<int64_t>(x.shape.size());
  std::vector<bool> seen(x.shape.size(), false);
  bool ok = static_cast<int64_t>(perm.size()) == rank;
  for (size_t i = 0; ok && i < perm.size(); ++i) {
    ok = perm[i] >= 0 && perm[i] < rank && !seen[perm[i]];
    if (ok) seen[perm[i]] = true;
  }
  if (!ok)
    fail(GENIE_ERR_INVALID_ATTRIBUTE, "attribute 'perm' ", shape_str(perm), " is not a permutation of 0..",
         rank - 1, " for x ", shape_str(x.shape));
  Shape out;
  for (int64_t p : perm) out.push_back(x.shape[p]);
  return one(x.dtype, out);
}

Out infer_flatten(const In& in, const Attrs& attrs) {
  const ValueType& x = in[0];
  if (x.shape.empty()) return one(x.dtype, {1});
  const auto rank = static_cast<int64_t>(x.shape.size());
  const int64_t s = normalize_axis(attrs.get_int("start_dim", 1), rank, "start_dim");
  const int64_t e = normalize_axis(attrs.get_int("end_dim", -1), rank, "end_dim");
  check(s <= e, GENIE_ERR_INVALID_ATTRIBUTE, "start_dim ", s, " is after end_dim ", e);
  Shape out(x.shape.begin(), x.shape.begin() + s);
  out.push_back(numel(Shape(x.shape.begin() + s, x.shape.begin() + e + 1)));
  out.insert(out.end(), x.shape.begin() + e + 1, x.shape.end());
  return one(x.dtype, out);
}

Out infer_concat(const In& in, const Attrs& attrs) {
  const ValueType& first = in[0];
  const auto rank = static_cast<int64_t>(first.shape.size());
  const int64_t axis = normalize_axis(attrs.get_int("axis", 0), rank);
  Shape out = first.shape;
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i].dtype != first.dtype)
      fail(GENIE_ERR_DTYPE_MISMATCH, "x", i + 1, " must have the dtype of x1, ", dtype_name(first.dtype),
           ", got ", dtype_name(in[i].dtype));
    bool ok = in[i].shape.size() == first.shape.size();
    for (int64_t d = 0; ok && d < rank; ++d) ok = d == axis || in[i].shape[d] == first.shape[d];
    if (!ok)
      fail(GENIE_ERR_SHAPE_MISMATCH, "x", i + 1, " ", shape_str(in[i].shape), " does not match x1 ",
           shape_str(first.shape), " outside axis ", axis);
    out[axis] = checked_add(out[axis], in[i].shape[axis]);
  }
  return one(first.dtype, out);
}

// The number of outputs must equal the number of sizes; validation checks
// that against the node, which this function cannot see.
Out infer_split(const In& in, const Attrs& attrs) {
  const ValueType& x = in[0];
  const int64_t axis = normalize_axis(attrs.get_int("axis", 0), static_cast<int64_t>(x.shape.size()));
  const auto sizes = required<std::vector<int64_t>>(attrs, "sizes");
  check(!sizes.empty(), GENIE_ERR_INVALID_ATTRIBUTE, "attribute 'sizes' must not be empty");
  int64_t total = 0;
  Out out;
  for (int64_t s : sizes) {
    check(s >= 0, GENIE_ERR_INVALID_ATTRIBUTE, "attribute 'sizes' entries must be >= 0, got ", s);
    total = checked_add(total, s);
    Shape shape = x.shape;
    shape[axis] = s;
    out.push_back({x.dtype, shape});
  }
  if (total != x.shape[axis])
    fail(GENIE_ERR_SHAPE_MISMATCH, "sizes ", shape_str(sizes), " sum to ", total, " but x ",
         shape_str(x.shape), " has ", x.shape[axis], " along axis ", axis);
  return out;
}

Out infer_slice(const In& in, const Attrs& attrs) {
  const ValueType& x = in[0];
  const int64_t axis = normalize_axis(required<int64_t>(attrs, "axis"), static_cast<int64_t>(x.shape.size()));
  const int64_t len = x.shape[axis];
  // Python slicing: negative indices count from the end, then clamp.
  auto clamp = [len](int64_t i) {
    if (i < 0) return std::max<int64_t>(i + len, 0);
    return std::min(i, len);
  };
  const int64_t start = clamp(attrs.get_int("start", 0));
  const int64_t end = attrs.has("end") ? clamp(attrs.get_int("end", 0)) : len;
  const int64_t step = attrs.get_int("step", 1);
  check(step > 0, GENIE_ERR_INVALID_ATTRIBUTE, "attribute 'step' must be > 0, got ", step);
  Shape out = x.shape;
  out[axis] = end > start ? 1 + (end - start - 1) / step : 0;
  return one(x.dtype, out);
}

Out infer_reduce(const In& in, const Attrs& attrs, bool float_only) {
  const ValueType& x = in[0];
  if (float_only)
    expect_float(x, "x");
  else
    expect_numeric(x, "x");
  const auto rank = static_cast<int64_t>(x.shape.size());
  // Absent or empty axes reduce over every dimension.
  std::vector<int64_t> axes = attrs.get_ints("axes", {});
  std::vector<bool> reduced(x.shape.size(), axes.empty());
  for (int64_t a : axes) {
    const int64_t n = normalize_axis(a, rank, "axes entry");
    if (reduced[n])
      fail(GENIE_ERR_INVALID_ATTRIBUTE, "attribute 'axes' ", shape_str(axes), " repeats axis ", n);
    reduced[n] = true;
  }
  const bool keep = flag_attr(attrs, "keepdims");
  Shape out;
  for (size_t i = 0; i < x.shape.size(); ++i) {
    if (!reduced[i])
      out.push_back(x.shape[i]);
    else if (keep)
      out.push_back(1);
  }
  return one(x.dtype, out);
}

Out infer_attention(const In& in, const Attrs& attrs) {
  const ValueType &q = in[0], &k = in[1], &v = in[2], &mask = in[3];
  expect_float(q, "q");
  expect_same_dtype(q, "q", k, "k");
  expect_same_dtype(q, "q", v, "v");
  expect_min_rank(q, "q", 2);
  const size_t r = q.shape.size();
  if (!(k.shape.size() == r && v.shape.size() == r &&
        std::equal(q.shape.begin(), q.shape.end() - 2, k.shape.begin()) &&
        std::equal(q.shape.begin(), q.shape.end() - 2, v.shape.begin())))
    fail(GENIE_ERR_SHAPE_MISMATCH, "q ", shape_str(q.shape), ", k ", shape_str(k.shape), " and v ",
         shape_str(v.shape), " must have the same rank and leading dimensions");
  if (k.shape[r - 1] != q.shape[r - 1])
    fail(GENIE_ERR_SHAPE_MISMATCH, "k ", shape_str(k.shape), " must have the head size of q ",
         shape_str(q.shape));
  if (v.shape[r - 2] != k.shape[r - 2])
    fail(GENIE_ERR_SHAPE_MISMATCH, "v ", shape_str(v.shape), " must have the sequence length of k ",
         shape_str(k.shape));
  if (present(mask)) {
    check(mask.dtype == DType::Bool || mask.dtype == q.dtype, GENIE_ERR_DTYPE_MISMATCH,
          "mask must be bool or ", dtype_name(q.dtype), " like q, got ", dtype_name(mask.dtype));
    Shape scores(q.shape.begin(), q.shape.end() - 1);
    scores.push_back(k.shape[r - 2]);
    if (!broadcasts_to(mask.shape, scores))
      fail(GENIE_ERR_SHAPE_MISMATCH, "mask ", shape_str(mask.shape), " does not broadcast to the scores ",
           shape_str(scores));
  }
  flag_attr(attrs, "causal");
  const double scale = attrs.get_float("scale", 1.0);
  check(std::isfinite(scale), GENIE_ERR_INVALID_ATTRIBUTE, "attribute 'scale' must be finite, got ", scale);
  Shape out = q.shape;
  out[r - 1] = v.shape[r - 1];
  return one(q.dtype, out);
}

// Output length of a sliding window: floor((len + 2*pad - span) / stride) + 1
// where span = dilation*(kernel-1)+1, refusing windows larger than the input.
int64_t window_out(int64_t len, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation,
                   const char* dim) {
  const int64_t span = checked_add(checked_mul(dilation, kernel - 1), 1);
  const int64_t padded = checked_add(len, checked_mul(2, pad));
  check(padded >= span, GENIE_ERR_SHAPE_MISMATCH, "window of ", span, " does not fit in ", dim, " = ", len,
        " with padding ", pad);
  return (padded - span) / stride + 1;
}

Out infer_conv2d(const In& in, const Attrs& attrs) {
  const ValueType &x = in[0], &w = in[1];
  expect_float(x, "x");
  expect_same_dtype(x, "x", w, "weight");
  expect_rank(x, "x", 4);
  expect_rank(w, "weight", 4);
  const int64_t groups = attrs.get_int("groups", 1);
  check(groups >= 1, GENIE_ERR_INVALID_ATTRIBUTE, "attribute 'groups' must be >= 1, got ", groups);
  const auto stride = pair_attr(attrs, "stride", {1, 1}, 1);
  const auto padding = pair_attr(attrs, "padding", {0, 0}, 0);
  const auto dilation = pair_attr(attrs, "dilation", {1, 1}, 1);
  const int64_t c = x.shape[1], o = w.shape[0];
  if (!(c % groups == 0 && w.shape[1] == c / groups && o % groups == 0))
    fail(GENIE_ERR_SHAPE_MISMATCH, "weight ", shape_str(w.shape), " does not fit x ", shape_str(x.shape),
         " with groups = ", groups, " (need [O, C/groups, kh, kw] with O divisible by groups)");
  if (w.shape[2] < 1 || w.shape[3] < 1)
    fail(GENIE_ERR_SHAPE_MISMATCH, "weight ", shape_str(w.shape), " has an empty kernel");
  expect_vector(in[2], "bias", x, "x", o);
  return one(x.dtype,
             {x.shape[0], o, window_out(x.shape[2], w.shape[2], stride[0], padding[0], dilation[0], "H"),
              window_out(x.shape[3], w.shape[3], stride[1], padding[1], dilation[1], "W")});
}

Out infer_pool2d(const In& in, const Attrs& attrs) {
  const ValueType& x = in[0];
  expect_float(x, "x");
  expect_rank(x, "x", 4);
  const auto kernel = pair_attr(attrs, "kernel", required<std::vector<int64_t>>(attrs, "kernel"), 1);
  const auto stride = pair_attr(attrs, "stride", kernel, 1);
  const auto padding = pair_attr(attrs, "padding", {0, 0}, 0);
  for (int i = 0; i < 2; ++i)
    if (padding[i] > kernel[i] / 2)
      fail(GENIE_ERR_INVALID_ATTRIBUTE, "attribute 'padding' ", shape_str(padding),
           " must be at most half of kernel ", shape_str(kernel));
  return one(x.dtype,
             {x.shape[0], x.shape[1], window_out(x.shape[2], kernel[0], stride[0], padding[0], 1, "H"),
              window_out(x.shape[3], kernel[1], stride[1], padding[1], 1, "W")});
}

Out infer_adaptive_pool2d(const In& in, const Attrs& attrs) {
  const ValueType& x = in[0];
  expect_float(x, "x");
  expect_rank(x, "x", 4);
  const auto size = pair_attr(attrs, "output_size", required<std::vector<int64_t>>(attrs, "output_size"), 1);
  // An empty input gives empty bins, whose average or maximum is undefined.
  if (x.shape[2] < 1 || x.shape[3] < 1)
    fail(GENIE_ERR_SHAPE_MISMATCH, "x ", shape_str(x.shape), " has an empty spatial dimension");
  return one(x.dtype, {x.shape[0], x.shape[1], size[0], size[1]});
}

// ---------------------------------------------------------------------------
// The table.
// ---------------------------------------------------------------------------

// "2", "2 to 3", "1 or more".
std::string count_range(int min, int max) {
  if (max == min) return std::to_string(min);
  return max < 0 ? cat(min, " or more") : cat(min, " to ", max);
}

// Wraps an inference function so that callers other than validation (the
// scheduler, the executor) get arity errors rather than out-of-range reads,
// and so that every function sees all its declared input slots (omitted
// optional ones as dtype Invalid).
InferFn guarded(const OpSchema& s, InferFn fn) {
  return [name = s.name, min = s.min_inputs, max = s.max_inputs, fn = std::move(fn)](const In& in,
                                                                                     const Attrs& attrs) {
    const auto n = static_cast<int>(in.size());
    if (n < min || (max >= 0 && n > max))
      fail(GENIE_ERR_INVALID_GRAPH, name, " takes ", count_range(min, max), " inputs, got ", n);
    for (int i = 0; i < min; ++i)
      check(present(in[i]), GENIE_ERR_INVALID_GRAPH, "required input ", i, " of ", name, " is omitted");
    if (max < 0 || n == max) return fn(in, attrs);
    In padded = in;
    padded.resize(static_cast<size_t>(max));
    return fn(padded, attrs);
  };
}

std::vector<OpSchema> build_table() {
  using T = AttrType;
  std::vector<OpSchema> ops;
  auto add = [&ops](std::string name, int min_in, int max_in, std::vector<AttrSpec> attrs, InferFn fn,
                    int max_out = 1) {
    OpSchema s{std::move(name), min_in, max_in, 1, max_out, std::move(attrs), nullptr, false, nullptr};
    s.infer = guarded(s, std::move(fn));
    ops.push_back(std::move(s));
  };

  add("matmul", 2, 2, {{"transpose_a", T::Int}, {"transpose_b", T::Int}}, infer_matmul);
  add("linear", 2, 3, {}, infer_linear);
  for (const char* op : {"add", "sub", "mul", "div"}) add(op, 2, 2, {}, infer_arith);
  for (const char* op : {"silu", "tanh", "sigmoid", "exp", "log", "sqrt"})
    add(op, 1, 1, {}, infer_unary_float);
  for (const char* op : {"relu", "neg", "abs"}) add(op, 1, 1, {}, infer_unary_numeric);
  add("gelu", 1, 1, {{"approximate", T::String}}, infer_gelu);
  add("dropout", 1, 1, {{"p", T::Float}}, infer_dropout);
  for (const char* op : {"eq", "ne", "lt", "le", "gt", "ge"}) add(op, 2, 2, {}, infer_compare);
  add("where", 3, 3, {}, infer_where);
  add("masked_fill", 2, 2, {{"value", T::Float, true}}, infer_masked_fill);
  add("cast", 1, 1, {{"dtype", T::String, true}}, infer_cast);
  add("softmax", 1, 1, {{"axis", T::Int}}, infer_softmax);
  add("layer_norm", 1, 3, {{"eps", T::Float}}, infer_norm);
  add("rms_norm", 1, 2, {{"eps", T::Float}}, infer_norm);
  add("embedding", 2, 2, {}, infer_embedding);
  add("reshape", 1, 1, {{"shape", T::Ints, true}}, infer_reshape);
  add("transpose", 1, 1, {{"dim0", T::Int}, {"dim1", T::Int}}, infer_transpose);
  add("permute", 1, 1, {{"perm", T::Ints, true}}, infer_permute);
  add("flatten", 1, 1, {{"start_dim", T::Int}, {"end_dim", T::Int}}, infer_flatten);
  add("concat", 1, -1, {{"axis", T::Int}}, infer_concat);
  add("split", 1, 1, {{"axis", T::Int}, {"sizes", T::Ints, true}}, infer_split, -1);
  add("slice", 1, 1, {{"axis", T::Int, true}, {"start", T::Int}, {"end", T::Int}, {"step", T::Int}},
      infer_slice);
  const std::vector<AttrSpec> reduce_attrs = {{"axes", T::Ints}, {"keepdims", T::Int}};
  add("reduce_sum", 1, 1, reduce_attrs,
      [](const In& in, const Attrs& a) { return infer_reduce(in, a, false); });
  add("reduce_max", 1, 1, reduce_attrs,
      [](const In& in, const Attrs& a) { return infer_reduce(in, a, false); });
  add("reduce_mean", 1, 1, reduce_attrs,
      [](const In& in, const Attrs& a) { return infer_reduce(in, a, true); });
  add("attention", 3, 4, {{"causal", T::Int}, {"scale", T::Float}}, infer_attention);
  add("conv2d", 2, 3, {{"stride", T::Ints}, {"padding", T::Ints}, {"dilation", T::Ints}, {"groups", T::Int}},
      infer_conv2d);
  for (const char* op : {"max_pool2d", "avg_pool2d"})
    add(op, 1, 1, {{"kernel", T::Ints, true}, {"stride", T::Ints}, {"padding", T::Ints}}, infer_pool2d);
  for (const char* op : {"adaptive_avg_pool2d", "adaptive_max_pool2d"})
    add(op, 1, 1, {{"output_size", T::Ints, true}}, infer_adaptive_pool2d);
  return ops;
}

const std::map<std::string, OpSchema>& table() {
  static const std::map<std::string, OpSchema> t = [] {
    std::map<std::string, OpSchema> m;
    for (OpSchema& s : build_table()) m.emplace(s.name, std::move(s));
    // Every schema has its line in op_table.def and every line its schema.
    const std::vector<std::string>& listed = op_table_names();
    for (const auto& [name, schema] : m)
      if (std::find(listed.begin(), listed.end(), name) == listed.end())
        fail(GENIE_ERR_INTERNAL, "op '", name, "' has a schema but no line in src/graph/op_table.def");
    for (const std::string& name : listed)
      if (m.count(name) == 0) fail(GENIE_ERR_INTERNAL, "op '", name, "' of src/graph/op_table.def has no schema");
    return m;
  }();
  return t;
}

}  // namespace

const OpSchema* find_builtin_op(const std::string& name) {
  auto it = table().find(name);
  return it == table().end() ? nullptr : &it->second;
}

const std::vector<std::string>& op_table_names() {
  static const std::vector<std::string> names = {
#define GENIE_OP(name, sched_class, cuda) #name,
#include "graph/op_table.def"
#undef GENIE_OP
  };
  return names;
}

std::vector<std::string> builtin_op_names() {
  std::vector<std::string> names;
  for (const auto& [name, schema] : table()) names.push_back(name);
  return names;
}

void check_arity(const OpSchema& s, const std::vector<std::string>& inputs, size_t n_outputs) {
  const auto n_in = static_cast<int>(inputs.size());
  const auto n_out = static_cast<int>(n_outputs);
  if (n_in < s.min_inputs || (s.max_inputs >= 0 && n_in > s.max_inputs))
    fail(GENIE_ERR_INVALID_GRAPH, s.name, " takes ", count_range(s.min_inputs, s.max_inputs), " inputs, got ",
         n_in);
  if (n_out < s.min_outputs || (s.max_outputs >= 0 && n_out > s.max_outputs))
    fail(GENIE_ERR_INVALID_GRAPH, s.name, " produces ", count_range(s.min_outputs, s.max_outputs),
         " outputs, got ", n_out);
  for (int i = 0; i < n_in; ++i)
    check(!inputs[i].empty() || (i >= s.min_inputs && s.max_inputs >= 0), GENIE_ERR_INVALID_GRAPH, "input ",
          i, " of ", s.name, " is required and cannot be omitted");
}

void check_attr(const OpSchema& schema, const std::string& key, const AttrValue& value) {
  if (schema.custom) return;  // its inference checks the attributes it reads
  auto spec = std::find_if(schema.attrs.begin(), schema.attrs.end(),
                           [&](const AttrSpec& s) { return s.name == key; });
  if (spec == schema.attrs.end()) {
    std::string known;
    for (const AttrSpec& s : schema.attrs) known += (known.empty() ? "" : ", ") + s.name;
    fail(GENIE_ERR_INVALID_ATTRIBUTE, schema.name, " has no attribute '", key, "' (",
         known.empty() ? "it takes none" : "it takes " + known, ")");
  }
  const AttrType given = attr_type(value);
  const bool ok = spec->type == given || (spec->type == AttrType::Float && given == AttrType::Int) ||
                  (spec->type == AttrType::Floats && given == AttrType::Ints);
  check(ok, GENIE_ERR_INVALID_ATTRIBUTE, "attribute '", key, "' of ", schema.name, " must be ",
        attr_type_name(spec->type), ", got ", attr_type_name(given));
}

void check_attrs(const OpSchema& schema, const Attrs& attrs) {
  for (const auto& [key, value] : attrs.all()) check_attr(schema, key, value);
  for (const AttrSpec& s : schema.attrs)
    check(!s.required || attrs.has(s.name), GENIE_ERR_INVALID_ATTRIBUTE, "required attribute '", s.name,
          "' of ", schema.name, " is missing");
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      fail(GENIE_ERR_SHAPE_MISMATCH, "shapes ", shape_str(a), " and ", shape_str(b), " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace genie
