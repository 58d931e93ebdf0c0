// C API: graph submission and futures.
#include "capi/handles.hpp"

using namespace genie;

namespace {

FutureObj* F(const genie_future_t* f) { return live<FutureObj>(f); }

genie_tensor_t* new_tensor_handle(const std::shared_ptr<FutureState>& st, TensorRef ref) {
  auto h = std::make_unique<TensorObj>();
  h->ctx = st->ctx();
  h->device = ref.is_remote() ? ref.remote()->device : ref.local()->device().str();
  h->ref = std::move(ref);
  return publish(std::move(h));
}

}  // namespace

extern "C" {

genie_status_t genie_graph_submit(genie_context_t* ctx, const genie_graph_t* graph,
                                  const char* const* input_names, genie_tensor_t* const* inputs,
                                  size_t n_inputs, genie_future_t** out) {
  return guard([&] {
    Context& c = *live<ContextObj>(ctx)->impl;
    GraphObj* gh = live<GraphObj>(graph);
    const Graph& g = gh->g;
    check_out(out, "out");
    std::vector<std::string> names;
    std::vector<TensorRef> tensors;
    collect_bindings(c, input_names, inputs, n_inputs, &names, &tensors);
    c.check_live();
    auto h = std::make_unique<FutureObj>();
    h->state = c.submit(g, names, tensors, &gh->memo, gh->version.load(std::memory_order_relaxed));
    *out = publish(std::move(h));
  });
}

void genie_future_destroy(genie_future_t* future) {
  FutureObj* f = find<FutureObj>(future);
  if (f == nullptr) return;
  // Detach while the handle is still live: a callback running right now
  // (detach waits for it) may still call genie_future_output on it.
  f->state->detach();
  retire<FutureObj>(future);
}

genie_status_t genie_future_wait(genie_future_t* future, int64_t timeout_ms) {
  genie_status_t s = GENIE_OK;
  const genie_status_t g = guard([&] { s = F(future)->state->wait(timeout_ms); });
  return g != GENIE_OK ? g : s;
}

genie_status_t genie_future_poll(const genie_future_t* future) {
  genie_status_t s = GENIE_OK;
  const genie_status_t g = guard([&] { s = F(future)->state->poll(); });
  return g != GENIE_OK ? g : s;
}

genie_status_t genie_future_set_callback(genie_future_t* future, genie_future_callback_t cb,
                                         void* user_data) {
  return guard([&] { F(future)->state->set_callback(cb, user_data, future); });
}

genie_status_t genie_future_num_outputs(const genie_future_t* future, size_t* out) {
  return guard([&] {
    const FutureObj* f = F(future);
    check_out(out, "out");
    *out = f->state->num_outputs();
  });
}

genie_status_t genie_future_output(genie_future_t* future, size_t index, genie_tensor_t** out) {
  return guard([&] {
    FutureObj* f = F(future);
    check_out(out, "out");
    TensorRef t = f->state->output(index);
    *out = new_tensor_handle(f->state, std::move(t));
  });
}

genie_status_t genie_future_output_by_name(genie_future_t* future, const char* name, genie_tensor_t** out) {
  return guard([&] {
    FutureObj* f = F(future);
    check_out(out, "out");
    check(name != nullptr, GENIE_ERR_INVALID_ARGUMENT, "name is NULL");
    TensorRef t = f->state->output(std::string(name));
    *out = new_tensor_handle(f->state, std::move(t));
  });
}

genie_status_t genie_future_exec_ns(const genie_future_t* future, uint64_t* out) {
  return guard([&] {
    const FutureObj* f = F(future);
    check_out(out, "out");
    *out = f->state->exec_ns();
  });
}

}  // extern "C"
