// One multi-node graph run on the master (MultiNode::run, multinode.hpp):
// its plan cut into stages, run through the plan runner (exec/plan_runner.hpp)
// by two drivers: this server's CPU, on the task thread that reaches the
// stage, and the workers, whose stages no thread waits for: a stage is sent,
// the thread goes back to the pool, and the worker's reply, the stage
// deadline or the server's stop (StageWaits) posts the rest of the run back
// to the pool, in the submitting session's order.
#include <algorithm>
#include <chrono>
#include <future>

#include "control/semantic_tag.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "core/metrics.hpp"
#include "core/trace.hpp"
#include "exec/learn.hpp"
#include "exec/plan_runner.hpp"
#include "exec/run_memory.hpp"
#include "graph/split.hpp"
#include "server/multinode.hpp"

namespace genie {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string dims(DType dtype, const Shape& shape) {
  std::string s = cat(dtype_name(dtype), "[");
  for (size_t i = 0; i < shape.size(); ++i) append_to(s, i ? ", " : "", shape[i]);
  return s + "]";
}

// Runs `body`, reporting what it throws to `done` as a status (drivers and
// the run throw nothing); `body` reports its success itself.
void report(const StageDone& done, const std::function<void()>& body) {
  try {
    body();
    return;
  } catch (const Error& e) {
    done(e.code(), e.detail());
  } catch (const std::bad_alloc&) {
    done(GENIE_ERR_OUT_OF_MEMORY, "out of memory running a multi-node graph");
  } catch (const std::exception& e) {
    done(GENIE_ERR_INTERNAL, cat("internal error running a multi-node graph: ", e.what()));
  }
}

// A driver whose stages a member of the run drives.
class Driver final : public StageDriver {
 public:
  explicit Driver(std::function<void(size_t, const Stage&, StageDone)> body) : body_(std::move(body)) {}
  void run(size_t index, const Stage& st, StageDone done) override { body_(index, st, std::move(done)); }

 private:
  std::function<void(size_t, const Stage&, StageDone)> body_;
};

}  // namespace

class MultiNode::GraphRun : public std::enable_shared_from_this<GraphRun> {
 public:
  GraphRun(MultiNode& mn, std::shared_ptr<const Graph> g, std::vector<Held> inputs,
           std::unordered_map<ValueId, Shape> shapes, Charge charge, uint64_t session, Post post, Done done)
      : mn_(mn),
        gp_(std::move(g)),
        g_(*gp_),
        inputs_(std::move(inputs)),
        shapes_(std::move(shapes)),
        charge_(std::move(charge)),
        session_(session),
        post_(std::move(post)),
        done_(std::move(done)),
        local_([this](size_t k, const Stage& st, StageDone d) { report(d, [&] { local_stage(k, st, d); }); }),
        worker_([this](size_t k, const Stage& st, StageDone d) { report(d, [&] { worker_stage(k, st, d); }); }) {}

  // On the calling (task) thread until the first worker stage is sent.
  void start() {
    bool planned = false;
    report([this](genie_status_t status, std::string detail) { finish(status, std::move(detail)); },
           [&] {
             check(!mn_.cancelled_.load(), GENIE_ERR_SHUTDOWN, "the server is stopping");
             pl_ = mn_.plan(g_, inputs_, shapes_);
             stages_ = split_stages(g_, pl_.plan->node_device, pl_.plan->order, &shapes_);
             timing_.assign(stages_.size(), {});
             {
               std::lock_guard<std::mutex> lk(mn_.mu_);
               ++mn_.multinode_graphs_;
             }
             started_ = Clock::now();
             for (size_t k = 0; k < inputs_.size(); ++k) {
               Holding& h = held_[g_.inputs()[k]];
               if (inputs_[k].local) {
                 h.local = inputs_[k].local;
               } else {
                 h.home = inputs_[k].remote->node;
                 h.at[h.home] = inputs_[k].remote;
               }
             }
             for (const std::string& node : pl_.device_node)
               drivers_.push_back(node.empty() ? static_cast<StageDriver*>(&local_) : &worker_);
             planned = true;
           });
    if (!planned) return;
    // The run keeps itself alive until its last stage reports.
    run_stages(stages_, drivers_, [self = shared_from_this()](genie_status_t status, std::string detail) {
      self->finish(status, std::move(detail));
    });
  }

 private:
  // Where each value is: its home (where it was produced or bound: "" =
  // here) and the copies made for other nodes.
  struct Holding {
    std::string home;
    TensorPtr local;
    std::map<std::string, RemoteTensorPtr> at;
  };

