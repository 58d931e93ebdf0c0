// Tensor writes and reads by remote memory access where the data
// connection's transport has it (ucx; docs/ucx.md): the caller's buffer is
// registered with that transport and its descriptor sent in a
// TensorRmaWrite/TensorRmaRead; the server moves the bytes itself and
// answers. Small transfers, transports without RMA, channels whose RMA the
// transport would only emulate through the server's CPU
// (Channel::rma_emulated), and tensors the server does not hold itself (it
// answers UNSUPPORTED) take the framed path.
#pragma once

#include <cstddef>
#include <cstdint>

#include "control/client/impl.hpp"

namespace genie {

// Below this size a framed payload is as fast and needs no registration.
constexpr size_t kRmaMinBytes = 64 << 10;

// RemoteClient::Impl::rma_transfer (impl.hpp): true when the bytes moved
// by RMA, false to use the framed path instead. Throws the server's error (a
// refused range, say) like transact.

}  // namespace genie
