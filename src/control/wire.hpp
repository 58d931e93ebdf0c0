// The control plane's view of frames (dataplane/frame.hpp): which message
// types exist, and headers whose type is a MsgType. Every frame carries one
// encoded protobuf message (proto/genie.proto; which one is named by `type`)
// and, for tensor data, a raw payload. The byte layout, the CRC and the size
// limits are the data plane's (dataplane/frame.hpp); a frame of a type not
// listed below is refused from its header, before its message is read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "dataplane/frame.hpp"
#include "genie.h"

namespace genie::wire {

constexpr uint32_t kMagic = dataplane::kFrameMagic;
constexpr uint16_t kWireVersion = dataplane::kFrameVersion;
// 2: node roles of Hello.role are genie_node_role_t (0x100..0x102); direct
// transfers (TensorExport/TensorFetch/TensorImport); data endpoints in Welcome.
constexpr uint32_t kProtocolVersion = 3;  // Hello.protocol_version
constexpr size_t kHeaderSize = dataplane::kFrameHeaderSize;
constexpr uint32_t kFlagError = 1u << 0;  // the message is an ErrorReply
constexpr uint32_t kDefaultMaxMessage = dataplane::kDefaultMaxMessage;  // 64 MiB of encoded message
// Small tensors inside a submission and its completion (Welcome.
// inline_tensors; docs/protocol.md): at most this many bytes each, and in
// all per submission (its inline inputs) or per completion (its outputs).
constexpr size_t kMaxInlineTensorBytes = 64 * 1024;
constexpr size_t kMaxInlineBytes = 1024 * 1024;

enum class MsgType : uint16_t {
  Hello = 1,
  Challenge = 2,
  AuthResponse = 3,
  Welcome = 4,
  DataHello = 5,
  ErrorReply = 6,
  Ok = 7,
  TensorAlloc = 10,
  TensorAllocReply = 11,
  TensorWrite = 12,
  TensorRead = 13,
  TensorFree = 14,
  // Moving a tensor between two servers directly (docs/multinode.md).
  TensorExport = 15,
  TensorExportReply = 16,
  TensorFetch = 17,
  TensorImport = 18,
  GraphSubmit = 20,
  SubmitAccepted = 21,  // no longer sent by servers (docs/protocol.md); clients ignore it
  GraphDone = 22,
  GraphSubmitDelta = 23,
  ServerInfoRequest = 30,
  ServerInfo = 31,
  WorkerRegister = 32,
  PlanExplain = 33,
  PlanExplainReply = 34,
  // The server's steady clock, for merging its trace spans into a client's
  // (only to servers whose Welcome has trace_spans).
  ClockProbe = 35,
  ClockProbeReply = 36,
  Goodbye = 40,
  // Cluster (docs/cluster.md): Probe/ProbeReply before any handshake,
  // Heartbeat/HeartbeatReply on a session's control connection.
  Probe = 50,
  ProbeReply = 51,
  Heartbeat = 52,
  HeartbeatReply = 53,
  // Tensor bytes by RMA on data connections with an RMA transport (docs/ucx.md).
  TensorRmaWrite = 70,
  TensorRmaRead = 71,
};

// True for the values of MsgType above.
bool known_type(uint16_t type);
const char* type_name(MsgType t);

// The frame types above, for channels and the frame codec: a frame of
// another type is refused from its header.
const dataplane::FrameTypes& frame_types();

struct FrameHeader {
  uint16_t version = kWireVersion;
  MsgType type = MsgType::Ok;
  uint32_t flags = 0;
  uint32_t msg_len = 0;
  uint64_t request_id = 0;
  uint64_t payload_len = 0;
  uint32_t crc = 0;
};

// Between the data plane's header (type a plain uint16) and control's.
FrameHeader from_frame(const dataplane::FrameHeader& h);
dataplane::FrameHeader to_frame(const FrameHeader& h);

// The frame codec (dataplane/frame.hpp) with control's message types.
void encode_header(FrameHeader h, const void* msg, size_t msg_len, uint8_t out[kHeaderSize]);
// Throws Error(PROTOCOL) for a wrong magic, an unknown type, nonzero reserved
// bytes or msg_len > max_message, Error(VERSION_MISMATCH) for another wire
// version. Does not check the CRC (the message has not arrived yet).
FrameHeader decode_header(const uint8_t in[kHeaderSize], uint32_t max_message);
// Throws Error(PROTOCOL) unless h.crc matches the header and message.
void verify_crc(const uint8_t header[kHeaderSize], const void* msg, size_t msg_len);

}  // namespace genie::wire
