// Reference workloads of the scheduler, shared by its unit tests and its
// benchmarks (never built into the library: header-only): a small
// GPT-2-style model (prefill or one decode step against a KV cache), plus
// helpers. Header-only; builds through the internal Graph API.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "graph/graph.hpp"
#include "sched/plan.hpp"

namespace genie::sched::testing {

struct Gpt2Options {
  int layers = 2;
  int hidden = 128;
  int heads = 4;
  int vocab = 1000;
  int batch = 4;
  int seq = 1;            // new tokens per sequence
  int past = 16;          // KV-cache length; 0 = no KV cache (prefill)
  bool fused = false;     // `attention` op instead of matmul-softmax-matmul
  bool tag_kv = false;    // set role kv_cache on the cache inputs
  bool tag_weights = true;  // set role weight on the parameters
  Phase annotate = Phase::Unknown;  // annotate every node with this phase
};

inline std::unique_ptr<Graph> gpt2(const Gpt2Options& o) {
  auto g = std::make_unique<Graph>("gpt2");
  const int64_t B = o.batch, S = o.seq, H = o.hidden, NH = o.heads, HD = o.hidden / o.heads, P = o.past;
  auto weight = [&](const std::string& name, Shape s) {
    const ValueId v = g->add_input(name, DType::F32, s);
    if (o.tag_weights) g->value(v).role = TensorRole::Weight;
    return name;
  };
  int counter = 0;
  auto node = [&](const std::string& op, std::vector<std::string> in, int layer) {
    const std::string name = op + "_" + std::to_string(counter++);
    g->add_node(op, name, in, {name + ":0"});
    g->node(g->find_node(name)).ann.layer = layer;
    if (o.annotate != Phase::Unknown) g->node(g->find_node(name)).ann.phase = o.annotate;
    return name + ":0";
  };
  auto attr = [&](const std::string& value, const std::string& key, AttrValue v) {
    g->set_attr(value.substr(0, value.size() - 2), key, std::move(v));
  };
  g->add_input("ids", DType::I64, {B, S});
  weight("wte", {o.vocab, H});
  g->add_input("mask", DType::F32, {S, P + S});
  auto scale = std::make_shared<TensorData>(DType::F32, Shape{1});
  scale->data<float>()[0] = 1.0f / 8;
  g->add_constant("scale", scale);

  std::string x = node("embedding", {"ids", "wte"}, -1);
  for (int l = 0; l < o.layers; ++l) {
    const std::string p = "l" + std::to_string(l) + ".";
    auto heads = [&](const std::string& t) {
      std::string r = node("reshape", {t}, l);
      attr(r, "shape", std::vector<int64_t>{B, S, NH, HD});
      std::string q = node("permute", {r}, l);
      attr(q, "perm", std::vector<int64_t>{0, 2, 1, 3});
      return q;
    };
    std::string ln1 = node("layer_norm", {x, weight(p + "ln1.w", {H}), weight(p + "ln1.b", {H})}, l);
    std::string q = heads(node("linear", {ln1, weight(p + "wq", {H, H}), weight(p + "bq", {H})}, l));
    std::string k = heads(node("linear", {ln1, weight(p + "wk", {H, H}), weight(p + "bk", {H})}, l));
    std::string v = heads(node("linear", {ln1, weight(p + "wv", {H, H}), weight(p + "bv", {H})}, l));
    if (P > 0) {
      const ValueId pk = g->add_input(p + "past_k", DType::F32, {B, NH, P, HD});
      const ValueId pv = g->add_input(p + "past_v", DType::F32, {B, NH, P, HD});
      if (o.tag_kv) g->value(pk).role = g->value(pv).role = TensorRole::KvCache;
      k = node("concat", {p + "past_k", k}, l);
      attr(k, "axis", int64_t{2});
      v = node("concat", {p + "past_v", v}, l);
      attr(v, "axis", int64_t{2});
      g->mark_output(k);
      g->mark_output(v);
    }
    std::string ctx;
    if (o.fused) {
      ctx = node("attention", {q, k, v, "mask"}, l);
    } else {
      std::string kt = node("transpose", {k}, l);
      std::string s = node("matmul", {q, kt}, l);
      s = node("mul", {s, "scale"}, l);
      s = node("add", {s, "mask"}, l);
      s = node("softmax", {s}, l);
      s = node("dropout", {s}, l);
      attr(s, "p", 0.1);
      ctx = node("matmul", {s, v}, l);
    }
    ctx = node("permute", {ctx}, l);
    attr(ctx, "perm", std::vector<int64_t>{0, 2, 1, 3});
    ctx = node("reshape", {ctx}, l);
    attr(ctx, "shape", std::vector<int64_t>{B, S, H});
    std::string proj = node("linear", {ctx, weight(p + "wo", {H, H}), weight(p + "bo", {H})}, l);
    x = node("add", {x, proj}, l);
    std::string ln2 = node("layer_norm", {x, weight(p + "ln2.w", {H}), weight(p + "ln2.b", {H})}, l);
    std::string h = node("linear", {ln2, weight(p + "w1", {4 * H, H}), weight(p + "b1", {4 * H})}, l);
    h = node("gelu", {h}, l);
    h = node("linear", {h, weight(p + "w2", {H, 4 * H}), weight(p + "b2", {H})}, l);
    x = node("add", {x, h}, l);
  }
  std::string lnf = node("layer_norm", {x, weight("lnf.w", {H}), weight("lnf.b", {H})}, -1);
  std::string logits = node("linear", {lnf, "wte"}, -1);
  g->mark_output(logits);
  g->validate();
  return g;
}

// y = x [n, n] @ w [n, n], then relu: one matmul and one cheap op.
inline std::unique_ptr<Graph> matmul_relu(int64_t n) {
  auto g = std::make_unique<Graph>("mm");
  g->add_input("x", DType::F32, {n, n});
  g->add_input("w", DType::F32, {n, n});
  g->add_node("matmul", "mm", {"x", "w"}, {"h"});
  g->add_node("relu", "act", {"h"}, {"y"});
  g->mark_output("y");
  g->validate();
  return g;
}

// A device with round figures, for hand-checkable plans.
inline DeviceProfile device(const std::string& node, const std::string& dev, double gflops, double gbps,
                            uint64_t budget = uint64_t{1} << 34) {
  DeviceProfile d;
  d.node_id = node;
  d.device = dev;
  d.peak_flops = gflops * 1e9;
  d.mem_bw_bytes_per_s = gbps * 1e9;
  d.mem_capacity_bytes = budget;
  d.mem_budget_bytes = budget;
  d.op_overhead_s = 2e-6;
  return d;
}

// Two nodes: node-a with a CPU, node-b with a CPU and a GPU; 10 Gbit/s, 50 us RTT.
inline Topology two_nodes() {
  Topology t;
  t.devices = {device("node-a", "cpu:0", 100, 10), device("node-b", "cpu:0", 100, 10),
               device("node-b", "gpu:0", 10000, 1000)};
  t.links = {{"node-a", "node-b", 1.25e9, 50e-6}};
  t.version = 1;
  return t;
}

// A random DAG of `n` nodes (relu of one earlier value, add of two, or a
// concat-free mix), every value [16, 16] f32, the sinks marked as outputs.
inline std::unique_ptr<Graph> random_dag(int n, uint32_t seed, int n_inputs = 4) {
  auto g = std::make_unique<Graph>("random");
  std::mt19937 rng(seed);
  std::vector<std::string> values;
  for (int i = 0; i < n_inputs; ++i) {
    values.push_back("in" + std::to_string(i));
    g->add_input(values.back(), DType::F32, {16, 16});
  }
  std::vector<int> uses;
  uses.assign(values.size(), 0);
  for (int i = 0; i < n; ++i) {
    const std::string out = "v" + std::to_string(i);
    // Prefer recent values so the graph is deep as well as wide.
    auto pick = [&] {
      const size_t window = std::min<size_t>(values.size(), 64);
      const size_t j = values.size() - 1 - rng() % window;
      ++uses[j];
      return values[j];
    };
    if (rng() % 3 == 0) {
      g->add_node("relu", "n" + std::to_string(i), {pick()}, {out});
    } else {
      const std::string a = pick(), b = pick();
      g->add_node(rng() % 2 ? "add" : "mul", "n" + std::to_string(i), {a, b}, {out});
    }
    values.push_back(out);
    uses.push_back(0);
  }
  for (size_t j = static_cast<size_t>(n_inputs); j < values.size(); ++j)
    if (uses[j] == 0) g->mark_output(values[j]);
  g->validate();
  return g;
}

}  // namespace genie::sched::testing
