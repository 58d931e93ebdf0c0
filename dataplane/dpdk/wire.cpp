#include "dataplane/dpdk/wire.hpp"

#include <rte_byteorder.h>
#include <rte_hash_crc.h>

#include <nmmintrin.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstring>

#ifdef GENIE_HAVE_ISAL
#include <isa-l/crc.h>
#endif

namespace genie::dataplane::dpdk {
namespace {

constexpr size_t kCrcAt = 72;
#ifdef GENIE_HAVE_ISAL
constexpr size_t kFoldMin = 256;  // shorter runs: one crc32 chain is as fast
#endif

void put16(uint8_t* p, uint16_t v) {
  v = rte_cpu_to_be_16(v);
  std::memcpy(p, &v, 2);
}
void put32(uint8_t* p, uint32_t v) {
  v = rte_cpu_to_be_32(v);
  std::memcpy(p, &v, 4);
}
void put64(uint8_t* p, uint64_t v) {
  v = rte_cpu_to_be_64(v);
  std::memcpy(p, &v, 8);
}
uint16_t get16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return rte_be_to_cpu_16(v);
}
uint32_t get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return rte_be_to_cpu_32(v);
}
uint64_t get64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return rte_be_to_cpu_64(v);
}

// The three chains of crc32c each take kBlock bytes of a 3 * kBlock run;
// a chain's register is moved past the next chain's bytes by multiplying
// it with x^(8 * kBlock) mod P, done with four tables of 256 entries (the
// "zeros operator" of Mark Adler's crc32c.c).
constexpr size_t kBlock = 256;
constexpr uint32_t kPoly = 0x82f63b78u;  // Castagnoli, reflected

uint32_t gf2_times(const uint32_t mat[32], uint32_t vec) {
  uint32_t sum = 0;
  for (int i = 0; vec != 0; ++i, vec >>= 1)
    if (vec & 1) sum ^= mat[i];
  return sum;
}

struct ShiftTables {
  std::array<std::array<uint32_t, 256>, 4> t{};
  ShiftTables() {
    // op: the operator that feeds one zero bit into the register; squared
    // repeatedly it feeds 2, 4, 8 ... zero bits. Combined for 8 * kBlock bits.
    uint32_t op[32], sq[32], acc[32];
    op[0] = kPoly;
    for (int i = 1; i < 32; ++i) op[i] = 1u << (i - 1);
    for (int i = 0; i < 32; ++i) acc[i] = 1u << i;  // identity
    uint64_t bits = 8 * kBlock;
    while (bits != 0) {
      if (bits & 1) {
        uint32_t next[32];
        for (int i = 0; i < 32; ++i) next[i] = gf2_times(op, acc[i]);
        std::memcpy(acc, next, sizeof acc);
      }
      bits >>= 1;
      for (int i = 0; i < 32; ++i) sq[i] = gf2_times(op, op[i]);
      std::memcpy(op, sq, sizeof op);
    }
    for (int k = 0; k < 4; ++k)
      for (uint32_t b = 0; b < 256; ++b) t[k][b] = gf2_times(acc, b << (8 * k));
  }
  uint32_t shift(uint32_t crc) const {
    return t[0][crc & 0xff] ^ t[1][(crc >> 8) & 0xff] ^ t[2][(crc >> 16) & 0xff] ^ t[3][crc >> 24];
  }
};

const ShiftTables& shift_tables() {
  static const ShiftTables tables;
  return tables;
}

uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

uint32_t crc32c_reference(const void* data, size_t len, uint32_t crc) {
  // rte_hash_crc loads 8 bytes at a time through a cast: start it aligned.
  const auto* p = static_cast<const uint8_t*>(data);
  while (len > 0 && reinterpret_cast<uintptr_t>(p) % 8 != 0) {
    crc = rte_hash_crc_1byte(*p++, crc);
    --len;
  }
  return rte_hash_crc(p, static_cast<uint32_t>(len), crc);
}

uint32_t crc32c(const void* data, size_t len, uint32_t crc) {
#ifdef GENIE_HAVE_ISAL
  // ISA-L's crc32_iscsi (the same CRC, the same conventions) folds 64-byte
  // blocks with carry-less multiplies (VPCLMULQDQ on AVX-512 CPUs): several
  // times the speed of crc32 instruction chains once a run is long enough.
  if (len >= kFoldMin && len <= INT_MAX)
    return crc32_iscsi(static_cast<unsigned char*>(const_cast<void*>(data)), static_cast<int>(len), crc);
#endif
  return crc32c_chains(data, len, crc);
}

