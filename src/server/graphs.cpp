// The graph service: submissions (full and delta), their execution here or
// across workers, completions, and server information.
#include <algorithm>

#include "dataplane/transport_bytes.hpp"
#include "exec/run_trace.hpp"
#include "server/impl.hpp"
#include "server/trace_spans.hpp"

namespace genie {

// Whether the loop may issue `g` on the device `where` itself (graph_submit):
// a few nodes, none of whose kernels waits for its queue.
static bool loop_may_issue(const Graph& g, const DeviceRef& where) {
  if (g.nodes().size() > kIssueOnLoopNodes) return false;
  for (const Node& n : g.nodes())
    if (where.backend->kernel_waits(n.op)) return false;
  return true;
}

const std::string& Server::Impl::base_key(const Session& s, const std::string& digest) {
  base_key_.clear();
  append_to(base_key_, s.serial(), "/", digest);
  return base_key_;
}

std::shared_ptr<const std::string> Server::Impl::rebuild(const Session& s, const wire::GraphSubmitDelta& m,
                                                         bool* unknown_base) {
  std::shared_ptr<const std::string> base = bases.find(base_key(s, m.base_hash()));
  if (!base) {
    *unknown_base = true;
    fail(GENIE_ERR_NOT_FOUND, "unknown base graph ", delta::short_hex(m.base_hash()),
         ": this server does not hold it (send the full graph)");
  }
  if (m.patches_size() == 0) {
    if (m.graph_hash() == m.base_hash()) return base;
    *unknown_base = true;
    fail(GENIE_ERR_NOT_FOUND, "graph delta without patches names graph ", delta::short_hex(m.graph_hash()),
         " but base ", delta::short_hex(m.base_hash()), " (send the full graph)");
  }
  std::vector<delta::Patch> patches;
  patches.reserve(m.patches_size());
  for (const wire::LeafPatch& lp : m.patches()) patches.push_back({lp.leaf(), lp.json()});
  auto text = std::make_shared<const std::string>(delta::apply(*base, patches));
  const std::string d = delta::digest(*text);
  if (d != m.graph_hash()) {
    *unknown_base = true;
    fail(GENIE_ERR_NOT_FOUND, "graph delta on base ", delta::short_hex(m.base_hash()), " rebuilt graph ",
         delta::short_hex(d), ", not ", delta::short_hex(m.graph_hash()), " (send the full graph)");
  }
  bases.put(base_key(s, d), text);
  return text;
}

void Server::Impl::graph_submit(const std::shared_ptr<Peer>& p, uint64_t rid, const std::string& json,
                                const Bindings& bindings, const Inlined& inlined, std::function<void()> loaded) {
  check(!stopping, GENIE_ERR_SHUTDOWN, "the server is stopping");
  p->session->settle();
  // Only names and shapes: the reused buffers hold no tensor after this
  // returns.
  std::vector<std::string>& names = submit_names_;
  std::vector<TensorDesc>& descs = submit_descs_;
  names.resize(bindings.size());
  descs.resize(bindings.size());
  std::vector<TensorPtr> tensors;
  tensors.reserve(bindings.size());
  std::vector<RemoteTensorPtr> remote;  // per binding: set when the tensor is on a worker
  for (const wire::Binding& b : bindings) {
    const size_t i = tensors.size();
    names[i] = b.name();
    if (RemoteTensorPtr wt = p->session->find_remote(b.tensor_id())) {
      descs[i].dtype = wt->dtype;
      descs[i].shape = wt->shape;
      tensors.push_back(nullptr);
      remote.resize(bindings.size());
      remote[i] = std::move(wt);
      continue;
    }
    TensorPtr t = p->session->get(b.tensor_id());
    descs[i].dtype = t->dtype();
    descs[i].shape = t->shape();  // into the buffer the last submission left
    tensors.push_back(std::move(t));
  }
  bind_inline(*p, inlined, names, descs, tensors);
  std::shared_ptr<const GraphCache::Entry> cached = graphs.find(json, names, descs);
  if (!cached && json.size() >= kOffLoopParseBytes) {
    parse_off_loop(p, rid, json, std::move(tensors), std::move(remote), std::move(loaded), bindings.size());
    return;
  }
  if (!cached) {
    cached = graphs.load(json, names, descs);
    graphs.put(json, names, descs, cached);
  }
  if (loaded) loaded();
  count_inline(*cached->graph, names, bindings.size(), tensors);
  run_graph(p, rid, cached, tensors, remote, descs);
}

// A submission whose graph is parsed on the parse pool: what it bound, held
// until the parse is done and the graph runs.
struct Server::Impl::Parse {
  std::string json;
  std::vector<std::string> names;
  std::vector<TensorDesc> descs;
  std::vector<TensorPtr> tensors;
  std::vector<RemoteTensorPtr> remote;
  std::function<void()> loaded;
  size_t first_inline = 0;                         // names from here on were given inline
  std::shared_ptr<const GraphCache::Entry> entry;  // once parsed
  std::exception_ptr error;                        // or why not
};

void Server::Impl::parse_off_loop(const std::shared_ptr<Peer>& p, uint64_t rid, const std::string& json,
                                  std::vector<TensorPtr> tensors, std::vector<RemoteTensorPtr> remote,
                                  std::function<void()> loaded, size_t first_inline) {
  // Past the limits it is refused now, before anything is charged, copied
  // or queued (a scan of the text: a millisecond per ten megabytes or so).
  graphs.check_limits(json);
  // Charged for as long as it is parsed, and counted as one of the
  // session's graphs in flight, so that neither a large graph nor many
  // queued ones hold memory no quota sees.
  auto charge = gate.reserve(p->session, json.size() * kParseBytesPerByte, 0,
                             [&] { return cat("parsing a graph of ", json.size(), " bytes of JSON"); });
  auto job = std::make_shared<Parse>();
  job->json = json;
  job->names = submit_names_;
  job->descs = submit_descs_;
  job->tensors = std::move(tensors);
  job->remote = std::move(remote);
  job->loaded = std::move(loaded);
  job->first_inline = first_inline;
  std::weak_ptr<Peer> wp = p;
  std::weak_ptr<Session> ws = p->session;
  ++graphs_in_flight;  // graph_parsed counts it out: stopping waits for the parse
  const bool posted = parses.post(p->session->serial(), [this, job, wp, ws, rid, charge] {
    try {
      job->entry = graphs.load(job->json, job->names, job->descs);
    } catch (...) {
      job->error = std::current_exception();
    }
    charge->release();
    // Cannot fail: stop() keeps the loop running until every graph is done.
    loop.post([this, job, wp, ws, rid] { graph_parsed(wp.lock(), ws.lock(), rid, *job); });
  });
  if (!posted) {
    --graphs_in_flight;
    fail(GENIE_ERR_SHUTDOWN, "the server is stopping");
  }
}

void Server::Impl::graph_parsed(const std::shared_ptr<Peer>& p, const std::shared_ptr<Session>& s,
                                uint64_t rid, Parse& job) {
  --graphs_in_flight;
  // Nobody can learn its outputs once the connection or session is gone.
  if (p && s && !p->closing && p->session == s) {
    try {
      check(!stopping, GENIE_ERR_SHUTDOWN, "the server is stopping");
      if (job.error) std::rethrow_exception(job.error);
      graphs.put(job.json, job.names, job.descs, job.entry);
      if (job.loaded) job.loaded();
      count_inline(*job.entry->graph, job.names, job.first_inline, job.tensors);
      run_graph(p, rid, job.entry, job.tensors, job.remote, job.descs);
    } catch (const Error& e) {
      send_error(*p, rid, e.code(), e.detail());
    } catch (const std::bad_alloc&) {
      send_error(*p, rid, GENIE_ERR_OUT_OF_MEMORY, "out of memory loading the graph");
    } catch (const std::exception& e) {
      send_error(*p, rid, GENIE_ERR_INTERNAL, cat("internal error loading the graph: ", e.what()));
    }
  }
  maybe_finish_stop();
}

void Server::Impl::run_graph(const std::shared_ptr<Peer>& p, uint64_t rid,
                             const std::shared_ptr<const GraphCache::Entry>& cached,
                             std::vector<TensorPtr>& tensors, std::vector<RemoteTensorPtr>& remote,
                             const std::vector<TensorDesc>& descs) {
  const GraphCache::Entry& e = *cached;
  if (metrics::on()) metrics::add(metrics::Id::GraphsSubmitted, {graph_phase_name(*e.graph)});
  const uint64_t num_outputs = e.graph->outputs().size();
  bool bound_on_device = false;
  for (const TensorPtr& t : tensors) bound_on_device |= t && !t->host_accessible();
  if (bound_on_device)
    check(remote.empty() && !(workers && workers->has_workers()), GENIE_ERR_UNSUPPORTED, "graph '",
          e.graph->name(), "' binds tensors on ", node_id,
          "'s devices while it plans across workers: ", "keep them in its host memory");
  if (!remote.empty() || (workers && workers->has_workers())) {
    // The plan checks each device's peak against its budget; here, the
    // session's graphs in flight and tensors.
    auto reservation =
        gate.reserve(p->session, 0, num_outputs, [&] { return cat("graph '", e.graph->name(), "'"); });
    // Planned across this server and its workers, on the task pool.
    auto r = std::make_shared<Resolved>();
    r->entry = cached;
    for (size_t k = 0; k < e.order.size(); ++k) {
      const size_t i = e.order[k];
      r->inputs.push_back(i < remote.size() && remote[i] ? Held{nullptr, remote[i]}
                                                         : Held{tensors[i], nullptr});
      r->shapes[e.graph->inputs()[k]] = descs[i].shape;
    }
    std::weak_ptr<Peer> wp = p;
    std::weak_ptr<Session> ws = p->session;
    ++graphs_in_flight;  // multinode_done counts it out
    // The copies the master reads back from workers for the graph are the
    // session's and the server's bytes until the graph ends.
    MultiNode::Charge charge = [this, ws](uint64_t bytes, const MemoryGate::Describe& what) {
      std::shared_ptr<Session> s = ws.lock();
      check(s != nullptr, GENIE_ERR_CONNECTION, what(), ": its session closed while the graph ran");
      return std::shared_ptr<void>(gate.charge(s, bytes, what));
    };
    // Started on the task pool; its stages on workers hold no thread while
    // they wait (MultiNode::run), what follows them is posted back here.
    const uint64_t key = p->session->serial();
    MultiNode::Post post = [this, key](std::function<void()> task) {
      return tasks.post(key, std::move(task));
    };
    MultiNode::Done done = [this, wp, ws, rid, graph = r->entry->graph, reservation](MultiResult&& m) {
      auto result = std::make_shared<MultiResult>(std::move(m));
      loop.post([this, wp, ws, rid, graph, result, reservation] {
        reservation->release();
        multinode_done(wp.lock(), ws.lock(), rid, graph, *result);
      });
    };
    if (!post([this, r, charge, key, post, done] {
          workers->run(r->entry->graph, r->inputs, r->shapes, charge, key, post, done);
        })) {
      --graphs_in_flight;
      fail(GENIE_ERR_SHUTDOWN, "the server is stopping");
    }
    return;
  }
  std::vector<TensorPtr> inputs;
  inputs.reserve(e.order.size());
  for (size_t i : e.order) inputs.push_back(tensors[i]);
  // Inputs in one device's memory run the graph on that device (host inputs
  // move there), as the client placed them. Inputs on several devices: the
  // scheduler places the graph across them as embedded mode does
  // (exec/local_devices.hpp), on one device or by stages.
  DeviceRef where{};
  bool several = false;
  for (const TensorPtr& t : inputs) {
    if (t->host_accessible()) continue;
    const DeviceRef r = device_ref(*t);
    several |= where.backend != nullptr && !(where == r);
    where = r;
  }
  if (several) {
    where = {};
    std::unordered_map<ValueId, Shape> shapes;
    for (size_t k = 0; k < e.order.size(); ++k) shapes[e.graph->inputs()[k]] = descs[e.order[k]].shape;
    LocalDevices::Placed placed = local->place(*e.graph, shapes, inputs);
    if (placed.device < 0) {
      run_staged(p, rid, cached, std::move(placed), std::move(shapes), std::move(inputs));
      return;
    }
    if (placed.device > 0) where = local->list()[static_cast<size_t>(placed.device)].ref;
  }

  // Nothing runs unless its outputs and intermediates fit the session's
  // quota and the server's budget; they stay reserved until it completes.
  const RunMemory& need = e.memory;
  const auto describe = [&] { return need.describe(*e.graph); };
  if (Executor::is_tiny(*e.graph, inputs)) {
    // Microseconds of work: handing it to a worker and its completion back
    // to this loop would cost more than running it here.
    ExecResult r;
    {
      MemoryGate::Reservation held = gate.hold(p->session, need.peak, num_outputs, describe);
      r = exec.run_inline(e.graph, std::move(inputs), where);
    }
    ++graphs_in_flight;  // graph_done counts it out
    graph_done(p, p->session, rid, e.graph, r);
    return;
  }
  std::weak_ptr<Peer> wp = p;
  std::weak_ptr<Session> ws = p->session;
  auto reservation = gate.reserve(p->session, need.peak, num_outputs, describe);
  // On a device whose kernels only queue work (a CUDA launch), this loop
  // issues a graph of a few nodes itself and only the wait for the device
  // goes to a worker, whose wake-up then overlaps the device's work instead
  // of delaying its start. The loop must never wait for the device itself,
  // so only while no other device graph is in flight (behind queued work a
  // launch can block until the device drains) and when no kernel of the
  // graph waits for its queue. A larger graph is issued on a worker, so
  // that no client's requests wait behind a long issue.
  const bool on_device = where.backend != nullptr;
  const Executor::Issue issue = on_device && device_graphs_in_flight == 0 && loop_may_issue(*e.graph, where)
                                    ? Executor::Issue::Here
                                    : Executor::Issue::OnWorker;
  ++graphs_in_flight;  // before run(): the completion may be posted at once
  if (on_device) ++device_graphs_in_flight;
  try {
    exec.run(
        e.graph, std::move(inputs),
        [this, wp, ws, rid, graph = e.graph, reservation, on_device](ExecResult&& r) {
          auto result = std::make_shared<ExecResult>(std::move(r));
          // Cannot fail: stop() keeps the loop running until every graph is done.
          loop.post([this, wp, ws, rid, graph, result, reservation, on_device] {
            reservation->release();
            if (on_device) --device_graphs_in_flight;
            graph_done(wp.lock(), ws.lock(), rid, graph, *result);
          });
        },
        where, issue);
  } catch (...) {
    --graphs_in_flight;
    if (on_device) --device_graphs_in_flight;
    throw;
  }
}

void Server::Impl::run_staged(const std::shared_ptr<Peer>& p, uint64_t rid,
                              const std::shared_ptr<const GraphCache::Entry>& cached,
                              LocalDevices::Placed placed, std::unordered_map<ValueId, Shape> shapes,
                              std::vector<TensorPtr> inputs) {
  const GraphCache::Entry& e = *cached;
  const RunMemory& need = e.memory;
  auto reservation =
      gate.reserve(p->session, need.peak, e.graph->outputs().size(), [&] { return need.describe(*e.graph); });
  std::weak_ptr<Peer> wp = p;
  std::weak_ptr<Session> ws = p->session;
  // Its stages issue on executor workers; while it runs, the loop issues
  // no device graph itself (see run_graph).
  ++graphs_in_flight;
  ++device_graphs_in_flight;
  try {
    local->run_staged(std::move(placed), e.graph, std::move(shapes), std::move(inputs),
                      [this, wp, ws, rid, graph = e.graph, reservation](ExecResult&& r) {
                        auto result = std::make_shared<ExecResult>(std::move(r));
                        loop.post([this, wp, ws, rid, graph, result, reservation] {
                          reservation->release();
                          --device_graphs_in_flight;
                          graph_done(wp.lock(), ws.lock(), rid, graph, *result);
                        });
                      });
  } catch (...) {
    --graphs_in_flight;
    --device_graphs_in_flight;
    throw;
  }
}

// Stores the outputs in the session and reports them, if the connection that
// submitted the graph is still there; otherwise nobody can learn the outputs'
// ids, so they are dropped at once rather than held until the session ends.
// A graph output held here (TensorPtr) or here or on a worker (Held).
static DType dtype_of(const TensorPtr& t) { return t->dtype(); }
static DType dtype_of(const Held& t) { return t.dtype(); }
static const Shape& shape_of(const TensorPtr& t) { return t->shape(); }
static const Shape& shape_of(const Held& t) { return t.shape(); }
static std::string device_of(const TensorPtr& t) { return served_device_name(*t); }
static std::string device_of(const Held& t) {
  return t.local ? served_device_name(*t.local) : t.remote->device;
}
static const TensorData* here(const TensorPtr& t) { return t.get(); }
static const TensorData* here(const Held& t) { return t.local.get(); }

template <class Result, class Store>
void Server::Impl::report_done(const std::shared_ptr<Peer>& p, const std::shared_ptr<Session>& s,
                               uint64_t rid, const Graph& graph, Result& r, Store store) {
  --graphs_in_flight;
  counters.graphs_executed.fetch_add(1, std::memory_order_relaxed);
  if (metrics::on()) metrics::graph_finished(graph_phase_name(graph), r.status == GENIE_OK, r.exec_ns);
  // The connection that submitted it, while it still serves the session:
  // the control connection, or one of its data connections.
  const bool serves = p && s && !p->closing && p->session == s &&
                      (p->state == Peer::State::Control
                           ? s->control == p.get()
                           : p->state == Peer::State::Data &&
                                 std::find(s->data.begin(), s->data.end(), p.get()) != s->data.end());
  if (serves) {
    try {
      size_t bytes = r.detail.size();
      for (ValueId o : graph.outputs()) bytes += graph.value(o).name.size() + 64;
      const std::vector<uint32_t> wanted = take_wanted_outputs(*p, rid);
      for (uint32_t i : wanted)
        if (i < r.outputs.size() && here(r.outputs[i])) bytes += here(r.outputs[i])->nbytes();
      wire::ReusedMsg<wire::GraphDone> done(bytes);
      wire::GraphDone& d = *done;
      d.set_status(r.status);
      d.set_detail(r.detail);
      d.set_exec_ns(r.exec_ns);
      if (!p->traced.empty() && p->traced.erase(rid) != 0) add_trace_spans(graph, r, d);
      size_t budget = wire::kMaxInlineBytes;
      if (r.status == GENIE_OK) {
        for (size_t i = 0; i < r.outputs.size() && i < graph.outputs().size(); ++i) {
          const auto& t = r.outputs[i];
          wire::OutputTensor* o = d.add_outputs();
          o->set_name(graph.value(graph.outputs()[i]).name);
          o->set_dtype(static_cast<int32_t>(dtype_of(t)));
          for (int64_t dim : shape_of(t)) o->add_shape(dim);
          o->set_device(device_of(t));
          if (std::find(wanted.begin(), wanted.end(), i) != wanted.end()) add_output_data(here(t), *o, &budget);
          o->set_tensor_id(store(t, *s));
        }
      }
      send(*p, MsgType::GraphDone, rid, d);
    } catch (const std::exception& e) {
      log(LogLevel::Error, "server: session ", s->serial(), ": cannot report graph completion: ", e.what());
    }
  } else {
    log(LogLevel::Debug, "server: graph of request ", rid, " finished after its connection was lost");
  }
  maybe_finish_stop();
}

void Server::Impl::graph_done(const std::shared_ptr<Peer>& p, const std::shared_ptr<Session>& s, uint64_t rid,
                              const std::shared_ptr<const Graph>& graph, ExecResult& r) {
  if (observing()) observe_run(*graph, r, "server");
  learn_from(*graph, r);
  report_done(p, s, rid, *graph, r, [](const TensorPtr& t, Session& s) { return s.add(t); });
}

wire::ServerInfo Server::Impl::server_info() const {
  wire::ServerInfo i;
  i.set_node_id(node_id);
  counters.report(i);
  i.set_uptime_ms(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started)
          .count()));
  const MultiNode::Stats c = workers ? workers->stats() : MultiNode::Stats{};
  i.set_workers(c.workers);
  i.set_multinode_graphs(c.multinode_graphs);
  i.set_server_transfer_bytes(c.transfer_bytes);
  i.set_direct_transfer_bytes(c.direct_transfer_bytes);
  for (const auto& [role, bytes] : c.transfer_bytes_by_role)
    (*i.mutable_server_transfer_bytes_by_role())[role] = bytes;
  i.set_plan_cache_hits(c.plan_hits);
  i.set_plan_cache_misses(c.plan_misses);
  i.set_last_plan_predicted_ns(c.last_predicted_ns);
  i.set_last_plan_measured_ns(c.last_measured_ns);
  {
    std::lock_guard<std::mutex> lk(data_mu);
    for (const auto& [transport, n] : data_connections) (*i.mutable_data_connections())[transport] = n;
    for (const auto& [key, n] : tagged_bytes) (*i.mutable_tagged_bytes())[key] = n;
    for (const std::string& t : data_transports_offered) i.add_data_transports(t);
  }
  for (const auto& [key, bytes] : dataplane::transport_byte_totals())
    (*i.mutable_transport_bytes())[key] = bytes;
  return i;
}

void Server::Impl::multinode_done(const std::shared_ptr<Peer>& p, const std::shared_ptr<Session>& s,
                                  uint64_t rid, const std::shared_ptr<const Graph>& graph, MultiResult& r) {
  report_done(p, s, rid, *graph, r,
              [](const Held& t, Session& s) { return t.local ? s.add(t.local) : s.add_remote(t.remote); });
}

}  // namespace genie
