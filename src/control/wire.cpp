#include "control/wire.hpp"

namespace genie::wire {

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
    case MsgType::ClockProbe:
    case MsgType::ClockProbeReply:
    case MsgType::Goodbye:
    case MsgType::Probe:
    case MsgType::ProbeReply:
    case MsgType::Heartbeat:
    case MsgType::HeartbeatReply:
    case MsgType::TensorRmaWrite:
    case MsgType::TensorRmaRead: return true;
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
    case MsgType::ClockProbe: return "ClockProbe";
    case MsgType::ClockProbeReply: return "ClockProbeReply";
    case MsgType::Goodbye: return "Goodbye";
    case MsgType::Probe: return "Probe";
    case MsgType::ProbeReply: return "ProbeReply";
    case MsgType::TensorRmaWrite: return "TensorRmaWrite";
    case MsgType::TensorRmaRead: return "TensorRmaRead";
    case MsgType::Heartbeat: return "Heartbeat";
    case MsgType::HeartbeatReply: return "HeartbeatReply";
  }
  return "unknown";
}

namespace {
const char* name16(uint16_t type) { return type_name(static_cast<MsgType>(type)); }
}  // namespace

const dataplane::FrameTypes& frame_types() {
  static const dataplane::FrameTypes types{known_type, name16};
  return types;
}

FrameHeader from_frame(const dataplane::FrameHeader& h) {
  return FrameHeader{h.version, static_cast<MsgType>(h.type), h.flags, h.msg_len, h.request_id, h.payload_len, h.crc};
}

dataplane::FrameHeader to_frame(const FrameHeader& h) {
  return dataplane::FrameHeader{h.version,    static_cast<uint16_t>(h.type), h.flags, h.msg_len,
                                h.request_id, h.payload_len,                 h.crc};
}

void encode_header(FrameHeader h, const void* msg, size_t msg_len, uint8_t out[kHeaderSize]) {
  dataplane::encode_frame_header(to_frame(h), msg, msg_len, out);
}

FrameHeader decode_header(const uint8_t in[kHeaderSize], uint32_t max_message) {
  return from_frame(dataplane::decode_frame_header(in, max_message, frame_types()));
}

void verify_crc(const uint8_t header[kHeaderSize], const void* msg, size_t msg_len) {
  dataplane::verify_frame_crc(header, msg, msg_len, frame_types());
}

}  // namespace genie::wire