uint32_t crc32c_chains(const void* data, size_t len, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  if (len >= 3 * kBlock) {
    const ShiftTables& st = shift_tables();
    uint64_t c0 = crc;
    while (len >= 3 * kBlock) {
      uint64_t c1 = 0, c2 = 0;
      for (size_t i = 0; i < kBlock; i += 8) {
        c0 = _mm_crc32_u64(c0, load64(p + i));
        c1 = _mm_crc32_u64(c1, load64(p + kBlock + i));
        c2 = _mm_crc32_u64(c2, load64(p + 2 * kBlock + i));
      }
      // The register is linear in its start value: reg(A||B, r) =
      // shift(reg(A, r), |B|) ^ reg(B, 0).
      c0 = st.shift(static_cast<uint32_t>(c0)) ^ c1;
      c0 = st.shift(static_cast<uint32_t>(c0)) ^ c2;
      p += 3 * kBlock;
      len -= 3 * kBlock;
    }
    crc = static_cast<uint32_t>(c0);
  }
  uint64_t c = crc;
  for (; len >= 8; p += 8, len -= 8) c = _mm_crc32_u64(c, load64(p));
  crc = static_cast<uint32_t>(c);
  for (; len > 0; --len) crc = _mm_crc32_u8(crc, *p++);
  return crc;
}

size_t encode_ranges(const SeqRange* r, size_t n, uint8_t* out) {
  n = std::min(n, kMaxNackRanges);
  for (size_t i = 0; i < n; ++i) {
    put32(out + i * kNackRangeBytes, r[i].first);
    put32(out + i * kNackRangeBytes + 4, r[i].count);
  }
  return n * kNackRangeBytes;
}

bool decode_ranges(const uint8_t* in, size_t len, SeqRange* out, size_t* n) {
  if (len % kNackRangeBytes != 0 || len / kNackRangeBytes > kMaxNackRanges) return false;
  *n = len / kNackRangeBytes;
  for (size_t i = 0; i < *n; ++i) {
    out[i].first = get32(in + i * kNackRangeBytes);
    out[i].count = get32(in + i * kNackRangeBytes + 4);
    if (out[i].count == 0 || out[i].count > (1u << 30)) return false;
  }
  return true;
}

void encode_header(const PacketHeader& h, uint8_t out[kPacketHeaderSize]) {
  put32(out + 0, kPacketMagic);
  out[4] = h.version;
  out[5] = static_cast<uint8_t>(h.type);
  put16(out + 6, h.flags);
  put32(out + 8, h.dst_session);
  put32(out + 12, h.src_session);
  put32(out + 16, h.seq);
  put32(out + 20, h.ack);
  put32(out + 24, h.window);
  put16(out + 28, h.payload_len);
  out[30] = h.dtype;
  out[31] = h.phase;
  put64(out + 32, h.tensor_id);
  put64(out + 40, h.tensor_size);
  put64(out + 48, h.frag_offset);
  put32(out + 56, h.frag_index);
  put32(out + 60, h.frag_count);
  put64(out + 64, h.sack);
  put32(out + kCrcAt, 0);
  out[76] = h.role;
  out[77] = 0;
  put16(out + 78, h.layer);
}

uint32_t header_crc(const uint8_t hdr[kPacketHeaderSize]) {
  // The crc field taken as zero, the bytes read where they lie.
  static_assert(kCrcAt + 8 == kPacketHeaderSize);
  const uint32_t crc = crc32c_chains(hdr, kCrcAt, 0xFFFFFFFFu);
  uint32_t after;
  std::memcpy(&after, hdr + kCrcAt + 4, 4);
  return _mm_crc32_u32(_mm_crc32_u32(crc, 0), after);
}

uint32_t packet_crc(const uint8_t hdr[kPacketHeaderSize], const rte_mbuf* m, uint32_t skip, uint32_t len) {
  return chain_crc(header_crc(hdr), m, skip, len);
}

uint32_t chain_crc(uint32_t crc, const rte_mbuf* m, uint32_t skip, uint32_t len) {
  for (const rte_mbuf* s = m; s != nullptr && len > 0; s = s->next) {
    if (skip >= s->data_len) {
      skip -= s->data_len;
      continue;
    }
    const uint32_t n = std::min<uint32_t>(s->data_len - skip, len);
    crc = crc32c(rte_pktmbuf_mtod_offset(s, const uint8_t*, skip), n, crc);
    len -= n;
    skip = 0;
  }
  return crc;
}

void store_crc(uint8_t hdr[kPacketHeaderSize], uint32_t crc) { put32(hdr + kCrcAt, crc); }

bool decode_header(const uint8_t in[kPacketHeaderSize], PacketHeader* h, const char** why) {
  if (get32(in) != kPacketMagic) {
    *why = "wrong magic";
    return false;
  }
  h->version = in[4];
  if (h->version != kPacketVersion) {
    *why = "another packet version";
    return false;
  }
  h->type = static_cast<PacketType>(in[5]);
  h->flags = get16(in + 6);
  h->dst_session = get32(in + 8);
  h->src_session = get32(in + 12);
  h->seq = get32(in + 16);
  h->ack = get32(in + 20);
  h->window = get32(in + 24);
  h->payload_len = get16(in + 28);
  h->dtype = in[30];
  h->phase = in[31];
  h->tensor_id = get64(in + 32);
  h->tensor_size = get64(in + 40);
  h->frag_offset = get64(in + 48);
  h->frag_index = get32(in + 56);
  h->frag_count = get32(in + 60);
  h->sack = get64(in + 64);
  h->crc = get32(in + kCrcAt);
  h->role = in[76];
  h->layer = get16(in + 78);
  return true;
}

}  // namespace genie::dataplane::dpdk
