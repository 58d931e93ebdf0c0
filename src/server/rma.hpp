// Tensor bytes by remote memory access (TensorRmaWrite / TensorRmaRead,
// proto/genie.proto): on a data connection whose transport has RMA, the
// client sends the descriptor of a buffer it registered, and the server
// moves the bytes between that buffer and the tensor itself (a get for a
// write, a put for a read) over the session's channel. The tensor's own
// registration is cached per tensor buffer. The server hands out no keys to
// its memory: nothing a peer claims reaches it.
#pragma once

#include <string>

#include "dataplane/transport.hpp"
#include "server/impl.hpp"

namespace genie {

// The client's region as the request names it, checked: it decodes, it
// belongs to `transport` (the connection's), and `nbytes` fit in it. Throws Error(INVALID_ARGUMENT) naming
// what is wrong.
dataplane::MemoryDescriptor check_rma_region(const std::string& encoded, const std::string& transport,
                                             uint64_t nbytes);

// TensorAlloc.local_grant: grants the client on the other end of `peer`
// (the connection's "host:port") one-sided access to `tensor`'s bytes
// (reply->grant: this process, the address, the length) when that host is
// a loopback address and the tensor is host memory of this server; leaves
// the reply without a grant otherwise. What the grant lets a client do, and
// what it does not: docs/ucx.md, "One-sided transfers between local
// processes".
void grant_local(const std::string& peer, const TensorData& tensor, wire::TensorAllocReply* reply);

// Server::Impl::tensor_rma (impl.hpp) serves one request on the loop
// thread; its errors become the ErrorReply.

}  // namespace genie
