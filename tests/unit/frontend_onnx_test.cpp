// ONNX import internals: constant folding of exporters' shape arithmetic,
// the shape helpers, and the importer's mapping of patterns (the Erf GELU,
// shape chains folded away, run-time Gather/Slice/Expand) on models built
// with the generated protobuf classes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "frontend/onnx/fold.hpp"
#include "frontend/onnx/import.hpp"
#include "graph_test_util.hpp"
#include "onnx_subset.pb.h"

namespace genie {
namespace {

using onnx::Host;
using testing::fails_with;
namespace pb = onnxpb;

Host floats(Shape shape, std::vector<double> v) {
  Host h;
  h.shape = std::move(shape);
  h.v = std::move(v);
  return h;
}

std::vector<Host> fold1(const std::string& op, std::vector<const Host*> in, const Attrs& a = {}) {
  std::vector<Host> out;
  EXPECT_TRUE(onnx::fold(op, in, a, nullptr, out)) << op;
  return out;
}

TEST(OnnxFold, ShapeHelpers) {
  EXPECT_EQ(onnx::reshape_shape({2, 3, 4}, {0, -1}, false), (Shape{2, 12}));
  EXPECT_EQ(onnx::reshape_shape({2, 3, 4}, {4, 0, 2}, false), (Shape{4, 3, 2}));
  EXPECT_TRUE(fails_with([] { onnx::reshape_shape({2, 3}, {-1, -1}, false); }, GENIE_ERR_SHAPE_MISMATCH, "two -1"));
  EXPECT_TRUE(fails_with([] { onnx::reshape_shape({2, 3}, {4}, false); }, GENIE_ERR_SHAPE_MISMATCH, "6 elements"));
  EXPECT_EQ(onnx::unsqueeze_shape({3, 4}, {0, -1}), (Shape{1, 3, 4, 1}));
  EXPECT_EQ(onnx::squeeze_shape({1, 3, 1}, {}), (Shape{3}));
  EXPECT_TRUE(fails_with([] { onnx::squeeze_shape({2, 3}, {0}); }, GENIE_ERR_SHAPE_MISMATCH, "size 2"));
  EXPECT_EQ(onnx::flatten_shape({2, 3, 4}, 2), (Shape{6, 4}));
  EXPECT_TRUE(fails_with([] { onnx::norm_axis(3, 3, "axis"); }, GENIE_ERR_INVALID_ATTRIBUTE, "out of range"));
}

TEST(OnnxFold, ShapeChainOfAnExporter) {
  // Shape -> Gather(1) -> Unsqueeze -> Concat with [-1] : the Reshape target
  // torch.onnx.export writes for x.view(x.size(1), -1).
  const Host shape = onnx::shape_host({2, 5, 3}, {}, false);
  const Host idx = onnx::host_ints({1}, true);
  const Host t = fold1("Gather", {&shape, &idx})[0];
  EXPECT_TRUE(t.shape.empty());
  EXPECT_EQ(t.v, std::vector<double>{5});
  Attrs ax;
  ax.set("axes", std::vector<int64_t>{0});
  const Host u = fold1("Unsqueeze", {&t}, ax)[0];
  const Host minus1 = onnx::host_ints({-1});
  Attrs a0;
  a0.set("axis", int64_t{0});
  const Host c = fold1("Concat", {&u, &minus1}, a0)[0];
  EXPECT_EQ(onnx::ints_of(c), (std::vector<int64_t>{5, -1}));
}

TEST(OnnxFold, TensorOps) {
  // Range, then a causal mask: Less(Range[:,None], Range[None,:]) via Where.
  const Host s = onnx::host_ints({0}, true), l = onnx::host_ints({3}, true), d = onnx::host_ints({1}, true);
  const Host r = fold1("Range", {&s, &l, &d})[0];
  EXPECT_EQ(r.v, (std::vector<double>{0, 1, 2}));
  Host col = r, row = r;
  col.shape = {3, 1};
  row.shape = {1, 3};
  const Host lt = fold1("Less", {&col, &row})[0];
  EXPECT_EQ(lt.dtype, DType::Bool);
  const Host ninf = floats({}, {-INFINITY}), zero = floats({}, {0});
  const Host m = fold1("Where", {&lt, &ninf, &zero})[0];
  EXPECT_EQ(m.shape, (Shape{3, 3}));
  EXPECT_EQ(m.v[1], -INFINITY);
  EXPECT_EQ(m.v[3], 0);
  // Slice with negative starts and a step, Transpose.
  const Host x = floats({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7});
  const Host st = onnx::host_ints({-3}), en = onnx::host_ints({4}), axes = onnx::host_ints({1}),
             step = onnx::host_ints({2});
  const Host sl = fold1("Slice", {&x, &st, &en, &axes, &step})[0];
  EXPECT_EQ(sl.shape, (Shape{2, 2}));
  EXPECT_EQ(sl.v, (std::vector<double>{1, 3, 5, 7}));
  const Host tr = fold1("Transpose", {&x})[0];
  EXPECT_EQ(tr.shape, (Shape{4, 2}));
  EXPECT_EQ(tr.v[1], 4);
  // Integer division truncates; by zero is refused.
  const Host seven = onnx::host_ints({7}, true), two = onnx::host_ints({2}, true), nil = onnx::host_ints({0}, true);
  EXPECT_EQ(fold1("Div", {&seven, &two})[0].v[0], 3);
  std::vector<Host> out;
  EXPECT_TRUE(fails_with([&] { onnx::fold("Div", {&seven, &nil}, {}, nullptr, out); }, GENIE_ERR_INVALID_ARGUMENT,
                         "division by zero"));
  // Not a folding op: the importer maps it instead.
  EXPECT_FALSE(onnx::fold("MatMul", {&x, &x}, {}, nullptr, out));
}

// ---- Importer on models built with the protobuf classes ---------------------

void attr_int(pb::Node* n, const std::string& name, int64_t v) {
  auto* at = n->add_attribute();
  at->set_name(name);
  at->set_type(pb::Attribute::INT);
  at->set_i(v);
}

class Model {
 public:
  Model() {
    auto* op = m_.add_opset_import();
    op->set_version(17);
    m_.set_ir_version(8);
  }
  void input(const std::string& name, Shape shape) { io(m_.mutable_graph()->add_input(), name, shape); }
  void output(const std::string& name) { m_.mutable_graph()->add_output()->set_name(name); }
  pb::Node* node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
                 const std::string& name = "") {
    auto* n = m_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? "/" + op + "_" + std::to_string(m_.graph().node_size()) : name);
    for (auto& i : in) n->add_input(i);
    for (auto& o : out) n->add_output(o);
    return n;
  }
  // A float initializer (or int64 with `ints`).
  void init(const std::string& name, Shape dims, std::vector<float> v, std::vector<int64_t> ints = {}) {
    auto* t = m_.mutable_graph()->add_initializer();
    t->set_name(name);
    for (auto d : dims) t->add_dims(d);
    if (!ints.empty()) {
      t->set_data_type(pb::Tensor::INT64);
      for (auto i : ints) t->add_int64_data(i);
    } else {
      t->set_data_type(pb::Tensor::FLOAT);
      for (auto f : v) t->add_float_data(f);
    }
  }
  OnnxImport run() const {
    const std::string bytes = m_.SerializeAsString();
    return import_onnx(bytes.data(), bytes.size());
  }
  std::vector<std::string> ops() const {
    std::vector<std::string> r;
    for (const auto& n : run().graph->nodes()) r.push_back(n.op);
    return r;
  }

