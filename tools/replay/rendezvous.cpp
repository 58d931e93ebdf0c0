#include "rendezvous.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <thread>

#include "control/auth.hpp"
#include "core/error.hpp"
#include "dataplane/transport.hpp"

namespace genie::replay {

namespace {

using Clock = std::chrono::steady_clock;

// What a connection may make the server hold.
constexpr size_t kMaxLine = 64 << 10;               // a line (HELLO, READY, ERROR) before its newline
constexpr size_t kMaxStrangers = 64;                // connections open at once that have not said HELLO
constexpr uint64_t kMaxReport = uint64_t{1} << 30;  // a rank's report
constexpr size_t kMaxServerLine = 64 << 20;         // a line a rank reads from the server

void send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(GENIE_ERR_CONNECTION, "rendezvous: send: ", std::strerror(errno));
    off += static_cast<size_t>(n);
  }
}

// Reads what is there into buf; false on EOF or error.
bool fill(int fd, std::string& buf) {
  char tmp[65536];
  for (;;) {
    const ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buf.append(tmp, static_cast<size_t>(n));
    return true;
  }
}

// Takes one line (without its newline) off buf.
bool take_line(std::string& buf, std::string* line) {
  const size_t nl = buf.find('\n');
  if (nl == std::string::npos) return false;
  *line = buf.substr(0, nl);
  buf.erase(0, nl + 1);
  return true;
}

sockaddr_in resolve(const std::string& host, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || !res)
      fail(GENIE_ERR_INVALID_ARGUMENT, "rendezvous: cannot resolve host '", host, "'");
    a.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
    freeaddrinfo(res);
  }
  return a;
}

struct Conn {
  int fd = -1;
  std::string peer;  // its address, for the error that names a dropped stranger
  std::string buf;
  int rank = -1;
  bool ready = false;
  bool reported = false;
  bool gone = false;
};

}  // namespace

RendezvousServer::RendezvousServer(const std::string& host, int port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) fail(GENIE_ERR_IO, "rendezvous: socket: ", std::strerror(errno));
  int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a = resolve(host, port);
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 1024) != 0) {
    const int e = errno;
    ::close(fd_);
    fail(GENIE_ERR_IO, "rendezvous: cannot listen on ", host, ":", port, ": ", std::strerror(e));
  }
  socklen_t len = sizeof a;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
  char ip[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  address_ = cat(ip, ":", ntohs(a.sin_port));
}

