// Structural hash: stable across processes, blind to names and constant
// bytes, sensitive to everything else that shapes a plan.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "graph_test_util.hpp"

namespace genie {
namespace {

using testing::tensor;

// A small attention block; `p` prefixes every name so that two builds can
// differ in names only.
Graph block(const std::string& p, float weight_fill = 0.f) {
  Graph g(p + "graph");
  g.add_input(p + "x", DType::F16, {-1, 16});
  auto w = tensor(DType::F16, {16, 16});
  std::memset(w->bytes(), static_cast<int>(weight_fill), w->nbytes());
  g.add_constant(p + "w", w);
  g.value(g.find_value(p + "w")).role = TensorRole::Weight;
  g.add_node("linear", p + "proj", {p + "x", p + "w", ""}, {p + "h"});
  g.add_node("attention", p + "attn", {p + "h", p + "h", p + "h"}, {p + "a"});
  g.set_attr(p + "attn", "causal", int64_t{1});
  g.set_attr(p + "attn", "scale", 0.25);
  g.node(g.find_node(p + "attn")).ann = {Phase::Prefill, "model.layers.0.attn", 0, Modality::Text};
  g.add_node("reshape", p + "flat", {p + "a"}, {p + "f"});
  g.set_attr(p + "flat", "shape", std::vector<int64_t>{-1});
  g.mark_output(p + "f");
  g.mark_output(p + "h");
  return g;
}

TEST(StructuralHash, IgnoresNamesAndConstantBytes) {
  const uint64_t h = block("").structural_hash();
  EXPECT_EQ(block("").structural_hash(), h);
  EXPECT_EQ(block("other_").structural_hash(), h);
  EXPECT_EQ(block("", 1.f).structural_hash(), h);
}

// The value is fixed by the algorithm (FNV-1a over a canonical stream), not
// by the process: a plan cache on another machine must see the same number.
// Change it only together with a deliberate change to the hashed stream.
TEST(StructuralHash, GoldenValue) { EXPECT_EQ(block("").structural_hash(), 0x2f1c7e572696690bull); }

TEST(StructuralHash, IndependentOfValidationAndInterleaving) {
  Graph g = block("");
  const uint64_t h = g.structural_hash();
  std::unordered_map<ValueId, Shape> bound{{g.find_value("x"), {4, 16}}};
  g.validate(&bound);
  EXPECT_EQ(g.structural_hash(), h);

  // Same structure, values created in another order of kinds.
  Graph a, b;
  a.add_input("x", DType::F32, {2});
  a.add_node("neg", "n", {"x"}, {"y"});
  a.add_constant("c", tensor(DType::F32, {2}));
  a.add_node("add", "s", {"y", "c"}, {"z"});
  a.mark_output("z");
  b.add_constant("c", tensor(DType::F32, {2}));
  b.add_input("x", DType::F32, {2});
  b.add_node("neg", "n", {"x"}, {"y"});
  b.add_node("add", "s", {"y", "c"}, {"z"});
  b.mark_output("z");
  EXPECT_EQ(a.structural_hash(), b.structural_hash());
}

TEST(StructuralHash, SensitiveToStructure) {
  const uint64_t base = block("").structural_hash();
  const std::vector<std::pair<const char*, std::function<void(Graph&)>>> changes = {
      {"input shape",
       [](Graph& g) {
         g.value(g.find_value("x")).shape = {-1, 32};
       }},
      {"input dtype", [](Graph& g) { g.value(g.find_value("x")).dtype = DType::BF16; }},
      {"constant shape",
       [](Graph& g) {
         g.value(g.find_value("w")).shape = {16, 8};
       }},
      {"constant dtype", [](Graph& g) { g.value(g.find_value("w")).dtype = DType::F32; }},
      {"op", [](Graph& g) { g.mutable_nodes()[0].op = "matmul"; }},
      {"edge", [](Graph& g) { g.mutable_nodes()[1].input_names[2] = "x"; }},
      {"edge to input vs constant", [](Graph& g) { g.mutable_nodes()[0].input_names[1] = "x"; }},
      {"omitted input", [](Graph& g) { g.mutable_nodes()[0].input_names.pop_back(); }},
      {"dangling edge", [](Graph& g) { g.mutable_nodes()[1].input_names[0] = "ghost"; }},
      {"attr value", [](Graph& g) { g.set_attr("attn", "scale", 0.5); }},
      {"attr int value", [](Graph& g) { g.set_attr("attn", "causal", int64_t{0}); }},
      {"attr added", [](Graph& g) { g.mutable_nodes()[0].attrs.set("nothing", int64_t{0}); }},
      {"attr list",
       [](Graph& g) {
         g.set_attr("flat", "shape", std::vector<int64_t>{-1, 1});
       }},
      {"attr type", [](Graph& g) { g.mutable_nodes()[1].attrs.set("scale", int64_t{0}); }},
      {"phase", [](Graph& g) { g.mutable_nodes()[1].ann.phase = Phase::Decode; }},
      {"module", [](Graph& g) { g.mutable_nodes()[1].ann.module_path = "model.layers.1.attn"; }},
      {"layer", [](Graph& g) { g.mutable_nodes()[1].ann.layer = 1; }},
      {"modality", [](Graph& g) { g.mutable_nodes()[1].ann.modality = Modality::Vision; }},
      {"role", [](Graph& g) { g.value(g.find_value("w")).role = TensorRole::KvCache; }},
      {"output role", [](Graph& g) { g.value(g.find_value("a")).role = TensorRole::Activation; }},
      {"extra output", [](Graph& g) { g.mark_output("a"); }},
      {"extra node", [](Graph& g) { g.add_node("relu", "r", {"f"}, {"r_out"}); }},
      {"extra input", [](Graph& g) { g.add_input("unused", DType::F16, {1}); }},
  };
  for (const auto& [what, change] : changes) {
    SCOPED_TRACE(what);
    Graph g = block("");
    change(g);
    EXPECT_NE(g.structural_hash(), base);
  }
  Graph swapped = block("");
  swapped.mutable_nodes()[0].input_names = {"w", "x", ""};
  EXPECT_NE(swapped.structural_hash(), base);
}

// Output order is the order of a future's results.
TEST(StructuralHash, OutputOrderMatters) {
  auto make = [](bool swap) {
    Graph g;
    g.add_input("x", DType::F32, {2});
    g.add_node("neg", "n", {"x"}, {"a"});
    g.add_node("abs", "m", {"x"}, {"b"});
    g.mark_output(swap ? "b" : "a");
    g.mark_output(swap ? "a" : "b");
    return g.structural_hash();
  };
  EXPECT_NE(make(false), make(true));
}

TEST(StructuralHash, NanPayloadsHashAlike) {
  Graph a = block(""), b = block("");
  a.mutable_nodes()[1].attrs.set("scale", std::nan("1"));
  b.mutable_nodes()[1].attrs.set("scale", -std::nan("2"));
  EXPECT_EQ(a.structural_hash(), b.structural_hash());
}

}  // namespace
}  // namespace genie