 private:
  static void io(pb::ValueInfo* vi, const std::string& name, const Shape& shape) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(pb::Tensor::FLOAT);
    for (auto d : shape) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  pb::Model m_;
};

TEST(OnnxImport, ErfGeluIsOneNode) {
  // y = x * 0.5 * (1 + erf(x / sqrt(2))), as torch.onnx.export writes F.gelu.
  Model m;
  m.input("x", {2, 8});
  m.init("sqrt2", {}, {static_cast<float>(std::sqrt(2.0))});
  m.init("one", {}, {1.0f});
  m.init("half", {}, {0.5f});
  m.node("Div", {"x", "sqrt2"}, {"a"});
  m.node("Erf", {"a"}, {"b"});
  m.node("Add", {"b", "one"}, {"c"});
  m.node("Mul", {"x", "c"}, {"d"});
  m.node("Mul", {"d", "half"}, {"y"});
  m.output("y");
  const auto imp = m.run();
  std::vector<std::string> ops;
  for (const auto& n : imp.graph->nodes()) ops.push_back(n.op);
  EXPECT_EQ(ops, std::vector<std::string>{"gelu"});
  EXPECT_TRUE(imp.weights.empty());  // the scalars were used by the pattern only
}

TEST(OnnxImport, ScaledValueUsedElsewhereIsStillComputed) {
  // x / sqrt(2) feeds the Erf GELU and an output of its own.
  Model m;
  m.input("x", {4});
  m.init("sqrt2", {}, {static_cast<float>(std::sqrt(2.0))});
  m.init("one", {}, {1.0f});
  m.init("half", {}, {0.5f});
  m.node("Div", {"x", "sqrt2"}, {"a"}, "/mlp/Div");
  m.node("Erf", {"a"}, {"b"});
  m.node("Add", {"b", "one"}, {"c"});
  m.node("Mul", {"x", "c"}, {"d"});
  m.node("Mul", {"d", "half"}, {"y"});
  m.output("y");
  m.output("a");
  const auto imp = m.run();
  std::vector<std::string> ops;
  for (const auto& n : imp.graph->nodes()) ops.push_back(n.op);
  EXPECT_EQ(ops, (std::vector<std::string>{"gelu", "div"}));
  EXPECT_EQ(imp.graph->nodes()[1].name, "/mlp/Div");
  EXPECT_EQ(imp.graph->nodes()[1].ann.module_path, "mlp");
}

