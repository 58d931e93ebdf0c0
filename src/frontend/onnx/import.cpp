// ONNX model -> Genie graph. Values are either runtime values (Genie values
// computed from the model's inputs) or host constants (initializers,
// Constant nodes and everything folded from them, fold.hpp). A node
// whose inputs are all constant is folded; any other becomes Genie nodes.
// A constant that a Genie node uses becomes an input with role weight (an
// initializer, or a folded tensor of more than kInlineMax elements) or an
// inline graph constant (small folded values: scalars, shapes).
#include "frontend/onnx/import.hpp"

#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "core/error.hpp"
#include "frontend/onnx/fold.hpp"
#include "graph/op_schema.hpp"
#include "onnx_subset.pb.h"

namespace genie {

namespace {

using onnx::Host;
namespace pb = onnxpb;

constexpr int64_t kInlineMax = 16;

std::optional<DType> dtype_of_onnx(int32_t code) {
  switch (code) {
    case pb::Tensor::FLOAT: return DType::F32;
    case pb::Tensor::FLOAT16: return DType::F16;
    case pb::Tensor::BFLOAT16: return DType::BF16;
    case pb::Tensor::INT32: return DType::I32;
    case pb::Tensor::INT64: return DType::I64;
    case pb::Tensor::BOOL: return DType::Bool;
    default: return std::nullopt;
  }
}

// An initializer or Constant-node tensor.
TensorPtr tensor_from(const pb::Tensor& t, const std::string& what) {
  check(t.data_location() != pb::Tensor::EXTERNAL, GENIE_ERR_UNSUPPORTED, what,
        " is stored in an external data file (save the model with its tensors inside)");
  Shape shape(t.dims().begin(), t.dims().end());
  for (int64_t d : shape) check(d >= 0, GENIE_ERR_PARSE, what, " has a negative dimension");
  check(shape.size() <= GENIE_MAX_DIMS, GENIE_ERR_UNSUPPORTED, what, " has rank ", shape.size());
  const int32_t code = t.data_type();
  if (code == pb::Tensor::DOUBLE) {  // held as f32, the dtype Genie computes in
    auto out = std::make_shared<TensorData>(DType::F32, shape);
    const auto n = static_cast<size_t>(out->numel());
    if (t.has_raw_data()) {
      check(t.raw_data().size() == n * 8, GENIE_ERR_PARSE, what, ": raw_data of ", t.raw_data().size(),
            " bytes for ", n, " doubles");
      for (size_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, t.raw_data().data() + i * 8, 8);
        out->data<float>()[i] = static_cast<float>(d);
      }
    } else {
      check(static_cast<size_t>(t.double_data_size()) == n, GENIE_ERR_PARSE, what, ": ", t.double_data_size(),
            " values for ", n, " elements");
      for (size_t i = 0; i < n; ++i) out->data<float>()[i] = static_cast<float>(t.double_data(static_cast<int>(i)));
    }
    return out;
  }
  const auto dt = dtype_of_onnx(code);
  check(dt.has_value(), GENIE_ERR_UNSUPPORTED, what, " has ONNX element type ", code,
        " (Genie has float, float16, bfloat16, int32, int64, bool; double is read as float)");
  auto out = std::make_shared<TensorData>(*dt, shape);
  const auto n = static_cast<size_t>(out->numel());
  if (t.has_raw_data()) {
    check(t.raw_data().size() == out->nbytes(), GENIE_ERR_PARSE, what, ": raw_data of ", t.raw_data().size(),
          " bytes for ", n, " elements of ", dtype_name(*dt));
    if (n) std::memcpy(out->bytes(), t.raw_data().data(), out->nbytes());
    return out;
  }
  auto count_is = [&](int have) {
    check(static_cast<size_t>(have) == n, GENIE_ERR_PARSE, what, ": ", have, " values for ", n, " elements");
  };
  switch (*dt) {
    case DType::F32:
      count_is(t.float_data_size());
      for (size_t i = 0; i < n; ++i) out->data<float>()[i] = t.float_data(static_cast<int>(i));
      break;
    case DType::I64:
      count_is(t.int64_data_size());
      for (size_t i = 0; i < n; ++i) out->data<int64_t>()[i] = t.int64_data(static_cast<int>(i));
      break;
    case DType::I32:
      count_is(t.int32_data_size());
      for (size_t i = 0; i < n; ++i) out->data<int32_t>()[i] = t.int32_data(static_cast<int>(i));
      break;
    case DType::Bool:
      count_is(t.int32_data_size());
      for (size_t i = 0; i < n; ++i) out->data<uint8_t>()[i] = t.int32_data(static_cast<int>(i)) != 0;
      break;
    default:  // f16, bf16: the bits in int32_data
      count_is(t.int32_data_size());
      for (size_t i = 0; i < n; ++i)
        out->data<uint16_t>()[i] = static_cast<uint16_t>(t.int32_data(static_cast<int>(i)));
  }
  return out;
}

// "/transformer/h.0/attn/MatMul" (torch.onnx.export's scoped node names) ->
// "transformer.h.0.attn".
std::string module_of(const std::string& node_name) {
  if (node_name.empty() || node_name[0] != '/') return "";
  const auto last = node_name.rfind('/');
  std::string m = node_name.substr(1, last == 0 ? 0 : last - 1);
  for (auto& c : m)
    if (c == '/') c = '.';
  return m;
}

int32_t layer_of(const std::string& module) {
  size_t start = 0;
  while (start <= module.size()) {
    size_t end = module.find('.', start);
    if (end == std::string::npos) end = module.size();
    const std::string part = module.substr(start, end - start);
    if (!part.empty() && part.find_first_not_of("0123456789") == std::string::npos && part.size() < 9)
      return std::stoi(part);
    start = end + 1;
  }
  return -1;
}

class Importer {
 public:
  Importer(const pb::Model& m, OnnxImport& res) : m_(m), res_(res) {
    for (const auto& o : m.opset_import())
      if (o.domain().empty() || o.domain() == "ai.onnx") opset_ = o.version();
  }

