// The objects behind the opaque C handles, and the boundary guard that turns
// exceptions into a status plus the thread-local detail message.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <new>
#include <string>

#include "runtime/context.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "genie.h"
#include "graph/graph.hpp"

namespace genie {

// Every handle starts with a magic word naming its kind, so a handle of the
// wrong kind (or one already destroyed and poisoned) is refused, not used.
enum : uint32_t {
  kConfigMagic = 0x47434647,  // "GCFG"
  kContextMagic = 0x47435458,
  kTensorMagic = 0x4754534e,
  kGraphMagic = 0x47475248,
  kFutureMagic = 0x47465554,
  kDeadMagic = 0xdeadbeef,
};

// Records the detail message genie_last_error() returns on this thread.
void set_last_error(const std::string& detail);

// Runs f; returns GENIE_OK, or the status of what it threw (recording the
// detail). Nothing escapes.
template <class F>
genie_status_t guard(F&& f) noexcept {
  try {
    f();
    return GENIE_OK;
  } catch (const Error& e) {
    set_last_error(e.detail());
    return e.code();
  } catch (const std::bad_alloc&) {
    set_last_error("out of memory");
    return GENIE_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_last_error(std::string("internal error: ") + e.what());
    return GENIE_ERR_INTERNAL;
  } catch (...) {
    set_last_error("internal error: unknown exception");
    return GENIE_ERR_INTERNAL;
  }
}

// Returns h if it is a live handle of the given kind, else throws
// Error(INVALID_HANDLE) naming `what`.
template <class H>
H* live(H* h, uint32_t magic, const char* what) {
  check(h != nullptr, GENIE_ERR_INVALID_HANDLE, what, " is NULL");
  check(h->magic == magic, GENIE_ERR_INVALID_HANDLE, what, " is not a live ", what, " handle");
  return h;
}

inline void check_out(const void* out, const char* name) {
  check(out != nullptr, GENIE_ERR_INVALID_ARGUMENT, name, " is NULL");
}

}  // namespace genie

struct genie_config {
  uint32_t magic = genie::kConfigMagic;
  genie::Config cfg;
};

struct genie_context {
  uint32_t magic = genie::kContextMagic;
  std::shared_ptr<genie::Context> impl;
};

struct genie_tensor {
  uint32_t magic = genie::kTensorMagic;
  std::shared_ptr<genie::Context> ctx;
  genie::TensorRef ref;  // host memory or a server tensor, shared by handles of the same tensor
  std::string device;    // canonical device string
};

struct genie_graph {
  uint32_t magic = genie::kGraphMagic;
  genie::Graph g;
  // Bumped by every call that may change g (they all reach g through the
  // mutable accessor in api_graph.cpp), so that submissions reuse what they
  // derived from g (memo) only while g is unchanged.
  std::atomic<uint64_t> version{0};
  genie::SubmitMemo memo;
};

struct genie_future {
  uint32_t magic = genie::kFutureMagic;
  std::shared_ptr<genie::FutureState> state;
};

namespace genie {

// The tensors a caller binds to a graph's inputs (genie_graph_submit,
// genie_plan_explain_bound): checks the arrays and that every tensor is live
// and belongs to `ctx`; fills `names` and `tensors` in the caller's order.
inline void collect_bindings(const Context& ctx, const char* const* input_names, genie_tensor_t* const* inputs,
                             size_t n_inputs, std::vector<std::string>* names, std::vector<TensorRef>* tensors) {
  check(n_inputs == 0 || (input_names != nullptr && inputs != nullptr), GENIE_ERR_INVALID_ARGUMENT,
        "input_names or inputs is NULL with n_inputs ", n_inputs);
  for (size_t i = 0; i < n_inputs; ++i) {
    check(input_names[i] != nullptr, GENIE_ERR_INVALID_ARGUMENT, "input_names[", i, "] is NULL");
    genie_tensor* t = live(inputs[i], kTensorMagic, "tensor");
    check(t->ctx.get() == &ctx, GENIE_ERR_INVALID_ARGUMENT, "tensor bound to '", input_names[i],
          "' belongs to another context");
    names->emplace_back(input_names[i]);
    tensors->push_back(t->ref);
  }
}

}  // namespace genie
