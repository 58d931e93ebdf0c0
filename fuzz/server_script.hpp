// The record format of server_fuzz's inputs (server_fuzz.cpp), shared with
// the seed generator (make_seeds.cpp): a frame record names its type by an
// index into kScriptTypes.
#pragma once

#include <cstddef>

#include "control/wire.hpp"

namespace genie::fuzz {

constexpr wire::MsgType kScriptTypes[] = {
    wire::MsgType::Hello,         wire::MsgType::AuthResponse,      wire::MsgType::DataHello,
    wire::MsgType::TensorAlloc,   wire::MsgType::TensorWrite,       wire::MsgType::TensorRead,
    wire::MsgType::TensorFree,    wire::MsgType::TensorExport,      wire::MsgType::TensorFetch,
    wire::MsgType::TensorImport,  wire::MsgType::GraphSubmit,       wire::MsgType::GraphSubmitDelta,
    wire::MsgType::ServerInfoRequest, wire::MsgType::WorkerRegister, wire::MsgType::PlanExplain,
    wire::MsgType::Goodbye,       wire::MsgType::Probe,             wire::MsgType::Heartbeat,
    wire::MsgType::Ok,            wire::MsgType::Welcome};
constexpr size_t kNumScriptTypes = sizeof kScriptTypes / sizeof kScriptTypes[0];

// Record opcodes (the low two bits of a record's first byte).
enum ScriptOp { kOpFrame = 0, kOpRaw = 1, kOpAuth = 2, kOpRead = 3 };
constexpr unsigned char kWithPayload = 0x80;  // a frame record with a payload

}  // namespace genie::fuzz
