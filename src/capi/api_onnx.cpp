// C API: ONNX import. The graph layer maps the model onto graph IR; here its
// initializers become resident tensors of the context.
#include <cstdlib>
#include <memory>
#include <vector>

#include "capi/handles.hpp"
#include "graph/onnx_import.hpp"

using namespace genie;

extern "C" {

genie_status_t genie_graph_import_onnx(genie_context_t* ctx, const void* model, size_t len, const char* device,
                                       genie_graph_t** out_graph, genie_tensor_t*** out_weights,
                                       size_t* out_num_weights) {
  return guard([&] {
    Context& c = *live(ctx, kContextMagic, "context")->impl;
    check(model != nullptr || len == 0, GENIE_ERR_INVALID_ARGUMENT, "model is NULL");
    check_out(out_graph, "out_graph");
    check_out(out_weights, "out_weights");
    check_out(out_num_weights, "out_num_weights");
    c.check_live();
    OnnxImport imp = import_onnx(model, len);
    // Until the end, the tensors are owned here: a failure releases them all.
    std::vector<std::unique_ptr<genie_tensor>> tensors;
    for (const auto& [name, data] : imp.weights) {
      auto h = std::make_unique<genie_tensor>();
      h->ref = c.alloc(data->dtype(), data->shape(), device, &h->device);
      h->ctx = ctx->impl;
      if (data->nbytes()) h->ref.write(0, data->bytes(), data->nbytes());
      tensors.push_back(std::move(h));
    }
    genie_tensor_t** array = nullptr;
    if (!tensors.empty()) {
      array = static_cast<genie_tensor_t**>(std::malloc(tensors.size() * sizeof(genie_tensor_t*)));
      if (array == nullptr) throw std::bad_alloc();
    }
    auto g = std::make_unique<genie_graph>();
    g->g = std::move(*imp.graph);
    for (size_t i = 0; i < tensors.size(); ++i) array[i] = tensors[i].release();
    *out_graph = g.release();
    *out_weights = array;
    *out_num_weights = tensors.size();
  });
}

}  // extern "C"
