// libFuzzer harness: a frame as it arrives from the network, decoded as the
// control plane decodes it: the 40-byte header (dataplane/frame.hpp), the
// CRC over header and message, then the message parsed as the protobuf its
// type names (control/wire.hpp, wire_codec.hpp). The message is parsed even
// when the CRC fails, so the fuzzer need not forge checksums to reach the
// parser. Bad input must end in genie::Error, never a crash or a leak.
#include <cstddef>
#include <cstdint>
#include <string>

#include "control/wire.hpp"
#include "control/wire_codec.hpp"
#include "core/error.hpp"
#include "genie.pb.h"

namespace {

using genie::wire::MsgType;

template <class M>
void parse(const std::string& bytes, MsgType t) {
  try {
    M m = genie::wire::parse_msg<M>(bytes, t);
    // A parsed message must encode again (what a server does to reply).
    (void)genie::wire::encode_msg(m);
  } catch (const genie::Error&) {
  }
}

void parse_as(MsgType t, const std::string& b) {
  namespace w = genie::wire;
  switch (t) {
    case MsgType::Hello: return parse<w::Hello>(b, t);
    case MsgType::Challenge: return parse<w::Challenge>(b, t);
    case MsgType::AuthResponse: return parse<w::AuthResponse>(b, t);
    case MsgType::Welcome: return parse<w::Welcome>(b, t);
    case MsgType::DataHello: return parse<w::DataHello>(b, t);
    case MsgType::ErrorReply: return parse<w::ErrorReply>(b, t);
    case MsgType::Ok: return parse<w::Ok>(b, t);
    case MsgType::TensorAlloc: return parse<w::TensorAlloc>(b, t);
    case MsgType::TensorAllocReply: return parse<w::TensorAllocReply>(b, t);
    case MsgType::TensorWrite: return parse<w::TensorWrite>(b, t);
    case MsgType::TensorRead: return parse<w::TensorRead>(b, t);
    case MsgType::TensorFree: return parse<w::TensorFree>(b, t);
    case MsgType::TensorExport: return parse<w::TensorExport>(b, t);
    case MsgType::TensorExportReply: return parse<w::TensorExportReply>(b, t);
    case MsgType::TensorFetch: return parse<w::TensorFetch>(b, t);
    case MsgType::TensorImport: return parse<w::TensorImport>(b, t);
    case MsgType::GraphSubmit: return parse<w::GraphSubmit>(b, t);
    case MsgType::SubmitAccepted: return parse<w::SubmitAccepted>(b, t);
    case MsgType::GraphDone: return parse<w::GraphDone>(b, t);
    case MsgType::GraphSubmitDelta: return parse<w::GraphSubmitDelta>(b, t);
    case MsgType::ServerInfoRequest: return parse<w::ServerInfoRequest>(b, t);
    case MsgType::ServerInfo: return parse<w::ServerInfo>(b, t);
    case MsgType::WorkerRegister: return parse<w::WorkerRegister>(b, t);
    case MsgType::PlanExplain: return parse<w::PlanExplain>(b, t);
    case MsgType::PlanExplainReply: return parse<w::PlanExplainReply>(b, t);
    case MsgType::ClockProbe: return parse<w::ClockProbe>(b, t);
    case MsgType::ClockProbeReply: return parse<w::ClockProbeReply>(b, t);
    case MsgType::Goodbye: return parse<w::Goodbye>(b, t);
    case MsgType::Probe: return parse<w::Probe>(b, t);
    case MsgType::ProbeReply: return parse<w::ProbeReply>(b, t);
    case MsgType::Heartbeat: return parse<w::Heartbeat>(b, t);
    case MsgType::HeartbeatReply: return parse<w::HeartbeatReply>(b, t);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < genie::wire::kHeaderSize) return 0;
  // A small maximum, so that length checks are reached by small inputs.
  constexpr uint32_t kMaxMessage = 1u << 16;
  genie::wire::FrameHeader h;
  try {
    h = genie::wire::decode_header(data, kMaxMessage);
  } catch (const genie::Error&) {
    return 0;
  }
  const size_t rest = size - genie::wire::kHeaderSize;
  if (h.msg_len > rest) return 0;  // the message has not arrived
  const std::string msg(reinterpret_cast<const char*>(data) + genie::wire::kHeaderSize, h.msg_len);
  try {
    genie::wire::verify_crc(data, msg.data(), msg.size());
  } catch (const genie::Error&) {
  }
  parse_as(h.type, msg);
  return 0;
}
