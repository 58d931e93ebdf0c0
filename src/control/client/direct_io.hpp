// The direct link's frames (direct.hpp) in control's terms: the blocking
// framed I/O of the TCP transport (dataplane/tcp/blocking_stream.hpp) with
// control's message types and the client's data-socket settings. Shared by
// the link's transfers (direct.cpp), its submissions (direct_submit.cpp)
// and the probe of a server (cluster/discovery.cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "control/wire.hpp"
#include "dataplane/blocking.hpp"
#include "dataplane/tcp/blocking_stream.hpp"

namespace genie::direct_io {

using Clock = std::chrono::steady_clock;
using dataplane::tcp::broke;
using dataplane::tcp::Broke;
using dataplane::tcp::Deadline;
using dataplane::tcp::idle_ok;
using dataplane::tcp::recv_all;
using dataplane::tcp::send_all;
using dataplane::tcp::wait_for;
using Io = dataplane::tcp::BlockingStream;
using LinkBroken = dataplane::tcp::StreamBroken;

void send_frame(Io& io, wire::MsgType type, uint64_t rid, const std::string& msg, const void* payload,
                uint64_t len);
// A frame without payload, appended to *out (frames sent in one write).
// With `frees`, `msg` is an encoded submission and the frame carries them
// in it (GraphSubmit.free_tensor_ids).
void append_frame(std::string* out, wire::MsgType type, uint64_t rid, const std::string& msg,
                  const std::vector<uint64_t>& frees = {});
// Reads a frame's header and message (a type control knows, the CRC
// checked). The payload, if any, is the caller's to read.
wire::FrameHeader read_frame(Io& io, uint32_t max_message, std::string* msg, bool spin);
// read_frame, for the reply to request `rid` (Protocol if it is not).
wire::FrameHeader recv_reply(Io& io, uint64_t rid, uint32_t max_message, std::string* msg);

// A blocking connect bounded by the deadline, with the loop's data
// connection's options. Throws Error(CONNECTION).
int connect_to(const std::string& address, Clock::time_point deadline);

// One exchange on the direct link, whatever carries it: the caller's
// socket (Io) or a transport's blocking channel. Failures throw LinkBroken.
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual void send(wire::MsgType type, uint64_t rid, const std::string& msg, const void* payload,
                    uint64_t len) = 0;
  // The next frame's header and message; its payload, if any, is the
  // caller's to read (payload() or skip()).
  virtual wire::FrameHeader read(std::string* msg, bool spin) = 0;
  virtual void payload(void* dst, size_t n) = 0;
  // Reads and drops an n-byte payload.
  virtual void skip(uint64_t n) = 0;
  virtual void set_deadline(Clock::time_point at) = 0;
  // read(), for the reply to request `rid` (Protocol if it is not).
  wire::FrameHeader reply(uint64_t rid, std::string* msg);
};

class SocketExchange final : public Exchange {
 public:
  SocketExchange(const Io& io, uint32_t max_message) : io_(io), max_(max_message) {}
  void send(wire::MsgType type, uint64_t rid, const std::string& msg, const void* payload,
            uint64_t len) override;
  wire::FrameHeader read(std::string* msg, bool spin) override;
  void payload(void* dst, size_t n) override;
  void skip(uint64_t n) override;
  void set_deadline(Clock::time_point at) override { io_.deadline = at; }
  Io& io() { return io_; }

 private:
  Io io_;
  uint32_t max_;
};

class ChannelExchange final : public Exchange {
 public:
  ChannelExchange(dataplane::BlockingChannel& ch, Deadline deadline, uint32_t max_message)
      : ch_(ch), deadline_(deadline), max_(max_message) {}
  void send(wire::MsgType type, uint64_t rid, const std::string& msg, const void* payload,
            uint64_t len) override;
  wire::FrameHeader read(std::string* msg, bool spin) override;
  void payload(void* dst, size_t n) override;
  void skip(uint64_t n) override;
  void set_deadline(Clock::time_point at) override { deadline_ = at; }

 private:
  dataplane::BlockingChannel& ch_;
  Deadline deadline_;
  uint32_t max_;
};

}  // namespace genie::direct_io
