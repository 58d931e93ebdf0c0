// A UCX channel the calling thread drives (dataplane/blocking.hpp): a
// ucp_worker and one endpoint of its own, progressed by whichever thread
// holds the channel, with no event loop. Frames are the active messages of
// a loop channel (channel.hpp): the frame header and message, then the
// payload (by rendezvous from kRndvBytes on, into the caller's buffer), so
// the listener sees an ordinary Endpoint.
//
// Waiting: progress the worker while polling briefly (the host's spin
// rule, TransportHost::spin), then arm the worker (ucp_worker_arm) and
// sleep in poll() on its event fd and on an eventfd of ours that
// interrupt() writes, until the deadline.
#pragma once

#include <sys/socket.h>

#include <memory>
#include <string>

#include "dataplane/blocking.hpp"
#include "dataplane/ucx/worker.hpp"

namespace genie::dataplane::ucx {

// Connects to the listener at `addr` and waits for its welcome. Throws
// Error(CONNECTION) naming `peer` and the reason (or the deadline).
std::unique_ptr<BlockingChannel> connect_blocking(std::shared_ptr<Context> ctx, const struct sockaddr* addr,
                                                  socklen_t len, std::string peer, uint32_t max_message,
                                                  Deadline deadline);

}  // namespace genie::dataplane::ucx
