// Semantic analysis: stage detection, patterns, KV caches.
#include <gtest/gtest.h>

#include "graph_test_util.hpp"
#include "sched/analysis.hpp"
#include "sched/reference_graphs.hpp"

namespace genie::sched {
namespace {

using testing::Gpt2Options;
using testing::gpt2;

int count(const Analysis& a, PatternKind k) {
  int n = 0;
  for (const PatternMatch& m : a.patterns) n += m.kind == k;
  return n;
}

const PatternMatch* first(const Analysis& a, PatternKind k) {
  for (const PatternMatch& m : a.patterns)
    if (m.kind == k) return &m;
  return nullptr;
}

TEST(SchedStage, DecodeFromTokenShapeAndKvCache) {
  Gpt2Options o;
  o.batch = 4, o.seq = 1, o.past = 16;
  auto g = gpt2(o);
  Analysis a = analyze(*g);
  EXPECT_EQ(a.stage, Stage::Decode);
  EXPECT_EQ(a.stage_source, Source::Inferred);
  EXPECT_NE(a.stage_evidence.find("[4, 1]"), std::string::npos) << a.stage_evidence;
  EXPECT_EQ(a.modality, Modality::Text);
}

TEST(SchedStage, PrefillWithoutKvCache) {
  Gpt2Options o;
  o.batch = 8, o.seq = 512, o.past = 0;
  auto g = gpt2(o);
  Analysis a = analyze(*g);
  EXPECT_EQ(a.stage, Stage::Prefill);
  EXPECT_EQ(a.stage_source, Source::Inferred);
  EXPECT_TRUE(a.kv_caches.empty());
  EXPECT_NE(a.stage_evidence.find("[8, 512]"), std::string::npos) << a.stage_evidence;
}

TEST(SchedStage, VisionFromPixels) {
  Graph g("vision");
  g.add_input("pixels", DType::F32, {4, 3, 224, 224});
  g.add_input("w", DType::F32, {16, 3, 3, 3});
  g.add_node("conv2d", "conv", {"pixels", "w"}, {"c"});
  g.set_attr("conv", "stride", std::vector<int64_t>{2, 2});
  g.add_node("relu", "act", {"c"}, {"r"});
  g.mark_output("r");
  g.validate();
  Analysis a = analyze(g);
  EXPECT_EQ(a.stage, Stage::Vision);
  EXPECT_EQ(a.stage_source, Source::Inferred);
  EXPECT_EQ(a.modality, Modality::Vision);
  EXPECT_EQ(count(a, PatternKind::ConvNormActivation), 1);
}

TEST(SchedStage, AnnotationWins) {
  Gpt2Options o;
  o.batch = 4, o.seq = 1, o.past = 16;
  o.annotate = Phase::Prefill;  // says prefill although the shapes look like decode
  auto g = gpt2(o);
  Analysis a = analyze(*g);
  EXPECT_EQ(a.stage, Stage::Prefill);
  EXPECT_EQ(a.stage_source, Source::Annotation);

  o.batch = 8, o.seq = 512, o.past = 0;
  o.annotate = Phase::Decode;
  a = analyze(*gpt2(o));
  EXPECT_EQ(a.stage, Stage::Decode);
  EXPECT_EQ(a.stage_source, Source::Annotation);
}

TEST(SchedStage, VisionModalityAnnotationWins) {
  Gpt2Options o;
  o.past = 0, o.seq = 4;
  auto g = gpt2(o);
  for (Node& n : g->mutable_nodes()) n.ann.modality = Modality::Vision;
  Analysis a = analyze(*g);
  EXPECT_EQ(a.stage, Stage::Vision);
  EXPECT_EQ(a.stage_source, Source::Annotation);
}

TEST(SchedKvCache, InferredFromTheGraph) {
  for (bool fused : {false, true}) {
    Gpt2Options o;
    o.fused = fused;
    auto g = gpt2(o);
    Analysis a = analyze(*g);
    ASSERT_EQ(a.kv_caches.size(), 4u) << "fused " << fused;  // k and v of two layers
    for (const KvCache& kv : a.kv_caches) {
      EXPECT_EQ(kv.source, Source::Inferred);
      const std::string name = g->value(kv.value).name;
      EXPECT_TRUE(name.find("past_") != std::string::npos) << name;
      // The concat appending the step and the attention reading it stay with the cache.
      bool concat = false, reader = false;
      for (NodeId id : kv.nodes) {
        concat |= g->node(id).op == "concat";
        reader |= g->node(id).op == (fused ? "attention" : "matmul");
      }
      EXPECT_TRUE(concat && reader) << name;
    }
  }
}

TEST(SchedKvCache, FromTheRoleAnnotation) {
  // The cache is read directly (no concat): only the role says what it is.
  Graph g("annotated");
  g.add_input("q", DType::F32, {1, 4, 1, 32});
  g.add_input("cache_k", DType::F32, {1, 4, 64, 32});
  g.add_input("cache_v", DType::F32, {1, 4, 64, 32});
  g.add_node("attention", "attn", {"q", "cache_k", "cache_v"}, {"o"});
  g.mark_output("o");
  g.validate();
  EXPECT_TRUE(analyze(g).kv_caches.empty());  // nothing appended: not inferred
  g.value(g.find_value("cache_k")).role = TensorRole::KvCache;
  g.value(g.find_value("cache_v")).role = TensorRole::KvCache;
  Analysis a = analyze(g);
  ASSERT_EQ(a.kv_caches.size(), 2u);
  EXPECT_EQ(a.kv_caches[0].source, Source::Annotation);
  ASSERT_EQ(a.kv_caches[0].nodes.size(), 1u);
  EXPECT_EQ(g.node(a.kv_caches[0].nodes[0]).name, "attn");
}

TEST(SchedPatterns, Gpt2Blocks) {
  Gpt2Options o;
  auto g = gpt2(o);
  Analysis a = analyze(*g);
  EXPECT_EQ(count(a, PatternKind::Attention), 2);
  EXPECT_EQ(count(a, PatternKind::Mlp), 2);
  EXPECT_EQ(count(a, PatternKind::Residual), 4);  // after attention and after the MLP, per layer
  EXPECT_EQ(count(a, PatternKind::Embedding), 1);
  EXPECT_EQ(count(a, PatternKind::LmHead), 1);
  const PatternMatch* att = first(a, PatternKind::Attention);
  ASSERT_NE(att, nullptr);
  EXPECT_EQ(att->detail, "scale, mask, softmax, dropout");
  EXPECT_EQ(att->nodes.size(), 6u);
  EXPECT_EQ(att->layer, 0);
  EXPECT_EQ(g->node(att->nodes.front()).op, "matmul");
  EXPECT_EQ(g->node(att->nodes.back()).op, "matmul");

  o.fused = true;
  a = analyze(*gpt2(o));
  EXPECT_EQ(count(a, PatternKind::Attention), 0);
  EXPECT_EQ(count(a, PatternKind::FusedAttention), 2);
}

// q @ k^T -> steps -> softmax -> steps -> @ v, with the given step ops.
std::unique_ptr<Graph> attention_graph(const std::vector<std::string>& before, const std::vector<std::string>& after) {
  auto g = std::make_unique<Graph>("att");
  g->add_input("q", DType::F32, {2, 8, 16});
  g->add_input("k", DType::F32, {2, 8, 16});
  g->add_input("v", DType::F32, {2, 8, 16});
  g->add_input("s", DType::F32, {1});
  g->add_input("m", DType::Bool, {8, 8});
  g->add_input("fm", DType::F32, {8, 8});
  g->add_node("matmul", "qk", {"q", "k"}, {"x0"});
  g->set_attr("qk", "transpose_b", int64_t{1});
  std::string x = "x0";
  int i = 0;
  for (const std::string& op : before) {
    const std::string out = "b" + std::to_string(i), name = "nb" + std::to_string(i++);
    if (op == "masked_fill") {
      g->add_node(op, name, {x, "m"}, {out});
      g->set_attr(name, "value", -1e9);
    } else if (op == "where") {
      g->add_node(op, name, {"m", x, "fm"}, {out});
    } else if (op == "add") {
      g->add_node(op, name, {x, "fm"}, {out});
    } else {
      g->add_node(op, name, {x, "s"}, {out});
    }
    x = out;
  }
  g->add_node("softmax", "sm", {x}, {"p"});
  x = "p";
  for (const std::string& op : after) {
    const std::string out = "a" + std::to_string(i), name = "na" + std::to_string(i++);
    g->add_node(op, name, {x}, {out});
    if (op == "cast") g->set_attr(name, "dtype", std::string("f32"));
    x = out;
  }
  g->add_node("matmul", "pv", {x, "v"}, {"o"});
  g->mark_output("o");
  g->validate();
  return g;
}

TEST(SchedPatterns, AttentionVariants) {
  struct Case {
    std::vector<std::string> before, after;
    std::string detail;
  } cases[] = {
      {{}, {}, "softmax"},
      {{"mul"}, {}, "scale, softmax"},
      {{"div", "masked_fill"}, {"dropout"}, "scale, mask, softmax, dropout"},
      {{"mul", "add"}, {"dropout"}, "scale, mask, softmax, dropout"},
      {{"where", "mul"}, {"cast", "dropout"}, "mask, scale, softmax, cast, dropout"},
  };
  for (const Case& c : cases) {
    auto g = attention_graph(c.before, c.after);
    Analysis a = analyze(*g);
    ASSERT_EQ(count(a, PatternKind::Attention), 1) << c.detail;
    const PatternMatch* m = first(a, PatternKind::Attention);
    EXPECT_EQ(m->detail, c.detail);
    EXPECT_EQ(m->nodes.size(), c.before.size() + c.after.size() + 3);
    EXPECT_EQ(g->node(m->nodes.front()).name, "qk");
    EXPECT_EQ(g->node(m->nodes.back()).name, "pv");
  }
}

TEST(SchedPatterns, SoftmaxNotBetweenMatmulsIsNoAttention) {
  Graph g("no");
  g.add_input("x", DType::F32, {4, 8});
  g.add_input("w", DType::F32, {8, 8});
  g.add_node("softmax", "sm", {"x"}, {"p"});
  g.add_node("matmul", "mm", {"p", "w"}, {"o"});
  g.mark_output("o");
  g.validate();
  EXPECT_EQ(count(analyze(g), PatternKind::Attention), 0);
  // An exp (not a scale or mask step) between the matmul and the softmax breaks it too.
  Graph h("no2");
  h.add_input("a", DType::F32, {4, 8});
  h.add_input("b", DType::F32, {8, 4});
  h.add_input("v", DType::F32, {4, 8});
  h.add_node("matmul", "m1", {"a", "b"}, {"s"});
  h.add_node("exp", "e", {"s"}, {"t"});
  h.add_node("softmax", "sm", {"t"}, {"p"});
  h.add_node("matmul", "m2", {"p", "v"}, {"o"});
  h.mark_output("o");
  h.validate();
  EXPECT_EQ(count(analyze(h), PatternKind::Attention), 0);
}

TEST(SchedPatterns, MlpVariants) {
  // linear -> relu -> linear
  {
    Graph g("mlp");
    g.add_input("x", DType::F32, {4, 32});
    g.add_input("w1", DType::F32, {64, 32});
    g.add_input("w2", DType::F32, {32, 64});
    g.add_node("linear", "fc1", {"x", "w1"}, {"h"});
    g.add_node("relu", "act", {"h"}, {"a"});
    g.add_node("linear", "fc2", {"a", "w2"}, {"o"});
    g.mark_output("o");
    g.validate();
    Analysis a = analyze(g);
    ASSERT_EQ(count(a, PatternKind::Mlp), 1);
    EXPECT_EQ(first(a, PatternKind::Mlp)->nodes.size(), 3u);
  }
  // matmul + bias -> gelu -> dropout -> matmul
  {
    Graph g("mlp2");
    g.add_input("x", DType::F32, {4, 32});
    g.add_input("w1", DType::F32, {32, 64});
    g.add_input("b1", DType::F32, {64});
    g.add_input("w2", DType::F32, {64, 32});
    g.add_node("matmul", "fc1", {"x", "w1"}, {"h"});
    g.add_node("add", "bias", {"h", "b1"}, {"hb"});
    g.add_node("gelu", "act", {"hb"}, {"a"});
    g.add_node("dropout", "drop", {"a"}, {"d"});
    g.add_node("matmul", "fc2", {"d", "w2"}, {"o"});
    g.mark_output("o");
    g.validate();
    Analysis a = analyze(g);
    ASSERT_EQ(count(a, PatternKind::Mlp), 1);
    EXPECT_EQ(first(a, PatternKind::Mlp)->nodes.size(), 5u);
    EXPECT_EQ(first(a, PatternKind::Mlp)->detail, "gelu, dropout");
  }
  // SwiGLU: silu(x W1) * (x W3) -> W2
  {
    Graph g("swiglu");
    g.add_input("x", DType::F32, {4, 32});
    g.add_input("w1", DType::F32, {64, 32});
    g.add_input("w3", DType::F32, {64, 32});
    g.add_input("w2", DType::F32, {32, 64});
    g.add_node("linear", "gate", {"x", "w1"}, {"g"});
    g.add_node("linear", "up", {"x", "w3"}, {"u"});
    g.add_node("silu", "act", {"g"}, {"s"});
    g.add_node("mul", "glu", {"s", "u"}, {"m"});
    g.add_node("linear", "down", {"m", "w2"}, {"o"});
    g.mark_output("o");
    g.validate();
    Analysis a = analyze(g);
    ASSERT_EQ(count(a, PatternKind::Mlp), 1);
    EXPECT_EQ(first(a, PatternKind::Mlp)->detail, "silu, gate");
  }
  // An activation with no projection after it is no MLP.
  {
    Graph g("half");
    g.add_input("x", DType::F32, {4, 32});
    g.add_input("w1", DType::F32, {64, 32});
    g.add_node("linear", "fc1", {"x", "w1"}, {"h"});
    g.add_node("relu", "act", {"h"}, {"a"});
    g.mark_output("a");
    g.validate();
    EXPECT_EQ(count(analyze(g), PatternKind::Mlp), 0);
  }
}

TEST(SchedPatterns, ConvNormActivation) {
  for (const std::string& norm : {std::string("layer_norm"), std::string("affine"), std::string("")}) {
    Graph g("conv");
    g.add_input("x", DType::F32, {1, 3, 16, 16});
    g.add_input("w", DType::F32, {8, 3, 3, 3});
    g.add_input("s", DType::F32, {8, 1, 1});
    g.add_input("b", DType::F32, {8, 1, 1});
    g.add_node("conv2d", "conv", {"x", "w"}, {"c"});
    g.set_attr("conv", "padding", std::vector<int64_t>{1, 1});
    std::string y = "c";
    if (norm == "layer_norm") {
      g.add_node("layer_norm", "ln", {"c"}, {"n"});
      y = "n";
    } else if (norm == "affine") {  // batch norm folded: x * s + b
      g.add_node("mul", "bn_s", {"c", "s"}, {"n1"});
      g.add_node("add", "bn_b", {"n1", "b"}, {"n"});
      y = "n";
    }
    g.add_node("silu", "act", {y}, {"o"});
    g.mark_output("o");
    g.validate();
    Analysis a = analyze(g);
    ASSERT_EQ(count(a, PatternKind::ConvNormActivation), 1) << norm;
    const PatternMatch* m = first(a, PatternKind::ConvNormActivation);
    EXPECT_EQ(m->nodes.size(), norm == "affine" ? 4u : norm.empty() ? 2u : 3u);
    EXPECT_EQ(g.node(m->nodes.back()).name, "act");
  }
  // conv -> pool: no activation, no block.
  Graph g("nope");
  g.add_input("x", DType::F32, {1, 3, 16, 16});
  g.add_input("w", DType::F32, {8, 3, 3, 3});
  g.add_node("conv2d", "conv", {"x", "w"}, {"c"});
  g.add_node("max_pool2d", "pool", {"c"}, {"o"});
  g.set_attr("pool", "kernel", std::vector<int64_t>{2, 2});
  g.mark_output("o");
  g.validate();
  EXPECT_EQ(count(analyze(g), PatternKind::ConvNormActivation), 0);
}

TEST(SchedPatterns, Residual) {
  Graph g("res");
  g.add_input("x", DType::F32, {4, 32});
  g.add_input("y", DType::F32, {4, 32});
  g.add_input("w", DType::F32, {32, 32});
  g.add_node("linear", "f", {"x", "w"}, {"h"});
  g.add_node("relu", "r", {"h"}, {"fx"});
  g.add_node("add", "res", {"x", "fx"}, {"o"});     // x + f(x): residual
  g.add_node("add", "plain", {"o", "y"}, {"o2"});   // o + y: two unrelated tensors
  g.mark_output("o2");
  g.validate();
  Analysis a = analyze(g);
  ASSERT_EQ(count(a, PatternKind::Residual), 1);
  EXPECT_EQ(g.node(first(a, PatternKind::Residual)->nodes[0]).name, "res");
  EXPECT_EQ(first(a, PatternKind::Residual)->detail, "skip from 'x'");
}

TEST(SchedPatterns, NodePatternIndex) {
  auto g = gpt2({});
  Analysis a = analyze(*g);
  ASSERT_EQ(a.node_pattern.size(), g->nodes().size());
  for (size_t i = 0; i < a.patterns.size(); ++i)
    for (NodeId id : a.patterns[i].nodes) EXPECT_GE(a.node_pattern[id], 0);
  EXPECT_TRUE(genie::testing::fails_with([&] { analyze(Graph("unvalidated")); }, GENIE_ERR_INVALID_ARGUMENT, "validated"));
}

}  // namespace
}  // namespace genie::sched
