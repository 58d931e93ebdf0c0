// The frame format every byte-stream transport speaks (TCP today).
//
// A frame is a fixed 40-byte header, then `msg_len` bytes of message (the
// owner's encoding; control puts one protobuf message there), then
// `payload_len` bytes of raw payload (tensor data). All integers are
// little-endian.
//
//   offset size field
//        0    4 magic        "GNIE" (0x45494e47 read as little-endian u32)
//        4    2 version      kFrameVersion
//        6    2 type         owner-defined (control: wire::MsgType)
//        8    4 flags        owner-defined
//       12    4 msg_len      bytes of the message
//       16    8 request_id   chosen by the requester, echoed in replies
//       24    8 payload_len  raw bytes after the message
//       32    4 crc          CRC-32 (zlib) of the header with crc = 0,
//                            followed by the message bytes
//       36    4 reserved     zero
//
// The CRC covers the header and the message; payloads are covered by the
// transport's own checksum only, so that bulk bytes go from the socket to
// tensor memory without a pass over them. A header is refused before
// anything is allocated for its frame when the type is one the owner does
// not accept or msg_len exceeds the maximum message size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace genie::dataplane {

constexpr uint32_t kFrameMagic = 0x45494e47u;
constexpr uint16_t kFrameVersion = 1;
constexpr size_t kFrameHeaderSize = 40;
constexpr uint32_t kDefaultMaxMessage = 64u << 20;  // 64 MiB of message

struct FrameHeader {
  uint16_t version = kFrameVersion;
  uint16_t type = 0;
  uint32_t flags = 0;
  uint32_t msg_len = 0;
  uint64_t request_id = 0;
  uint64_t payload_len = 0;
  uint32_t crc = 0;
};

// The frame types an owner understands, and their names for messages.
// Plain function pointers: a channel checks every header against them.
struct FrameTypes {
  bool (*accepts)(uint16_t type) = nullptr;      // nullptr: every type
  const char* (*name)(uint16_t type) = nullptr;  // nullptr: "type N"
};

// "Hello" (from types.name) for an accepted type, "type N" without a name
// function, "unknown" for a type the owner does not accept.
std::string frame_type_label(const FrameTypes& types, uint16_t type);

// Writes the 40 header bytes (magic included) with the CRC computed over
// them and `msg`. The msg_len written is `msg_len`, whatever h.msg_len says,
// so that a caller cannot describe one message and checksum another.
void encode_frame_header(const FrameHeader& h, const void* msg, size_t msg_len,
                         uint8_t out[kFrameHeaderSize]);

// Parses 40 header bytes. Throws Error(PROTOCOL) for a wrong magic, a type
// `types` does not accept, nonzero reserved bytes or msg_len > max_message,
// and Error(VERSION_MISMATCH) for another frame version (naming both). Does
// not check the CRC (the message has not arrived yet).
FrameHeader decode_frame_header(const uint8_t in[kFrameHeaderSize], uint32_t max_message,
                                const FrameTypes& types = {});

// Throws Error(PROTOCOL) unless the header's crc matches the header and
// message.
void verify_frame_crc(const uint8_t header[kFrameHeaderSize], const void* msg, size_t msg_len,
                      const FrameTypes& types = {});

}  // namespace genie::dataplane
