// The objects behind the opaque C handles, and the boundary guard that turns
// exceptions into a status plus the thread-local detail message.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <new>
#include <string>

#include "capi/handle_table.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "genie.h"
#include "graph/graph.hpp"
#include "runtime/context.hpp"

namespace genie {

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

// The objects behind the handles. Each names its C handle type, its kind
// and the word error messages use for it.
struct ConfigObj {
  using Handle = genie_config_t;
  static constexpr HandleKind kKind = HandleKind::Config;
  static constexpr const char* kName = "config";
  Config cfg;
};

// A server's own settings (genie_server_config_t): the Server-side fields of
// a Config (config_settings.def); the others stay at their defaults.
struct ServerConfigObj {
  using Handle = genie_server_config_t;
  static constexpr HandleKind kKind = HandleKind::ServerConfig;
  static constexpr const char* kName = "server config";
  Config cfg;
};

struct ContextObj {
  using Handle = genie_context_t;
  static constexpr HandleKind kKind = HandleKind::Context;
  static constexpr const char* kName = "context";
  std::shared_ptr<Context> impl;
  std::atomic<bool> closing{false};  // genie_shutdown has begun
};

struct TensorObj {
  using Handle = genie_tensor_t;
  static constexpr HandleKind kKind = HandleKind::Tensor;
  static constexpr const char* kName = "tensor";
  std::shared_ptr<Context> ctx;
  TensorRef ref;       // host memory or a server tensor, shared by handles of the same tensor
  std::string device;  // canonical device string
};

struct GraphObj {
  using Handle = genie_graph_t;
  static constexpr HandleKind kKind = HandleKind::Graph;
  static constexpr const char* kName = "graph";
  Graph g;
  // Bumped by every call that may change g (they all reach g through the
  // mutable accessor in api_graph.cpp), so that submissions reuse what they
  // derived from g (memo) only while g is unchanged.
  std::atomic<uint64_t> version{0};
  SubmitMemo memo;
};

struct FutureObj {
  using Handle = genie_future_t;
  static constexpr HandleKind kKind = HandleKind::Future;
  static constexpr const char* kName = "future";
  std::shared_ptr<FutureState> state;
};

template <class T>
using TableOf = HandleTable<T, T::kKind>;

inline uint64_t handle_value(const void* h) { return reinterpret_cast<uintptr_t>(h); }

// Hands `obj` to its table and returns the new handle.
template <class T>
typename T::Handle* publish(std::unique_ptr<T> obj) {
  return reinterpret_cast<typename T::Handle*>(
      static_cast<uintptr_t>(TableOf<T>::instance().insert(std::move(obj))));
}

// The object of live handle `h`, or null (NULL, another kind, destroyed).
template <class T>
T* find(const typename T::Handle* h) noexcept {
  return TableOf<T>::instance().find(handle_value(h));
}

// The object of live handle `h`; else throws Error(INVALID_HANDLE) saying
// whether it is NULL, destroyed or not a handle of this kind.
template <class T>
T* live(const typename T::Handle* h) {
  check(h != nullptr, GENIE_ERR_INVALID_HANDLE, T::kName, " is NULL");
  T* obj = find<T>(h);
  if (obj == nullptr) {
    if (TableOf<T>::is_kind(handle_value(h)))
      fail(GENIE_ERR_INVALID_HANDLE, T::kName, " handle is not live (already destroyed)");
    fail(GENIE_ERR_INVALID_HANDLE, "not a ", T::kName, " handle");
  }
  return obj;
}

// Takes the object of `h` out of its table (its handle is dead from now
// on); null for NULL or a handle that is not live, which destroy ignores.
template <class T>
std::unique_ptr<T> retire(const typename T::Handle* h) noexcept {
  return TableOf<T>::instance().remove(handle_value(h));
}

inline void check_out(const void* out, const char* name) {
  check(out != nullptr, GENIE_ERR_INVALID_ARGUMENT, name, " is NULL");
}

}  // namespace genie

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
    const TensorObj* t = live<TensorObj>(inputs[i]);
    check(t->ctx.get() == &ctx, GENIE_ERR_INVALID_ARGUMENT, "tensor bound to '", input_names[i],
          "' belongs to another context");
    names->emplace_back(input_names[i]);
    tensors->push_back(t->ref);
  }
}

}  // namespace genie