TEST(OnnxImport, ErfOtherwiseIsRefusedByName) {
  Model m;
  m.input("x", {4});
  m.node("Erf", {"x"}, {"y"}, "/act/Erf");
  m.output("y");
  EXPECT_TRUE(fails_with([&] { m.run(); }, GENIE_ERR_UNSUPPORTED, "'/act/Erf' has op_type 'Erf'"));
}

TEST(OnnxImport, ShapeArithmeticFoldsAway) {
  // y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])) + Expand(b)
  Model m;
  m.input("x", {3, 2, 4});
  m.init("zero", {}, {}, {0});
  m.init("minus1", {1}, {}, {-1});
  m.init("axes", {1}, {}, {0});
  m.init("b", {1}, {0.25f});
  m.init("target", {2}, {}, {3, 8});
  m.node("Shape", {"x"}, {"s"});
  m.node("Gather", {"s", "zero"}, {"n"});
  m.node("Unsqueeze", {"n", "axes"}, {"n1"});
  attr_int(m.node("Concat", {"n1", "minus1"}, {"shape"}), "axis", 0);
  m.node("Reshape", {"x", "shape"}, {"r"});
  m.node("Expand", {"b", "target"}, {"be"});
  m.node("Add", {"r", "be"}, {"y"});
  m.output("y");
  const auto imp = m.run();
  std::vector<std::string> ops;
  for (const auto& n : imp.graph->nodes()) ops.push_back(n.op);
  EXPECT_EQ(ops, (std::vector<std::string>{"reshape", "add"}));
  // Expand(b) of 24 elements is a computed constant > 16 elements: a weight.
  ASSERT_EQ(imp.weights.size(), 1u);
  EXPECT_EQ(imp.weights[0].second->shape(), (Shape{3, 8}));
  const Value& w = imp.graph->value(imp.graph->find_value(imp.weights[0].first));
  EXPECT_EQ(w.role, TensorRole::Weight);
}

TEST(OnnxImport, RuntimeGatherSliceAndAnnotations) {
  Model m;
  m.input("x", {2, 6});
  m.init("i", {2}, {}, {2, 3});
  m.init("st", {1}, {}, {1});
  m.init("en", {1}, {}, {2});
  m.init("ax", {1}, {}, {0});
  attr_int(m.node("Gather", {"x", "i"}, {"g"}, "/enc/layers.3/Gather"), "axis", 1);
  m.node("Slice", {"g", "st", "en", "ax"}, {"y"}, "/enc/layers.3/Slice");
  m.output("y");
  const auto imp = m.run();
  const auto& nodes = imp.graph->nodes();
  ASSERT_GE(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].op, "slice");  // consecutive indices into a run-time value
  EXPECT_EQ(nodes[0].ann.module_path, "enc.layers.3");
  EXPECT_EQ(nodes[0].ann.layer, 3);
  const Value& y = imp.graph->value(imp.graph->outputs().at(0));
  EXPECT_EQ(y.shape, (Shape{1, 2}));
}

TEST(OnnxImport, NonConsecutiveRuntimeGatherIsRefused) {
  Model m;
  m.input("x", {2, 6});
  m.init("i", {2}, {}, {3, 1});
  attr_int(m.node("Gather", {"x", "i"}, {"y"}, "/pick/Gather"), "axis", 1);
  m.output("y");
  EXPECT_TRUE(fails_with([&] { m.run(); }, GENIE_ERR_UNSUPPORTED, "not consecutive"));
}

TEST(OnnxImport, InconsistentModelsAreNamed) {
  Model m;
  m.input("x", {2});
  m.node("Relu", {"nowhere"}, {"y"});
  m.output("y");
  EXPECT_TRUE(fails_with([&] { m.run(); }, GENIE_ERR_INVALID_GRAPH, "'nowhere' is not produced"));
  Model n;
  n.input("x", {2});
  n.output("missing");
  EXPECT_TRUE(fails_with([&] { n.run(); }, GENIE_ERR_INVALID_GRAPH, "'missing' is not produced"));
}

}  // namespace
}  // namespace genie
