// What a traced graph's GraphDone carries (server/trace_spans.hpp): the
// graph's span and its nodes', bounded in count and bytes, whatever the
// graph a client sends.
#include <gtest/gtest.h>

#include <string>

#include "server/trace_spans.hpp"

namespace genie {
namespace {

// A chain of `n` relu nodes, each given a module path of `module_bytes`
// bytes, and a run of it in which every node took 1 us on worker 0.
struct Chain {
  Graph g{"chain"};
  ExecResult r;
  Chain(int n, size_t module_bytes) {
    g.add_input("v0", DType::F32, {4});
    for (int i = 0; i < n; ++i) {
      const std::string out = "v" + std::to_string(i + 1);
      const NodeId id = g.add_node("relu", "n" + std::to_string(i), {"v" + std::to_string(i)}, {out});
      g.node(id).ann.module_path = std::string(module_bytes, 'm');
      r.trace.push_back(NodeTrace{id, 0, uint64_t(i) * 1000, uint64_t(i) * 1000 + 1000});
    }
    g.mark_output("v" + std::to_string(n));
    r.exec_ns = uint64_t(n) * 1000;
  }
};

TEST(TraceSpans, TheGraphAndEachNodeOnTheServersClock) {
  Chain c(3, 8);
  wire::GraphDone d;
  add_trace_spans(c.g, c.r, d);
  ASSERT_EQ(d.spans_size(), 4);
  EXPECT_EQ(d.spans_dropped(), 0u);
  EXPECT_EQ(d.spans(0).cat(), "graph");
  EXPECT_EQ(d.spans(0).name(), "chain");
  EXPECT_EQ(d.spans(0).dur_ns(), 3000u);
  for (int i = 1; i <= 3; ++i) {
    EXPECT_EQ(d.spans(i).cat(), "node");
    EXPECT_EQ(d.spans(i).name(), "relu");
    EXPECT_EQ(d.spans(i).track(), 2u) << "worker 0";
    EXPECT_EQ(d.spans(i).track_name(), "worker 0");
    EXPECT_EQ(d.spans(i).dur_ns(), 1000u);
    // Placed from the graph's start by its offset in the run.
    EXPECT_EQ(d.spans(i).start_ns(), d.spans(0).start_ns() + uint64_t(i - 1) * 1000);
    std::string node;
    for (const wire::TraceArg& a : d.spans(i).args())
      if (a.key() == "node") node = a.text();
    EXPECT_EQ(node, "n" + std::to_string(i - 1));
  }
}

TEST(TraceSpans, AtMostTheCountBound) {
  const int n = static_cast<int>(kMaxTraceSpans) + 100;
  Chain c(n, 1);
  wire::GraphDone d;
  add_trace_spans(c.g, c.r, d);
  EXPECT_EQ(static_cast<size_t>(d.spans_size()), kMaxTraceSpans);
  EXPECT_EQ(d.spans_dropped(), 1u + n - kMaxTraceSpans) << "every span left out is counted";
}

TEST(TraceSpans, AtMostTheByteBound) {
  // 64 KiB of module path per node: far fewer spans than the count bound fit.
  Chain c(100, 64 * 1024);
  wire::GraphDone d;
  add_trace_spans(c.g, c.r, d);
  size_t bytes = 0;
  for (const wire::TraceSpan& s : d.spans()) bytes += s.ByteSizeLong();
  EXPECT_LE(bytes, kMaxTraceSpanBytes);
  EXPECT_GT(d.spans_size(), 1);
  EXPECT_EQ(static_cast<size_t>(d.spans_size()) + d.spans_dropped(), 101u);
}

}  // namespace
}  // namespace genie