RendezvousServer::~RendezvousServer() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<std::string> RendezvousServer::serve(int size, std::chrono::milliseconds timeout,
                                                 const std::string& token,
                                                 const std::function<std::string()>& lost) {
  std::vector<Conn> conns;
  struct Closer {
    std::vector<Conn>& c;
    ~Closer() {
      for (auto& x : c) ::close(x.fd);
    }
  } closer{conns};
  std::string dropped;  // the last stranger dropped, and why
  size_t strangers_dropped = 0;
  auto drop = [&](Conn& c, const std::string& why) {
    c.gone = true;
    dropped = cat(c.peer, ": ", why);
    ++strangers_dropped;
  };
  std::vector<std::string> addrs(size), results(size);
  std::string transport;
  auto broadcast = [&](const std::string& s) {
    for (auto& c : conns)
      if (!c.gone) try {
          send_all(c.fd, s);
        } catch (const Error&) {
          c.gone = true;
        }
  };
  auto refuse = [&](const std::string& why) {
    broadcast("ERROR " + why + "\n");
    fail(GENIE_ERR_INVALID_ARGUMENT, why);
  };
  // Polls the listener (while accepting) and every connection once;
  // handle(conn) consumes what arrived. Returns false at the deadline.
  auto pump = [&](bool accepting, Clock::time_point deadline, auto&& handle) {
    std::vector<pollfd> fds;
    if (accepting) fds.push_back({fd_, POLLIN, 0});
    for (auto& c : conns) fds.push_back({c.gone ? -1 : c.fd, POLLIN, 0});
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::min<long long>(left, 500)));
    if (n <= 0) return true;
    for (size_t i = accepting ? 1 : 0, k = 0; i < fds.size(); ++i, ++k) {
      if (!fds[i].revents) continue;
      Conn& c = conns[k];
      if (!fill(c.fd, c.buf)) c.gone = true;
      // A line longer than any the protocol has: the connection goes (a
      // rank's then counts as one that went away).
      if (c.buf.size() > kMaxLine && c.buf.find('\n') == std::string::npos) {
        if (c.rank < 0) drop(c, cat("sent more than ", kMaxLine, " bytes without a newline"));
        c.gone = true;
        c.buf.clear();
      }
      handle(c);
    }
    // Strangers that went away leave nothing behind.
    for (auto it = conns.begin(); it != conns.end();) {
      if (it->gone && it->rank < 0) {
        ::close(it->fd);
        it = conns.erase(it);
      } else {
        ++it;
      }
    }
    // Accepted last: strangers that closed by now have made room for it.
    if (accepting && (fds[0].revents & POLLIN)) {
      sockaddr_in from{};
      socklen_t len = sizeof from;
      const int c = ::accept4(fd_, reinterpret_cast<sockaddr*>(&from), &len, SOCK_CLOEXEC);
      size_t strangers = 0;
      for (const auto& x : conns) strangers += x.rank < 0;
      if (c >= 0 && strangers >= kMaxStrangers) {
        ::close(c);
        ++strangers_dropped;
        dropped = cat("more than ", kMaxStrangers, " connections at once without a HELLO");
      } else if (c >= 0) {
        char ip[INET_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET, &from.sin_addr, ip, sizeof ip);
        Conn conn;
        conn.fd = c;
        conn.peer = cat(ip, ":", ntohs(from.sin_port));
        conns.push_back(std::move(conn));
      }
    }
    return true;
  };

  // 1. Every rank says hello.
  const auto deadline = Clock::now() + timeout;
  int hellos = 0;
  while (hellos < size) {
    std::string problem;
    if (!pump(true, deadline, [&](Conn& c) {
          std::string line;
          if (c.rank >= 0 || !take_line(c.buf, &line)) return;
          std::istringstream in(line);
          std::string word, tr, addr, tok;
          int r = -1, n = -1;
          in >> word >> r >> n >> tr >> addr >> tok;
          if (word != "HELLO" || addr.empty()) {
            drop(c, cat("sent '", line.substr(0, 40), "', not a HELLO"));
            return;
          }
          if (!token.empty() && !mac_equal(tok, token)) {
            drop(c, cat("said HELLO as rank ", r, " without this run's token"));
            return;
          }
          if (n != size)
            problem = cat("rank ", r, " was started for ", n, " ranks, the launcher for ", size);
          else if (r < 0 || r >= size || !addrs[r].empty())
            problem = cat("two ranks call themselves rank ", r);
          else if (!transport.empty() && tr != transport)
            problem = cat("rank ", r, " uses transport ", tr, ", another rank ", transport,
                          " (give every rank the same --backend)");
          if (!problem.empty()) return;
          transport = tr;
          c.rank = r;
          addrs[r] = addr;
          ++hellos;
        }))
      refuse(cat("rendezvous: only ", hellos, " of ", size, " ranks arrived within ",
                 timeout.count() / 1000.0, " s",
                 strangers_dropped
                     ? cat("; ", strangers_dropped, " other connection(s) were dropped, the last ", dropped)
                     : std::string()));
    if (problem.empty() && lost) problem = lost();
    if (!problem.empty()) refuse(problem);
  }
  std::string peers = "PEERS";
  for (auto& a : addrs) peers += " " + a;
  broadcast(peers + "\n");

  // 2. Every rank has connected its data plane.
  int ready = 0;
  while (ready < size) {
    std::string problem;
    if (!pump(false, deadline, [&](Conn& c) {
          std::string line;
          if (c.rank < 0) return;
          if (c.gone && !c.ready) problem = cat("rank ", c.rank, " exited before it was ready");
          while (!c.ready && take_line(c.buf, &line)) {
            if (line == "READY") {
              c.ready = true;
              ++ready;
            } else if (line.rfind("ERROR ", 0) == 0) {
              problem = line.substr(6);
            }
          }
        }))
      refuse(cat("rendezvous: only ", ready, " of ", size, " ranks connected their data plane in time"));
    if (problem.empty() && lost) problem = lost();
    if (!problem.empty()) refuse(problem);
  }
  broadcast("GO\n");

  // 3. Reports, however long the replay takes (each rank bounds its own
  // waits).
  int reported = 0;
  while (reported < size) {
    pump(false, Clock::now() + std::chrono::hours(24 * 365), [&](Conn& c) {
      if (c.rank < 0 || c.reported) return;
      const size_t nl = c.buf.find('\n');
      if (nl != std::string::npos && c.buf.rfind("RESULT ", 0) == 0) {
        const uint64_t len = std::strtoull(c.buf.c_str() + 7, nullptr, 10);
        if (len > kMaxReport) {
          results[c.rank] = cat("error: rank ", c.rank, "'s report has ", len, " bytes, more than the ",
                                kMaxReport, "-byte limit");
          c.gone = true;
          c.buf.clear();
          c.reported = true;
          ++reported;
          return;
        }
        if (c.buf.size() >= nl + 1 + len) {
          results[c.rank] = c.buf.substr(nl + 1, len);
          c.buf.erase(0, nl + 1 + len);
          c.reported = true;
          ++reported;
          return;
        }
      }
      if (c.gone) {
        results[c.rank] = cat("error: rank ", c.rank, " exited without a report");
        c.reported = true;
        ++reported;
      }
    });
  }
  broadcast("BYE\n");
  return results;
}

