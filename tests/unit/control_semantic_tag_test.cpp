// The semantic tag a graph value travels with between nodes
// (control/semantic_tag.hpp), derived from the graph's annotations.
#include "control/semantic_tag.hpp"

#include <gtest/gtest.h>

#include <memory>

#include "core/tensor_data.hpp"

namespace genie {
namespace {

using dataplane::SemanticTag;

// x (input) and w (constant) -> mm (matmul, decode, layer 3) -> y -> act
// (relu, unannotated) -> z; cache (input, annotated kv_cache) -> upd (add
// with y, prefill, layer 7) -> cache_out.
struct Fixture {
  Graph g{"tags"};
  ValueId x, w, cache, y, z, cache_out;
  Fixture() {
    x = g.add_input("x", DType::F32, {2, 2});
    w = g.add_constant("w", std::make_shared<TensorData>(DType::F32, Shape{2, 2}));
    cache = g.add_input("cache", DType::F16, {2, 2});
    const NodeId mm = g.add_node("matmul", "mm", {"x", "w"}, {"y"});
    g.add_node("relu", "act", {"y"}, {"z"});
    g.add_node("cast", "cast", {"cache"}, {"cache32"});
    g.set_attr("cast", "dtype", AttrValue(std::string("f32")));
    const NodeId upd = g.add_node("add", "upd", {"cache32", "y"}, {"cache_out"});
    g.node(mm).ann.phase = Phase::Decode;
    g.node(mm).ann.layer = 3;
    g.node(upd).ann.phase = Phase::Prefill;
    g.node(upd).ann.layer = 7;
    g.value(cache).role = TensorRole::KvCache;
    g.mark_output("z");
    g.mark_output("cache_out");
    g.validate();
    y = g.find_value("y");
    z = g.find_value("z");
    cache_out = g.find_value("cache_out");
  }
};

SemanticTag tag(DType d, Phase p, TensorRole r, uint16_t layer) {
  SemanticTag t;
  t.dtype = static_cast<uint8_t>(static_cast<int32_t>(d) + 1);
  t.phase = static_cast<uint8_t>(p);
  t.role = static_cast<uint8_t>(r);
  t.layer = layer;
  return t;
}

TEST(SemanticTagOf, NodeOutputTakesItsProducersPhaseAndLayer) {
  Fixture f;
  EXPECT_EQ(tag_name(semantic_tag(f.g, f.y)), "decode/activation/3");
  EXPECT_TRUE(semantic_tag(f.g, f.y) == tag(DType::F32, Phase::Decode, TensorRole::Activation, 3));
  // An unannotated producer: phase and layer unknown.
  EXPECT_TRUE(semantic_tag(f.g, f.z) ==
              tag(DType::F32, Phase::Unknown, TensorRole::Activation, SemanticTag::kNoLayer));
  EXPECT_EQ(tag_name(semantic_tag(f.g, f.z)), "unknown/activation/-");
  EXPECT_EQ(tag_name(semantic_tag(f.g, f.cache_out)), "prefill/activation/7");
}

TEST(SemanticTagOf, InputsAndConstantsTakeTheirConsumersPhaseAndLayer) {
  Fixture f;
  EXPECT_TRUE(semantic_tag(f.g, f.x) == tag(DType::F32, Phase::Decode, TensorRole::Input, 3));
  EXPECT_TRUE(semantic_tag(f.g, f.w) == tag(DType::F32, Phase::Decode, TensorRole::Weight, 3));
  // Its annotated role; its first consumer (cast) has no annotations.
  EXPECT_TRUE(semantic_tag(f.g, f.cache) ==
              tag(DType::F16, Phase::Unknown, TensorRole::KvCache, SemanticTag::kNoLayer));
}

TEST(SemanticTagOf, KvCacheFoundByTheAnalysisWins) {
  Fixture f;
  EXPECT_EQ(tag_name(semantic_tag(f.g, f.x, true)), "decode/kv_cache/3");
  EXPECT_EQ(tag_name(semantic_tag(f.g, f.cache_out, true)), "prefill/kv_cache/7");
}

TEST(SemanticTagOf, LayerBeyondTheWireFieldIsUnknown) {
  Fixture f;
  f.g.node(f.g.find_node("mm")).ann.layer = 0xFFFF;
  EXPECT_EQ(semantic_tag(f.g, f.y).layer, SemanticTag::kNoLayer);
  f.g.node(f.g.find_node("mm")).ann.layer = 0xFFFE;
  EXPECT_EQ(semantic_tag(f.g, f.y).layer, 0xFFFE);
}

TEST(SemanticTagOf, NameOfAnUntaggedOrOutOfRangeTag) {
  EXPECT_EQ(tag_name(SemanticTag()), "unknown/unspecified/-");
  SemanticTag t;
  t.phase = 200;
  t.role = 9;
  t.layer = 12;
  EXPECT_EQ(tag_name(t), "invalid/invalid/12");
}

}  // namespace
}  // namespace genie
