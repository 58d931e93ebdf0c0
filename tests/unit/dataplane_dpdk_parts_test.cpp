// The DPDK transport's pieces that need no EAL: the CRC-32C (ISA-L's and
// the three-chain one) against DPDK's one-chain rte_hash_crc, a packet's
// CRC over an mbuf chain, the Nack ranges on the wire, the receive
// window's bitmap (held packets, the runs a Nack names), the ring of
// packets in flight and their hold on their message, and the mbuf stash
// when its pool runs dry.
// Built where libdpdk is (its headers); the transport itself is tested
// over a port in dataplane_dpdk_test.cpp.
#include <gtest/gtest.h>

#ifdef GENIE_HAVE_DPDK_TRANSPORT
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "dataplane/dpdk/flight_ring.hpp"
#include "dataplane/dpdk/mbuf_stash.hpp"
#include "dataplane/dpdk/seq_window.hpp"
#include "dataplane/dpdk/session.hpp"
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

TEST(DpdkParts, FoldingAndThreeChainCrcEqualOneChainAtEveryLengthAndAlignment) {
  const std::vector<uint8_t> v = bytes(20000, 7);
  // Around every multiple of the 768-byte three-block run, and packet sizes.
  std::vector<size_t> lens;
  for (size_t n = 0; n < 2400; n += 1) lens.push_back(n);
  for (size_t n : {8920u, 9000u, 1420u, 16384u, 19990u}) lens.push_back(n);
  for (size_t len : lens)
    for (size_t off : {0u, 1u, 3u, 7u}) {
      if (off + len > v.size()) continue;
      const uint32_t want = crc32c_reference(v.data() + off, len, 0xFFFFFFFFu);
      ASSERT_EQ(crc32c(v.data() + off, len, 0xFFFFFFFFu), want) << "length " << len << " at offset " << off;
      ASSERT_EQ(crc32c_chains(v.data() + off, len, 0xFFFFFFFFu), want) << "length " << len << " at offset " << off;
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

// An mbuf over [p, p + len) of a test buffer (only what the CRC reads).
rte_mbuf seg(uint8_t* p, uint16_t len, rte_mbuf* next) {
  rte_mbuf m{};
  m.buf_addr = p;
  m.data_off = 0;
  m.data_len = len;
  m.next = next;
  return m;
}

TEST(DpdkParts, PacketCrcTakesTheCrcFieldAsZeroAndFollowsTheChain) {
  PacketHeader h;
  h.seq = 7;
  h.payload_len = 3000;
  std::vector<uint8_t> pkt(kPacketHeaderSize + 3000);
  encode_header(h, pkt.data());
  const std::vector<uint8_t> payload = bytes(3000, 3);
  std::memcpy(pkt.data() + kPacketHeaderSize, payload.data(), payload.size());
  const uint32_t want = crc32c_reference(pkt.data(), pkt.size(), 0xFFFFFFFFu);
  // Ethernet-header room, then the header and 100 payload bytes in one
  // segment, the rest in two more (as a header mbuf and attached ones).
  std::vector<uint8_t> first(14 + kPacketHeaderSize + 100, 0xEE);
  std::memcpy(first.data() + 14, pkt.data(), kPacketHeaderSize + 100);
  std::vector<uint8_t> rest(pkt.begin() + kPacketHeaderSize + 100, pkt.end());
  rte_mbuf c = seg(rest.data() + 900, 2000, nullptr);
  rte_mbuf b = seg(rest.data(), 900, &c);
  rte_mbuf a = seg(first.data(), static_cast<uint16_t>(first.size()), &b);
  const uint8_t* hdr = first.data() + 14;
  EXPECT_EQ(packet_crc(hdr, &a, 14 + kPacketHeaderSize, 3000), want);
  store_crc(first.data() + 14, 0xDEADBEEF);  // the stored CRC is not part of it
  EXPECT_EQ(packet_crc(hdr, &a, 14 + kPacketHeaderSize, 3000), want);
  rest[1500] ^= 1;
  EXPECT_NE(packet_crc(hdr, &a, 14 + kPacketHeaderSize, 3000), want);
}

// A pool of `size` fake mbufs that counts what is out and refuses a batch
// larger than what it has left (rte_pktmbuf_alloc_bulk is all or nothing).
struct FakePool {
  std::vector<rte_mbuf>* store = nullptr;
  std::vector<rte_mbuf*>* free = nullptr;
  int* calls = nullptr;
  bool alloc_bulk(rte_mbuf** out, unsigned n) {
    ++*calls;
    if (n > free->size()) return false;
    for (unsigned i = 0; i < n; ++i) {
      out[i] = free->back();
      free->pop_back();
    }
    return true;
  }
  void free_bulk(rte_mbuf** m, unsigned n) {
    for (unsigned i = 0; i < n; ++i) free->push_back(m[i]);
  }
};

TEST(DpdkParts, MbufStashTakesBatchesAndCopesWithAPoolRunningDry) {
  std::vector<rte_mbuf> store(77);
  std::vector<rte_mbuf*> free;
  for (auto& m : store) free.push_back(&m);
  int calls = 0;
  std::set<rte_mbuf*> out;
  {
    MbufStash<FakePool> stash(FakePool{&store, &free, &calls});
    // Forty mbufs cost two calls into the pool, not forty.
    for (int i = 0; i < 40; ++i) {
      ASSERT_TRUE(stash.ensure(1));
      rte_mbuf* m = stash.take();
      ASSERT_NE(m, nullptr);
      EXPECT_TRUE(out.insert(m).second) << "handed out twice";
    }
    EXPECT_EQ(calls, 2);
    EXPECT_EQ(stash.held(), 24u);
    // The pool has 13 left, the stash 24: a full batch no longer fits, the
    // smaller ones that do are taken (8, then 4 and 1) until it is dry.
    EXPECT_TRUE(stash.ensure(32)) << "24 in hand and 8 more from the pool";
    EXPECT_EQ(stash.held(), 32u);
    while (rte_mbuf* m = stash.take()) EXPECT_TRUE(out.insert(m).second) << "handed out twice";
    EXPECT_EQ(out.size(), store.size()) << "every mbuf of the pool, each once";
    EXPECT_TRUE(free.empty());
    EXPECT_FALSE(stash.ensure(1));
    EXPECT_EQ(stash.take(), nullptr);
    // Some come back; the stash takes them again, then gives what it holds
    // back when it goes.
    std::vector<rte_mbuf*> back(out.begin(), out.end());
    FakePool{&store, &free, &calls}.free_bulk(back.data(), 5);
    EXPECT_TRUE(stash.ensure(2));
    EXPECT_EQ(stash.held(), 4u) << "batches of 4, then 1, from the 5 back";
    EXPECT_EQ(free.size(), 1u);
  }
  EXPECT_EQ(free.size(), 5u) << "the stash returned what it held";
}

TEST(DpdkParts, FlightRingKeepsOrderAcrossItsWrapAndLetsGoOfWhatItPops) {
  FlightRing<std::shared_ptr<int>> r(5);
  EXPECT_EQ(r.capacity(), 8u);
  auto held = std::make_shared<int>(0);
  int next = 0, first = 0;
  for (int lap = 0; lap < 5; ++lap) {  // fill to 8, drain to 2: the head wraps
    while (r.size() < r.capacity()) r.push_back(std::make_shared<int>(next++));
    for (size_t i = 0; i < r.size(); ++i) ASSERT_EQ(*r[i], first + static_cast<int>(i));
    EXPECT_EQ(*r.back(), next - 1);
    while (r.size() > 2) {
      ASSERT_EQ(*r.front(), first++);
      r.pop_front();
    }
  }
  r.push_back(held);
  EXPECT_EQ(held.use_count(), 2);
  r.pop_front();
  r.pop_front();
  r.pop_front();
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(held.use_count(), 1) << "a popped slot still holds its item";
  r.push_back(held);
  r.clear();
  EXPECT_EQ(held.use_count(), 1);
}

// Packets in flight keep their message alive through one shared reference
// for all of them, taken by the first and given back by the last.
TEST(DpdkParts, PacketsInFlightHoldTheirMessageUntilTheLastIsPopped) {
  FlightRing<TxPkt> r(8);
  auto a = std::make_shared<TxMsg>();
  auto b = std::make_shared<TxMsg>();
  std::weak_ptr<TxMsg> wa = a, wb = b;
  for (uint32_t f = 0; f < 3; ++f) r.push_back(TxPkt{MsgRef(a), f});
  r.push_back(TxPkt{MsgRef(b), 0});
  EXPECT_EQ(a->flight_refs, 3u);
  EXPECT_EQ(a.use_count(), 2) << "one reference for all three packets";
  EXPECT_EQ(b->flight_refs, 1u);
  EXPECT_EQ(&*r[2].msg, a.get());
  EXPECT_EQ(r[3].msg->flight_refs, 1u);
  a.reset();
  b.reset();
  EXPECT_FALSE(wa.expired()) << "packets in flight still point at it";
  r.pop_front();
  r.pop_front();
  EXPECT_FALSE(wa.expired());
  EXPECT_EQ(wa.lock()->flight_refs, 1u);
  r.pop_front();
  EXPECT_TRUE(wa.expired()) << "its last packet popped: the message goes";
  EXPECT_FALSE(wb.expired());
  r.clear();
  EXPECT_TRUE(wb.expired());
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
  // 0xFFFFFFFF and 0 arrive in order, taken without being held; 1 waits.
  w.skip();
  w.skip();
  EXPECT_EQ(w.base(), 1u);
  EXPECT_EQ(w.pop_front(), &b);
  EXPECT_EQ(w.base(), 2u);
  EXPECT_EQ(w.top(), 2u);
  w.skip();
  EXPECT_EQ(w.top(), 3u) << "with nothing held, top follows base";
  EXPECT_FALSE(w.has(2));
}

}  // namespace
}  // namespace genie::dataplane::dpdk
#else
TEST(DpdkParts, NeedsLibdpdk) { GTEST_SKIP() << "libdpdk is not installed: the dpdk transport is not built"; }
#endif
