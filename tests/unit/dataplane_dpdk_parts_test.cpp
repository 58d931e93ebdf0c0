// The DPDK transport's pieces that need no EAL: the three-chain CRC-32C
// against DPDK's one-chain rte_hash_crc, the Nack ranges on the wire, and
// the receive window's bitmap (held packets, the runs a Nack names).
// Built where libdpdk is (its headers); the transport itself is tested
// over a port in dataplane_dpdk_test.cpp.
#include <gtest/gtest.h>

#ifdef GENIE_HAVE_DPDK_TRANSPORT
#include <cstring>
#include <vector>

#include "dataplane/dpdk/seq_window.hpp"
#include "dataplane/dpdk/wire.hpp"

namespace genie::dataplane::dpdk {
namespace {

std::vector<uint8_t> bytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = static_cast<uint8_t>(seed >> 24);
  }
  return v;
}

TEST(DpdkParts, Crc32cMatchesTheCastagnoliCheckValue) {
  const char* s = "123456789";
  EXPECT_EQ(~crc32c(s, 9, 0xFFFFFFFFu), 0xE3069283u);  // the standard CRC-32C check
}

TEST(DpdkParts, ThreeChainCrcEqualsOneChainAtEveryLengthAndAlignment) {
  const std::vector<uint8_t> v = bytes(20000, 7);
  // Around every multiple of the 768-byte three-block run, and packet sizes.
  std::vector<size_t> lens;
  for (size_t n = 0; n < 2400; n += 1) lens.push_back(n);
  for (size_t n : {8920u, 9000u, 1420u, 16384u, 19990u}) lens.push_back(n);
  for (size_t len : lens)
    for (size_t off : {0u, 1u, 3u, 7u}) {
      if (off + len > v.size()) continue;
      ASSERT_EQ(crc32c(v.data() + off, len, 0xFFFFFFFFu), crc32c_reference(v.data() + off, len, 0xFFFFFFFFu))
          << "length " << len << " at offset " << off;
    }
  // Continued over pieces, as over an mbuf chain.
  uint32_t c = 0xFFFFFFFFu;
  c = crc32c(v.data(), 777, c);
  c = crc32c(v.data() + 777, 9000, c);
  EXPECT_EQ(c, crc32c_reference(v.data(), 9777, 0xFFFFFFFFu));
  // One flipped bit anywhere changes it.
  std::vector<uint8_t> w(v.begin(), v.begin() + 9000);
  const uint32_t good = crc32c(w.data(), w.size(), 0xFFFFFFFFu);
  for (size_t at : {0u, 300u, 1000u, 8999u}) {
    w[at] ^= 0x04;
    EXPECT_NE(crc32c(w.data(), w.size(), 0xFFFFFFFFu), good) << at;
    w[at] ^= 0x04;
  }
}

TEST(DpdkParts, NackRangesRoundTripAndBadOnesAreRefused) {
  SeqRange in[3] = {{5, 1}, {0xFFFFFFF0u, 32}, {100, 7}};
  uint8_t buf[kMaxNackRanges * kNackRangeBytes];
  const size_t len = encode_ranges(in, 3, buf);
  ASSERT_EQ(len, 24u);
  EXPECT_EQ(buf[3], 5);  // network byte order
  SeqRange out[kMaxNackRanges];
  size_t n = 0;
  ASSERT_TRUE(decode_ranges(buf, len, out, &n));
  ASSERT_EQ(n, 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].first, in[i].first);
    EXPECT_EQ(out[i].count, in[i].count);
  }
  EXPECT_FALSE(decode_ranges(buf, 23, out, &n)) << "a partial range";
  std::memset(buf + 4, 0, 4);
  EXPECT_FALSE(decode_ranges(buf, len, out, &n)) << "an empty range";
  std::vector<uint8_t> many((kMaxNackRanges + 1) * kNackRangeBytes, 1);
  EXPECT_FALSE(decode_ranges(many.data(), many.size(), out, &n)) << "too many ranges";
}

TEST(DpdkParts, WindowHoldsPacketsAheadOfAGapAndNamesTheMissingRuns) {
  int items[400];
  SeqWindow<int> w(256);
  w.reset(1);
  EXPECT_FALSE(w.put(0, &items[0])) << "below the window";
  EXPECT_FALSE(w.put(257, &items[0])) << "beyond the window";
  // 1 arrives, then 3, 4, 10, 70..72 (across a 64-bit word), 200.
  ASSERT_TRUE(w.put(1, &items[1]));
  EXPECT_EQ(w.pop_front(), &items[1]);
  EXPECT_EQ(w.pop_front(), nullptr);
  EXPECT_EQ(w.base(), 2u);
  for (uint32_t s : {3u, 4u, 10u, 70u, 71u, 72u, 200u}) ASSERT_TRUE(w.put(s, &items[s]));
  EXPECT_FALSE(w.put(4, &items[4])) << "a duplicate";
  EXPECT_EQ(w.held(), 7u);
  EXPECT_EQ(w.top(), 201u);
  EXPECT_TRUE(w.has(70));
  EXPECT_FALSE(w.has(69));
  SeqRange r[8];
  ASSERT_EQ(w.missing(r, 8), 4u);
  const std::pair<uint32_t, uint32_t> want[4] = {{2, 1}, {5, 5}, {11, 59}, {73, 127}};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(r[i].first, want[i].first) << i;
    EXPECT_EQ(r[i].count, want[i].second) << i;
  }
  EXPECT_EQ(w.missing(r, 2), 2u) << "at most as many as asked";
  // 2 fills the first gap: 2, 3, 4 come out in order.
  ASSERT_TRUE(w.put(2, &items[2]));
  EXPECT_EQ(w.pop_front(), &items[2]);
  EXPECT_EQ(w.pop_front(), &items[3]);
  EXPECT_EQ(w.pop_front(), &items[4]);
  EXPECT_EQ(w.pop_front(), nullptr);
  EXPECT_EQ(w.base(), 5u);
  int drained = 0;
  w.drain([&](int*) { ++drained; });
  EXPECT_EQ(drained, 5);  // 10, 70, 71, 72, 200
  EXPECT_EQ(w.held(), 0u);
  EXPECT_EQ(w.missing(r, 8), 0u);
}

TEST(DpdkParts, WindowWorksAcrossTheSequenceNumberWrap) {
  int a, b;
  SeqWindow<int> w(64);
  w.reset(0xFFFFFFFEu);
  ASSERT_TRUE(w.put(1, &b));  // 0xFFFFFFFE, 0xFFFFFFFF and 0 missing
  SeqRange r[4];
  ASSERT_EQ(w.missing(r, 4), 1u);
  EXPECT_EQ(r[0].first, 0xFFFFFFFEu);
  EXPECT_EQ(r[0].count, 3u);
  ASSERT_TRUE(w.put(0xFFFFFFFEu, &a));
  EXPECT_EQ(w.pop_front(), &a);
  EXPECT_EQ(w.pop_front(), nullptr);
  EXPECT_EQ(w.base(), 0xFFFFFFFFu);
}

}  // namespace
}  // namespace genie::dataplane::dpdk
#else
TEST(DpdkParts, NeedsLibdpdk) { GTEST_SKIP() << "libdpdk is not installed: the dpdk transport is not built"; }
#endif
