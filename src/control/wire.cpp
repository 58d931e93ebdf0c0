#include "control/wire.hpp"

#include <zlib.h>

#include <cstring>

#include "core/error.hpp"

namespace genie::wire {
namespace {

// Explicit byte order so the format does not depend on the host.
void put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint16_t get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

constexpr size_t kCrcOffset = 32;
constexpr size_t kReservedOffset = 36;

uint32_t frame_crc(const uint8_t header[kHeaderSize], const void* msg, size_t msg_len) {
  uint8_t h[kHeaderSize];
  std::memcpy(h, header, kHeaderSize);
  put32(h + kCrcOffset, 0);
  uLong crc = crc32_z(0L, Z_NULL, 0);
  crc = crc32_z(crc, h, kHeaderSize);
  if (msg_len > 0) crc = crc32_z(crc, static_cast<const Bytef*>(msg), msg_len);
  return static_cast<uint32_t>(crc);
}

}  // namespace

bool known_type(uint16_t type) {
  switch (static_cast<MsgType>(type)) {
    case MsgType::Hello:
    case MsgType::Challenge:
    case MsgType::AuthResponse:
    case MsgType::Welcome:
    case MsgType::DataHello:
    case MsgType::ErrorReply:
    case MsgType::Ok:
    case MsgType::TensorAlloc:
    case MsgType::TensorAllocReply:
    case MsgType::TensorWrite:
    case MsgType::TensorRead:
    case MsgType::TensorFree:
    case MsgType::TensorExport:
    case MsgType::TensorExportReply:
    case MsgType::TensorFetch:
    case MsgType::TensorImport:
    case MsgType::GraphSubmit:
    case MsgType::SubmitAccepted:
    case MsgType::GraphDone:
    case MsgType::GraphSubmitDelta:
    case MsgType::ServerInfoRequest:
    case MsgType::ServerInfo:
    case MsgType::WorkerRegister:
    case MsgType::PlanExplain:
    case MsgType::PlanExplainReply:
    case MsgType::Goodbye:
    case MsgType::Probe:
    case MsgType::ProbeReply:
    case MsgType::Heartbeat:
    case MsgType::HeartbeatReply: return true;
  }
  return false;
}

const char* type_name(MsgType t) {
  switch (t) {
    case MsgType::Hello: return "Hello";
    case MsgType::Challenge: return "Challenge";
    case MsgType::AuthResponse: return "AuthResponse";
    case MsgType::Welcome: return "Welcome";
    case MsgType::DataHello: return "DataHello";
    case MsgType::ErrorReply: return "ErrorReply";
    case MsgType::Ok: return "Ok";
    case MsgType::TensorAlloc: return "TensorAlloc";
    case MsgType::TensorAllocReply: return "TensorAllocReply";
    case MsgType::TensorWrite: return "TensorWrite";
    case MsgType::TensorRead: return "TensorRead";
    case MsgType::TensorFree: return "TensorFree";
    case MsgType::TensorExport: return "TensorExport";
    case MsgType::TensorExportReply: return "TensorExportReply";
    case MsgType::TensorFetch: return "TensorFetch";
    case MsgType::TensorImport: return "TensorImport";
    case MsgType::GraphSubmit: return "GraphSubmit";
    case MsgType::SubmitAccepted: return "SubmitAccepted";
    case MsgType::GraphDone: return "GraphDone";
    case MsgType::GraphSubmitDelta: return "GraphSubmitDelta";
    case MsgType::ServerInfoRequest: return "ServerInfoRequest";
    case MsgType::ServerInfo: return "ServerInfo";
    case MsgType::WorkerRegister: return "WorkerRegister";
    case MsgType::PlanExplain: return "PlanExplain";
    case MsgType::PlanExplainReply: return "PlanExplainReply";
    case MsgType::Goodbye: return "Goodbye";
    case MsgType::Probe: return "Probe";
    case MsgType::ProbeReply: return "ProbeReply";
    case MsgType::Heartbeat: return "Heartbeat";
    case MsgType::HeartbeatReply: return "HeartbeatReply";
  }
  return "unknown";
}

void encode_header(FrameHeader h, const void* msg, size_t msg_len, uint8_t out[kHeaderSize]) {
  put32(out + 0, kMagic);
  put16(out + 4, h.version);
  put16(out + 6, static_cast<uint16_t>(h.type));
  put32(out + 8, h.flags);
  // The length on the wire is the length of the bytes the CRC covers, so a
  // caller cannot describe one message and checksum another.
  put32(out + 12, static_cast<uint32_t>(msg_len));
  put64(out + 16, h.request_id);
  put64(out + 24, h.payload_len);
  put32(out + kCrcOffset, 0);
  put32(out + kReservedOffset, 0);
  put32(out + kCrcOffset, frame_crc(out, msg, msg_len));
}

FrameHeader decode_header(const uint8_t in[kHeaderSize], uint32_t max_message) {
  const uint32_t magic = get32(in);
  if (magic != kMagic) {
    fail(GENIE_ERR_PROTOCOL, "bad frame magic 0x", std::hex, magic, " (expected 0x", kMagic,
         "): not a Genie peer or the stream lost its framing");
  }
  FrameHeader h;
  // The version is checked before anything else in the header, whose layout
  // another version may define differently.
  h.version = get16(in + 4);
  if (h.version != kWireVersion) {
    fail(GENIE_ERR_VERSION_MISMATCH, "peer speaks wire version ", h.version, ", this build speaks version ",
         kWireVersion);
  }
  const uint16_t type = get16(in + 6);
  if (!known_type(type)) fail(GENIE_ERR_PROTOCOL, "unknown message type ", type);
  h.type = static_cast<MsgType>(type);
  h.flags = get32(in + 8);
  h.msg_len = get32(in + 12);
  h.request_id = get64(in + 16);
  h.payload_len = get64(in + 24);
  h.crc = get32(in + kCrcOffset);
  const uint32_t reserved = get32(in + kReservedOffset);
  if (reserved != 0) {
    fail(GENIE_ERR_PROTOCOL, "nonzero reserved header field 0x", std::hex, reserved, " in a ",
         type_name(h.type), " frame");
  }
  if (h.msg_len > max_message) {
    fail(GENIE_ERR_PROTOCOL, type_name(h.type), " message of ", h.msg_len,
         " bytes exceeds the maximum message size of ", max_message, " bytes");
  }
  return h;
}

void verify_crc(const uint8_t header[kHeaderSize], const void* msg, size_t msg_len) {
  const uint32_t want = get32(header + kCrcOffset);
  const uint32_t got = frame_crc(header, msg, msg_len);
  if (want != got) {
    const uint16_t type = get16(header + 6);
    fail(GENIE_ERR_PROTOCOL, "CRC mismatch in a ",
         known_type(type) ? type_name(static_cast<MsgType>(type)) : "unknown", " frame (header says 0x",
         std::hex, want, ", computed 0x", got, ")");
  }
}

}  // namespace genie::wire
