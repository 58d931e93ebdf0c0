// A tensor held by a server through one client session (RemoteClient): a
// remote-mode context's tensor on its server, or a tensor a master holds on
// one of its workers on behalf of one of its own sessions (the master's
// session lists it under a session tensor id like its local tensors, and
// forwards what clients do with it to the worker). Every holder shares one
// RemoteTensor; the server frees the tensor when the last holder lets go.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "control/client.hpp"
#include "core/dtype.hpp"
#include "core/shape.hpp"
#include "core/tensor_data.hpp"

namespace genie {

struct RemoteTensor {
  RemoteTensor(std::shared_ptr<RemoteClient> c, std::string server_node, uint64_t tensor_id, DType t, Shape s,
               std::string dev)
      : client(std::move(c)),
        node(std::move(server_node)),
        id(tensor_id),
        dtype(t),
        shape(std::move(s)),
        nbytes(byte_size(shape, dtype_size(dtype))),
        device(std::move(dev)) {}
  ~RemoteTensor() { client->tensor_free(id); }  // never throws, never blocks
  RemoteTensor(const RemoteTensor&) = delete;
  RemoteTensor& operator=(const RemoteTensor&) = delete;

  const std::shared_ptr<RemoteClient> client;  // the session holding it
  const std::string node;                      // the server's node id
  const uint64_t id;                           // tensor id in that session
  const DType dtype;
  const Shape shape;
  const size_t nbytes;
  const std::string device;  // canonical, as genie_tensor_device reports it

  // The tensor's bytes as the completion of the graph that produced it
  // carried them (RemoteOutput::data), so that reading them costs no round
  // trip. Whoever may change the tensor drops them first: a write, a graph
  // binding it. Any thread.
  void set_cached(std::string bytes) {
    auto b = std::make_shared<const std::string>(std::move(bytes));
    std::lock_guard<std::mutex> lk(cache_mu_);
    cached_ = std::move(b);
    has_cache_.store(true, std::memory_order_release);
  }
  void drop_cached() {
    if (!has_cache_.load(std::memory_order_acquire)) return;
    std::lock_guard<std::mutex> lk(cache_mu_);
    cached_.reset();
    has_cache_.store(false, std::memory_order_release);
  }
  // False (dst untouched) when no bytes are cached; the range is checked
  // against nbytes by the caller.
  bool read_cached(size_t offset, void* dst, size_t n) const {
    if (!has_cache_.load(std::memory_order_acquire)) return false;
    std::shared_ptr<const std::string> b;
    {
      std::lock_guard<std::mutex> lk(cache_mu_);
      b = cached_;
    }
    if (!b || b->size() != nbytes) return false;
    std::memcpy(dst, b->data() + offset, n);
    return true;
  }

 private:
  mutable std::mutex cache_mu_;
  std::shared_ptr<const std::string> cached_;
  std::atomic<bool> has_cache_{false};
};

using RemoteTensorPtr = std::shared_ptr<RemoteTensor>;

}  // namespace genie
