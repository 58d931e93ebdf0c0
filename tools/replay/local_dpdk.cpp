#include "local_dpdk.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "core/error.hpp"

namespace genie::replay {

// The memif pair: its socket lies in a directory of the launcher's own
// (mode 0700), and the run's token is the pair's memif secret, so no other
// process joins it. Each EAL has a file prefix of its own (memif needs
// EAL's multi-process channel) and slots of 9 KB (one jumbo packet per
// slot). memif's client does not retry a connect, so rank 1 starts its
// port once rank 0's socket is there.
LocalDpdk::LocalDpdk(const std::string& backend, int ranks, const std::string& token,
                     std::chrono::milliseconds wait)
    : wait_(wait) {
  // (The caller passes --backend as given: auto never picks dpdk, and
  // resolving auto here would load the UCX plugin into the launcher before
  // it forks.)
  if (backend != "dpdk") return;
  dpdk_ = true;
  if (const char* v = std::getenv("GENIE_DPDK_EAL"); v != nullptr && *v != '\0') {
    if (ranks > 1 && std::string(v).find("{rank}") == std::string::npos)
      fail(GENIE_ERR_INVALID_ARGUMENT, "GENIE_DPDK_EAL is the same for all ", ranks,
           " local ranks, but each needs a port and a file prefix of its own: write {rank} where the rank's "
           "number goes (e.g. --file-prefix=r{rank} --vdev=net_af_packet0,iface=veth{rank})");
    return;
  }
  if (ranks != 2)
    fail(GENIE_ERR_INVALID_ARGUMENT,
         "--backend dpdk on local ranks joins two ranks by a memif pair, and the run has ", ranks,
         ": give --ranks 2, or set GENIE_DPDK_EAL with a port per rank (docs/replay.md)");
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = cat(tmp && *tmp ? tmp : "/tmp", "/genie-replay-XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) fail(GENIE_ERR_IO, "mkdtemp ", tmpl, ": ", std::strerror(errno));
  dir_ = tmpl;
  prefix_ = cat("genie-replay-", getpid(), "-", token.substr(0, 8));
  secret_ = token.substr(0, 24);  // memif's secret has at most 24 characters
}

LocalDpdk::~LocalDpdk() {
  if (dir_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  // Each rank's EAL runtime directory: the transport removes its own at a
  // normal exit; a rank that crashed or was killed leaves it. It is
  // /var/run/dpdk/PREFIX for root, else under XDG_RUNTIME_DIR or /tmp.
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  const std::string base = getuid() == 0 ? "/var/run/dpdk" : cat(xdg && *xdg ? xdg : "/tmp", "/dpdk");
  for (int r = 0; r < 2; ++r) std::filesystem::remove_all(cat(base, "/", prefix_, "-", r), ec);
}

void LocalDpdk::enter(int rank) const {
  if (!dpdk_) return;
  if (dir_.empty()) {
    const char* v = std::getenv("GENIE_DPDK_EAL");
    if (v == nullptr) return;
    std::string eal = v;
    for (size_t at = 0; (at = eal.find("{rank}", at)) != std::string::npos;) {
      const std::string n = std::to_string(rank);
      eal.replace(at, 6, n);
      at += n.size();
    }
    setenv("GENIE_DPDK_EAL", eal.c_str(), 1);
    return;
  }
  const std::string sock = cat(dir_, "/memif.sock");
  const std::string eal =
      cat("--no-huge -m 256 --no-pci --no-telemetry --log-level=*:warning --file-prefix=", prefix_, "-", rank,
          " --vdev=net_memif0,role=", rank == 0 ? "server" : "client", ",socket=", sock,
          ",socket-abstract=no,secret=", secret_, ",bsize=9216");
  setenv("GENIE_DPDK_EAL", eal.c_str(), 1);
  if (rank == 0) return;
  const auto deadline = std::chrono::steady_clock::now() + wait_;
  while (access(sock.c_str(), F_OK) != 0) {
    if (std::chrono::steady_clock::now() > deadline)
      fail(GENIE_ERR_TIMEOUT, "rank 0 did not open its memif socket ", sock, " in time");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace genie::replay
