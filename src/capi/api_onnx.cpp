// C API: ONNX import. The graph layer maps the model onto graph IR; here its
// initializers become resident tensors of the context.
#include <cstdlib>
#include <memory>
#include <vector>

#include "capi/handles.hpp"
#include "frontend/onnx/import.hpp"

using namespace genie;

extern "C" {

genie_status_t genie_graph_import_onnx(genie_context_t* ctx, const void* model, size_t len, const char* device,
                                       genie_graph_t** out_graph, genie_tensor_t*** out_weights,
                                       size_t* out_num_weights) {
  return guard([&] {
    Context& c = *live<ContextObj>(ctx)->impl;
    check(model != nullptr || len == 0, GENIE_ERR_INVALID_ARGUMENT, "model is NULL");
    check_out(out_graph, "out_graph");
    check_out(out_weights, "out_weights");
    check_out(out_num_weights, "out_num_weights");
    c.check_live();
    OnnxImport imp = import_onnx(model, len);
    // Until the end, the tensors are owned here: a failure releases them all.
    std::vector<std::unique_ptr<TensorObj>> tensors;
    for (const auto& [name, data] : imp.weights) {
      auto h = std::make_unique<TensorObj>();
      h->ref = c.alloc(data->dtype(), data->shape(), device, &h->device);
      h->ctx = c.shared_from_this();
      h->ref.set_semantics({Phase::Unknown, TensorRole::Weight, -1});
      if (data->nbytes()) h->ref.write(0, data->bytes(), data->nbytes());
      tensors.push_back(std::move(h));
    }
    std::unique_ptr<genie_tensor_t*, decltype(&std::free)> array(nullptr, &std::free);
    if (!tensors.empty()) {
      array.reset(static_cast<genie_tensor_t**>(std::malloc(tensors.size() * sizeof(genie_tensor_t*))));
      if (!array) throw std::bad_alloc();
    }
    auto g = std::make_unique<GraphObj>();
    g->g = std::move(*imp.graph);
    // Published last, so that nothing can fail after the first handle is out.
    size_t published = 0;
    try {
      for (; published < tensors.size(); ++published) array.get()[published] = publish(std::move(tensors[published]));
      *out_graph = publish(std::move(g));
    } catch (...) {
      for (size_t i = 0; i < published; ++i) retire<TensorObj>(array.get()[i]);
      throw;
    }
    *out_weights = array.release();
    *out_num_weights = tensors.size();
  });
}

}  // extern "C"
