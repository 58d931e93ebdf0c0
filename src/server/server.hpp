// `genie serve`: accepts client sessions over TCP and executes their graphs
// on this node's devices (CPU now).
//
// One libuv loop thread runs every connection; graphs execute on the
// executor's worker pool and their completions come back to the loop
// through LoopThread::post, except tiny ones (Executor::is_tiny), which run
// on the loop thread itself. Parsed and validated graphs are cached
// (GraphCache), so a graph submitted again is not parsed again. Each session owns its tensors (ids are scoped
// to it: another session cannot name them). A session ends at Goodbye (its
// tensors are freed at once) or, when its control connection is lost, after
// the grace period unless the client resumes it with its token.
//
// A malformed frame, wrong magic/version/CRC, an oversize length, an unknown
// type or a failed handshake closes that one connection with one log line;
// every other client is unaffected.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "genie.pb.h"
#include "server/quota.hpp"

namespace genie {

namespace dataplane {
class Listener;
}

class ClusterMaster;
class LoopThread;
class RemoteClient;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 5555;         // 0: pick a free port (read it back with port())
  std::string auth_token;  // empty: no authentication
  // Listening beyond loopback without authentication (auth_token, or TLS
  // with tls_ca: client certificates) is refused unless set.
  bool allow_insecure = false;
  // TLS 1.3 (docs/security.md, "TLS"), PEM files: with tls_cert and tls_key
  // every TCP connection (control and data) must speak TLS; with tls_ca as
  // well, clients must present a certificate chained to it. Other data
  // transports, which do not encrypt, are not offered then. Connections
  // this server opens (to its master, to another server) verify the peer
  // against tls_ca and present tls_cert.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
  int64_t session_grace_ms = 30000;
  uint32_t max_message_bytes = 64u << 20;
  int num_threads = 0;  // executor workers; 0 = hardware concurrency
  // Bytes this server's tensors and graphs in flight may hold (0: a share of
  // the available memory and the cgroup limit at start, core/memory.hpp),
  // and what one session may hold (server/quota.hpp).
  uint64_t memory_budget = 0;
  SessionQuota quota;
  std::string node_id;  // empty: generated
  // A connection that has not completed its handshake by then is closed, so
  // idle or half-open connections cannot pile up.
  int64_t handshake_timeout_ms = 10000;
  // Bounds on what peers can make the server hold (docs/security.md). The
  // largest message accepted before a connection has authenticated (its
  // handshake done; max_message_bytes after).
  uint32_t handshake_max_message = 64u << 10;
  // Bytes that messages still arriving may hold, all connections together;
  // 0: 256 MiB, or max_message_bytes when that is more.
  uint64_t max_incomplete_bytes = 0;
  // Connections open at once, in total and from one source address, and
  // sessions; 0: no limit. Connections past a limit are refused at once.
  // max_connections is lowered to 3/4 of the open-file limit, so that
  // accept() never fails for want of a descriptor.
  int max_connections = 1024;
  int max_connections_per_source = 128;
  int max_sessions = 1024;
  // Connections in their handshake at once, all sources together (0: a
  // quarter of max_connections, at most 256). Past it, a new connection
  // closes the oldest handshake of the source that has the most, so that
  // peers without the token never hold more than this many slots and the
  // others stay free for clients that authenticate.
  int max_handshakes = 0;
  // A session that receives nothing for this long ends (its tensors are
  // freed, its connections closed); 0: never. A live client heartbeats
  // (and pings while it waits), so only abandoned sessions idle. Sessions
  // opened with the server role (a master's on its workers) are exempt.
  int64_t session_idle_ms = 600000;
  // Reply bytes queued to one connection and not yet taken by the kernel: a
  // peer past it (sending requests without reading the replies) is cut off.
  // One reply of any size is always queued.
  uint64_t max_queued_reply_bytes = 32u << 20;
  // The same for all connections together (0: 256 MiB, or
  // max_queued_reply_bytes if more): past it, the connection with the most
  // replies queued is cut off, so many slow readers cannot add up.
  uint64_t max_queued_reply_bytes_total = 0;
  // The largest graph a submission may carry: bytes of its JSON and nodes
  // (0: no limit). Larger ones are refused with TOO_LARGE before they are
  // parsed; parsing a large one is charged to the session's quota and the
  // budget first (docs/security.md).
  uint64_t max_graph_bytes = 32u << 20;
  uint64_t max_graph_nodes = 65536;
  // Transports offered for data connections besides TCP (always offered, on
  // `port`), by registry name (dataplane/registry.hpp); each listens on
  // host:0 and Welcome advertises where. One that cannot be had (plugin
  // missing, its libraries not installed) is logged and left out.
  std::vector<std::string> data_transports;