  void run();

 private:
  // The GELU that exporters write out with Erf, x * (1 + erf(x / sqrt 2)) * 0.5,
  // is recognised step by step: these kinds are the partial expressions.
  // ScaledX is x / sqrt 2, emitted only if something besides the Erf uses it.
  enum class Kind { Runtime, Const, ScaledX, ErfOfX, OnePlusErf, XOnePlusErf, HalfOnePlusErf };
  struct Val {
    Kind kind = Kind::Runtime;
    std::string name;  // the Genie value (Runtime); the GELU's x (patterns)
    std::shared_ptr<Host> host;
    TensorPtr data;    // Const: the tensor (as read, for initializers)
    bool initializer = false;
  };
  // Where a ScaledX value came from, to emit it if it is used after all.
  struct Deferred {
    const pb::Node* node;
    std::string node_name;
    Annotations ann;
  };

  [[noreturn]] void unsupported(const std::string& what) const {
    fail(GENIE_ERR_UNSUPPORTED, "ONNX node '", node_name_, "' (", cur_->op_type(), "): ", what,
         " (docs/onnx.md lists what Genie imports)");
  }

  const Val* in(int i) const {
    if (i >= cur_->input_size() || cur_->input(i).empty()) return nullptr;
    auto it = vals_.find(cur_->input(i));
    check(it != vals_.end(), GENIE_ERR_INVALID_GRAPH, "input '", cur_->input(i), "' is not produced before it is used");
    return &it->second;
  }
  const Host* in_const(int i) const {
    const Val* v = in(i);
    return v && v->kind == Kind::Const ? v->host.get() : nullptr;
  }
  const Host& need_const(int i, const char* what) const {
    const Host* h = in_const(i);
    if (h == nullptr) unsupported(std::string(what) + " computed at run time (it must be a constant)");
    return *h;
  }
  std::string out(int i) const { return i < cur_->output_size() ? cur_->output(i) : std::string(); }

  std::string fresh(const std::string& base) {
    std::string name = base.empty() ? "v" : base.substr(0, 200);
    for (int i = 2; used_.count(name); ++i) name = base.substr(0, 200) + "_" + std::to_string(i);
    used_.insert(name);
    return name;
  }

  // The Genie value of ONNX value `onnx` for use by a Genie node.
  std::string rt(const std::string& onnx);
  std::string emit_deferred(const std::string& onnx);
  std::string rt_in(int i) {
    const Val* v = in(i);
    if (v == nullptr) unsupported("input " + std::to_string(i) + " is missing");
    return rt(cur_->input(i));
  }
  const ValueType& type(const std::string& genie_name) const { return types_.at(genie_name); }
  const ValueType& type_in(int i) { return type(rt_in(i)); }

  // Adds a Genie node; returns its output value names.
  std::vector<std::string> emit(const std::string& op, const std::vector<std::string>& inputs, Attrs attrs,
                                const std::vector<std::string>& out_bases);
  std::string emit1(const std::string& op, const std::vector<std::string>& inputs, Attrs attrs,
                    const std::string& base = "") {
    return emit(op, inputs, std::move(attrs), {base.empty() ? out(0) + ".part" : base})[0];
  }
  void define(const std::string& onnx, const std::string& genie_name) {
    if (onnx.empty()) return;
    Val v;
    v.name = genie_name;
    vals_[onnx] = std::move(v);
  }
  void define_const(const std::string& onnx, Host h) {
    if (onnx.empty()) return;
    Val v;
    v.kind = Kind::Const;
    v.data = onnx::tensor_of(h);
    v.host = std::make_shared<Host>(std::move(h));
    vals_[onnx] = std::move(v);
  }
  void define_pattern(Kind k, const std::string& x) {
    Val v;
    v.kind = k;
    v.name = x;
    vals_[out(0)] = std::move(v);
  }
  std::string reshape(const std::string& x, const Shape& shape, const std::string& base) {
    if (type(x).shape == shape) return x;
    Attrs a;
    a.set("shape", std::vector<int64_t>(shape));
    return emit1("reshape", {x}, a, base);
  }

  void node(const pb::Node& n);
  void runtime_node(const std::string& op, const Attrs& a);
  bool gelu_step(const std::string& op);
  std::vector<int64_t> axes_of(const Attrs& a, int input);
  void pool(const std::string& genie_op, const Attrs& a, bool avg);

