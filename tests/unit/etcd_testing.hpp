// A real etcd for tests: started on 127.0.0.1 with free ports and its data
// in a temporary folder, stopped by its pid (and restartable on the same
// ports and data).
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

namespace genie::testing {

// A free TCP port on 127.0.0.1 (bound, read back and released).
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

// Where etcd is, or "" (then the test skips, saying so).
inline std::string etcd_binary() {
  for (const char* p : {"/usr/bin/etcd", "/usr/local/bin/etcd"})
    if (::access(p, X_OK) == 0) return p;
  return {};
}

// Where etcdctl is, or "" (Debian etcd-client).
inline std::string etcdctl_binary() {
  for (const char* p : {"/usr/bin/etcdctl", "/usr/local/bin/etcdctl"})
    if (::access(p, X_OK) == 0) return p;
  return {};
}

class EtcdProcess {
 public:
  EtcdProcess() : client_(free_port()), peer_(free_port()) {
    char tmpl[] = "/tmp/genie-etcd-XXXXXX";
    dir_ = ::mkdtemp(tmpl) ? tmpl : "";
  }
  ~EtcdProcess() {
    stop();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(client_); }

  // Starts it and waits until it accepts connections (at most 20 s).
  bool start() {
    const std::string c = endpoint();
    const std::string p = "http://127.0.0.1:" + std::to_string(peer_);
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string log = dir_ + "/etcd.log";
      if (FILE* f = std::freopen(log.c_str(), "a", stderr)) (void)f;
      if (FILE* f = std::freopen(log.c_str(), "a", stdout)) (void)f;
      const std::string data = dir_ + "/data";
      const std::string cluster = "t=" + p;
      ::execl(etcd_binary().c_str(), "etcd", "--name", "t", "--data-dir", data.c_str(), "--listen-client-urls",
              c.c_str(), "--advertise-client-urls", c.c_str(), "--listen-peer-urls", p.c_str(),
              "--initial-advertise-peer-urls", p.c_str(), "--initial-cluster", cluster.c_str(), "--log-level",
              "error", static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    for (int i = 0; i < 400; ++i) {
      if (accepts()) return true;
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
  }

 private:
  bool accepts() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(client_));
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
  }

  int client_, peer_;
  std::string dir_;
  pid_t pid_ = -1;
};

}  // namespace genie::testing
