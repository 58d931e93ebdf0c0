// The direct link's socket I/O (direct.hpp): frames sent and received by the
// calling thread on a non-blocking socket, with poll() bounding every wait
// by a deadline, in plaintext or through the link's TLS session. Shared by
// the link's transfers (direct.cpp) and its submissions
// (direct_submit.cpp).
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "control/wire.hpp"

namespace genie::dataplane::tcp {
class TlsSession;
}

namespace genie::direct_io {

using Clock = std::chrono::steady_clock;

// Why an exchange stopped: the caller turns it into the framed path's error.
enum class Broke { Timeout, Closed, Protocol };
struct LinkBroken {
  Broke why;
  std::string detail;
};

[[noreturn]] void broke(Broke why, std::string detail);

// When an exchange gives up: at a fixed time, or `budget` after the first
// moment it has to wait, so that an exchange that never waits reads no
// clock (tens of nanoseconds each on a VM, on every synchronous call).
class Deadline {
 public:
  Deadline(Clock::time_point at) : at_(at), set_(true) {}  // NOLINT(google-explicit-constructor)
  static Deadline after(Clock::duration budget) {
    Deadline d;
    d.budget_ = budget;
    return d;
  }
  Clock::time_point at() {
    if (!set_) {
      at_ = Clock::now() + budget_;
      set_ = true;
    }
    return at_;
  }

 private:
  Deadline() = default;
  Clock::time_point at_{};
  Clock::duration budget_{};
  bool set_ = false;
};

// One exchange on the direct link: its socket, with TLS its session, and
// the bytes received (decrypted, with TLS) but not yet taken by a frame.
// Without TLS, reads shorter than kReadAhead take what the socket has, up
// to kReadAhead bytes, so that a reply's header and message come in one
// recv; longer ones (payloads) go straight to their destination.
struct Io {
  int fd;
  dataplane::tcp::TlsSession* tls;  // null: plaintext
  std::string* plain;
  size_t* taken;  // bytes of *plain already taken
  Deadline deadline;
};
constexpr size_t kReadAhead = 2048;

// Waits until `fd` is ready for `events` or the deadline passes (Timeout).
// With `spin`, a socket ready within microseconds is taken without sleeping
// (core/spin.hpp).
void wait_for(int fd, short events, Deadline& deadline, bool spin);
void wait_for(int fd, short events, Clock::time_point deadline, bool spin);

// Sends every byte of `iov` (modified as it goes).
void send_all(Io& io, iovec* iov, int cnt);
// With TLS: reads and decrypts what the socket has (waiting for it),
// answering whatever the session has to say (handshake, alerts).
void tls_pull(Io& io, bool spin);
// Receives exactly n bytes into dst, those already in *plain first; `spin`
// for the first wait.
void recv_all(Io& io, void* dst, size_t n, bool spin);

void send_frame(Io& io, wire::MsgType type, uint64_t rid, const std::string& msg, const void* payload,
                uint64_t len);
// A frame without payload, appended to *out (frames sent in one write).
// With `frees`, `msg` is an encoded submission and the frame carries them
// in it (GraphSubmit.free_tensor_ids).
void append_frame(std::string* out, wire::MsgType type, uint64_t rid, const std::string& msg,
                  const std::vector<uint64_t>& frees = {});
// Reads a frame's header and message, the CRC checked. The payload, if
// any, is the caller's to read.
wire::FrameHeader read_frame(Io& io, uint32_t max_message, std::string* msg, bool spin);
// read_frame, for the reply to request `rid` (Protocol if it is not).
wire::FrameHeader recv_reply(Io& io, uint64_t rid, uint32_t max_message, std::string* msg);

// A blocking connect bounded by the deadline; the socket comes back
// non-blocking, with the data connection's options. Throws
// Error(CONNECTION).
int connect_to(const std::string& address, Clock::time_point deadline);

// True when an idle socket still looks usable: nothing to read (a peer's
// close or stray bytes make it readable) and no error.
bool idle_ok(int fd);

}  // namespace genie::direct_io