  const pb::Model& m_;
  OnnxImport& res_;
  Graph* g_ = nullptr;
  int64_t opset_ = 1;
  const pb::Node* cur_ = nullptr;
  std::string node_name_;
  Annotations ann_;
  std::unordered_map<std::string, Val> vals_;
  std::unordered_map<std::string, ValueType> types_;  // Genie values
  std::unordered_map<std::string, std::string> materialized_;  // ONNX constant -> Genie value
  std::unordered_set<std::string> used_, node_names_;
  std::unordered_map<std::string, Deferred> deferred_;  // ScaledX values
  int node_index_ = 0;
};

std::string Importer::rt(const std::string& onnx) {
  const Val& v = vals_.at(onnx);
  switch (v.kind) {
    case Kind::Runtime: return v.name;
    case Kind::Const: break;
    case Kind::ScaledX: return emit_deferred(onnx);
    default: unsupported("Erf (Genie has no erf: only the GELU x * 0.5 * (1 + erf(x / sqrt(2))) is imported)");
  }
  auto it = materialized_.find(onnx);
  if (it != materialized_.end()) return it->second;
  std::string name = fresh(onnx);
  if (v.initializer || v.data->numel() > kInlineMax) {
    g_->add_input(name, v.data->dtype(), v.data->shape());
    g_->value(g_->find_value(name)).role = TensorRole::Weight;
    res_.weights.emplace_back(name, v.data);
  } else {
    g_->add_constant(name, v.data);
  }
  types_[name] = ValueType{v.data->dtype(), v.data->shape()};
  materialized_[onnx] = name;
  return name;
}

// Emits the division (or multiplication) that produced ScaledX value `onnx`,
// as the node it came from.
std::string Importer::emit_deferred(const std::string& onnx) {
  const Deferred d = deferred_.at(onnx);
  const pb::Node* saved_node = cur_;
  std::string saved_name = std::move(node_name_);
  Annotations saved_ann = std::move(ann_);
  cur_ = d.node;
  node_name_ = d.node_name;
  ann_ = d.ann;
  const std::string y =
      emit1(d.node->op_type() == "Div" ? "div" : "mul", {vals_.at(onnx).name, rt(d.node->input(1))}, {}, onnx);
  cur_ = saved_node;
  node_name_ = std::move(saved_name);
  ann_ = std::move(saved_ann);
  define(onnx, y);
  return y;
}

std::vector<std::string> Importer::emit(const std::string& op, const std::vector<std::string>& inputs, Attrs attrs,
                                        const std::vector<std::string>& out_bases) {
  const OpSchemaPtr schema = find_op(op);
  check(schema != nullptr, GENIE_ERR_INTERNAL, "no Genie op ", op);
  std::vector<ValueType> in_types;
  for (const auto& i : inputs) in_types.push_back(i.empty() ? ValueType{} : type(i));
  const std::vector<ValueType> out_types = schema->infer(in_types, attrs);
  std::vector<std::string> outs;
  for (size_t i = 0; i < out_types.size(); ++i)
    outs.push_back(fresh(i < out_bases.size() && !out_bases[i].empty() ? out_bases[i]
                                                                       : out_bases[0] + "." + std::to_string(i)));
  std::string nname = node_name_.empty() ? cur_->op_type() : node_name_;
  for (int i = 2; node_names_.count(nname); ++i) nname = node_name_ + "#" + std::to_string(i);
  node_names_.insert(nname);
  const NodeId id = g_->add_node(op, nname, inputs, outs);
  for (const auto& [k, v] : attrs.all()) g_->set_attr(nname, k, v);
  g_->node(id).ann = ann_;
  for (size_t i = 0; i < outs.size(); ++i) types_[outs[i]] = out_types[i];
  return outs;
}

std::vector<int64_t> Importer::axes_of(const Attrs& a, int input) {
  if (in(input) != nullptr) return onnx::ints_of(need_const(input, "axes"));
  return a.get_ints("axes", {});
}

void Importer::pool(const std::string& genie_op, const Attrs& a, bool avg) {
  const std::string x = rt_in(0);
  check(type(x).shape.size() == 4, GENIE_ERR_UNSUPPORTED, "ONNX node '", node_name_, "': pooling of rank ",
        type(x).shape.size(), " (Genie pools NCHW)");
  const auto k = a.get_ints("kernel_shape", {});
  const auto pads = a.get_ints("pads", {0, 0, 0, 0});
  if (k.size() != 2) unsupported("kernel_shape of " + std::to_string(k.size()) + " dims");
  if (a.get_string("auto_pad", "NOTSET") != "NOTSET" && a.get_string("auto_pad", "") != "VALID")
    unsupported("auto_pad " + a.get_string("auto_pad", ""));
  if (pads.size() != 4 || pads[0] != pads[2] || pads[1] != pads[3]) unsupported("asymmetric pads");
  if (a.get_int("ceil_mode", 0) != 0) unsupported("ceil_mode 1");
  for (int64_t d : a.get_ints("dilations", {1, 1}))
    if (d != 1) unsupported("dilations other than 1");
  if (avg && (pads[0] || pads[1]) && a.get_int("count_include_pad", 0) == 0)
    unsupported("padding with count_include_pad 0 (Genie's avg_pool2d counts padded zeros)");
  if (!avg && cur_->output_size() > 1 && !cur_->output(1).empty()) unsupported("the Indices output");
  Attrs ga;
  ga.set("kernel", k);
  ga.set("stride", a.get_ints("strides", {1, 1}));
  ga.set("padding", std::vector<int64_t>{pads[0], pads[1]});
  define(out(0), emit1(genie_op, {x}, ga, out(0)));
}

// One step of the Erf GELU; false when `op` on these inputs is not one.
bool Importer::gelu_step(const std::string& op) {
  auto is_scalar = [&](int i, double want, double tol) {
    const Host* h = in_const(i);
    return h && h->v.size() == 1 && std::fabs(h->v[0] - want) <= tol;
  };
  const Val *a = in(0), *b = in(1);
  if (op == "Erf") {
    // input: Div(x, sqrt 2) or Mul(x, 1 / sqrt 2), recorded by the division step below
    if (a == nullptr || a->kind != Kind::ScaledX) return false;
    define_pattern(Kind::ErfOfX, a->name);
    return true;
  }
  if (!a || !b) return false;
  if ((op == "Div" && a->kind == Kind::Runtime && is_scalar(1, std::sqrt(2.0), 1e-4)) ||
      (op == "Mul" && a->kind == Kind::Runtime && is_scalar(1, 1.0 / std::sqrt(2.0), 1e-5))) {
    deferred_[out(0)] = Deferred{cur_, node_name_, ann_};
    define_pattern(Kind::ScaledX, a->name);
    return true;
  }
  const bool add_one = op == "Add" && ((a->kind == Kind::ErfOfX && is_scalar(1, 1.0, 0)) ||
                                       (b->kind == Kind::ErfOfX && is_scalar(0, 1.0, 0)));
  if (add_one) {
    define_pattern(Kind::OnePlusErf, (a->kind == Kind::ErfOfX ? a : b)->name);
    return true;
  }
  if (op != "Mul") return false;
  for (int s = 0; s < 2; ++s) {
    const Val *p = s ? b : a, *q = s ? a : b;
    const int qi = s ? 0 : 1;
    if (p->kind == Kind::OnePlusErf && q->kind == Kind::Runtime && q->name == p->name) {
      define_pattern(Kind::XOnePlusErf, p->name);
      return true;
    }
    if (p->kind == Kind::OnePlusErf && is_scalar(qi, 0.5, 0)) {
      define_pattern(Kind::HalfOnePlusErf, p->name);
      return true;
    }
    if ((p->kind == Kind::XOnePlusErf && is_scalar(qi, 0.5, 0)) ||
        (p->kind == Kind::HalfOnePlusErf && q->kind == Kind::Runtime && q->name == p->name)) {
      Attrs ga;
      ga.set("approximate", std::string("none"));
      define(out(0), emit1("gelu", {p->name}, ga, out(0)));
      return true;
    }
  }
  return false;
}

void Importer::node(const pb::Node& n) {
  cur_ = &n;
  const std::string& op = n.op_type();
  node_name_ = n.name().empty() ? op + "_" + std::to_string(node_index_) : n.name();
  ++node_index_;
  ann_ = Annotations{};
  ann_.module_path = module_of(n.name());
  ann_.layer = layer_of(ann_.module_path);
  if (!n.domain().empty() && n.domain() != "ai.onnx")
    fail(GENIE_ERR_UNSUPPORTED, "ONNX node '", node_name_, "' has op_type '", op, "' of domain '", n.domain(),
         "', which Genie cannot map (docs/onnx.md lists what Genie imports)");
  Attrs a;
  std::optional<Host> tensor_attr;
  for (const auto& at : n.attribute()) {
    switch (at.type()) {
      case pb::Attribute::INT: a.set(at.name(), at.i()); break;
      case pb::Attribute::FLOAT: a.set(at.name(), static_cast<double>(at.f())); break;
      case pb::Attribute::STRING: a.set(at.name(), at.s()); break;
      case pb::Attribute::INTS: a.set(at.name(), std::vector<int64_t>(at.ints().begin(), at.ints().end())); break;
      case pb::Attribute::FLOATS: a.set(at.name(), std::vector<double>(at.floats().begin(), at.floats().end())); break;
      case pb::Attribute::TENSOR:
        tensor_attr = onnx::host_of(*tensor_from(at.t(), "tensor attribute '" + at.name() + "'"));
        break;
      default: break;  // graphs, sparse tensors ...: no op Genie maps takes them
    }
  }
  if (op == "Constant") {
    if (tensor_attr) return define_const(out(0), *tensor_attr);
    if (a.has("value_float")) {
      Host h;
      h.v = {a.get_float("value_float", 0)};
      return define_const(out(0), h);
    }
    if (a.has("value_floats")) {
      Host h;
      h.v = a.get_floats("value_floats", {});
      h.shape = {static_cast<int64_t>(h.v.size())};
      return define_const(out(0), h);
    }
    if (a.has("value_int")) return define_const(out(0), onnx::host_ints({a.get_int("value_int", 0)}, true));
    if (a.has("value_ints")) return define_const(out(0), onnx::host_ints(a.get_ints("value_ints", {})));
    unsupported("a Constant without a tensor, float(s) or int(s) value");
  }
  bool all_const = true;
  std::vector<const Host*> hosts;
  for (int i = 0; i < n.input_size(); ++i) {
    const Val* v = in(i);
    if (v && v->kind != Kind::Const) all_const = false;
    hosts.push_back(v ? v->host.get() : nullptr);
  }
  if (all_const) {
    std::vector<Host> outs;
    if (onnx::fold(op, hosts, a, tensor_attr ? &*tensor_attr : nullptr, outs)) {
      for (size_t i = 0; i < outs.size(); ++i) define_const(out(static_cast<int>(i)), std::move(outs[i]));
      return;
    }
  }
  if ((op == "Shape" || op == "Size") && in(0) && in(0)->kind != Kind::Const)
    return define_const(out(0), onnx::shape_host(type_in(0).shape, a, op == "Size"));
  if (gelu_step(op)) return;
  runtime_node(op, a);
}

void Importer::runtime_node(const std::string& op, const Attrs& a) {
  static const std::map<std::string, std::string> same = {
      {"Add", "add"},   {"Sub", "sub"},       {"Mul", "mul"},         {"Div", "div"},      {"Relu", "relu"},
      {"Tanh", "tanh"}, {"Sigmoid", "sigmoid"}, {"Exp", "exp"},       {"Log", "log"},      {"Sqrt", "sqrt"},
      {"Neg", "neg"},   {"Abs", "abs"},       {"Equal", "eq"},        {"Less", "lt"},      {"LessOrEqual", "le"},
      {"Greater", "gt"}, {"GreaterOrEqual", "ge"}, {"MatMul", "matmul"}, {"Where", "where"},
  };
  if (auto it = same.find(op); it != same.end()) {
    std::vector<std::string> ins;
    for (int i = 0; i < cur_->input_size(); ++i) ins.push_back(rt_in(i));
    return define(out(0), emit1(it->second, ins, {}, out(0)));
  }
  if (op == "Identity" || op == "Dropout") return define(out(0), rt_in(0));
  if (op == "Pow") {
    const std::string x = rt_in(0);
    const Host& e = need_const(1, "Pow's exponent");
    const double p = e.v.size() == 1 ? e.v[0] : NAN;
    if (p == 1) return define(out(0), x);
    if (p == 0.5) return define(out(0), emit1("sqrt", {x}, {}, out(0)));
    if (p == 2 || p == 3) {
      const std::string sq = emit1("mul", {x, x}, {}, p == 2 ? out(0) : "");
      return define(out(0), p == 2 ? sq : emit1("mul", {sq, x}, {}, out(0)));
    }
    unsupported("exponent other than 0.5, 1, 2 or 3");
  }
  if (op == "Cast") {
    const std::string x = rt_in(0);
    const auto to = dtype_of_onnx(static_cast<int32_t>(a.get_int("to", 0)));
    if (!to) unsupported("cast to ONNX element type " + std::to_string(a.get_int("to", 0)));
    if (*to == type(x).dtype) return define(out(0), x);
    Attrs ga;
    ga.set("dtype", std::string(dtype_name(*to)));
    return define(out(0), emit1("cast", {x}, ga, out(0)));
  }
  if (op == "Not") {
    const std::string x = rt_in(0);
    Host f;
    f.dtype = DType::Bool;
    f.v = {0};
    define_const(out(0) + "#false", f);
    return define(out(0), emit1("eq", {x, rt(out(0) + "#false")}, {}, out(0)));
  }
  if (op == "Softmax") {
    const std::string x = rt_in(0);
    const size_t r = type(x).shape.size();
    const int64_t axis = onnx::norm_axis(a.get_int("axis", opset_ >= 13 ? -1 : 1), r, "Softmax axis");
    if (opset_ < 13 && axis != static_cast<int64_t>(r) - 1)
      unsupported("Softmax before opset 13 over an axis other than the last (it flattens)");
    Attrs ga;
    ga.set("axis", axis);
    return define(out(0), emit1("softmax", {x}, ga, out(0)));
  }
  if (op == "Gelu") {
    Attrs ga;
    ga.set("approximate", a.get_string("approximate", "none"));
    return define(out(0), emit1("gelu", {rt_in(0)}, ga, out(0)));
  }
  if (op == "LayerNormalization") {
    const std::string x = rt_in(0);
    const int64_t axis = onnx::norm_axis(a.get_int("axis", -1), type(x).shape.size(), "LayerNormalization axis");
    if (axis != static_cast<int64_t>(type(x).shape.size()) - 1) unsupported("normalisation over more than the last axis");
    for (int i = 1; i < cur_->output_size(); ++i)
      if (!cur_->output(i).empty()) unsupported("the Mean and InvStdDev outputs");
    std::vector<std::string> ins = {x, rt_in(1)};
    if (in(2)) ins.push_back(rt_in(2));
    Attrs ga;
    ga.set("eps", a.get_float("epsilon", 1e-5));
    return define(out(0), emit1("layer_norm", ins, ga, out(0)));
  }
  if (op == "Gemm") {
    std::string x = rt_in(0), w = rt_in(1);
    if (a.get_int("transA", 0)) unsupported("transA 1");
    if (a.get_float("alpha", 1.0) != 1.0 || a.get_float("beta", 1.0) != 1.0) unsupported("alpha or beta other than 1");
    const bool has_c = in(2) != nullptr;
    if (a.get_int("transB", 0) && (!has_c || type_in(2).shape.size() == 1)) {
      std::vector<std::string> ins = {x, w};
      if (has_c) ins.push_back(rt_in(2));
      return define(out(0), emit1("linear", ins, {}, out(0)));
    }
    Attrs ga;
    if (a.get_int("transB", 0)) ga.set("transpose_b", int64_t{1});
    std::string y = emit1("matmul", {x, w}, ga, has_c ? "" : out(0));
    if (has_c) y = emit1("add", {y, rt_in(2)}, {}, out(0));
    return define(out(0), y);
  }
  if (op == "Reshape") {
    const std::string x = rt_in(0);
    const Shape s = onnx::reshape_shape(type(x).shape, onnx::ints_of(need_const(1, "Reshape's shape")),
                                        a.get_int("allowzero", 0) != 0);
    return define(out(0), reshape(x, s, out(0)));
  }
  if (op == "Flatten") {
    const std::string x = rt_in(0);
    return define(out(0), reshape(x, onnx::flatten_shape(type(x).shape, a.get_int("axis", 1)), out(0)));
  }
  if (op == "Unsqueeze" || op == "Squeeze") {
    const std::string x = rt_in(0);
    const auto axes = axes_of(a, 1);
    const Shape s = op == "Unsqueeze" ? onnx::unsqueeze_shape(type(x).shape, axes)
                                      : onnx::squeeze_shape(type(x).shape, axes);
    return define(out(0), reshape(x, s, out(0)));
  }
  if (op == "Expand") {
    const std::string x = rt_in(0);
    const Shape s = broadcast_shapes(type(x).shape, onnx::ints_of(need_const(1, "Expand's shape")));
    if (s == type(x).shape) return define(out(0), x);
    Host zero;  // broadcasting against zeros of the target shape
    zero.dtype = type(x).dtype;
    zero.shape = s;
    zero.v.assign(static_cast<size_t>(numel(s)), 0.0);
    define_const(out(0) + "#zeros", zero);
    return define(out(0), emit1("add", {x, rt(out(0) + "#zeros")}, {}, out(0)));
  }
  if (op == "Transpose") {
    const std::string x = rt_in(0);
    std::vector<int64_t> perm = a.get_ints("perm", {});
    if (perm.empty())
      for (size_t i = type(x).shape.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
    Attrs ga;
    ga.set("perm", perm);
    return define(out(0), emit1("permute", {x}, ga, out(0)));
  }
  if (op == "Concat") {
    std::vector<std::string> ins;
    for (int i = 0; i < cur_->input_size(); ++i) ins.push_back(rt_in(i));
    Attrs ga;
    ga.set("axis", a.get_int("axis", 0));
    return define(out(0), emit1("concat", ins, ga, out(0)));
  }
  if (op == "Split") {
    const std::string x = rt_in(0);
    const Shape& s = type(x).shape;
    const int64_t axis = onnx::norm_axis(a.get_int("axis", 0), s.size(), "Split axis");
    std::vector<int64_t> sizes = in(1) ? onnx::ints_of(need_const(1, "Split's sizes")) : a.get_ints("split", {});
    const int64_t parts = cur_->output_size(), dim = s[static_cast<size_t>(axis)];
    if (sizes.empty()) {
      const int64_t chunk = (dim + parts - 1) / std::max<int64_t>(parts, 1);
      for (int64_t i = 0; i < parts; ++i) sizes.push_back(std::min(chunk, dim - i * chunk));
    }
    Attrs ga;
    ga.set("axis", axis);
    ga.set("sizes", sizes);
    std::vector<std::string> bases;
    for (int i = 0; i < cur_->output_size(); ++i) bases.push_back(cur_->output(i));
    const auto outs = emit("split", {x}, ga, bases);
    for (size_t i = 0; i < outs.size(); ++i) define(out(static_cast<int>(i)), outs[i]);
    return;
  }
  if (op == "Slice") {
    std::string x = rt_in(0);
    const Shape s = type(x).shape;
    const auto starts = onnx::ints_of(need_const(1, "Slice's starts")), ends = onnx::ints_of(need_const(2, "Slice's ends"));
    std::vector<int64_t> axes = in(3) ? onnx::ints_of(need_const(3, "Slice's axes")) : std::vector<int64_t>{};
    const std::vector<int64_t> steps = in(4) ? onnx::ints_of(need_const(4, "Slice's steps")) : std::vector<int64_t>{};
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    for (size_t i = 0; i < axes.size(); ++i) {
      const int64_t ax = onnx::norm_axis(axes[i], s.size(), "Slice axis");
      const int64_t d = s[static_cast<size_t>(ax)], st = steps.empty() ? 1 : steps[i];
      if (st <= 0) unsupported("a step of " + std::to_string(st) + " (only positive steps)");
      int64_t b = starts[i] < 0 ? starts[i] + d : starts[i], e = ends[i] < 0 ? ends[i] + d : ends[i];
      b = std::clamp<int64_t>(b, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      if (b == 0 && e == d && st == 1) continue;
      Attrs ga;
      ga.set("axis", ax);
      ga.set("start", b);
      ga.set("end", e);
      ga.set("step", st);
      x = emit1("slice", {x}, ga, i + 1 == axes.size() ? out(0) : "");
    }
    return define(out(0), x);
  }
  if (op == "Gather") {
    const Val* data = in(0);
    const int64_t axis = a.get_int("axis", 0);
    if (data && data->kind == Kind::Const && data->host->shape.size() == 2 &&
        onnx::norm_axis(axis, 2, "Gather axis") == 0) {
      std::string ids = rt_in(1);
      return define(out(0), emit1("embedding", {ids, rt_in(0)}, {}, out(0)));
    }
    const std::string x = rt_in(0);
    const Shape& s = type(x).shape;
    const int64_t ax = onnx::norm_axis(axis, s.size(), "Gather axis");
    const Host& idx = need_const(1, "Gather's indices into a run-time tensor");
    if (idx.shape.size() > 1) unsupported("indices of rank > 1 into a run-time tensor");
    const auto ix = onnx::ints_of(idx);
    const int64_t d = s[static_cast<size_t>(ax)];
    const int64_t first = ix.empty() ? 0 : (ix[0] < 0 ? ix[0] + d : ix[0]);
    for (size_t i = 0; i < ix.size(); ++i)
      if ((ix[i] < 0 ? ix[i] + d : ix[i]) != first + static_cast<int64_t>(i))
        unsupported("indices that are not consecutive, into a run-time tensor");
    Attrs ga;
    ga.set("axis", ax);
    ga.set("start", first);
    ga.set("end", first + static_cast<int64_t>(std::max<size_t>(ix.size(), 1)));
    std::string y = emit1("slice", {x}, ga);
    Shape os = type(y).shape;
    if (idx.shape.empty()) os.erase(os.begin() + ax);
    return define(out(0), reshape(y, os, out(0)));
  }
  if (op == "Conv") {
    const std::string x = rt_in(0), w = rt_in(1);
    if (type(x).shape.size() != 4) unsupported("convolution of rank " + std::to_string(type(x).shape.size()) + " (Genie has conv2d, NCHW)");
    const auto pads = a.get_ints("pads", {0, 0, 0, 0});
    if (pads.size() != 4 || pads[0] != pads[2] || pads[1] != pads[3]) unsupported("asymmetric pads");
    const std::string ap = a.get_string("auto_pad", "NOTSET");
    if (ap != "NOTSET" && ap != "VALID") unsupported("auto_pad " + ap);
    Attrs ga;
    ga.set("stride", a.get_ints("strides", {1, 1}));
    ga.set("padding", std::vector<int64_t>{pads[0], pads[1]});
    ga.set("dilation", a.get_ints("dilations", {1, 1}));
    ga.set("groups", a.get_int("group", 1));
    std::vector<std::string> ins = {x, w};
    if (in(2)) ins.push_back(rt_in(2));
    return define(out(0), emit1("conv2d", ins, ga, out(0)));
  }
  if (op == "MaxPool") return pool("max_pool2d", a, false);
  if (op == "AveragePool") return pool("avg_pool2d", a, true);
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    Attrs ga;
    ga.set("output_size", std::vector<int64_t>{1, 1});
    const std::string x = rt_in(0);
    if (type(x).shape.size() != 4) unsupported("a rank other than 4");
    return define(out(0), emit1(op == "GlobalAveragePool" ? "adaptive_avg_pool2d" : "adaptive_max_pool2d", {x}, ga, out(0)));
  }
  if (op == "ReduceMean" || op == "ReduceSum" || op == "ReduceMax") {
    const std::string x = rt_in(0);
    std::vector<int64_t> axes = axes_of(a, 1);
    if (axes.empty() && a.get_int("noop_with_empty_axes", 0)) return define(out(0), x);
    Attrs ga;
    if (!axes.empty()) ga.set("axes", axes);
    ga.set("keepdims", a.get_int("keepdims", 1));
    const std::string gop = op == "ReduceMean" ? "reduce_mean" : op == "ReduceSum" ? "reduce_sum" : "reduce_max";
    return define(out(0), emit1(gop, {x}, ga, out(0)));
  }
  if (op == "BatchNormalization") {
    // Inference: y = x * scale' + shift' per channel (dim 1), folded here.
    if (a.get_int("training_mode", 0)) unsupported("training_mode 1");
    const std::string x = rt_in(0);
    const Host &sc = need_const(1, "scale"), &bi = need_const(2, "B"), &mu = need_const(3, "mean"),
               &var = need_const(4, "var");
    const double eps = a.get_float("epsilon", 1e-5);
    const Shape& xs = type(x).shape;
    if (xs.size() < 2) unsupported("input of rank < 2");
    Host mul, add;
    mul.dtype = add.dtype = type(x).dtype;
    mul.shape = add.shape = Shape(xs.size() - 1, 1);
    mul.shape[0] = add.shape[0] = xs[1];
    for (int64_t c = 0; c < xs[1]; ++c) {
      const auto i = static_cast<size_t>(c);
      const double s = sc.v.at(i) / std::sqrt(var.v.at(i) + eps);
      mul.v.push_back(s);
      add.v.push_back(bi.v.at(i) - mu.v.at(i) * s);
    }
    define_const(out(0) + "#scale", mul);
    define_const(out(0) + "#shift", add);
    const std::string y = emit1("mul", {x, rt(out(0) + "#scale")}, {});
    return define(out(0), emit1("add", {y, rt(out(0) + "#shift")}, {}, out(0)));
  }
  fail(GENIE_ERR_UNSUPPORTED, "ONNX node '", node_name_, "' has op_type '", op,
       "', which Genie cannot map (docs/onnx.md lists what Genie imports)");
}

void Importer::run() {
  check(m_.has_graph(), GENIE_ERR_PARSE, "the ONNX model has no graph");
  const pb::Graph& gp = m_.graph();
  res_.graph = std::make_unique<Graph>(gp.name().empty() ? "onnx" : gp.name());
  g_ = res_.graph.get();
  for (const auto& t : gp.initializer()) {
    check(!t.name().empty(), GENIE_ERR_PARSE, "an initializer has no name");
    Val v;
    v.kind = Kind::Const;
    v.initializer = true;
    v.data = tensor_from(t, "initializer '" + t.name() + "'");
    v.host = std::make_shared<Host>(onnx::host_of(*v.data));
    vals_[t.name()] = std::move(v);
  }
  for (const auto& vi : gp.input()) {
    if (vals_.count(vi.name())) continue;  // an initializer listed as an input (IR < 4)
    check(vi.type().has_tensor_type(), GENIE_ERR_UNSUPPORTED, "model input '", vi.name(), "' is not a tensor");
    const auto& tt = vi.type().tensor_type();
    const auto dt = dtype_of_onnx(tt.elem_type());
    check(dt.has_value(), GENIE_ERR_UNSUPPORTED, "model input '", vi.name(), "' has ONNX element type ",
          tt.elem_type(), " (Genie has float, float16, bfloat16, int32, int64, bool)");
    check(tt.has_shape(), GENIE_ERR_UNSUPPORTED, "model input '", vi.name(), "' has no shape");
    Shape s;
    for (const auto& d : tt.shape().dim()) {
      check(d.has_dim_value(), GENIE_ERR_UNSUPPORTED, "model input '", vi.name(), "' has the symbolic dimension '",
            d.dim_param(), "': export with static shapes (no dynamic_axes)");
      s.push_back(d.dim_value());
    }
    const std::string name = fresh(vi.name());
    g_->add_input(name, *dt, s);
    g_->value(g_->find_value(name)).role = TensorRole::Input;
    types_[name] = ValueType{*dt, s};
    define(vi.name(), name);
  }
  for (const auto& n : gp.node()) {
    try {
      node(n);
    } catch (const Error& e) {
      if (e.detail().rfind("ONNX node", 0) == 0) throw;
      throw Error(e.code(), cat("ONNX node '", node_name_, "' (", n.op_type(), "): ", e.detail()));
    }
  }
  check(gp.output_size() > 0, GENIE_ERR_INVALID_GRAPH, "the ONNX graph has no outputs");
  std::unordered_set<std::string> marked;
  for (const auto& o : gp.output()) {
    auto it = vals_.find(o.name());
    check(it != vals_.end(), GENIE_ERR_INVALID_GRAPH, "graph output '", o.name(), "' is not produced");
    cur_ = nullptr;
    std::string v;
    if (it->second.kind == Kind::Runtime) {
      v = it->second.name;
    } else if (it->second.kind == Kind::Const || it->second.kind == Kind::ScaledX) {
      v = rt(o.name());
    } else {
      fail(GENIE_ERR_UNSUPPORTED, "graph output '", o.name(), "' is a partial GELU expression (uses Erf)");
    }
    check(marked.insert(v).second, GENIE_ERR_UNSUPPORTED, "graph output '", o.name(),
          "' is the same value as another output");
    g_->mark_output(v);
    g_->value(g_->find_value(v)).role = TensorRole::Output;
  }
  g_->validate();
}

}  // namespace

OnnxImport import_onnx(const void* data, size_t len) {
  check(data != nullptr || len == 0, GENIE_ERR_INVALID_ARGUMENT, "model bytes are NULL");
  check(len <= static_cast<size_t>(INT32_MAX), GENIE_ERR_TOO_LARGE, "ONNX model of ", len,
        " bytes (protobuf messages are limited to 2 GiB)");
  pb::Model m;
  check(len > 0 && m.ParseFromArray(data, static_cast<int>(len)), GENIE_ERR_PARSE,
        "not an ONNX model (the bytes do not parse as an onnx ModelProto)");
  OnnxImport res;
  Importer(m, res).run();
  return res;
}

}  // namespace genie
