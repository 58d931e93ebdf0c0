// `genie replay --backend dpdk` on local ranks: the ports of the ranks'
// DPDK transports. The transport drives one port per process
// (docs/dpdk.md), so every rank needs one of its own:
//  - where GENIE_DPDK_EAL is set, each rank gets it with "{rank}" replaced
//    by its number (a port and a file prefix per rank);
//  - where it is not, two ranks are joined by a memif pair that the
//    launcher sets up, and removes with what EAL left behind.
#pragma once

#include <chrono>
#include <string>

namespace genie::replay {

class LocalDpdk {
 public:
  // In the launcher, before the ranks start. Does nothing unless `backend`
  // is dpdk; throws Error(INVALID_ARGUMENT) for a rank count it cannot give
  // ports to. `wait`: how long rank 1 waits for rank 0's memif socket.
  LocalDpdk(const std::string& backend, int ranks, const std::string& token, std::chrono::milliseconds wait);
  // Removes the memif socket's directory and the EALs' runtime directories.
  ~LocalDpdk();
  LocalDpdk(const LocalDpdk&) = delete;
  LocalDpdk& operator=(const LocalDpdk&) = delete;

  // In rank `rank`'s process, before its transport starts: sets its
  // GENIE_DPDK_EAL, and for rank 1 of a memif pair waits for rank 0's
  // socket.
  void enter(int rank) const;

 private:
  bool dpdk_ = false;
  std::string dir_, prefix_, secret_;  // a memif pair's; dir_ empty without one
  std::chrono::milliseconds wait_;
};

}  // namespace genie::replay