  // The run's end: its result to done_, then the copies and charges go.
  void finish(genie_status_t status, std::string detail) {
    MultiResult result;
    result.status = status;
    result.detail = std::move(detail);
    if (status == GENIE_OK) {
      try {
        const double measured_s = seconds_since(started_);
        const sched::Plan& plan = *pl_.plan;
        {
          std::lock_guard<std::mutex> lk(mn_.mu_);
          mn_.last_predicted_ns_ = static_cast<uint64_t>(plan.predicted_total_s * 1e9);
          mn_.last_measured_ns_ = static_cast<uint64_t>(measured_s * 1e9);
          if (mn_.last_predicted_ns_ > 0)
            metrics::observe(metrics::Id::CostModelRatio, {},
                             double(mn_.last_measured_ns_) / double(mn_.last_predicted_ns_));
        }
        learn_stages(measured_s);
        mn_.plans_.report(plan, measured_s);  // re-planned when it keeps drifting
        for (ValueId o : g_.outputs()) {
          const Holding& h = held_.at(o);
          Held out;
          if (h.home.empty())
            out.local = h.local;
          else
            out.remote = h.at.at(h.home);
          result.outputs.push_back(std::move(out));
        }
      } catch (const std::exception& e) {
        result.status = GENIE_ERR_INTERNAL;
        result.detail = cat("internal error ending a multi-node graph: ", e.what());
        result.outputs.clear();
      }
    }
    result.exec_ns = static_cast<uint64_t>(seconds_since(t0_) * 1e9);
    // The copies read back, then their charges, go before the result is
    // handed on (the outputs it holds are its own): a client that has its
    // result finds the bytes free.
    held_.clear();
    charges_.clear();
    Done d = std::move(done_);
    d(std::move(result));
  }

  // What one stage took: from its driver's start to its end (its inputs'
  // moves, its run, a worker's round trip), and of that the device's own
  // run of it (the executor's time; a worker's as it reports it).
  struct StageTiming {
    Clock::time_point start;
    double wall_s = -1, run_s = 0;
  };

  // The stages' costs by stage node (the plan's, in the stage graph's node order).
  std::vector<sched::OpCost> stage_costs(const Stage& st) const {
    std::vector<sched::OpCost> c;
    c.reserve(st.nodes.size());
    for (NodeId n : st.nodes) c.push_back(pl_.plan->node_cost.at(static_cast<size_t>(n)));
    return c;
  }

  // A completed run teaches each stage's device what a stage costs there
  // beyond its run and its inputs' moves as planned (the coordinator's time
  // between stages shared among them; for a worker, less the link's modelled
  // share per node, which plans add per node): CostLearner::observe_stage.
  void learn_stages(double measured_s) {
    const sched::Plan& plan = *pl_.plan;
    double walls = 0;
    for (const StageTiming& t : timing_) {
      if (t.wall_s < 0) return;  // a stage unmeasured: teach nothing
      walls += t.wall_s;
    }
    if (timing_.empty()) return;
    const double between = std::max(0.0, measured_s - walls) / static_cast<double>(timing_.size());
    std::vector<int> stage_of(plan.node_device.size(), -1);
    for (size_t k = 0; k < stages_.size(); ++k)
      for (NodeId n : stages_[k].nodes) stage_of.at(static_cast<size_t>(n)) = static_cast<int>(k);
    std::vector<double> moves(stages_.size(), 0);
    for (const sched::Transfer& tr : plan.transfers)
      if (tr.consumer != kNone && stage_of.at(static_cast<size_t>(tr.consumer)) >= 0)
        moves[static_cast<size_t>(stage_of[static_cast<size_t>(tr.consumer)])] += tr.predicted_s;
    for (size_t k = 0; k < stages_.size(); ++k) {
      const Stage& st = stages_[k];
      const size_t d = static_cast<size_t>(st.device);
      const sched::DeviceProfile& dev = pl_.topo.devices.at(d);
      if (!dev.learned) continue;
      double per_node = 0;
      if (!pl_.device_node.at(d).empty())
        for (const sched::LinkProfile& l : pl_.topo.links)
          if (l.to_node == pl_.device_node[d]) per_node = l.dispatch_per_node_s;
      dev.learned->observe_stage(timing_[k].wall_s + between - timing_[k].run_s - moves[k] -
                                 per_node * static_cast<double>(st.nodes.size()));
    }
    if (const auto& coordinator = pl_.topo.devices.at(0).learned)
      coordinator->observe_total(plan.graph_signature, plan.predicted_parts_s, measured_s);
    mn_.save_learned();
  }

