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

}  // namespace genie::direct_io
