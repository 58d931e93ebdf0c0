// The floor under the dpdk transport's per-packet cost (bench_dpdk_packet_cost
// runs it beside the transport): the same packets through an in-process
// net_ring port with no protocol at all. One thread, bursts of 32: take
// mbufs, write an Ethernet header, an 80-byte header and the fragment's
// bytes (copied, as the transport copies small fragments), transmit;
// receive, read the header, copy the fragment out (as the transport's
// receiver copies into the frame's memory), free. With `crc`, a CRC-32C
// over header and fragment on each side, as the transport computes and
// verifies one: the transport's own function where its plugin is named
// (genie_dpdk_crc32c), else DPDK's rte_hash_crc. No windows, acknowledgements,
// sessions, reassembly or hand-off to another thread.
//
// usage: dpdk_ring_floor_peer FRAGMENT_BYTES PACKETS ROUNDS [crc [PLUGIN.so]]
// prints one line: {"ns_per_packet": [..one per round..], "crc": "none"|function, "crc_errors": N, ...}
// A peer process of the benchmark (EAL initialises once per process), not
// a benchmark of its own.
#include <dlfcn.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_hash_crc.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace {

constexpr uint16_t kBurst = 32;
constexpr uint32_t kEth = 14, kHdr = 80;

using CrcFn = uint32_t (*)(const void*, size_t, uint32_t);
uint32_t dpdk_crc(const void* p, size_t n, uint32_t c) {
  return rte_hash_crc(p, static_cast<uint32_t>(n), c);
}