  bool is_kv(ValueId v) const {
    const auto& kv = pl_.plan->analysis.value_kv;
    const size_t i = static_cast<size_t>(v);
    return i < kv.size() && kv[i] >= 0;
  }
  // What a transport that carries tags (dpdk) puts on the value's packets.
  dataplane::SemanticTag tag_of(ValueId v) const { return semantic_tag(g_, v, is_kv(v)); }
  std::string role_of(ValueId v) const {
    if (is_kv(v)) return "kv_cache";
    const Value& val = g_.value(v);
    switch (val.kind) {
      case ValueKind::Constant: return "constant";
      case ValueKind::NodeOutput: return "activation";
      case ValueKind::Input: return val.role == TensorRole::Unspecified ? "input" : role_name(val.role);
    }
    return "input";
  }
  // Counts a move of `v` (and traces it: from `t0`, by the transport of
  // `over`, between nodes `from` and `to`; "" is this server).
  void moved(ValueId v, uint64_t bytes, bool direct, RemoteClient& over, const std::string& from,
             const std::string& to, uint64_t t0) {
    mn_.count(role_of(v), bytes, direct);
    if (!trace::on()) return;
    const dataplane::SemanticTag tag = tag_of(v);
    trace::transfer(
        {g_.value(v).name, direct ? "direct (worker to worker)" : over.data_transport(), role_of(v),
         phase_name(Phase(tag.phase)), from.empty() ? "master" : from, to.empty() ? "master" : to, bytes},
        t0, trace::now_ns());
  }

  // The value as a tensor of this server (read from a worker if need be).
  TensorPtr here(ValueId v) {
    Holding& h = held_.at(v);
    if (h.local) return h.local;
    const RemoteTensorPtr& src = h.at.begin()->second;
    // Charged before it is allocated: the worker's tensor, whose dtype
    // and shape the plan checked, copied into this server's memory.
    if (charge_)
      charges_.push_back(charge_(src->nbytes, [&] {
        return cat("graph '", g_.name(), "': value '", g_.value(v).name, "' (", dims(src->dtype, src->shape),
                   ", ", src->nbytes, " bytes) read back from worker ", src->node);
      }));
    // Read whole before anyone sees it: no zeroing.
    auto t = std::make_shared<TensorData>(src->dtype, src->shape, TensorData::Uninitialized{});
    const uint64_t t0 = trace::on() ? trace::now_ns() : 0;
    try {
      src->client->tensor_read(src->id, 0, t->bytes(), t->nbytes(), tag_of(v));
    } catch (const Error& e) {
      if (e.code() != GENIE_ERR_TIMEOUT) throw;
      fail(GENIE_ERR_TIMEOUT, "graph '", g_.name(), "': value '", g_.value(v).name,
           "' was not read back from worker ", src->node, " within ", mn_.stage_timeout_ms_,
           " ms (the stage deadline): ", e.detail());
    }
    moved(v, t->nbytes(), false, *src->client, src->node, "", t0);
    h.local = t;
    return t;
  }

  // The value as a tensor of worker `node`, on its device `device`: moved
  // there from another worker directly when it lives on workers only (the
  // relay through this server is the fallback), else written from this
  // server.
  uint64_t there(ValueId v, const std::string& node, const std::string& device,
                 const std::shared_ptr<RemoteClient>& client) {
    Holding& h = held_.at(v);
    if (auto it = h.at.find(node); it != h.at.end()) return it->second->id;
    if (!h.local) {
      const RemoteTensorPtr& src = h.at.count(h.home) ? h.at.at(h.home) : h.at.begin()->second;
      auto wt =
          std::make_shared<RemoteTensor>(client, node, client->tensor_alloc(src->dtype, src->shape, device),
                                         src->dtype, src->shape, cat(node, "/", device));
      const uint64_t t0 = trace::on() ? trace::now_ns() : 0;
      if (mn_.move_direct(*src, *wt, tag_of(v))) {
        moved(v, wt->nbytes, true, *src->client, src->node, node, t0);
        h.at[node] = wt;
        return wt->id;
      }
      TensorPtr t = here(v);
      const uint64_t t1 = trace::on() ? trace::now_ns() : 0;
      client->tensor_write(wt->id, 0, t->bytes(), t->nbytes(), tag_of(v));
      moved(v, t->nbytes(), false, *client, "", node, t1);
      h.at[node] = wt;
      return wt->id;
    }
    TensorPtr t = here(v);
    const uint64_t id = client->tensor_alloc(t->dtype(), t->shape(), device);
    auto wt =
        std::make_shared<RemoteTensor>(client, node, id, t->dtype(), t->shape(), cat(node, "/", device));
    const uint64_t t0 = trace::on() ? trace::now_ns() : 0;
    client->tensor_write(id, 0, t->bytes(), t->nbytes(), tag_of(v));
    moved(v, t->nbytes(), false, *client, "", node, t0);
    h.at[node] = wt;
    return id;
  }

