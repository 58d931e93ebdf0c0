// Helpers for tests of RemoteClient against a real server: a client
// configuration, byte patterns, raw sockets and frames, and FrameProxy, a
// TCP relay between the two whose frames (server -> client) of chosen types
// can be held back and released, or have their CRC corrupted, and whose
// relayed connections can all be cut on demand.
#pragma once

#include <arpa/inet.h>
#include <google/protobuf/message.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "control/wire.hpp"
#include "core/config.hpp"
#include "genie.pb.h"

namespace genie {

inline int64_t ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
}

// A client of the server at 127.0.0.1:port.
// Polls `cond` until it holds or `ms` milliseconds pass.
inline bool eventually(const std::function<bool()>& cond, int ms = 5000) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

inline Config client_config(int port, int64_t timeout_ms = 5000) {
  Config c;
  c.master_addr = "127.0.0.1";
  c.master_port = port;
  c.timeout_ms = timeout_ms;
  return c;
}

// n pseudo-random bytes, the same for the same seed.
inline std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t r = rng();
    std::memcpy(v.data() + i, &r, std::min<size_t>(8, n - i));
  }
  return v;
}

inline int listen_local(int* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 16) != 0) {
    ::close(fd);
    return -1;
  }
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

inline int connect_local(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline bool send_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t k = ::send(fd, c, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

inline bool recv_all(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t k = ::recv(fd, c, n, 0);
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

inline void send_frame(int fd, wire::MsgType type, uint64_t rid, const google::protobuf::Message& m,
                       uint32_t flags = 0) {
  const std::string msg = m.SerializeAsString();
  wire::FrameHeader h;
  h.type = type;
  h.flags = flags;
  h.msg_len = static_cast<uint32_t>(msg.size());
  h.request_id = rid;
  uint8_t hdr[wire::kHeaderSize];
  wire::encode_header(h, msg.data(), msg.size(), hdr);
  ASSERT_TRUE(send_all(fd, hdr, sizeof hdr));
  ASSERT_TRUE(send_all(fd, msg.data(), msg.size()));
}

// Reads one frame without payload.
inline bool recv_frame(int fd, wire::FrameHeader* h, std::string* msg) {
  uint8_t hdr[wire::kHeaderSize];
  if (!recv_all(fd, hdr, sizeof hdr)) return false;
  *h = wire::decode_header(hdr, wire::kDefaultMaxMessage);
  msg->assign(h->msg_len, '\0');
  return recv_all(fd, msg->data(), msg->size());
}

// A TCP relay that forwards client <-> server. Server -> client streams are
// parsed into frames so that frames of chosen types can be held back (and
// later released, or lost with a cut).
class FrameProxy {
 public:
  explicit FrameProxy(int target) : target_(target) {
    lfd_ = listen_local(&port_);
    EXPECT_GE(lfd_, 0);
    EXPECT_EQ(::pipe(wake_), 0);
    thread_ = std::thread([this] { run(); });
  }
  ~FrameProxy() {
    stop_ = true;
    poke();
    thread_.join();
    for (auto& p : pairs_) close_pair(p);
    ::close(lfd_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }
  int port() const { return port_; }
  int accepted() const { return accepted_; }
  // Frames held back so far.
  int held() const { return held_frames_; }

  void hold(wire::MsgType t) {
    std::lock_guard<std::mutex> lk(mu_);
    held_types_.insert(static_cast<uint16_t>(t));
  }
  // Flips a bit of the CRC of every frame of type `t` from now on (until
  // release()), as a corrupted link or a broken server would.
  void corrupt(wire::MsgType t) {
    std::lock_guard<std::mutex> lk(mu_);
    corrupt_types_.insert(static_cast<uint16_t>(t));
  }
  // Frames corrupted so far.
  int corrupted() const { return corrupted_frames_; }
  // Frames of type `from` without payload go on as type `to` from now on
  // (until release()), their message and request id kept, their CRC made
  // right: a server answering with the wrong frame.
  void retype(wire::MsgType from, wire::MsgType to) {
    std::lock_guard<std::mutex> lk(mu_);
    retyped_[static_cast<uint16_t>(from)] = static_cast<uint16_t>(to);
  }
  // Welcomes from now on say nothing of submissions on data connections
  // (Welcome.data_submit), or of frees inside submissions
  // (Welcome.submit_frees), as a server from before them would.
  void strip_data_submit() { strip_ |= kStripDataSubmit; }
  void strip_submit_frees() { strip_ |= kStripSubmitFrees; }
  // Every GraphDone from now on goes through `edit` (its CRC made right):
  // a server that lies about its results. Empty: no more edits.
  void edit_graph_done(std::function<void(wire::GraphDone&)> edit) {
    std::lock_guard<std::mutex> lk(mu_);
    edit_done_ = std::move(edit);
  }
  // GraphDones edited so far.
  int edited() const { return edited_frames_; }
  // Forwards what was held and stops holding.
  void release() { command(Cmd::Release); }
  // Closes every relayed connection (both sides); keeps listening.
  void cut() { command(Cmd::Cut); }
  // Closes the connection accepted last (both sides).
  void cut_last() { command(Cmd::CutLast); }

 private:
  enum class Cmd { None, Release, Cut, CutLast };
  static constexpr int kStripDataSubmit = 1, kStripSubmitFrees = 2;
  struct Pair {
    int client = -1, server = -1;
    // server -> client frame parsing
    std::string header;
    uint64_t remaining = 0;
    bool holding = false;
    std::string held;
    // A Welcome being rewritten (strip_*): its header and message.
    bool rewriting = false;
    std::string whole;
  };

  void poke() {
    const char c = 1;
    (void)!::write(wake_[1], &c, 1);
  }
  void command(Cmd c) {
    std::unique_lock<std::mutex> lk(mu_);
    cmd_ = c;
    poke();
    cv_.wait(lk, [&] { return cmd_ == Cmd::None; });
  }
  static void close_pair(Pair& p) {
    if (p.client >= 0) ::close(p.client);
    if (p.server >= 0) ::close(p.server);
    p.client = p.server = -1;
  }
  bool is_held(uint16_t type) {
    std::lock_guard<std::mutex> lk(mu_);
    return held_types_.count(type) != 0;
  }
  bool is_corrupted(uint16_t type) {
    std::lock_guard<std::mutex> lk(mu_);
    return corrupt_types_.count(type) != 0;
  }

  // Server -> client bytes: decide per frame whether to forward or hold.
  bool relay_down(Pair& p, const char* data, size_t n) {
    while (n > 0) {
      if (p.remaining == 0) {
        const size_t take = std::min(n, wire::kHeaderSize - p.header.size());
        p.header.append(data, take);
        data += take;
        n -= take;
        if (p.header.size() < wire::kHeaderSize) return true;
        const auto* h = reinterpret_cast<const uint8_t*>(p.header.data());
        uint16_t type;
        uint32_t msg_len;
        uint64_t payload_len;
        std::memcpy(&type, h + 6, 2);
        std::memcpy(&msg_len, h + 12, 4);
        std::memcpy(&payload_len, h + 24, 8);
        p.holding = is_held(type);
        if (p.holding) ++held_frames_;
        p.remaining = msg_len + payload_len;
        if (payload_len == 0 &&
            ((strip_ != 0 && type == static_cast<uint16_t>(wire::MsgType::Welcome)) || retyped(type) != 0 ||
             (type == static_cast<uint16_t>(wire::MsgType::GraphDone) && editing()))) {
          p.rewriting = true;
          p.whole = std::move(p.header);
          p.header.clear();
          if (p.remaining == 0 && !rewrite(p)) return false;
          continue;
        }
        std::string hdr = std::move(p.header);
        if (is_corrupted(type)) {
          hdr[32] = static_cast<char>(hdr[32] ^ 1);  // the CRC's first byte
          ++corrupted_frames_;
        }
        p.header.clear();
        if (!emit(p, hdr.data(), hdr.size())) return false;
        continue;
      }
      const size_t take = static_cast<size_t>(std::min<uint64_t>(n, p.remaining));
      if (p.rewriting) {
        p.whole.append(data, take);
      } else if (!emit(p, data, take)) {
        return false;
      }
      data += take;
      n -= take;
      p.remaining -= take;
      if (p.rewriting && p.remaining == 0 && !rewrite(p)) return false;
    }
    return true;
  }
  bool editing() {
    std::lock_guard<std::mutex> lk(mu_);
    return edit_done_ != nullptr;
  }
  uint16_t retyped(uint16_t type) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = retyped_.find(type);
    return it == retyped_.end() ? 0 : it->second;
  }
  // The frame in p.whole, rewritten under a header of its own: a Welcome
  // without the fields stripped, or a frame of another type (retype).
  bool rewrite(Pair& p) {
    p.rewriting = false;
    wire::FrameHeader h = wire::decode_header(reinterpret_cast<const uint8_t*>(p.whole.data()), 1 << 20);
    std::string msg = p.whole.substr(wire::kHeaderSize);
    if (const uint16_t to = retyped(static_cast<uint16_t>(h.type)); to != 0) {
      h.type = static_cast<wire::MsgType>(to);
    } else if (h.type == wire::MsgType::GraphDone) {
      wire::GraphDone d;
      EXPECT_TRUE(d.ParseFromString(msg));
      {
        std::lock_guard<std::mutex> lk(mu_);
        if (edit_done_) edit_done_(d);
      }
      ++edited_frames_;
      msg = d.SerializeAsString();
    } else {
      wire::Welcome w;
      EXPECT_TRUE(w.ParseFromString(msg));
      if (strip_ & kStripDataSubmit) w.set_data_submit(false);
      if (strip_ & kStripSubmitFrees) w.set_submit_frees(false);
      msg = w.SerializeAsString();
    }
    uint8_t hdr[wire::kHeaderSize];
    wire::encode_header(h, msg.data(), msg.size(), hdr);
    p.whole.clear();
    return emit(p, reinterpret_cast<const char*>(hdr), sizeof hdr) && emit(p, msg.data(), msg.size());
  }
  bool emit(Pair& p, const char* data, size_t n) {
    if (p.holding) {
      p.held.append(data, n);
      return true;
    }
    return send_all(p.client, data, n);
  }

  void run() {
    std::vector<char> buf(1 << 20);
    while (!stop_) {
      {
        std::lock_guard<std::mutex> lk(mu_);
        if (cmd_ == Cmd::CutLast && !pairs_.empty()) {
          close_pair(pairs_.back());
          pairs_.pop_back();
        } else if (cmd_ != Cmd::None && cmd_ != Cmd::CutLast) {
          for (auto& p : pairs_) {
            if (cmd_ == Cmd::Cut) {
              close_pair(p);
            } else if (!p.held.empty()) {
              send_all(p.client, p.held.data(), p.held.size());
              p.held.clear();
            }
          }
          if (cmd_ == Cmd::Cut) pairs_.clear();
          if (cmd_ == Cmd::Release) {
            held_types_.clear();
            corrupt_types_.clear();
            retyped_.clear();
          }
          for (auto& p : pairs_) p.holding = false;
        }
        if (cmd_ != Cmd::None) {
          cmd_ = Cmd::None;
          cv_.notify_all();
        }
      }
      std::vector<pollfd> fds{{lfd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
      for (auto& p : pairs_) {
        fds.push_back({p.client, POLLIN, 0});
        fds.push_back({p.server, POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), 1000) <= 0) continue;
      if (fds[1].revents) {
        char c[64];
        (void)!::read(wake_[0], c, sizeof c);
      }
      if (fds[0].revents & POLLIN) {
        const int c = ::accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0) {
          Pair p;
          p.client = c;
          p.server = connect_local(target_);
          if (p.server < 0) {
            ::close(c);
          } else {
            // Frames are relayed piecewise: Nagle would delay each piece
            // until the peer's delayed ACK.
            const int one = 1;
            ::setsockopt(p.client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            ::setsockopt(p.server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            pairs_.push_back(std::move(p));
            ++accepted_;
          }
        }
        continue;  // the pair list changed: poll again
      }
      for (size_t i = 0; i < pairs_.size(); ++i) {
        Pair& p = pairs_[i];
        bool ok = true;
        if (fds[2 + 2 * i].revents) {
          const ssize_t k = ::recv(p.client, buf.data(), buf.size(), 0);
          ok = k > 0 && send_all(p.server, buf.data(), static_cast<size_t>(k));
        }
        if (ok && fds[3 + 2 * i].revents) {
          const ssize_t k = ::recv(p.server, buf.data(), buf.size(), 0);
          ok = k > 0 && relay_down(p, buf.data(), static_cast<size_t>(k));
        }
        if (!ok) close_pair(p);
      }
      std::erase_if(pairs_, [](const Pair& p) { return p.client < 0; });
    }
  }

  int target_;
  std::atomic<int> strip_{0};
  int lfd_ = -1;
  int port_ = 0;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::atomic<int> held_frames_{0};
  std::atomic<int> corrupted_frames_{0};
  std::atomic<int> edited_frames_{0};
  std::function<void(wire::GraphDone&)> edit_done_;
  std::mutex mu_;
  std::condition_variable cv_;
  Cmd cmd_ = Cmd::None;
  std::set<uint16_t> held_types_;
  std::set<uint16_t> corrupt_types_;
  std::map<uint16_t, uint16_t> retyped_;  // retype(): from -> to
  std::vector<Pair> pairs_;               // proxy thread only
  std::thread thread_;
};

}  // namespace genie
