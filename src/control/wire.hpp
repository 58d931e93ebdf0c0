// The frame format of the control and data connections.
//
// Every frame is a fixed 40-byte header, then `msg_len` bytes of one encoded
// protobuf message (proto/genie.proto; which one is named by `type`), then
// `payload_len` bytes of raw tensor data. All integers are little-endian.
//
//   offset size field
//        0    4 magic        "GNIE" (0x45494e47 read as little-endian u32)
//        4    2 version      kWireVersion
//        6    2 type         MsgType
//        8    4 flags        kFlagError: the message is an ErrorReply
//       12    4 msg_len      bytes of the encoded message
//       16    8 request_id   chosen by the requester, echoed in replies
//       24    8 payload_len  raw tensor bytes after the message
//       32    4 crc          CRC-32 (zlib) of the header with crc = 0,
//                            followed by the message bytes
//       36    4 reserved     zero
//
// The CRC covers the header and the message; tensor payloads are covered by
// TCP's own checksum only, so that bulk bytes go from socket to tensor memory
// without a pass over them. Frames are refused before anything is allocated
// when msg_len exceeds the configured maximum message size, or when the
// payload does not fit the tensor range the message names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "genie.h"

namespace genie::wire {

constexpr uint32_t kMagic = 0x45494e47u;
constexpr uint16_t kWireVersion = 1;
constexpr uint32_t kProtocolVersion = 1;  // Hello.protocol_version
constexpr size_t kHeaderSize = 40;
constexpr uint32_t kFlagError = 1u << 0;
constexpr uint32_t kDefaultMaxMessage = 64u << 20;  // 64 MiB of encoded message

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
  Goodbye = 40,
  // Cluster (docs/cluster.md): Probe/ProbeReply before any handshake,
  // Heartbeat/HeartbeatReply on a session's control connection.
  Probe = 50,
  ProbeReply = 51,
  Heartbeat = 52,
  HeartbeatReply = 53,
};

// True for the values of MsgType above.
bool known_type(uint16_t type);
const char* type_name(MsgType t);

struct FrameHeader {
  uint16_t version = kWireVersion;
  MsgType type = MsgType::Ok;
  uint32_t flags = 0;
  uint32_t msg_len = 0;
  uint64_t request_id = 0;
  uint64_t payload_len = 0;
  uint32_t crc = 0;
};

// Writes the 40 header bytes (magic included) with the CRC computed over
// them and `msg`.
void encode_header(FrameHeader h, const void* msg, size_t msg_len, uint8_t out[kHeaderSize]);

// Parses 40 header bytes. Throws Error(PROTOCOL) for a wrong magic, an
// unknown type, nonzero reserved bytes or msg_len > max_message, and
// Error(VERSION_MISMATCH) for another wire version (naming both). Does not
// check the CRC (the message has not arrived yet).
FrameHeader decode_header(const uint8_t in[kHeaderSize], uint32_t max_message);

// Throws Error(PROTOCOL) unless h.crc matches the header and message.
void verify_crc(const uint8_t header[kHeaderSize], const void* msg, size_t msg_len);

}  // namespace genie::wire
