// C API: plans (genie_plan_explain).
#include <cstdlib>
#include <cstring>

#include "capi/handles.hpp"
#include "control/client.hpp"
#include "sched/plan.hpp"

using namespace genie;

namespace {

// The devices an embedded context runs graphs on: this process's CPU
// (calibrated once, cached on disk). GPUs join here when the CUDA executor
// does.
sched::Topology local_topology(const Context& ctx) {
  sched::CalibrateOptions opts;
  opts.node_id = ctx.node_id();
  sched::Topology t;
  t.devices.push_back(sched::calibrate_local_cpu(opts));
  t.version = 1;
  return t;
}

char* malloc_copy(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p == nullptr) throw std::bad_alloc();
  std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

}  // namespace

extern "C" {

genie_status_t genie_plan_explain(genie_context_t* ctx, const genie_graph_t* graph, char** out_json) {
  return guard([&] {
    Context& c = *live(ctx, kContextMagic, "context")->impl;
    const genie_graph* gh = live(const_cast<genie_graph_t*>(graph), kGraphMagic, "graph");
    check_out(out_json, "out_json");
    c.check_live();
    if (!c.embedded()) {
      // Remote mode: the master plans (it knows the cluster's topology: its
      // own devices and every worker's, with their links) and answers with
      // the same explain JSON.
      Graph rg = gh->g;
      rg.validate();
      *out_json = malloc_copy(c.client()->plan_explain(graph_to_json(rg), {}));
      return;
    }
    Graph g = gh->g;  // a copy: validating must not touch the caller's graph
    g.validate();
    const sched::Plan plan = sched::plan_graph(g, local_topology(c), sched::Residency{});
    const std::string json = plan.explain_json(g);
    *out_json = malloc_copy(json);
  });
}

}  // extern "C"
