// Frames moved by the calling thread, with no event loop in between: the
// deadline and failure types of a blocking exchange, and BlockingChannel,
// a channel a transport may offer for it (Transport::connect_blocking).
//
// Why: a synchronous call through an event loop passes caller -> loop ->
// peer -> loop -> caller, two thread wake-ups more than the caller sending
// and waiting itself; for small transfers those wake-ups cost more than the
// bytes (docs/ucx.md, "Where the time of a small call goes"). The TCP
// transport's blocking framed I/O is tcp/blocking_stream.hpp (used on a
// socket of the caller's own); other transports offer a BlockingChannel.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "dataplane/frame.hpp"

namespace genie::dataplane {

using StreamClock = std::chrono::steady_clock;

// Why an exchange stopped.
enum class Broke { Timeout, Closed, Protocol };
struct StreamBroken {
  Broke why;
  std::string detail;
};

[[noreturn]] inline void broke(Broke why, std::string detail) { throw StreamBroken{why, std::move(detail)}; }

// When an exchange gives up: at a fixed time, or `budget` after the first
// moment it has to wait, so that an exchange that never waits reads no
// clock (tens of nanoseconds each on a VM, on every synchronous call).
class Deadline {
 public:
  Deadline(StreamClock::time_point at) : at_(at), set_(true) {}  // NOLINT(google-explicit-constructor)
  static Deadline after(StreamClock::duration budget) {
    Deadline d;
    d.budget_ = budget;
    return d;
  }
  StreamClock::time_point at() {
    if (!set_) {
      at_ = StreamClock::now() + budget_;
      set_ = true;
    }
    return at_;
  }

 private:
  Deadline() = default;
  StreamClock::time_point at_{};
  StreamClock::duration budget_{};
  bool set_ = false;
};

// A connection to a listener of the transport (Transport::listen: the
// peer sees an ordinary Channel) that the calling thread drives itself: it
// sends a frame and waits for the answer, progressing the connection while
// it waits (briefly polling, then sleeping until the transport has
// something or the deadline passes). Frames are those of a Channel
// (dataplane/frame.hpp: header with its CRC over header and message, the
// message, an optional payload), so the peer cannot tell the two apart.
//
// Threads: one thread at a time (the owner serialises, e.g. with a mutex;
// successive calls may come from different threads), except interrupt(),
// which any thread may call at any time while the object lives.
//
// Errors: a call that cannot complete throws StreamBroken: Timeout (the
// deadline passed), Closed (the peer closed or the connection broke, or
// interrupt() ran), Protocol (a malformed frame). After any of them the
// channel is unusable; destroy it.
class BlockingChannel {
 public:
  virtual ~BlockingChannel() = default;

  // Sends one frame (h.msg_len and h.payload_len are taken from the
  // arguments) and returns once `payload` may be reused.
  virtual void send_frame(const FrameHeader& h, const void* msg, size_t msg_len, const void* payload,
                          uint64_t payload_len, Deadline& deadline) = 0;
  // Waits for the next frame: its header and message (a type `types`
  // accepts, at most max_message bytes, the CRC checked). If it has a
  // payload, the next call must be recv_payload for all of it.
  virtual FrameHeader recv_frame(uint32_t max_message, const FrameTypes& types, std::string* msg,
                                 Deadline& deadline) = 0;
  // Receives the payload of the frame recv_frame returned into dst
  // (h.payload_len bytes, all at once).
  virtual void recv_payload(void* dst, uint64_t length, Deadline& deadline) = 0;
  // True when an idle channel still looks usable (the peer has not closed
  // it, nothing unexpected arrived); does not wait.
  virtual bool idle_ok() = 0;
  // Any thread: ends a call blocked in this channel (Closed) and every
  // later one.
  virtual void interrupt() = 0;
};

}  // namespace genie::dataplane
