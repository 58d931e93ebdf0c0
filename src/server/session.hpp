// One client session of `genie serve`: its token and its tensors, with the
// server-wide counters kept in step. Loop thread only, except the counters.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "control/remote_tensor.hpp"
#include "control/uv_timer.hpp"
#include "core/tensor_data.hpp"
#include "genie.h"
#include "server/quota.hpp"

namespace genie {

// Server-wide figures, read by Server::stats() from any thread. Each is a
// field of the same name in wire::ServerInfo (proto/genie.proto): adding one
// means adding it there and to this list, and counting it where it happens.
#define GENIE_SERVER_COUNTERS(X)                                                                         \
  X(sessions)                                                                                            \
  X(tensors)                                                                                             \
  X(tensor_bytes) X(graphs_executed) X(connections_refused) X(graph_submits_full) X(graph_submits_delta) \
      X(graph_submit_bytes) X(graph_delta_unknown_base) X(peer_fetch_bytes) X(peer_export_bytes)

struct ServerCounters {
#define GENIE_COUNTER(name) std::atomic<uint64_t> name{0};
  GENIE_SERVER_COUNTERS(GENIE_COUNTER)
#undef GENIE_COUNTER

  // Copies every counter into `info` (a wire::ServerInfo).
  template <class Info>
  void report(Info& info) const {
#define GENIE_COUNTER(name) info.set_##name(name.load(std::memory_order_relaxed));
    GENIE_SERVER_COUNTERS(GENIE_COUNTER)
#undef GENIE_COUNTER
  }
};

struct Peer;

class Session {
 public:
  Session(uint64_t serial, std::string token, std::string client_node, ServerCounters& counters)
      : serial_(serial),
        token_(std::move(token)),
        client_node_(std::move(client_node)),
        counters_(counters) {}
  // Frees every tensor still held.
  ~Session() { clear(); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Ids are per session, from 1, never reused within the session.
  uint64_t add(TensorPtr t);
  // nullptr when this session has no tensor `id`.
  TensorPtr find(uint64_t id) const;
  // Throws Error(NOT_FOUND) "no tensor N in this session".
  TensorPtr get(uint64_t id) const;
  // A tensor held on a worker (master only); its id comes from the same
  // sequence. Not counted in the server's tensors and tensor_bytes (the
  // worker holds the bytes).
  uint64_t add_remote(RemoteTensorPtr t);
  // nullptr when `id` is not a worker tensor of this session.
  RemoteTensorPtr find_remote(uint64_t id) const;
  // False when there was no such tensor (local or on a worker). A tensor
  // that a read in flight still holds (read_begins) stays counted here and
  // in the server's tensor bytes until the read lets go of it and settle()
  // runs: its memory is still taken.
  bool erase(uint64_t id);
  // Stops counting the freed tensors nobody holds any more.
  void settle();
  // A read reply holding tensor `t` of this session was queued, and has
  // been sent (or dropped). Loop thread.
  void read_begins(const TensorPtr& t);
  void read_ends(const TensorData* t);
  void clear();
  size_t num_tensors() const { return tensors_.size() + remote_.size(); }

  uint64_t serial() const { return serial_; }  // for logs: the token is a secret
  const std::string& token() const { return token_; }
  const std::string& client_node() const { return client_node_; }
  // The role its opening Hello named (genie_node_role_t): only a server's
  // session may make this server dial a peer (TensorImport).
  int client_role = GENIE_NODE_ROLE_CLIENT;
  // The certificate its opening connection presented (Channel::
  // peer_identity; empty: none). Resuming the session, and joining it with
  // a data connection, take the same one.
  std::string client_cert;

  // Connections attached to the session (owned by the server's peer table).
  Peer* control = nullptr;  // null while the session waits in its grace period
  std::vector<Peer*> data;
  // What it holds here and has reserved (server/quota.hpp).
  SessionUsage usage;
  // Armed while the control connection is lost; the session ends when it fires.
  std::unique_ptr<Timer> grace;
  // When a frame last arrived on one of its connections (the loop's clock,
  // uv_now): a session idle past ServerOptions::session_idle_ms ends.
  uint64_t last_active_ms = 0;

 private:
  uint64_t serial_;
  std::string token_;
  std::string client_node_;
  ServerCounters& counters_;
  std::unordered_map<uint64_t, TensorPtr> tensors_;
  std::unordered_map<uint64_t, RemoteTensorPtr> remote_;
  // Freed, still held elsewhere: still counted until they expire.
  struct Lingering {
    std::weak_ptr<TensorData> tensor;
    size_t bytes = 0;
  };
  std::vector<Lingering> lingering_;
  // Tensors that reads in flight hold, and how many reads.
  struct Reading {
    std::weak_ptr<TensorData> tensor;
    int reads = 0;
  };
  std::unordered_map<const TensorData*, Reading> reading_;
  uint64_t next_id_ = 1;
};

}  // namespace genie