int fail(const char* what) {
  std::fprintf(stderr, "dpdk_ring_floor_peer: %s: %s\n", what, rte_strerror(rte_errno));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s FRAGMENT_BYTES PACKETS ROUNDS [crc]\n", argv[0]);
    return 2;
  }
  const uint32_t frag = static_cast<uint32_t>(std::strtoul(argv[1], nullptr, 10));
  const uint64_t packets = std::strtoull(argv[2], nullptr, 10);
  const int rounds = std::atoi(argv[3]);
  const bool crc = argc > 4 && std::strcmp(argv[4], "crc") == 0;
  CrcFn crc32c = dpdk_crc;
  const char* crc_name = "rte_hash_crc";
  if (argc > 5)
    if (void* h = dlopen(argv[5], RTLD_NOW | RTLD_LOCAL))
      if (auto fn = reinterpret_cast<CrcFn>(dlsym(h, "genie_dpdk_crc32c"))) {
        crc32c = fn;
        crc_name = "genie_dpdk_crc32c";
      }
  if (frag == 0 || frag > 9000 || packets == 0 || rounds <= 0) return 2;

  int cpu = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) {
        cpu = c;
        break;
      }
  const std::string lcore = std::to_string(cpu), prefix = "genie_floor_" + std::to_string(getpid());
  std::vector<std::string> args{argv[0],
                                "-l",
                                lcore,
                                "--no-huge",
                                "-m",
                                "256",
                                "--no-shconf",
                                "--no-pci",
                                "--no-telemetry",
                                "--vdev=net_ring0",
                                "--log-level=*:warning",
                                "--file-prefix=" + prefix};
  std::vector<char*> eal;
  for (auto& a : args) eal.push_back(a.data());
  if (rte_eal_init(static_cast<int>(eal.size()), eal.data()) < 0) return fail("rte_eal_init");
  const uint16_t room =
      static_cast<uint16_t>(RTE_PKTMBUF_HEADROOM + std::max<uint32_t>(2048, kEth + kHdr + frag));
  rte_mempool* pool = rte_pktmbuf_pool_create("floor", 8191, 512, 0, room, static_cast<int>(rte_socket_id()));
  if (pool == nullptr) return fail("rte_pktmbuf_pool_create");
  rte_eth_conf conf{};
  const uint16_t port = 0;
  if (rte_eth_dev_configure(port, 1, 1, &conf) != 0 ||
      rte_eth_rx_queue_setup(port, 0, 1024, 0, nullptr, pool) != 0 ||
      rte_eth_tx_queue_setup(port, 0, 1024, 0, nullptr) != 0 || rte_eth_dev_start(port) != 0)
    return fail("net_ring port");

  std::vector<uint8_t> src(1 << 20), dst(1 << 20);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131);
  uint8_t hdr[kHdr];
  std::memset(hdr, 0x5a, sizeof hdr);
  const size_t span = src.size() - frag;
  uint64_t sink = 0, bad = 0;
  std::vector<double> ns;
  for (int r = 0; r < rounds; ++r) {
    uint64_t sent = 0, got = 0, off_tx = 0, off_rx = 0;
    const auto t0 = std::chrono::steady_clock::now();
    while (got < packets) {
      rte_mbuf* tx[kBurst];
      const uint16_t want = static_cast<uint16_t>(std::min<uint64_t>(kBurst, packets - sent));
      if (want > 0 && rte_pktmbuf_alloc_bulk(pool, tx, want) == 0) {
        for (uint16_t i = 0; i < want; ++i) {
          auto* d = reinterpret_cast<uint8_t*>(
              rte_pktmbuf_append(tx[i], static_cast<uint16_t>(kEth + kHdr + frag)));
          std::memset(d, 0xff, 12);
          d[12] = 0x88;
          d[13] = 0xb5;
          std::memcpy(hdr, &sent, sizeof sent);  // a sequence number
          const uint8_t* payload = src.data() + off_tx;
          uint32_t c = 0;
          std::memset(hdr + kHdr - 8, 0, 4);  // the CRC field, zero while the CRC is taken
          if (crc) c = crc32c(payload, frag, crc32c(hdr, kHdr, 0xFFFFFFFFu));
          std::memcpy(hdr + kHdr - 8, &c, sizeof c);
          std::memcpy(d + kEth, hdr, kHdr);
          std::memcpy(d + kEth + kHdr, payload, frag);
          off_tx = off_tx + frag > span ? 0 : off_tx + frag;
          ++sent;
        }
        uint16_t n = 0;
        while (n < want) n += rte_eth_tx_burst(port, 0, tx + n, static_cast<uint16_t>(want - n));
      }
      rte_mbuf* rx[kBurst];
      const uint16_t n = rte_eth_rx_burst(port, 0, rx, kBurst);
      for (uint16_t i = 0; i < n; ++i) {
        const auto* d = rte_pktmbuf_mtod(rx[i], const uint8_t*);
        uint64_t seq;
        std::memcpy(&seq, d + kEth, sizeof seq);
        sink += seq;
        if (crc) {
          uint8_t h[kHdr];
          std::memcpy(h, d + kEth, kHdr);
          uint32_t want_crc;
          std::memcpy(&want_crc, h + kHdr - 8, sizeof want_crc);
          std::memset(h + kHdr - 8, 0, 4);
          bad += crc32c(d + kEth + kHdr, frag, crc32c(h, kHdr, 0xFFFFFFFFu)) != want_crc;
        }
        std::memcpy(dst.data() + off_rx, d + kEth + kHdr, frag);
        off_rx = off_rx + frag > span ? 0 : off_rx + frag;
      }
      rte_pktmbuf_free_bulk(rx, n);
      got += n;
    }
    ns.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
                 static_cast<double>(packets));
  }
  std::printf("{\"ns_per_packet\": [");
  for (size_t i = 0; i < ns.size(); ++i) std::printf("%s%.1f", i ? ", " : "", ns[i]);
  std::printf("], \"crc\": \"%s\", \"crc_errors\": %llu, \"sink\": %llu}\n", crc ? crc_name : "none",
              static_cast<unsigned long long>(bad), static_cast<unsigned long long>(sink & 1));
  rte_eth_dev_stop(port);
  // EAL keeps its runtime directory (named by this process's file prefix)
  // after it exits: remove it.
  const std::string runtime = rte_eal_get_runtime_dir();
  rte_eal_cleanup();
  std::error_code ec;
  std::filesystem::remove_all(runtime, ec);
  return 0;
}
