#include "frontend/onnx/fold.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include "core/error.hpp"
#include "graph/op_schema.hpp"

namespace genie::onnx {

namespace {

int64_t count(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Shape strides_of(const Shape& s) {
  Shape st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

// Offset into a tensor of shape `src` (right-aligned, size-1 dims broadcast)
// of the element at multi-index `idx` of the broadcast result.
int64_t bcast_offset(const Shape& idx, const Shape& src, const Shape& src_strides) {
  int64_t off = 0;
  const size_t lead = idx.size() - src.size();
  for (size_t i = 0; i < src.size(); ++i)
    if (src[i] != 1) off += idx[lead + i] * src_strides[i];
  return off;
}

void unravel(int64_t flat, const Shape& shape, Shape& idx) {
  idx.assign(shape.size(), 0);
  for (size_t i = shape.size(); i-- > 0;) {
    idx[i] = shape[i] ? flat % shape[i] : 0;
    flat = shape[i] ? flat / shape[i] : 0;
  }
}

double cast_value(double x, DType to) {
  if (to == DType::Bool) return x != 0 ? 1 : 0;
  if (to == DType::I32 || to == DType::I64) return std::trunc(x);
  if (to == DType::F16) return f16_to_f32(f32_to_f16(static_cast<float>(x)));
  if (to == DType::BF16) return bf16_to_f32(f32_to_bf16(static_cast<float>(x)));
  return static_cast<float>(x);
}

Host broadcast_binary(const Host& a, const Host& b, DType out_dtype, const std::function<double(double, double)>& f) {
  Host o;
  o.dtype = out_dtype;
  o.shape = broadcast_shapes(a.shape, b.shape);
  const int64_t n = count(o.shape);
  o.v.resize(static_cast<size_t>(n));
  const Shape sa = strides_of(a.shape), sb = strides_of(b.shape);
  Shape idx;
  for (int64_t i = 0; i < n; ++i) {
    unravel(i, o.shape, idx);
    o.v[static_cast<size_t>(i)] = f(a.v[static_cast<size_t>(bcast_offset(idx, a.shape, sa))],
                                    b.v[static_cast<size_t>(bcast_offset(idx, b.shape, sb))]);
  }
  return o;
}

Host expand_to(const Host& a, const Shape& shape) {
  Host zero;
  zero.dtype = a.dtype;
  zero.shape = shape;
  zero.v.assign(static_cast<size_t>(count(shape)), 0.0);
  return broadcast_binary(a, zero, a.dtype, [](double x, double) { return x; });
}

// Gathers along `axis` with a function mapping an output multi-index to the
// source multi-index (Transpose, Gather, Slice, Concat share this).
Host gather_by(const Host& src, DType dtype, const Shape& out_shape,
               const std::function<void(const Shape& out_idx, Shape& src_idx)>& map) {
  Host o;
  o.dtype = dtype;
  o.shape = out_shape;
  const int64_t n = count(out_shape);
  o.v.resize(static_cast<size_t>(n));
  const Shape st = strides_of(src.shape);
  Shape idx, sidx(src.shape.size());
  for (int64_t i = 0; i < n; ++i) {
    unravel(i, out_shape, idx);
    map(idx, sidx);
    int64_t off = 0;
    for (size_t d = 0; d < sidx.size(); ++d) off += sidx[d] * st[d];
    o.v[static_cast<size_t>(i)] = src.v[static_cast<size_t>(off)];
  }
  return o;
}

const Host& need(const std::vector<const Host*>& in, size_t i, const std::string& op) {
  check(i < in.size() && in[i] != nullptr, GENIE_ERR_INVALID_GRAPH, op, " needs input ", i);
  return *in[i];
}

std::optional<DType> onnx_dtype_of(int64_t code) {
  switch (code) {
    case 1: return DType::F32;
    case 6: return DType::I32;
    case 7: return DType::I64;
    case 9: return DType::Bool;
    case 10: return DType::F16;
    case 16: return DType::BF16;
    default: return std::nullopt;
  }
}

}  // namespace

int64_t norm_axis(int64_t axis, size_t rank, const char* what) {
  const auto r = static_cast<int64_t>(rank);
  check(axis >= -r && axis < std::max<int64_t>(r, 1), GENIE_ERR_INVALID_ATTRIBUTE, what, " ", axis,
        " is out of range for rank ", rank);
  return axis < 0 ? axis + r : axis;
}

Host host_of(const TensorData& t) {
  Host h;
  h.dtype = t.dtype();
  h.shape = t.shape();
  const auto n = static_cast<size_t>(t.numel());
  h.v.resize(n);
  for (size_t i = 0; i < n; ++i) {
    switch (t.dtype()) {
      case DType::F32: h.v[i] = t.data<float>()[i]; break;
      case DType::F16: h.v[i] = f16_to_f32(t.data<uint16_t>()[i]); break;
      case DType::BF16: h.v[i] = bf16_to_f32(t.data<uint16_t>()[i]); break;
      case DType::I32: h.v[i] = t.data<int32_t>()[i]; break;
      case DType::I64: h.v[i] = static_cast<double>(t.data<int64_t>()[i]); break;
      case DType::Bool: h.v[i] = t.data<uint8_t>()[i] ? 1 : 0; break;
      default: fail(GENIE_ERR_INTERNAL, "host_of: dtype ", dtype_name(t.dtype()));
    }
  }
  return h;
}

TensorPtr tensor_of(const Host& h) {
  auto t = std::make_shared<TensorData>(h.dtype, h.shape);
  for (size_t i = 0; i < h.v.size(); ++i) {
    const double x = h.v[i];
    switch (h.dtype) {
      case DType::F32: t->data<float>()[i] = static_cast<float>(x); break;
      case DType::F16: t->data<uint16_t>()[i] = f32_to_f16(static_cast<float>(x)); break;
      case DType::BF16: t->data<uint16_t>()[i] = f32_to_bf16(static_cast<float>(x)); break;
      case DType::I32: t->data<int32_t>()[i] = static_cast<int32_t>(x); break;
      case DType::I64: t->data<int64_t>()[i] = static_cast<int64_t>(x); break;
      case DType::Bool: t->data<uint8_t>()[i] = x != 0; break;
      default: fail(GENIE_ERR_INTERNAL, "tensor_of: dtype ", dtype_name(h.dtype));
    }
  }
  return t;
}

std::vector<int64_t> ints_of(const Host& h) {
  if (h.shape.size() > 1)
    fail(GENIE_ERR_SHAPE_MISMATCH, "expected a scalar or a 1-D list of ints, got ", shape_str(h.shape));
  std::vector<int64_t> r;
  for (double x : h.v) r.push_back(static_cast<int64_t>(x));
  return r;
}

Host host_ints(const std::vector<int64_t>& v, bool scalar) {
  Host h;
  h.dtype = DType::I64;
  if (!scalar) h.shape = {static_cast<int64_t>(v.size())};
  for (int64_t x : v) h.v.push_back(static_cast<double>(x));
  return h;
}

Host shape_host(const Shape& s, const Attrs& a, bool size) {
  if (size) return host_ints({count(s)}, true);
  const auto r = static_cast<int64_t>(s.size());
  int64_t b = a.get_int("start", 0), e = a.get_int("end", r);
  b = std::clamp<int64_t>(b < 0 ? b + r : b, 0, r);
  e = std::clamp<int64_t>(e < 0 ? e + r : e, 0, r);
  return host_ints(std::vector<int64_t>(s.begin() + b, s.begin() + std::max(b, e)));
}

Shape unsqueeze_shape(const Shape& s, std::vector<int64_t> axes) {
  const size_t rank = s.size() + axes.size();
  for (auto& a : axes) a = norm_axis(a, rank, "Unsqueeze axis");
  std::sort(axes.begin(), axes.end());
  check(std::adjacent_find(axes.begin(), axes.end()) == axes.end(), GENIE_ERR_INVALID_ATTRIBUTE,
        "Unsqueeze axes repeat");
  Shape out;
  size_t j = 0;
  for (size_t i = 0; i < rank; ++i) {
    if (std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(i)))
      out.push_back(1);
    else
      out.push_back(s[j++]);
  }
  return out;
}

Shape squeeze_shape(const Shape& s, const std::vector<int64_t>& axes) {
  std::vector<bool> drop(s.size(), false);
  if (axes.empty()) {
    for (size_t i = 0; i < s.size(); ++i) drop[i] = s[i] == 1;
  } else {
    for (int64_t a : axes) {
      const int64_t ax = norm_axis(a, s.size(), "Squeeze axis");
      check(s[static_cast<size_t>(ax)] == 1, GENIE_ERR_SHAPE_MISMATCH, "Squeeze of axis ", a, " of size ",
            s[static_cast<size_t>(ax)]);
      drop[static_cast<size_t>(ax)] = true;
    }
  }
  Shape out;
  for (size_t i = 0; i < s.size(); ++i)
    if (!drop[i]) out.push_back(s[i]);
  return out;
}

Shape reshape_shape(const Shape& s, const std::vector<int64_t>& target, bool allowzero) {
  Shape out;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t d = target[i];
    if (d == 0 && !allowzero) {
      if (i >= s.size()) fail(GENIE_ERR_SHAPE_MISMATCH, "Reshape copies dimension ", i, " of ", shape_str(s));
      d = s[i];
    }
    if (d == -1) {
      check(infer < 0, GENIE_ERR_SHAPE_MISMATCH, "Reshape target has two -1 dimensions");
      infer = static_cast<int>(i);
      out.push_back(1);
      continue;
    }
    check(d >= 0, GENIE_ERR_SHAPE_MISMATCH, "Reshape target dimension ", d);
    known *= d;
    out.push_back(d);
  }
  const int64_t n = count(s);
  if (infer >= 0) {
    if (!(known > 0 && n % known == 0))
      fail(GENIE_ERR_SHAPE_MISMATCH, "Reshape of ", shape_str(s), " to ", shape_str(target));
    out[static_cast<size_t>(infer)] = n / known;
  }
  if (count(out) != n)
    fail(GENIE_ERR_SHAPE_MISMATCH, "Reshape of ", shape_str(s), " (", n, " elements) to ", shape_str(out));
  return out;
}

Shape flatten_shape(const Shape& s, int64_t axis) {
  const int64_t ax = axis < 0 ? axis + static_cast<int64_t>(s.size()) : axis;
  check(ax >= 0 && ax <= static_cast<int64_t>(s.size()), GENIE_ERR_INVALID_ATTRIBUTE, "Flatten axis ", axis,
        " for rank ", s.size());
  int64_t a = 1, b = 1;
  for (size_t i = 0; i < s.size(); ++i) (static_cast<int64_t>(i) < ax ? a : b) *= s[i];
  return {a, b};
}

bool fold(const std::string& op, const std::vector<const Host*>& in, const Attrs& a, const Host* tensor_attr,
          std::vector<Host>& out) {
  static const std::map<std::string, std::function<double(double, double)>> binary = {
      {"Add", [](double x, double y) { return x + y; }},
      {"Sub", [](double x, double y) { return x - y; }},
      {"Mul", [](double x, double y) { return x * y; }},
      {"Pow", [](double x, double y) { return std::pow(x, y); }},
      {"Max", [](double x, double y) { return std::max(x, y); }},
      {"Min", [](double x, double y) { return std::min(x, y); }},
  };
  static const std::map<std::string, std::function<double(double, double)>> compare = {
      {"Equal", [](double x, double y) { return x == y ? 1.0 : 0.0; }},
      {"Less", [](double x, double y) { return x < y ? 1.0 : 0.0; }},
      {"LessOrEqual", [](double x, double y) { return x <= y ? 1.0 : 0.0; }},
      {"Greater", [](double x, double y) { return x > y ? 1.0 : 0.0; }},
      {"GreaterOrEqual", [](double x, double y) { return x >= y ? 1.0 : 0.0; }},
      {"And", [](double x, double y) { return (x != 0 && y != 0) ? 1.0 : 0.0; }},
      {"Or", [](double x, double y) { return (x != 0 || y != 0) ? 1.0 : 0.0; }},
  };
  static const std::map<std::string, std::function<double(double)>> unary = {
      {"Neg", [](double x) { return -x; }},          {"Abs", [](double x) { return std::fabs(x); }},
      {"Sqrt", [](double x) { return std::sqrt(x); }}, {"Exp", [](double x) { return std::exp(x); }},
      {"Log", [](double x) { return std::log(x); }},   {"Tanh", [](double x) { return std::tanh(x); }},
      {"Erf", [](double x) { return std::erf(x); }},   {"Relu", [](double x) { return x > 0 ? x : 0.0; }},
      {"Sigmoid", [](double x) { return 1.0 / (1.0 + std::exp(-x)); }},
      {"Not", [](double x) { return x == 0 ? 1.0 : 0.0; }},
      {"Floor", [](double x) { return std::floor(x); }}, {"Ceil", [](double x) { return std::ceil(x); }},
  };
  if (auto it = binary.find(op); it != binary.end()) {
    const Host &x = need(in, 0, op), &y = need(in, 1, op);
    Host r = broadcast_binary(x, y, x.dtype, it->second);
    for (auto& v : r.v) v = cast_value(v, r.dtype);
    out.push_back(std::move(r));
    return true;
  }
  if (op == "Div") {
    const Host &x = need(in, 0, op), &y = need(in, 1, op);
    const bool integer = x.dtype == DType::I32 || x.dtype == DType::I64;
    Host r = broadcast_binary(x, y, x.dtype, [&](double p, double q) {
      if (integer) {
        check(q != 0, GENIE_ERR_INVALID_ARGUMENT, "Div: integer division by zero");
        return std::trunc(p / q);
      }
      return p / q;
    });
    for (auto& v : r.v) v = cast_value(v, r.dtype);
    out.push_back(std::move(r));
    return true;
  }
  if (auto it = compare.find(op); it != compare.end()) {
    out.push_back(broadcast_binary(need(in, 0, op), need(in, 1, op), DType::Bool, it->second));
    return true;
  }
  if (auto it = unary.find(op); it != unary.end()) {
    Host r = need(in, 0, op);
    for (auto& v : r.v) v = cast_value(it->second(v), r.dtype);
    out.push_back(std::move(r));
    return true;
  }
  if (op == "Identity") {
    out.push_back(need(in, 0, op));
    return true;
  }
  if (op == "Cast") {
    const auto to = onnx_dtype_of(a.get_int("to", 0));
    check(to.has_value(), GENIE_ERR_UNSUPPORTED, "Cast to ONNX element type ", a.get_int("to", 0),
          " (Genie has f32, f16, bf16, i32, i64, bool)");
    Host r = need(in, 0, op);
    r.dtype = *to;
    for (auto& v : r.v) v = cast_value(v, *to);
    out.push_back(std::move(r));
    return true;
  }
  if (op == "Shape" || op == "Size") {
    out.push_back(shape_host(need(in, 0, op).shape, a, op == "Size"));
    return true;
  }
  if (op == "ConstantOfShape") {
    Host r;
    r.dtype = tensor_attr ? tensor_attr->dtype : DType::F32;
    const double fill = tensor_attr && !tensor_attr->v.empty() ? tensor_attr->v[0] : 0.0;
    r.shape = ints_of(need(in, 0, op));
    r.v.assign(static_cast<size_t>(count(r.shape)), fill);
    out.push_back(std::move(r));
    return true;
  }
  if (op == "Range") {
    const Host &s = need(in, 0, op), &l = need(in, 1, op), &d = need(in, 2, op);
    check(!s.v.empty() && !l.v.empty() && !d.v.empty() && d.v[0] != 0, GENIE_ERR_INVALID_ARGUMENT,
          "Range needs scalar start, limit and a non-zero delta");
    Host r;
    r.dtype = s.dtype;
    const auto n = static_cast<int64_t>(std::max(0.0, std::ceil((l.v[0] - s.v[0]) / d.v[0])));
    for (int64_t i = 0; i < n; ++i) r.v.push_back(s.v[0] + static_cast<double>(i) * d.v[0]);
    r.shape = {n};
    out.push_back(std::move(r));
    return true;
  }
  if (op == "Unsqueeze" || op == "Squeeze" || op == "Reshape" || op == "Flatten" || op == "Expand") {
    Host r = need(in, 0, op);
    if (op == "Unsqueeze") {
      r.shape = unsqueeze_shape(r.shape, in.size() > 1 && in[1] ? ints_of(*in[1]) : a.get_ints("axes", {}));
    } else if (op == "Squeeze") {
      r.shape = squeeze_shape(r.shape, in.size() > 1 && in[1] ? ints_of(*in[1]) : a.get_ints("axes", {}));
    } else if (op == "Reshape") {
      r.shape = reshape_shape(r.shape, ints_of(need(in, 1, op)), a.get_int("allowzero", 0) != 0);
    } else if (op == "Flatten") {
      r.shape = flatten_shape(r.shape, a.get_int("axis", 1));
    } else {
      r = expand_to(r, broadcast_shapes(r.shape, ints_of(need(in, 1, op))));
    }
    out.push_back(std::move(r));
    return true;
  }
  if (op == "Transpose") {
    const Host& x = need(in, 0, op);
    std::vector<int64_t> perm = a.get_ints("perm", {});
    if (perm.empty())
      for (size_t i = x.shape.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
    check(perm.size() == x.shape.size(), GENIE_ERR_INVALID_ATTRIBUTE, "Transpose perm of ", perm.size(),
          " entries for rank ", x.shape.size());
    Shape os;
    for (int64_t p : perm) os.push_back(x.shape[static_cast<size_t>(norm_axis(p, x.shape.size(), "perm"))]);
    out.push_back(gather_by(x, x.dtype, os, [&](const Shape& oi, Shape& si) {
      for (size_t d = 0; d < perm.size(); ++d) si[static_cast<size_t>(perm[d])] = oi[d];
    }));
    return true;
  }
  if (op == "Gather") {
    const Host &x = need(in, 0, op), &ix = need(in, 1, op);
    const int64_t axis = norm_axis(a.get_int("axis", 0), x.shape.size(), "Gather axis");
    const int64_t dim = x.shape[static_cast<size_t>(axis)];
    Shape os(x.shape.begin(), x.shape.begin() + axis);
    os.insert(os.end(), ix.shape.begin(), ix.shape.end());
    os.insert(os.end(), x.shape.begin() + axis + 1, x.shape.end());
    const Shape ist = strides_of(ix.shape);
    out.push_back(gather_by(x, x.dtype, os, [&](const Shape& oi, Shape& si) {
      const auto ax = static_cast<size_t>(axis);
      int64_t ioff = 0;
      for (size_t d = 0; d < ix.shape.size(); ++d) ioff += oi[ax + d] * ist[d];
      auto i = static_cast<int64_t>(ix.v[static_cast<size_t>(ioff)]);
      if (i < 0) i += dim;
      check(i >= 0 && i < dim, GENIE_ERR_INVALID_ARGUMENT, "Gather index out of range [0, ", dim, ")");
      for (size_t d = 0; d < ax; ++d) si[d] = oi[d];
      si[ax] = i;
      for (size_t d = ax + 1; d < si.size(); ++d) si[d] = oi[d + ix.shape.size() - 1];
    }));
    return true;
  }
  if (op == "Concat") {
    const Host& x0 = need(in, 0, op);
    const int64_t axis = norm_axis(a.get_int("axis", 0), x0.shape.size(), "Concat axis");
    Host r;
    r.dtype = x0.dtype;
    r.shape = x0.shape;
    r.shape[static_cast<size_t>(axis)] = 0;
    for (size_t i = 0; i < in.size(); ++i) r.shape[static_cast<size_t>(axis)] += need(in, i, op).shape[static_cast<size_t>(axis)];
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= r.shape[static_cast<size_t>(d)];
    for (int64_t o = 0; o < outer; ++o)
      for (const Host* p : in) {
        const int64_t chunk = count(p->shape) / std::max<int64_t>(outer, 1);
        r.v.insert(r.v.end(), p->v.begin() + o * chunk, p->v.begin() + (o + 1) * chunk);
      }
    out.push_back(std::move(r));
    return true;
  }
  if (op == "Slice") {
    const Host& x = need(in, 0, op);
    const auto starts = ints_of(need(in, 1, op)), ends = ints_of(need(in, 2, op));
    std::vector<int64_t> axes, steps;
    if (in.size() > 3 && in[3]) axes = ints_of(*in[3]);
    if (in.size() > 4 && in[4]) steps = ints_of(*in[4]);
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    Shape begin(x.shape.size(), 0), step(x.shape.size(), 1), os = x.shape;
    for (size_t i = 0; i < axes.size(); ++i) {
      const auto ax = static_cast<size_t>(norm_axis(axes[i], x.shape.size(), "Slice axis"));
      const int64_t d = x.shape[ax], st = steps.empty() ? 1 : steps[i];
      check(st > 0, GENIE_ERR_UNSUPPORTED, "Slice with a step of ", st, " (only positive steps)");
      int64_t s = starts[i] < 0 ? starts[i] + d : starts[i], e = ends[i] < 0 ? ends[i] + d : ends[i];
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      begin[ax] = s;
      step[ax] = st;
      os[ax] = e > s ? (e - s + st - 1) / st : 0;
    }
    out.push_back(gather_by(x, x.dtype, os, [&](const Shape& oi, Shape& si) {
      for (size_t d = 0; d < si.size(); ++d) si[d] = begin[d] + oi[d] * step[d];
    }));
    return true;
  }
  if (op == "Where") {
    const Host &c = need(in, 0, op), &x = need(in, 1, op), &y = need(in, 2, op);
    Host xy = broadcast_binary(x, y, x.dtype, [](double p, double) { return p; });
    Host yx = broadcast_binary(x, y, x.dtype, [](double, double q) { return q; });
    Host sel = broadcast_binary(c, xy, DType::Bool, [](double p, double) { return p; });
    xy = expand_to(xy, sel.shape);
    yx = expand_to(yx, sel.shape);
    for (size_t i = 0; i < xy.v.size(); ++i) xy.v[i] = sel.v[i] != 0 ? xy.v[i] : yx.v[i];
    out.push_back(std::move(xy));
    return true;
  }
  return false;
}

}  // namespace genie::onnx
