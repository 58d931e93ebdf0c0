// The server's cache of parsed and validated graphs: what makes a hit, what
// is shared, eviction by count and by bytes, and errors never being kept.
#include <gtest/gtest.h>

#include <thread>

#include "core/error.hpp"
#include "graph/graph.hpp"
#include "server/graph_cache.hpp"

namespace genie {
namespace {

std::string add_json(const std::string& name = "add") {
  Graph g(name);
  g.add_input("a", DType::F32, {-1});
  g.add_input("b", DType::F32, {-1});
  g.add_node("add", "sum", {"a", "b"}, {"c"});
  g.mark_output("c");
  return graph_to_json(g);
}

const std::vector<std::string> kAB = {"a", "b"};

std::vector<TensorDesc> f32(int64_t n) { return {{DType::F32, {n}}, {DType::F32, {n}}}; }

TEST(GraphCache, SameJsonAndBindingsHitAndShareTheGraph) {
  GraphCache cache;
  const std::string json = add_json();
  const std::shared_ptr<const GraphCache::Entry> e1 = cache.get(json, kAB, f32(4));
  const std::shared_ptr<const GraphCache::Entry> e2 = cache.get(json, kAB, f32(4));
  EXPECT_EQ(cache.misses(), 1u);
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(e1->graph.get(), e2->graph.get());
  EXPECT_TRUE(e1->graph->validated());
  EXPECT_EQ(e1->order, e2->order);
  EXPECT_EQ(e1->graph->value(e1->graph->outputs()[0]).shape, Shape{4});
}

// A decode loop binds the same graph to other shapes every step: each is a
// miss, but the graph is parsed once and copied after, and each copy is
// validated with its own shapes.
TEST(GraphCache, TheSameJsonWithOtherShapesIsNotParsedAgain) {
  GraphCache cache;
  const std::string json = add_json();
  for (int64_t n = 1; n <= 5; ++n) {
    const std::shared_ptr<const GraphCache::Entry> e = cache.get(json, kAB, f32(n));
    EXPECT_EQ(e->graph->value(e->graph->outputs()[0]).shape, Shape{n});
  }
  EXPECT_EQ(cache.misses(), 5u);
  EXPECT_EQ(cache.parses_saved(), 4u);
  // Another text is parsed; a bad binding of a kept text is refused, not kept.
  cache.get(add_json("other"), kAB, f32(2));
  EXPECT_EQ(cache.parses_saved(), 4u);
  EXPECT_THROW(cache.get(json, kAB, {{DType::F32, {2}}, {DType::F32, {3}}}), Error);
  EXPECT_EQ(cache.parses_saved(), 5u);
  const std::shared_ptr<const GraphCache::Entry> two = cache.get(json, kAB, f32(2));
  EXPECT_EQ(two->graph->value(two->graph->outputs()[0]).shape, Shape{2});
  // Past kParsedGraphs texts, the oldest is parsed again.
  for (size_t i = 0; i < GraphCache::kParsedGraphs; ++i) cache.get(add_json("g" + std::to_string(i)), kAB, f32(1));
  const uint64_t saved = cache.parses_saved();
  cache.get(json, kAB, f32(9));
  EXPECT_EQ(cache.parses_saved(), saved);
}

// The three steps of get() as the server takes them for a large graph
// (find on its loop, load on another thread, put back on its loop): load
// keeps nothing, put keeps what load made, and a second put of the same
// graph and bindings keeps one entry.
TEST(GraphCache, LoadElsewhereThenPut) {
  GraphCache cache;
  const std::string json = add_json();
  EXPECT_EQ(cache.find(json, kAB, f32(4)), nullptr);
  EXPECT_EQ(cache.misses(), 1u);
  std::shared_ptr<const GraphCache::Entry> made;
  std::thread([&] { made = cache.load(json, kAB, f32(4)); }).join();
  ASSERT_NE(made, nullptr);
  EXPECT_TRUE(made->graph->validated());
  EXPECT_EQ(cache.size(), 0u);
  cache.put(json, kAB, f32(4), made);
  cache.put(json, kAB, f32(4), cache.load(json, kAB, f32(4)));  // parsed twice at once
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.find(json, kAB, f32(4)).get(), made.get());
  EXPECT_EQ(cache.hits(), 1u);
  GraphCache limited;
  limited.set_limits(0, 0, "the limit");
  EXPECT_NO_THROW(limited.load(json, kAB, f32(4)));
  limited.set_limits(16, 0, "the limit");
  EXPECT_THROW(limited.load(json, kAB, f32(4)), Error);
}

TEST(GraphCache, BindingsAreValidatedAgainstEachOnTheirOwn) {
  GraphCache cache;
  const std::string json = add_json();
  // Other shapes: validated again, with their own inferred shapes.
  const std::shared_ptr<const GraphCache::Entry> e4 = cache.get(json, kAB, f32(4));
  const std::shared_ptr<const GraphCache::Entry> e8 = cache.get(json, kAB, f32(8));
  EXPECT_NE(e4->graph.get(), e8->graph.get());
  EXPECT_EQ(e8->graph->value(e8->graph->outputs()[0]).shape, Shape{8});
  // Other order of the same names: its own binding order.
  const std::shared_ptr<const GraphCache::Entry> ba = cache.get(json, {"b", "a"}, f32(4));
  EXPECT_EQ(ba->order, (std::vector<size_t>{1, 0}));
  EXPECT_EQ(e4->order, (std::vector<size_t>{0, 1}));
  // Other JSON, even one byte: another entry.
  cache.get(add_json("add2"), kAB, f32(4));
  EXPECT_EQ(cache.misses(), 4u);
  EXPECT_EQ(cache.hits(), 0u);
  EXPECT_EQ(cache.size(), 4u);
}

TEST(GraphCache, ErrorsAreThrownEveryTimeAndNeverKept) {
  GraphCache cache;
  const std::string json = add_json();
  for (int i = 0; i < 2; ++i) {
    EXPECT_THROW(cache.get("{not json", {}, {}), Error);
    try {
      cache.get(json, kAB, {{DType::F32, {4}}, {DType::I32, {4}}});
      ADD_FAILURE() << "a dtype mismatch was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), GENIE_ERR_DTYPE_MISMATCH);
    }
    try {
      cache.get(json, {"a"}, {{DType::F32, {4}}});
      ADD_FAILURE() << "an unbound input was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), GENIE_ERR_INVALID_GRAPH);
    }
  }
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.bytes(), 0u);
  EXPECT_EQ(cache.misses(), 6u);
}

