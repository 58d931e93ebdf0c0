#include "exec/plan_runner.hpp"

#include <atomic>
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

// The sequencer of run_stages: whichever of a driver's run() returning
// and its completion comes second moves on to the next stage.
struct Sequence {
  const std::vector<Stage>* stages = nullptr;
  const std::vector<StageDriver*>* drivers = nullptr;
  StageDone done;
  size_t next = 0;
  genie_status_t status = GENIE_OK;
  std::string detail;
};

void advance(const std::shared_ptr<Sequence>& s) {
  for (;;) {
    if (s->status != GENIE_OK || s->next == s->stages->size()) {
      StageDone d = std::move(s->done);
      d(s->status, std::move(s->detail));
      return;
    }
    const size_t k = s->next++;
    const Stage& st = (*s->stages)[k];
    auto turn = std::make_shared<std::atomic<bool>>(false);
    (*s->drivers)[static_cast<size_t>(st.device)]->run(k, st,
                                                       [s, turn](genie_status_t status, std::string detail) {
                                                         if (status != GENIE_OK) {
                                                           s->status = status;
                                                           s->detail = std::move(detail);
                                                         }
                                                         if (turn->exchange(true)) advance(s);
                                                       });
    if (!turn->exchange(true)) return;  // its completion moves on
  }
}

struct Planned final : StageDriver {
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
  std::vector<StageDriver*> drivers;  // this, for every device

  void run(size_t k, const Stage& st, StageDone stage_done) override;

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

void Planned::run(size_t k, const Stage& st, StageDone stage_done) {
  try {
    std::vector<TensorPtr> ins;
    ins.reserve(st.inputs.size());
    for (ValueId v : st.inputs) ins.push_back(on(v, st.device));
    if (stages_run) stages_run->push_back(st.device);
    const uint64_t stage_start = now_ns() - start_ns;
    exec->run(
        st.graph, std::move(ins),
        [this, k, stage_start, stage_done](ExecResult&& r) {
          const Stage& s = stages[k];
          if (r.status != GENIE_OK) {
            stage_done(r.status, std::move(r.detail));
            return;
          }
          for (size_t i = 0; i < r.trace.size() && i < s.nodes.size(); ++i) {
            NodeTrace t = r.trace[i];
            t.node = s.nodes[i];
            t.start_ns += stage_start;
            t.end_ns += stage_start;
            trace[static_cast<size_t>(s.nodes[i])] = t;
          }
          try {
            for (size_t i = 0; i < s.outputs.size(); ++i)
              put(s.outputs[i], s.device, std::move(r.outputs[i]));
          } catch (const std::bad_alloc&) {
            stage_done(GENIE_ERR_OUT_OF_MEMORY, "out of memory keeping a stage's outputs");
            return;
          }
          stage_done(GENIE_OK, {});
        },
        r.devices[static_cast<size_t>(st.device)]);
  } catch (const Error& e) {
    stage_done(e.code(), e.detail());
  } catch (const std::bad_alloc&) {
    stage_done(GENIE_ERR_OUT_OF_MEMORY, "out of memory moving tensors between devices");
  }
}

}  // namespace

void run_stages(const std::vector<Stage>& stages, const std::vector<StageDriver*>& drivers, StageDone done) {
  auto s = std::make_shared<Sequence>();
  s->stages = &stages;
  s->drivers = &drivers;
  s->done = std::move(done);
  advance(s);
}

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
  p->drivers.assign(p->r.devices.size(), p.get());
  // The run holds itself (`p`) until its last stage completes.
  run_stages(p->stages, p->drivers, [p](genie_status_t status, std::string detail) {
    if (status == GENIE_OK)
      finish(p);
    else
      p->fail_with(status, std::move(detail));
  });
}

}  // namespace genie
