// A tensor held by a server through one client session (RemoteClient): a
// remote-mode context's tensor on its server, or a tensor a master holds on
// one of its workers on behalf of one of its own sessions (the master's
// session lists it under a session tensor id like its local tensors, and
// forwards what clients do with it to the worker). Every holder shares one
// RemoteTensor; the server frees the tensor when the last holder lets go.
#pragma once

#include <cstdint>
#include <memory>
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
};

using RemoteTensorPtr = std::shared_ptr<RemoteTensor>;

}  // namespace genie
