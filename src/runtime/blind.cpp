// Blind mode (Config::semantics false; genie.h, genie_config_set_semantics):
// the context behaves like semantics-blind disaggregation, API remoting in
// the style of rCUDA, so that what the semantics buy can be measured on the
// same workload. Nothing here reads a role, a phase or a layer:
//   - every tensor bound to a submission is host memory (Context::alloc
//     keeps "remote" tensors here), so weights and KV caches are uploaded
//     with every submission that binds them;
//   - each operation is one remote call (a graph of one node, split from
//     the submitted graph by split_stages), waited for before the next, sent
//     in full (no graph deltas, no plan);
//   - the values between operations stay on the server until the
//     submission ends (as device pointers do under API remoting), and the
//     graph's outputs are downloaded and freed there.
#include <chrono>
#include <cstring>
#include <condition_variable>
#include <mutex>
#include <unordered_map>

#include "control/client.hpp"
#include "core/error.hpp"
#include "graph/binding.hpp"
#include "graph/split.hpp"
#include "runtime/context.hpp"

namespace genie {

namespace {

// One remote call: submits `json` and waits for its completion (reading the
// direct link on this thread when the submission went there).
RemoteResult call_graph(RemoteClient& client, const std::string& json,
                        std::vector<std::pair<std::string, uint64_t>> bindings, int64_t timeout_ms) {
  struct Wait {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    RemoteResult r;
  };
  auto w = std::make_shared<Wait>();
  std::shared_ptr<RemoteClient::Submission> direct =
      client.submit(json, std::move(bindings), [w](RemoteResult&& r) {
        {
          std::lock_guard<std::mutex> lk(w->mu);
          w->r = std::move(r);
          w->done = true;
        }
        w->cv.notify_all();
      });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  if (direct) client.collect(*direct, deadline);
  std::unique_lock<std::mutex> lk(w->mu);
  if (!w->cv.wait_until(lk, deadline, [&] { return w->done; })) {
    lk.unlock();
    if (direct) client.watch(*direct);
    fail(GENIE_ERR_TIMEOUT, "blind mode: an operation did not complete within ", timeout_ms, " ms");
  }
  return std::move(w->r);
}

}  // namespace

FutureResult Context::run_blind(const Graph& graph, const std::vector<TensorRef>& tensors,
                                const std::vector<size_t>& order, const std::unordered_map<ValueId, Shape>& shapes) {
  RemoteClient& client = *client_;
  const std::string& device = client.server_devices().at(0);
  // One stage per node: consecutive nodes never share a device.
  const std::vector<NodeId>& topo = graph.topo_order();
  std::vector<int> node_device(graph.nodes().size(), 0);
  for (size_t i = 0; i < topo.size(); ++i) node_device[static_cast<size_t>(topo[i])] = static_cast<int>(i % 2);
  const std::vector<Stage> stages = split_stages(graph, node_device, topo, &shapes);

  // How many later reads each value has, so the server frees it after its
  // last; graph outputs are kept to the end.
  std::unordered_map<ValueId, size_t> reads;
  for (const Stage& s : stages)
    for (ValueId v : s.inputs) ++reads[v];
  const std::unordered_map<ValueId, size_t> op_reads = reads;  // by operations only
  for (ValueId v : graph.outputs()) ++reads[v];

  std::unordered_map<ValueId, RemoteTensorPtr> on_server;
  std::unordered_map<ValueId, TensorPtr> on_client;  // graph inputs, as bound
  // Every bound tensor travels with the submission, whatever it is.
  for (size_t k = 0; k < order.size(); ++k) {
    const ValueId v = graph.inputs()[k];
    const TensorRef& t = tensors[order[k]];
    if (t.is_remote()) {
      on_server[v] = t.remote();
      continue;
    }
    on_client[v] = t.local();
    if (!op_reads.contains(v)) continue;  // read by no operation
    const uint64_t id = client.tensor_alloc(t.dtype(), t.shape(), device);
    auto rt = std::make_shared<RemoteTensor>(client_, client.server_node_id(), id, t.dtype(), t.shape(), device);
    client.tensor_write(id, 0, t.local()->bytes(), t.nbytes());
    on_server[v] = std::move(rt);
  }

  FutureResult fr;
  for (const Stage& s : stages) {
    std::vector<std::pair<std::string, uint64_t>> bindings;
    for (ValueId v : s.inputs) {
      auto it = on_server.find(v);
      check(it != on_server.end(), GENIE_ERR_INTERNAL, "blind mode: value '", graph.value(v).name,
            "' is not on the server");
      bindings.emplace_back(graph.value(v).name, it->second->id);
    }
    RemoteResult r = call_graph(client, graph_to_json(*s.graph), std::move(bindings), cfg_.timeout_ms);
    if (r.status != GENIE_OK) {
      fr.status = r.status;
      fr.detail = std::move(r.detail);
      return fr;
    }
    check(r.outputs.size() == s.outputs.size(), GENIE_ERR_PROTOCOL, "the server reported ", r.outputs.size(),
          " outputs for an operation with ", s.outputs.size());
    fr.exec_ns += r.exec_ns;
    for (size_t i = 0; i < s.outputs.size(); ++i) {
      RemoteOutput& o = r.outputs[i];
      on_server[s.outputs[i]] = std::make_shared<RemoteTensor>(client_, client.server_node_id(), o.tensor_id,
                                                               o.dtype, std::move(o.shape), o.device);
    }
    for (ValueId v : s.inputs)
      if (--reads[v] == 0) on_server.erase(v);  // freed on the server with the next request
  }
  // Every output comes back to this process.
  for (ValueId v : graph.outputs()) {
    if (auto it = on_client.find(v); it != on_client.end()) {
      auto copy = std::make_shared<TensorData>(it->second->dtype(), it->second->shape());
      std::memcpy(copy->bytes(), it->second->bytes(), copy->nbytes());
      fr.outputs.emplace_back(std::move(copy));
      continue;
    }
    const RemoteTensorPtr& rt = on_server.at(v);
    auto out = std::make_shared<TensorData>(rt->dtype, rt->shape);
    client.tensor_read(rt->id, 0, out->bytes(), out->nbytes());
    fr.outputs.emplace_back(std::move(out));
  }
  return fr;
}

std::shared_ptr<FutureState> Context::submit_blind(const Graph& graph, const std::vector<TensorRef>& tensors,
                                                   const std::vector<TensorDesc>& descs,
                                                   const std::vector<size_t>& order) {
  std::unordered_map<ValueId, Shape> shapes = input_shapes(graph, descs, order);
  auto snapshot = std::make_shared<Graph>(graph);
  snapshot->validate(&shapes);
  auto state = std::make_shared<FutureState>(shared_from_this(), snapshot);
  {
    // Counted as in flight, so shutdown waits for it before closing the client.
    std::lock_guard<std::mutex> il(inflight_mu_);
    check_live();
    ++inflight_;
  }
  FutureResult fr;
  try {
    fr = run_blind(*snapshot, tensors, order, shapes);
  } catch (const Error& e) {
    fr = FutureResult{};
    fr.status = e.code();
    fr.detail = e.detail();
  } catch (const std::bad_alloc&) {
    fr = FutureResult{};
    fr.status = GENIE_ERR_OUT_OF_MEMORY;
    fr.detail = "blind mode: out of memory";
  } catch (const std::exception& e) {
    fr = FutureResult{};
    fr.status = GENIE_ERR_INTERNAL;
    fr.detail = cat("blind mode: ", e.what());
  }
  state->complete(std::move(fr));
  remote_graph_done();
  return state;
}

}  // namespace genie
