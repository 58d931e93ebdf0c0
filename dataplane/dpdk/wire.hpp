// The Genie packet of the DPDK transport (docs/dpdk.md has the layout and
// the protocol): an Ethernet header (EtherType kEtherType), this fixed
// 80-byte header in network byte order, then up to payload_len bytes of one
// fragment of a "tensor" (the frame of dataplane/frame.hpp: its 40-byte
// header, message and payload, sent as one byte string). The CRC-32C covers
// the header (crc field zero) and the payload bytes; every packet is
// checked on arrival and a bad one is dropped (the retransmission recovers).
#pragma once

#include <rte_mbuf.h>

#include <cstddef>
#include <cstdint>

namespace genie::dataplane::dpdk {

constexpr uint16_t kEtherType = 0x88B5;         // IEEE 802 local experimental EtherType 1
constexpr uint32_t kPacketMagic = 0x4744504Bu;  // "GDPK"
constexpr uint8_t kPacketVersion = 1;
constexpr size_t kPacketHeaderSize = 80;
constexpr size_t kEthHeaderSize = 14;

enum class PacketType : uint8_t {
  Syn = 1,     // open a session to the listener `tensor_id` names (its endpoint)
  SynAck = 2,  // the listener's session accepts it
  Data = 3,    // one fragment of a tensor
  Ack = 4,     // cumulative ack, selective acks, receive window
  Nack = 5,    // ack plus the sequence numbers found missing (sack bits)
  Fin = 6,     // orderly close, after every sent tensor was acknowledged
  Rst = 7,     // the session is gone (or refused)
};

// flags
constexpr uint16_t kFlagRetransmit = 1;  // a repeat of a packet sent before
constexpr uint16_t kFlagProbe = 2;       // Ack requested (window probe)
constexpr uint16_t kFlagFinAck = 4;      // on Ack: the Fin was received

struct PacketHeader {
  uint8_t version = kPacketVersion;
  PacketType type = PacketType::Data;
  uint16_t flags = 0;
  uint32_t dst_session = 0;  // the receiver's session id (0 in a Syn)
  uint32_t src_session = 0;  // the sender's session id
  uint32_t seq = 0;          // Data/Fin: sequence number; others: the next one
  uint32_t ack = 0;          // every seq below it has arrived
  uint32_t window = 0;       // packets the sender of this one can still take
  uint16_t payload_len = 0;  // bytes after the header
  uint8_t dtype = 0;         // semantic tag: 0 = unknown
  uint8_t phase = 0;
  uint64_t tensor_id = 0;    // Syn: the listener's endpoint id
  uint64_t tensor_size = 0;  // bytes of the whole tensor
  uint64_t frag_offset = 0;  // where this fragment starts in the tensor
  uint32_t frag_index = 0;
  uint32_t frag_count = 0;
  uint64_t sack = 0;  // Ack: bit i = seq ack+1+i arrived; Nack: bit i = seq ack+i missing
  uint32_t crc = 0;
  uint8_t role = 0;
  uint16_t layer = 0xFFFF;  // 0xFFFF = unknown
};

// CRC-32C (rte_hash_crc: Castagnoli, initial value 0xFFFFFFFF, no final
// XOR) continued over `len` bytes: ISA-L's folding crc32_iscsi for runs of
// 256 bytes and more where ISA-L is there (Debian's libdpdk-dev brings
// it), crc32c_chains otherwise.
uint32_t crc32c(const void* data, size_t len, uint32_t crc);
// The same with crc32 instructions only: long runs go through three
// independent chains combined at the end (the instruction's latency, not
// its throughput, bounds one chain), a half to a third of rte_hash_crc's
// single chain on a 9 KB packet.
uint32_t crc32c_chains(const void* data, size_t len, uint32_t crc);
// The same, one chain (rte_hash_crc's way): the reference crc32c is checked
// against.
uint32_t crc32c_reference(const void* data, size_t len, uint32_t crc);

// A run of sequence numbers [first, first + count): a Nack's payload is a
// list of the runs the receiver misses, each 8 bytes (first, count; network
// byte order), at most kMaxNackRanges.
struct SeqRange {
  uint32_t first = 0;
  uint32_t count = 0;
};
constexpr size_t kMaxNackRanges = 64;
constexpr size_t kNackRangeBytes = 8;
// Writes n ranges (n <= kMaxNackRanges) and returns the bytes written.
size_t encode_ranges(const SeqRange* r, size_t n, uint8_t* out);
// Parses `len` bytes of ranges; false for a length that is not a multiple
// of 8, more than kMaxNackRanges ranges, or an empty or wrapping range.
bool decode_ranges(const uint8_t* in, size_t len, SeqRange* out, size_t* n);

// Writes the 80 header bytes with crc = 0 and returns nothing; finish_crc
// then stores the CRC over them and the payload.
void encode_header(const PacketHeader& h, uint8_t out[kPacketHeaderSize]);
// The CRC of an encoded header (crc bytes taken as zero) and `payload`
// segments of an mbuf chain starting `skip` bytes into it.
uint32_t packet_crc(const uint8_t hdr[kPacketHeaderSize], const rte_mbuf* m, uint32_t skip, uint32_t len);
// Its two parts: the header's CRC (crc bytes taken as zero), and a CRC
// continued over `len` bytes of an mbuf chain from `skip` bytes into it.
uint32_t header_crc(const uint8_t hdr[kPacketHeaderSize]);
uint32_t chain_crc(uint32_t crc, const rte_mbuf* m, uint32_t skip, uint32_t len);
void store_crc(uint8_t hdr[kPacketHeaderSize], uint32_t crc);

// Parses a header; false (with `why` set) for a wrong magic or version.
bool decode_header(const uint8_t in[kPacketHeaderSize], PacketHeader* h, const char** why);

}  // namespace genie::dataplane::dpdk
