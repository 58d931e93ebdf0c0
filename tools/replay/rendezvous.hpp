// How ranks find each other: a small line protocol over TCP. The launcher
// (`--ranks N`) or rank 0 (`--launch mpi`) runs the server; every rank
// connects, says who it is and where its data plane listens, and gets every
// rank's address back. The server then releases all ranks together (their
// common clock starts there), collects each rank's report and lets them go
// only when all have reported, so no rank closes its channels while another
// still needs them.
//
// The run's token (a secret the launcher gives its ranks; under mpirun,
// GENIE_REPLAY_TOKEN) must end every HELLO when the server has one. A
// connection that has not said a HELLO of this run is a stranger: it may
// hold at most a line's worth of bytes, at most 64 are open at once, and it
// is dropped, never trusted, at its first wrong line; so is any byte past
// the bounds below. If the ranks then do not all arrive in time, the error
// says what was dropped.
//
//   rank -> server: HELLO <rank> <size> <transport> <address> [<token>]
//   server -> rank: PEERS <address of rank 0> ... | ERROR <why>
//   rank -> server: READY | ERROR <why>
//   server -> rank: GO
//   rank -> server: RESULT <bytes>\n<report JSON>
//   server -> rank: BYE
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace genie::replay {

class RendezvousServer {
 public:
  // Listens on host:port (port 0: any; read it back from address()).
  RendezvousServer(const std::string& host, int port);
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  std::string address() const { return address_; }

  // Serves one replay of `size` ranks. Returns each rank's report, or a
  // line "error: ..." for a rank that failed before reporting. Throws
  // genie::Error naming the problem when the ranks never all arrived or
  // disagree (rank counts, transports) within `timeout`. Until the ranks
  // start, `lost` (when given) is asked about twice a second whether a rank
  // is gone (a local rank's process exited): a non-empty answer ends the
  // rendezvous with it at once rather than at the timeout.
  std::vector<std::string> serve(int size, std::chrono::milliseconds timeout, const std::string& token = {},
                                 const std::function<std::string()>& lost = {});

 private:
  int fd_ = -1;
  std::string address_;
};

class RendezvousClient {
 public:
  // Connects, retrying until `timeout` (the server may start later).
  RendezvousClient(const std::string& address, std::chrono::milliseconds timeout);
  ~RendezvousClient();
  RendezvousClient(const RendezvousClient&) = delete;
  RendezvousClient& operator=(const RendezvousClient&) = delete;

  // HELLO, then waits for the peers' addresses.
  std::vector<std::string> hello(int rank, int size, const std::string& transport, const std::string& address,
                                 const std::string& token = {});
  // READY (or ERROR), then waits for GO.
  void ready();
  void error(const std::string& why);
  // RESULT, then waits for BYE.
  void report(const std::string& json);

 private:
  std::string read_line();
  void write_all(const std::string& s);

  int fd_ = -1;
  std::string buf_;
  std::chrono::milliseconds timeout_;
};

}  // namespace genie::replay
