// One-sided transfers between local processes (rma_local.hpp).
#include "control/client/rma_local.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "control/client/impl.hpp"
#include "core/host.hpp"

namespace genie {
namespace {

// The most one system call is asked to copy.
constexpr size_t kLocalChunkBytes = size_t{1} << 30;

}  // namespace

std::string check_listener(uint64_t pid, const std::string& host, int port) {
  // How /proc/net/tcp{,6} print the addresses a listener there may be bound
  // to: the host's (each 32-bit word of it in the kernel's byte order, as
  // "%08X") or the wildcard of its family. "localhost" is both loopbacks.
  std::vector<std::string> bound;
  const auto words = [&](const void* a, size_t n) {
    std::string hex;
    for (size_t i = 0; i < n; i += 4) {
      uint32_t w;
      std::memcpy(&w, static_cast<const char*>(a) + i, 4);
      char b[9];
      std::snprintf(b, sizeof b, "%08X", w);
      hex += b;
    }
    return hex;
  };
  in_addr v4{};
  in6_addr v6{};
  const std::string name = host == "localhost" ? "127.0.0.1" : host;
  if (inet_pton(AF_INET, name.c_str(), &v4) == 1) bound.push_back(words(&v4, 4));
  if (inet_pton(AF_INET6, host == "localhost" ? "::1" : host.c_str(), &v6) == 1) bound.push_back(words(&v6, 16));
  bound.push_back(std::string(8, '0'));
  bound.push_back(std::string(32, '0'));
  // The listening sockets bound there, by inode.
  std::vector<std::string> listening;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream f(table);
    std::string line;
    std::getline(f, line);  // the column names
    while (std::getline(f, line)) {
      std::istringstream in(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      if (!(in >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode))
        continue;
      const size_t colon = local.rfind(':');
      if (state != "0A" || colon == std::string::npos) continue;  // 0A: TCP_LISTEN
      if (std::strtol(local.c_str() + colon + 1, nullptr, 16) != port) continue;
      if (std::find(bound.begin(), bound.end(), local.substr(0, colon)) == bound.end()) continue;
      listening.push_back(cat("socket:[", inode, "]"));
    }
  }
  if (listening.empty()) return cat("no socket listens on ", host, " port ", port, " in this network namespace");
  const std::string dir = cat("/proc/", pid, "/fd");
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return cat("cannot list ", dir, ": ", std::strerror(errno));
  bool found = false;
  while (const dirent* e = ::readdir(d)) {
    char target[64];
    const std::string path = cat(dir, "/", e->d_name);
    const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    for (const std::string& s : listening) found = found || s == target;
    if (found) break;
  }
  ::closedir(d);
  return found ? std::string() : cat("process ", pid, " holds no socket listening on port ", port);
}

bool RemoteClient::Impl::local_wanted() {
  if (!cfg.local_rma || !cfg.direct_calls || !is_loopback(cfg.master_addr)) return false;
  {
    std::lock_guard<std::mutex> lk(local.mu);
    if (local.off) return false;
  }
  std::lock_guard<std::mutex> lk(mu);
  return data_endpoint.transport == "ucx";
}

uint64_t RemoteClient::Impl::ready_epoch() {
  std::lock_guard<std::mutex> lk(mu);
  return state == State::Ready ? link_epoch : 0;
}

void RemoteClient::Impl::local_granted(uint64_t id, const wire::LocalGrant& g, uint64_t epoch) {
  // Granted by the server of another session establishment than the one
  // the request started in: it may be another process.
  if (epoch == 0 || ready_epoch() != epoch || g.length() == 0) return;
  std::lock_guard<std::mutex> lk(local.mu);
  local.by_tensor[id] = LocalGrants::Grant{g.pid(), g.address(), g.length(), epoch};
}

void RemoteClient::Impl::local_forget(uint64_t id) noexcept {
  std::lock_guard<std::mutex> lk(local.mu);
  local.by_tensor.erase(id);
}

bool RemoteClient::Impl::local_transfer(bool write, uint64_t id, size_t offset, void* buf, size_t nbytes) {
  if (nbytes == 0) return false;
  LocalGrants::Grant g;
  {
    std::lock_guard<std::mutex> lk(local.mu);
    const auto it = local.by_tensor.find(id);
    if (it == local.by_tensor.end() || local.off) return false;
    g = it->second;
  }
  // Out of range: the server's own check answers (SIZE_MISMATCH).
  if (offset > g.length || nbytes > g.length - offset) return false;
  const uint64_t epoch = ready_epoch();
  const auto refuse = [&](const std::string& why) {
    std::lock_guard<std::mutex> lk(local.mu);
    if (!local.off)
      log(LogLevel::Info, "client: one-sided transfers to the server on this host are off: ", why,
          "; tensor bytes go through the server");
    local.off = true;
    local.by_tensor.clear();
    return false;
  };
  if (g.epoch != epoch) {
    // The session was established again since (the server may be another
    // process): this grant, and every other of that time, is void.
    std::lock_guard<std::mutex> lk(local.mu);
    std::erase_if(local.by_tensor, [epoch](const auto& kv) { return kv.second.epoch != epoch; });
    return false;
  }
  bool checked;
  {
    std::lock_guard<std::mutex> lk(local.mu);
    checked = local.checked_epoch == epoch && local.checked_pid == g.pid;
  }
  if (!checked) {
    // The process named must be the one listening where this client
    // connected: a grant naming another process is never acted on.
    if (const std::string why = check_listener(g.pid, cfg.master_addr, cfg.master_port); !why.empty())
      return refuse(cat("the grant names process ", g.pid, ", which is not the server (", why, ")"));
    std::lock_guard<std::mutex> lk(local.mu);
    local.checked_pid = g.pid;
    local.checked_epoch = epoch;
  }
  const auto pid = static_cast<pid_t>(g.pid);
  // The kernel moves at most MAX_RW_COUNT (2 GiB less a page) a call, and
  // may stop short where a page is missing: the rest goes in the next one.
  for (size_t done = 0; done < nbytes;) {
    const size_t n = std::min(nbytes - done, kLocalChunkBytes);
    iovec mine{static_cast<char*>(buf) + done, n};
    iovec theirs{reinterpret_cast<void*>(g.address + offset + done), n};
    const ssize_t k = write ? ::process_vm_writev(pid, &mine, 1, &theirs, 1, 0)
                            : ::process_vm_readv(pid, &mine, 1, &theirs, 1, 0);
    if (k <= 0) {
      // Made again in full through the server.
      return refuse(k < 0 ? cat(write ? "process_vm_writev" : "process_vm_readv", " into process ", g.pid, ": ",
                                std::strerror(errno))
                          : cat("no byte copied at ", done, " of ", nbytes));
    }
    done += static_cast<size_t>(k);
  }
  local.calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace genie