  // The cluster role of this server (server/master.hpp; docs/cluster.md):
  // it answers Probes and Heartbeats, runs its timers on the server's loop,
  // learns the workers that join and leave, says which are alive, measures
  // the RTT to each, and, on a worker, heartbeats to the master. Null:
  // Probe and Heartbeat are refused with UNSUPPORTED. Must outlive the
  // Server.
  ClusterMaster* cluster = nullptr;
  // Multi-node (docs/multinode.md). A worker: the master to join at start
  // (empty: none), and the address the master should dial to reach this
  // server (empty: `host`, or this machine's host name when `host` is a
  // wildcard address).
  std::string join_host;
  int join_port = 5555;
  std::string advertise_host;
  // Multi-node orchestration (server/multinode.hpp): whether this server
  // accepts workers (WorkerRegister) and plans graphs across them; false:
  // it runs every graph itself and refuses WorkerRegister with UNSUPPORTED.
  bool multinode = false;
  // Timeout of this server's own client calls (to its master, or as a
  // master to its workers).
  int64_t client_timeout_ms = 30000;
  // A master: how long one stage sent to a worker may take before its graph
  // fails with TIMEOUT naming the worker (docs/multinode.md).
  int64_t stage_timeout_ms = 600000;
  // A master: how many stages one session may have waiting on workers at
  // once; past it a stage fails at once with OUT_OF_MEMORY
  // (server/stage_waits.hpp). No thread waits for them.
  int64_t session_max_stages = 16;
  // The data transport of the sessions this server opens (to its master,
  // as a master to its workers, to peers), demanded as Config::transport
  // (GENIE_TRANSPORT of `genie serve`); empty: TCP. With dpdk, the values a
  // master moves to and from its workers carry their semantic tags.
  std::string link_transport;
};

// A server's statistics are its ServerInfo message (proto/genie.proto):
// every counter is defined once, there and in GENIE_SERVER_COUNTERS
// (server/session.hpp), and reported the same way to clients and callers.
using ServerStats = wire::ServerInfo;

class MultiNode;

class Server {
 public:
  // Binds and listens (throws Error(IO) naming host:port and the reason,
  // e.g. address in use); serving starts on the server's own loop thread.
  // With a join_host, then registers with that master as a worker and
  // returns once the master has connected back (throws the client errors:
  // CONNECTION, TIMEOUT, AUTH, VERSION_MISMATCH, or the master's refusal).
  explicit Server(ServerOptions opts);
  // stop() then waits for the loop thread.
  ~Server();

  int port() const;
  const std::string& node_id() const;

  // Stops accepting, lets graphs in flight finish and deliver their
  // completions, closes every connection, and frees every session. Safe
  // from any thread; idempotent. wait() returns afterwards.
  void stop();
  // Blocks until stop() has completed.
  void wait();

  // Thread-safe.
  ServerStats stats() const;

  // Its multi-node orchestration (server/multinode.hpp), where other servers
  // are added as workers (server/cluster_peers.hpp); null when
  // ServerOptions::multinode is off. Lives as long as the server.
  MultiNode* multinode() const;

  // For in-process harnesses (fuzz/server_fuzz.cpp), which feed frames to
  // the server without sockets or threads per input. run_in_loop runs `fn`
  // on the server's loop thread and returns once it has (false: the server
  // is stopping, fn did not run). From there, adopt takes the connection
  // `listener` hands over (Listener::accept) as if one of the server's own
  // listeners of `transport` had announced it: the same admission,
  // handshake and limits as any other connection.
  bool run_in_loop(const std::function<void()>& fn);
  void adopt(dataplane::Listener& listener, const std::string& transport);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace genie