  // A stage on this server's CPU, on this thread: its outputs and
  // intermediates charged as a graph run here is (server/graphs.cpp), until
  // the graph ends (later stages may read its outputs).
  void local_stage(size_t index, const Stage& st, const StageDone& done) {
    timing_.at(index).start = Clock::now();
    std::vector<TensorPtr> ins;
    for (ValueId v : st.inputs) ins.push_back(here(v));
    if (charge_) {
      const RunMemory need = run_memory(*st.graph);
      charges_.push_back(charge_(need.peak, [&] {
        return cat(need.describe(*st.graph), ", a stage of graph '", g_.name(), "' on master ", mn_.node_id_);
      }));
    }
    auto p = std::make_shared<std::promise<ExecResult>>();
    std::future<ExecResult> f = p->get_future();
    mn_.exec_.run(st.graph, std::move(ins), [p](ExecResult&& r) { p->set_value(std::move(r)); });
    ExecResult r = f.get();
    if (r.status != GENIE_OK) throw Error(r.status, std::move(r.detail));
    // Its nodes teach this server's learner, and its time between nodes
    // is kept under the whole graph's (what plans of it look up).
    learn_from_run(stage_costs(st), r, pl_.topo, nullptr, st.device, &pl_.plan->node_cost, &st.nodes);
    timing_[index].run_s = static_cast<double>(r.exec_ns) * 1e-9;
    timing_[index].wall_s = seconds_since(timing_[index].start);
    for (size_t i = 0; i < st.outputs.size(); ++i) {
      Holding& h = held_[st.outputs[i]];
      h.home.clear();
      h.local = std::move(r.outputs[i]);
    }
    done(GENIE_OK, {});
  }

  // A stage on a worker: its inputs moved there on this thread, then the
  // stage sent; its reply (or its deadline, or the server's stop) goes on
  // on a task thread. No thread waits for it.
  void worker_stage(size_t index, const Stage& st, const StageDone& done) {
    timing_.at(index).start = Clock::now();
    const std::string node = pl_.device_node.at(static_cast<size_t>(st.device));
    std::shared_ptr<RemoteClient> client = mn_.client_of(node);
    check(client != nullptr, GENIE_ERR_CONNECTION, "worker ", node, " left before its part of graph '",
          g_.name(), "' ran");
    const std::string& device = pl_.topo.devices.at(static_cast<size_t>(st.device)).device;
    // The stage deadline bounds its inputs' moves as well as its run: each
    // call to a worker times out by then (its session's timeout is no
    // longer: MultiNode::join), and the moves together end by it.
    const int64_t limit_ms = mn_.stage_timeout_ms_;
    const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(limit_ms);
    std::vector<std::pair<std::string, uint64_t>> bindings;
    for (ValueId v : st.inputs) {
      const std::string& name = g_.value(v).name;
      const auto late = [&] {
        return cat("graph '", g_.name(), "': value '", name, "' was not moved to worker ", node,
                   " for its stage within ", limit_ms, " ms (the stage deadline)");
      };
      check(Clock::now() < deadline, GENIE_ERR_TIMEOUT, late());
      try {
        bindings.emplace_back(name, there(v, node, device, client));
      } catch (const Error& e) {
        if (e.code() != GENIE_ERR_TIMEOUT) throw;
        fail(GENIE_ERR_TIMEOUT, late(), ": ", e.detail());
      }
    }
    const std::string what = cat("graph '", g_.name(), "': its stage for worker ", node);
    // The rest of the stage, on a task thread in the session's order
    // (inline when the pool has stopped taking tasks).
    auto resume = [self = shared_from_this()](std::function<void()> rest) {
      auto shared = std::make_shared<std::function<void()>>(std::move(rest));
      if (!self->post_([shared] { (*shared)(); })) (*shared)();
    };
    StageWaits& waits = mn_.waits_;
    const uint64_t id = waits.add(
        session_, deadline,
        [resume, done, node, name = g_.name(), limit_ms](bool stopping) {
          resume([done, node, name, limit_ms, stopping] {
            if (stopping)
              done(GENIE_ERR_SHUTDOWN,
                   cat("the server stopped while graph '", name, "' waited for worker ", node));
            else
              done(GENIE_ERR_TIMEOUT, cat("worker ", node, " did not finish its stage of graph '", name,
                                          "' within ", limit_ms, " ms (the stage deadline)"));
          });
        },
        what);
    try {
      auto s = client->submit(
          graph_to_json(*st.graph), bindings,
          [&waits, id, resume, done, client, node, index, stage = &st, self = shared_from_this()](RemoteResult&& r) {
            if (!waits.finish(id)) {
              // Past its deadline or the stop: nobody takes its outputs.
              for (const RemoteOutput& o : r.outputs) client->tensor_free(o.tensor_id);
              return;
            }
            auto reply = std::make_shared<RemoteResult>(std::move(r));
            resume([self, index, stage, node, client, reply, done] {
              report(done, [&] { self->worker_replied(index, *stage, node, client, *reply, done); });
            });
          });
      if (s) client->watch(*s);
    } catch (...) {
      waits.finish(id);
      throw;
    }
  }

