// C API: plans (genie_plan_explain, genie_plan_explain_bound).
#include <cstdlib>
#include <cstring>

#include "capi/handles.hpp"
#include "control/client.hpp"
#include "graph/binding.hpp"
#include "sched/plan.hpp"

using namespace genie;

namespace {

// The devices an embedded context runs graphs on: this process's CPU and
// every device of its device backends, each calibrated by its backend.
const sched::Topology& local_topology(Context& ctx) { return ctx.local_topology(); }

char* malloc_copy(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p == nullptr) throw std::bad_alloc();
  std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

// Plans `graph` bound to `tensors` (none: every input planned as not yet
// resident) and returns the explain JSON.
std::string explain(Context& c, const Graph& graph, const std::vector<std::string>& names,
                    const std::vector<TensorRef>& tensors) {
  std::vector<TensorDesc> descs;
  for (const TensorRef& t : tensors) descs.push_back({t.dtype(), t.shape()});
  Graph g = graph;  // a copy: validating must not touch the caller's graph
  std::unordered_map<ValueId, Shape> shapes;
  if (names.empty()) {
    g.validate();
  } else {
    bind_inputs(g, names, descs, &shapes);
    g.validate(&shapes);
  }
  if (!c.embedded()) {
    // Remote mode: the master plans (it knows the cluster's topology: its
    // own devices and every worker's, with their links, and where each
    // bound tensor lives) and answers with the same explain JSON. A host
    // tensor would be copied to the master's default device by a
    // submission: here it gets an empty stand-in there, with no bytes moved.
    std::vector<std::pair<std::string, uint64_t>> bindings;
    std::vector<TensorRef> held;
    for (size_t i = 0; i < tensors.size(); ++i) {
      TensorRef t = tensors[i];
      if (!t.is_remote()) {
        std::string dev;
        t = c.alloc(t.dtype(), t.shape(), nullptr, &dev);
      }
      check(t.remote()->client == c.client(), GENIE_ERR_INVALID_ARGUMENT, "tensor bound to '", names[i],
            "' lives on another server connection");
      bindings.emplace_back(names[i], t.remote()->id);
      held.push_back(std::move(t));
    }
    return c.client()->plan_explain(graph_to_json(g), bindings);
  }
  sched::Residency residency;  // embedded: every bound tensor is on a device of this process
  for (size_t i = 0; i < names.size(); ++i) residency.value_device[names[i]] = c.device_of(*tensors[i].local());
  return sched::plan_graph(g, local_topology(c), residency, names.empty() ? nullptr : &shapes).explain_json(g);
}

}  // namespace

extern "C" {

genie_status_t genie_plan_explain(genie_context_t* ctx, const genie_graph_t* graph, char** out_json) {
  return genie_plan_explain_bound(ctx, graph, nullptr, nullptr, 0, out_json);
}

genie_status_t genie_plan_explain_bound(genie_context_t* ctx, const genie_graph_t* graph,
                                        const char* const* input_names, genie_tensor_t* const* inputs,
                                        size_t n_inputs, char** out_json) {
  return guard([&] {
    Context& c = *live<ContextObj>(ctx)->impl;
    const GraphObj* gh = live<GraphObj>(graph);
    check_out(out_json, "out_json");
    std::vector<std::string> names;
    std::vector<TensorRef> tensors;
    collect_bindings(c, input_names, inputs, n_inputs, &names, &tensors);
    c.check_live();
    *out_json = malloc_copy(explain(c, gh->g, names, tensors));
  });
}

}  // extern "C"
