// Plan::explain_json (docs/scheduler.md, "Explain JSON").
#include <cjson/cJSON.h>

#include <cstdio>
#include <memory>

#include "core/error.hpp"
#include "sched/cost.hpp"
#include "sched/plan.hpp"

namespace genie::sched {

namespace {

struct JsonDelete {
  void operator()(cJSON* p) const { cJSON_Delete(p); }
};
struct JsonFree {
  void operator()(char* p) const { cJSON_free(p); }
};

cJSON* checked(cJSON* item) {
  if (!item) throw std::bad_alloc();
  return item;
}

std::string hex(uint64_t h) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string micros(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g us", s * 1e6);
  return buf;
}

}  // namespace

std::string Plan::explain_json(const Graph& g) const {
  check(node_device.size() == g.nodes().size(), GENIE_ERR_INVALID_ARGUMENT, "the plan is for a graph of ",
        node_device.size(), " nodes, not ", g.nodes().size());
  std::unique_ptr<cJSON, JsonDelete> root(checked(cJSON_CreateObject()));
  cJSON* r = root.get();
  auto str = [](cJSON* o, const char* k, const std::string& v) { checked(cJSON_AddStringToObject(o, k, v.c_str())); };
  auto num = [](cJSON* o, const char* k, double v) { checked(cJSON_AddNumberToObject(o, k, v)); };
  auto dev = [&](int d) { return d >= 0 && static_cast<size_t>(d) < device_names.size() ? device_names[d] : std::string("?"); };

  str(r, "graph", g.name());
  str(r, "graph_hash", hex(graph_hash));
  num(r, "topology_version", static_cast<double>(topology_version));
  num(r, "predicted_total_s", predicted_total_s);

  cJSON* an = checked(cJSON_AddObjectToObject(r, "analysis"));
  str(an, "stage", stage_name(analysis.stage));
  str(an, "stage_source", source_name(analysis.stage_source));
  str(an, "stage_evidence", analysis.stage_evidence);
  str(an, "modality", modality_name(analysis.modality));
  cJSON* pats = checked(cJSON_AddArrayToObject(an, "patterns"));
  for (const PatternMatch& m : analysis.patterns) {
    cJSON* p = checked(cJSON_CreateObject());
    cJSON_AddItemToArray(pats, p);
    str(p, "kind", pattern_name(m.kind));
    if (!m.detail.empty()) str(p, "detail", m.detail);
    if (m.layer >= 0) num(p, "layer", m.layer);
    cJSON* ns = checked(cJSON_AddArrayToObject(p, "nodes"));
    for (NodeId id : m.nodes) cJSON_AddItemToArray(ns, checked(cJSON_CreateString(g.node(id).name.c_str())));
  }
  cJSON* kvs = checked(cJSON_AddArrayToObject(an, "kv_caches"));
  for (const KvCache& kv : analysis.kv_caches) {
    cJSON* k = checked(cJSON_CreateObject());
    cJSON_AddItemToArray(kvs, k);
    str(k, "value", g.value(kv.value).name);
    str(k, "source", source_name(kv.source));
    cJSON* ns = checked(cJSON_AddArrayToObject(k, "nodes"));
    for (NodeId id : kv.nodes) cJSON_AddItemToArray(ns, checked(cJSON_CreateString(g.node(id).name.c_str())));
  }

  cJSON* devs = checked(cJSON_AddArrayToObject(r, "devices"));
  for (size_t d = 0; d < device_names.size(); ++d) {
    cJSON* o = checked(cJSON_CreateObject());
    cJSON_AddItemToArray(devs, o);
    num(o, "index", static_cast<double>(d));
    str(o, "name", device_names[d]);
    num(o, "peak_bytes", d < peak_bytes_per_device.size() ? static_cast<double>(peak_bytes_per_device[d]) : 0);
    num(o, "budget_bytes", d < budget_per_device.size() ? static_cast<double>(budget_per_device[d]) : 0);
  }

  cJSON* nodes = checked(cJSON_AddArrayToObject(r, "nodes"));
  for (NodeId id : order) {
    const Node& n = g.node(id);
    const NodeDecision& dec = decisions[id];
    const OpCost c = id < static_cast<NodeId>(node_cost.size()) ? node_cost[id] : OpCost{};
    cJSON* o = checked(cJSON_CreateObject());
    cJSON_AddItemToArray(nodes, o);
    str(o, "name", n.name);
    str(o, "op", n.op);
    str(o, "device", dev(node_device[id]));
    str(o, "rule", rule_name(dec.rule));
    std::string why;
    switch (dec.rule) {
      case Rule::KvCacheColocation:
        why = cat("reads KV cache '", g.value(dec.pinned_by).name, "', which stays on ", dev(node_device[id]));
        break;
      case Rule::ResidentWeight:
        why = cat("reads weight '", g.value(dec.pinned_by).name, "', resident on ", dev(node_device[id]));
        break;
      case Rule::OnlyDevice:
        why = device_names.size() == 1 ? "the only device" : "the only device with room for its tensors and reach to its inputs";
        break;
      case Rule::StageMerge:
        why = cat("kept in its neighbouring stage: the plan finishes earlier with one cut fewer (",
                  dec.runner_up >= 0 ? cat("alone it would finish at ", micros(dec.runner_up_finish_s), " on ",
                                           dev(dec.runner_up), " vs ", micros(dec.finish_s), " here")
                                     : std::string("no alternative"),
                  ")");
        break;
      case Rule::MinFinishTime:
        why = dec.runner_up >= 0 ? cat("earliest predicted finish, transfers included: ", micros(dec.finish_s),
                                       " vs ", micros(dec.runner_up_finish_s), " on ", dev(dec.runner_up))
                                 : "earliest predicted finish";
        break;
    }
    str(o, "why", why);
    num(o, "flops", c.flops);
    num(o, "bytes", static_cast<double>(c.bytes()));
    num(o, "predicted_s", predicted_node_s[id]);
    num(o, "start_s", dec.start_s);
    num(o, "finish_s", dec.finish_s);
    if (dec.runner_up >= 0) {
      str(o, "runner_up", dev(dec.runner_up));
      num(o, "runner_up_finish_s", dec.runner_up_finish_s);
    }
    if (id < static_cast<NodeId>(analysis.node_pattern.size()) && analysis.node_pattern[id] >= 0)
      str(o, "pattern", pattern_name(analysis.patterns[analysis.node_pattern[id]].kind));
  }

  cJSON* trs = checked(cJSON_AddArrayToObject(r, "transfers"));
  for (const Transfer& t : transfers) {
    cJSON* o = checked(cJSON_CreateObject());
    cJSON_AddItemToArray(trs, o);
    str(o, "value", t.value);
    str(o, "from", dev(t.from_device));
    str(o, "to", dev(t.to_device));
    num(o, "bytes", static_cast<double>(t.bytes));
    num(o, "predicted_s", t.predicted_s);
    if (t.consumer != kNone) str(o, "for", g.node(t.consumer).name);
  }

  std::unique_ptr<char, JsonFree> text(cJSON_Print(r));
  if (!text) throw std::bad_alloc();
  return text.get();
}

}  // namespace genie::sched