  // A worker's word is checked against the plan before anything is kept,
  // allocated or forwarded on it: the outputs the stage graph declares,
  // each of its dtype and shape (so of its byte count; reads then check
  // the bytes that come back against it). A mismatch fails the graph and
  // the worker gets no more work.
  void worker_replied(size_t index, const Stage& st, const std::string& node,
                      const std::shared_ptr<RemoteClient>& client, const RemoteResult& r, const StageDone& done) {
    if (r.status != GENIE_OK) throw Error(r.status, cat("on worker ", node, ": ", r.detail));
    std::string lie;
    if (r.outputs.size() != st.outputs.size()) {
      lie = cat("it returned ", r.outputs.size(), " outputs for a stage of ", st.outputs.size());
    } else {
      for (size_t i = 0; i < st.outputs.size() && lie.empty(); ++i) {
        const Value& want = st.graph->value(st.graph->outputs()[i]);
        const RemoteOutput& o = r.outputs[i];
        if (o.dtype != want.dtype || o.shape != want.shape)
          lie = cat("it returned output '", want.name, "' as ", dims(o.dtype, o.shape),
                    ", but the plan makes it ", dims(want.dtype, want.shape));
      }
    }
    if (!lie.empty()) {
      for (const RemoteOutput& o : r.outputs) client->tensor_free(o.tensor_id);
      mn_.drop_unhealthy(node, lie);
      fail(GENIE_ERR_PROTOCOL, "graph '", g_.name(), "': worker ", node, " answered against its plan (", lie,
           "); it is marked unhealthy and gets no more work until it registers again");
    }
    const sched::DeviceProfile& profile = pl_.topo.devices.at(static_cast<size_t>(st.device));
    const std::string& device = profile.device;
    // The worker's time for the stage teaches this master's learner of the
    // worker's device (its nodes' times stay on the worker).
    StageTiming& t = timing_.at(index);
    t.wall_s = seconds_since(t.start);
    t.run_s = static_cast<double>(r.exec_ns) * 1e-9;
    learn_from_stage(stage_costs(st), t.run_s, profile);
    for (size_t i = 0; i < st.outputs.size(); ++i) {
      Holding& h = held_[st.outputs[i]];
      h.home = node;
      const RemoteOutput& o = r.outputs[i];
      h.at[node] = std::make_shared<RemoteTensor>(client, node, o.tensor_id, o.dtype, o.shape,
                                                  cat(node, "/", o.device.empty() ? device : o.device));
    }
    done(GENIE_OK, {});
  }

  MultiNode& mn_;
  const std::shared_ptr<const Graph> gp_;
  const Graph& g_;
  const std::vector<Held> inputs_;
  const std::unordered_map<ValueId, Shape> shapes_;
  const Charge charge_;
  const uint64_t session_;
  const Post post_;
  Done done_;
  const Clock::time_point t0_ = Clock::now();
  Clock::time_point started_;
  Planned pl_;
  std::vector<Stage> stages_;
  std::vector<StageTiming> timing_;  // per stage
  std::unordered_map<ValueId, Holding> held_;
  // The charges of the copies read back from workers and of the stages
  // here: released when the graph ends, after the copies.
  std::vector<std::shared_ptr<void>> charges_;
  Driver local_, worker_;
  std::vector<StageDriver*> drivers_;
};

void MultiNode::run(std::shared_ptr<const Graph> g, std::vector<Held> inputs,
                    std::unordered_map<ValueId, Shape> shapes, Charge charge, uint64_t session, Post post,
                    Done done) {
  auto r = std::make_shared<GraphRun>(*this, std::move(g), std::move(inputs), std::move(shapes),
                                      std::move(charge), session, std::move(post), std::move(done));
  r->start();
}

}  // namespace genie
