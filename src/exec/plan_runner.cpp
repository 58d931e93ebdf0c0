#include "exec/plan_runner.hpp"

#include <chrono>
#include <new>

#include "core/error.hpp"
#include "exec/transfer.hpp"
#include "graph/split.hpp"

namespace genie {

namespace {

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

struct Planned {
  Executor* exec = nullptr;
  PlannedRun r;
  std::vector<Stage> stages;
  // Where each value is: its home device and its copy on each device
  // (by topology index; null where it has none).
  std::unordered_map<ValueId, std::vector<TensorPtr>> at;
  std::unordered_map<ValueId, int> home;
  Executor::Done done;
  std::shared_ptr<std::vector<int>> stages_run;
  uint64_t start_ns = 0;
  std::vector<NodeTrace> trace;

  // The value on device d, copied there from its home if need be.
  TensorPtr on(ValueId v, int d) {
    std::vector<TensorPtr>& copies = at.at(v);
    if (copies[static_cast<size_t>(d)]) return copies[static_cast<size_t>(d)];
    const int h = home.at(v);
    TensorPtr t = copy_tensor(copies[static_cast<size_t>(h)], r.devices[static_cast<size_t>(h)],
                              r.devices[static_cast<size_t>(d)]);
    copies[static_cast<size_t>(d)] = t;
    return t;
  }

  void put(ValueId v, int d, TensorPtr t) {
    std::vector<TensorPtr>& copies = at[v];
    copies.assign(r.devices.size(), nullptr);
    copies[static_cast<size_t>(d)] = std::move(t);
    home[v] = d;
  }

  void fail_with(genie_status_t s, std::string detail) {
    ExecResult res;
    res.status = s;
    res.detail = std::move(detail);
    res.exec_ns = now_ns() - start_ns;
    Executor::Done d = std::move(done);
    at.clear();
    d(std::move(res));
  }
};

void step(const std::shared_ptr<Planned>& p, size_t k);

void finish(const std::shared_ptr<Planned>& p) {
  ExecResult res;
  const Graph& g = *p->r.graph;
  for (ValueId o : g.outputs()) {
    const int h = p->home.at(o);
    TensorPtr t = p->at.at(o)[static_cast<size_t>(h)];
    // An output that is a graph input or constant is copied, so that the
    // caller's output never aliases an input tensor.
    if (g.value(o).kind != ValueKind::NodeOutput) {
      const DeviceRef d = p->r.devices[static_cast<size_t>(h)];
      t = copy_tensor(t, d, d);
    }
    res.outputs.push_back(std::move(t));
  }
  res.exec_ns = now_ns() - p->start_ns;
  res.trace = std::move(p->trace);
  Executor::Done d = std::move(p->done);
  p->at.clear();
  d(std::move(res));
}

void step(const std::shared_ptr<Planned>& p, size_t k) {
  try {
    if (k == p->stages.size()) {
      finish(p);
      return;
    }
    const Stage& st = p->stages[k];
    std::vector<TensorPtr> ins;
    ins.reserve(st.inputs.size());
    for (ValueId v : st.inputs) ins.push_back(p->on(v, st.device));
    if (p->stages_run) p->stages_run->push_back(st.device);
    const uint64_t stage_start = now_ns() - p->start_ns;
    p->exec->run(
        st.graph, std::move(ins),
        [p, k, stage_start](ExecResult&& r) {
          const Stage& s = p->stages[k];
          if (r.status != GENIE_OK) {
            p->fail_with(r.status, std::move(r.detail));
            return;
          }
          for (size_t i = 0; i < r.trace.size() && i < s.nodes.size(); ++i) {
            NodeTrace t = r.trace[i];
            t.node = s.nodes[i];
            t.start_ns += stage_start;
            t.end_ns += stage_start;
            p->trace[static_cast<size_t>(s.nodes[i])] = t;
          }
          for (size_t i = 0; i < s.outputs.size(); ++i)
            p->put(s.outputs[i], s.device, std::move(r.outputs[i]));
          step(p, k + 1);
        },
        p->r.devices[static_cast<size_t>(st.device)]);
  } catch (const Error& e) {
    p->fail_with(e.code(), e.detail());
  } catch (const std::bad_alloc&) {
    p->fail_with(GENIE_ERR_OUT_OF_MEMORY, "out of memory moving tensors between devices");
  }
}

}  // namespace

void run_planned(Executor& exec, PlannedRun r, Executor::Done done,
                 std::shared_ptr<std::vector<int>> stages_run) {
  auto p = std::make_shared<Planned>();
  p->exec = &exec;
  p->done = std::move(done);
  p->stages_run = std::move(stages_run);
  p->start_ns = now_ns();
  try {
    const Graph& g = *r.graph;
    check(r.inputs.size() == g.inputs().size() && r.input_device.size() == r.inputs.size(),
          GENIE_ERR_INTERNAL, "run_planned: ", r.inputs.size(), " tensors for ", g.inputs().size(),
          " graph inputs");
    p->trace.resize(g.nodes().size());
    p->stages = split_stages(g, r.plan->node_device, r.plan->order, &r.shapes);
    p->r = std::move(r);
    const Graph& pg = *p->r.graph;
    for (size_t i = 0; i < p->r.inputs.size(); ++i) {
      const int d = p->r.input_device[i];
      check(d >= 0 && static_cast<size_t>(d) < p->r.devices.size(), GENIE_ERR_INTERNAL, "run_planned: input ",
            i, " on device ", d, " of ", p->r.devices.size());
      p->put(pg.inputs()[i], d, std::move(p->r.inputs[i]));
    }
    // Constants are host tensors: they start on the CPU device (index 0
    // of every local topology) and are copied where they are read.
    for (size_t v = 0; v < pg.values().size(); ++v) {
      const Value& val = pg.value(static_cast<ValueId>(v));
      if (val.kind == ValueKind::Constant) p->put(static_cast<ValueId>(v), 0, val.constant);
    }
  } catch (const Error& e) {
    p->fail_with(e.code(), e.detail());
    return;
  } catch (const std::bad_alloc&) {
    p->fail_with(GENIE_ERR_OUT_OF_MEMORY, "out of memory preparing a planned run");
    return;
  }
  step(p, 0);
}

}  // namespace genie