RendezvousClient::RendezvousClient(const std::string& address, std::chrono::milliseconds timeout) : timeout_(timeout) {
  std::string host;
  int port = 0;
  dataplane::split_address(address, &host, &port);
  const sockaddr_in a = resolve(host, port);
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) fail(GENIE_ERR_IO, "rendezvous: socket: ", std::strerror(errno));
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0) break;
    const int e = errno;
    ::close(fd_);
    fd_ = -1;
    if (Clock::now() > deadline)
      fail(GENIE_ERR_CONNECTION, "rendezvous: cannot reach ", address, ": ", std::strerror(e));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

RendezvousClient::~RendezvousClient() {
  if (fd_ >= 0) ::close(fd_);
}

void RendezvousClient::write_all(const std::string& s) { send_all(fd_, s); }

std::string RendezvousClient::read_line() {
  std::string line;
  while (!take_line(buf_, &line)) {
    // The longest line a server sends is PEERS: an address per rank.
    if (buf_.size() > kMaxServerLine)
      fail(GENIE_ERR_PROTOCOL, "rendezvous: the server sent more than ", kMaxServerLine,
           " bytes without a newline");
    if (!fill(fd_, buf_)) fail(GENIE_ERR_CONNECTION, "rendezvous: the launcher went away");
  }
  if (line.rfind("ERROR ", 0) == 0) fail(GENIE_ERR_INVALID_ARGUMENT, line.substr(6));
  return line;
}

std::vector<std::string> RendezvousClient::hello(int rank, int size, const std::string& transport,
                                                 const std::string& address, const std::string& token) {
  write_all(
      cat("HELLO ", rank, " ", size, " ", transport, " ", address, token.empty() ? "" : " ", token, "\n"));
  std::string answer;
  try {
    answer = read_line();
  } catch (const Error& e) {
    if (e.code() != GENIE_ERR_CONNECTION) throw;
    fail(GENIE_ERR_CONNECTION,
         "rendezvous: the server closed the connection after this rank's HELLO (it drops ",
         "one without the run's token: under mpirun every rank needs the same GENIE_REPLAY_TOKEN)");
  }
  std::istringstream in(answer);
  std::string word;
  in >> word;
  if (word != "PEERS") fail(GENIE_ERR_PROTOCOL, "rendezvous: unexpected answer '", word, "'");
  std::vector<std::string> addrs;
  for (std::string a; in >> a;) addrs.push_back(a);
  if (static_cast<int>(addrs.size()) != size)
    fail(GENIE_ERR_PROTOCOL, "rendezvous: ", addrs.size(), " peer addresses for ", size, " ranks");
  return addrs;
}

void RendezvousClient::ready() {
  write_all("READY\n");
  if (read_line() != "GO") fail(GENIE_ERR_PROTOCOL, "rendezvous: expected GO");
}

void RendezvousClient::error(const std::string& why) {
  std::string one_line = why;
  for (char& ch : one_line)
    if (ch == '\n') ch = ' ';
  try {
    write_all("ERROR " + one_line + "\n");
  } catch (const Error&) {
  }
}

void RendezvousClient::report(const std::string& json) {
  write_all(cat("RESULT ", json.size(), "\n", json));
  std::string line;
  while (!take_line(buf_, &line))
    if (!fill(fd_, buf_)) return;  // the launcher is gone: nothing left to wait for
}

}  // namespace genie::replay
