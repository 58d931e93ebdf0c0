// One-sided tensor transfers between processes on one host: a server that
// a client reaches on a loopback address grants it the bytes of each host
// tensor it allocates (TensorAlloc.local_grant -> TensorAllocReply.grant:
// the server's pid, the tensor's address and length), and the client's
// writes and reads of it copy straight between its buffer and the tensor
// with one process_vm_writev / process_vm_readv: no message, no wake-up of
// the server, one copy made by the kernel, which checks the access (the
// same user, ptrace allowed).
//
// Why: NIXL's figures (one one-sided put or get of UCX's cma transport),
// where every two-sided exchange costs at least a request and a reply
// through the server's event loop, several times a small transfer's copy
// (docs/ucx.md, "Where the time of a small call goes"), and a large one
// needs the server's CPU as well as the caller's. UCX 1.13, the one Genie
// links, wires no RMA lane between local processes with peer-failure
// handling (its put and get are emulated through the peer's CPU), so the
// one-sided copy is made here with the system calls UCX's cma transport
// makes. Measured faster than the server-driven paths at every size here
// (docs/benchmarks.md, "Genie beside NIXL and Mooncake Transfer Engine").
//
// When: the data transport is ucx (GENIE_BACKEND=ucx / rdma between local
// processes), Config::local_rma and Config::direct_calls are on, the
// master address is a loopback one, and the tensor was granted by the
// process that listens on the address and port the client connected to
// (checked once per session establishment: /proc/net/tcp and
// /proc/PID/fd), in the same session establishment (link_epoch). A grant ends with genie_tensor_destroy
// (before the free is sent) and with any reconnection. The first refused
// copy (another user, ptrace denied, another pid namespace) turns the path
// off for the client, with one log line saying why: every transfer then
// goes through the server as before.
//
// What the server gives away: a client on its host that may already read
// and write its memory (the kernel's check) learns where its own tensors
// are. A client the kernel refuses gains nothing; a remote client is never
// granted anything. The server does not see one-sided bytes: they are not
// counted in its tagged_bytes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "control/client/direct.hpp"

namespace genie {

struct LocalGrants {
  struct Grant {
    uint64_t pid = 0;
    uint64_t address = 0;
    uint64_t length = 0;
    uint64_t epoch = 0;  // the session establishment it was granted in
  };
  std::mutex mu;  // a leaf
  std::unordered_map<uint64_t, Grant> by_tensor;
  // The server process checked (check_listener) in session establishment
  // `checked_epoch`.
  uint64_t checked_pid = 0;
  uint64_t checked_epoch = 0;
  // Set once a check or a copy failed: the path is off for this client.
  bool off = false;
  std::atomic<uint64_t> calls{0};  // transfers made one-sided
};

// Whether process `pid` holds a TCP socket listening on `host` (an address,
// or "localhost"; a socket bound to its family's wildcard counts) and
// `port`, in this network namespace: "" if so, else why not.
std::string check_listener(uint64_t pid, const std::string& host, int port);

}  // namespace genie