TEST(GraphCache, EvictsTheLeastRecentlyUsed) {
  GraphCache cache(3);
  const std::string json = add_json();
  cache.get(json, kAB, f32(1));
  cache.get(json, kAB, f32(2));
  cache.get(json, kAB, f32(3));
  cache.get(json, kAB, f32(1));  // now the most recent
  cache.get(json, kAB, f32(4));  // evicts 2
  EXPECT_EQ(cache.size(), 3u);
  const uint64_t hits = cache.hits();
  cache.get(json, kAB, f32(1));
  cache.get(json, kAB, f32(3));
  cache.get(json, kAB, f32(4));
  EXPECT_EQ(cache.hits(), hits + 3);
  cache.get(json, kAB, f32(2));
  EXPECT_EQ(cache.hits(), hits + 3);
  EXPECT_EQ(cache.size(), 3u);
}

TEST(GraphCache, StaysWithinItsBytes) {
  // Graphs with 16 KiB constants; room for four of them.
  const auto with_constant = [](int i) {
    Graph g("k" + std::to_string(i));
    g.add_input("a", DType::F32, {4096});
    g.add_constant("k", std::make_shared<TensorData>(DType::F32, Shape{4096}));
    g.add_node("add", "sum", {"a", "k"}, {"c"});
    g.mark_output("c");
    return graph_to_json(g);
  };
  const std::string j0 = with_constant(0);
  const size_t one = j0.size() + 16384;  // JSON and constant bytes, give or take the bindings
  const size_t budget = 4 * one + one / 2;
  GraphCache cache(64, budget);
  for (int i = 0; i < 8; ++i) {
    cache.get(with_constant(i), {"a"}, {{DType::F32, {4096}}});
    EXPECT_LE(cache.bytes(), budget);
  }
  EXPECT_GE(cache.size(), 3u);
  EXPECT_LE(cache.size(), 4u);
  // One graph taking over a quarter of the budget is not kept at all.
  GraphCache small(64, j0.size());
  const std::shared_ptr<const GraphCache::Entry> e = small.get(j0, {"a"}, {{DType::F32, {4096}}});
  EXPECT_TRUE(e->graph->validated());
  EXPECT_EQ(small.size(), 0u);
}

}  // namespace
}  // namespace genie
