// A tensor a master holds on one of its workers, on behalf of one of its
// own sessions: the master's session lists it under a session tensor id like
// its local tensors, and forwards what clients do with it to the worker.
// The worker frees it when the last holder lets go.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "control/client.hpp"
#include "core/dtype.hpp"
#include "core/shape.hpp"
#include "core/tensor_data.hpp"

namespace genie {

struct WorkerTensor {
  WorkerTensor(std::shared_ptr<RemoteClient> c, std::string worker, uint64_t tensor_id, DType t, Shape s)
      : client(std::move(c)),
        node(std::move(worker)),
        id(tensor_id),
        dtype(t),
        shape(std::move(s)),
        nbytes(byte_size(shape, dtype_size(dtype))) {}
  ~WorkerTensor() { client->tensor_free(id); }  // never throws, never blocks
  WorkerTensor(const WorkerTensor&) = delete;
  WorkerTensor& operator=(const WorkerTensor&) = delete;

  const std::shared_ptr<RemoteClient> client;  // the master's session on the worker
  const std::string node;                      // the worker's node id
  const uint64_t id;                           // tensor id in that session
  const DType dtype;
  const Shape shape;
  const size_t nbytes;
};

using WorkerTensorPtr = std::shared_ptr<WorkerTensor>;

}  // namespace genie
