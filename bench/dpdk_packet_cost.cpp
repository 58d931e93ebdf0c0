// Per-packet cost of the dpdk transport on an in-process net_ring port
// (docs/dpdk.md), beside memcpy of the same bytes (the physical limit of a
// transport that must at least move them), interleaved.
//
// One channel, both ends on one libuv loop: frames of 1 MiB (8 in flight)
// go through the transport; the engine's one polling thread does transmit,
// receive, CRC (computed by the sender, verified by the receiver), reassembly
// and acks of both ends, and the loop's thread copies each payload into its
// frame's buffer, so the elapsed time per Data packet is the whole
// per-packet cost of a send and its receipt. The Acks are counted in the
// cost, not as packets. GENIE_DPDK_MTU sets the packet size (default 1500:
// 1420-byte fragments; 144 gives 64-byte fragments, where fixed costs
// dominate; 9000 gives 8920-byte ones, where the bytes do). Beside it: the
// CRC of one packet, timed alone (the transport's own function), which
// every packet pays twice, memcpy of a fragment's bytes, and the floor: the
// same fragments through net_ring with no protocol at all, with and without
// the transport's CRC on each side (bench/dpdk/ring_floor.cpp, run between
// the rounds).
//
// Internal interfaces (the registry) are not in the C API, so this links
// the static library. Never a pass/fail on a time (BENCHMARKING.md).
#include <dlfcn.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "dataplane/registry.hpp"

using namespace genie;
using namespace genie::dataplane;
using Clock = std::chrono::steady_clock;

namespace {

uint64_t g_stats[8];

using CrcFn = uint32_t (*)(const void*, size_t, uint32_t);
CrcFn crc_fn() {
  void* h = dlopen(GENIE_BUILD_DIR "/libgenie_transport_dpdk.so", RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return nullptr;
  auto fn = reinterpret_cast<CrcFn>(dlsym(h, "genie_dpdk_crc32c"));
  dlclose(h);  // still loaded: the transport holds it
  return fn;
}

// ns for the CRC of one packet's header and fragment (`bytes`), from a
// warm buffer, median of a few runs.
double crc_ns(CrcFn fn, uint32_t bytes) {
  if (fn == nullptr) return 0;
  std::vector<uint8_t> buf(bytes + 64, 0x3c);
  std::vector<double> runs;
  uint32_t sink = 0;
  for (int r = 0; r < 5; ++r) {
    const int n = 20000;
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) sink += fn(buf.data() + (i & 7), bytes, 0xFFFFFFFFu);
    runs.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / n);
  }
  if (sink == 42) std::printf(" ");
  return bu_stats(runs.data(), runs.size()).median;
}
// ns per packet of the floor under the transport (bench/dpdk/ring_floor.cpp,
// a process of its own: EAL initialises once per process): the same
// fragments through net_ring with no protocol, with or without the
// transport's CRC-32C on each side; one round of `packets`. -1 where the peer was not built or failed.
double floor_ns(uint32_t frag, uint64_t packets, bool crc) {
  const std::string peer = GENIE_BUILD_DIR "/bench/dpdk_ring_floor_peer";
  if (access(peer.c_str(), X_OK) != 0) return -1;
  const std::string cmd = peer + " " + std::to_string(frag) + " " + std::to_string(packets) + " 1" +
                          (crc ? " crc " GENIE_BUILD_DIR "/libgenie_transport_dpdk.so" : "") + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char line[512] = {};
  const bool got = std::fgets(line, sizeof line, p) != nullptr;
  const int st = pclose(p);
  const char* at = got && st == 0 ? std::strchr(line, '[') : nullptr;
  return at != nullptr ? std::strtod(at + 1, nullptr) : -1;
}

uint64_t dpdk_packets() {
  uint64_t* s = g_stats;
  void* h = dlopen(GENIE_BUILD_DIR "/libgenie_transport_dpdk.so", RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return 0;
  if (auto fn = reinterpret_cast<void (*)(uint64_t*)>(dlsym(h, "genie_dpdk_stats"))) fn(s);
  dlclose(h);
  return s[0];  // transmitted packets
}

struct Run {
  uv_loop_t* loop;
  std::shared_ptr<Channel> tx;
  std::vector<uint8_t> src, dst;
  int frames = 0, sent = 0, received = 0, inflight = 0;
  bool failed = false;
  std::string why;

  void pump() {
    while (inflight < 8 && sent < frames) {
      ++inflight;
      ++sent;
      tx->send(1, sent, 0, "f", src.data(), src.size(), nullptr, [this](genie_status_t st) {
        --inflight;
        if (st != GENIE_OK) {
          failed = true;
          why = "send failed";
        }
        pump();
      });
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  bu_options_t o = bu_parse_args(argc, argv, " (rounds)");
  const int rounds = o.iters ? o.iters : o.quick ? 1 : 5;
  const size_t frame = o.quick ? (64u << 10) : (1u << 20);
  const int frames = o.quick ? 4 : 128;
  FILE* json = bu_json_open(o.json_path);
  setenv("GENIE_TRANSPORT_PATH", GENIE_BUILD_DIR, 0);
  setenv("GENIE_DPDK_MTU", "1500", 0);  // else net_ring's default, 9000
  setenv("GENIE_DPDK_EAL",
         "-l 0 --no-huge -m 256 --no-shconf --no-pci --no-telemetry --log-level=*:error --vdev=net_ring0", 0);
  TransportLookup t = lookup_transport("dpdk");
  if (!t.transport) {
    std::printf("dpdk per-packet cost: skipped: %s\n", t.reason.c_str());
    if (json) {
      std::fprintf(json, "{\"benchmark\": \"dpdk_packet_cost\", \"skipped\": ");
      bu_json_str(json, t.reason.c_str());
      std::fprintf(json, "}\n");
      std::fclose(json);
    }
    return 0;
  }
  uv_loop_t loop;
  uv_loop_init(&loop);
  Run r;
  r.loop = &loop;
  r.src.assign(frame, 0x5a);
  r.dst.resize(frame);
  std::shared_ptr<Channel> rx;
  ChannelHandlers rh;
  rh.on_frame = [&](const FrameHeader& h, std::string&&) -> PayloadSink {
    return PayloadSink{r.dst.data(), nullptr, [&] { ++r.received; }};
  };
  rh.on_close = [](genie_status_t, const std::string&) {};
  auto listener = t.transport->listen(&loop, "bench:0", {}, [&](Listener& l) { rx = l.accept(rh); });
  bool up = false;
  ChannelHandlers th;
  th.on_close = [&](genie_status_t st, const std::string& d) {
    if (st != GENIE_OK) {
      r.failed = true;
      r.why = d;
    }
  };
  r.tx =
      t.transport->connect(&loop, listener->address(), {}, th, [&](genie_status_t st, const std::string& d) {
        up = st == GENIE_OK;
        if (!up) r.why = d;
      });
  while (!up && r.why.empty()) uv_run(&loop, UV_RUN_ONCE);
  if (!up) {
    std::fprintf(stderr, "dpdk per-packet cost: cannot connect: %s\n", r.why.c_str());
    return 1;
  }
  const uint32_t mtu = static_cast<uint32_t>(std::atoi(std::getenv("GENIE_DPDK_MTU")));
  // Every frame: its 40-byte header, the 1-byte message, the payload.
  const uint64_t frags = (frame + 41 + (mtu - 80) - 1) / (mtu - 80);
  std::vector<double> per_packet, per_wire, copy_ns, ratio, floor_plain, floor_crc;
  double gbps = 0;
  for (int i = 0; i <= rounds; ++i) {  // round 0 warms up
    r.frames = frames;
    r.sent = r.received = 0;
    const uint64_t p0 = dpdk_packets();
    const auto t0 = Clock::now();
    r.pump();
    while (r.received < frames && !r.failed) uv_run(&loop, UV_RUN_ONCE);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    const uint64_t packets = dpdk_packets() - p0;
    // memcpy of the same bytes, one pass.
    std::vector<uint8_t> a(frame, 1), b(frame);
    const auto c0 = Clock::now();
    for (int k = 0; k < frames; ++k)
      std::memcpy(b.data(), a.data(), frame), a[k % frame] = b[(k * 7) % frame];
    const double cs = std::chrono::duration<double>(Clock::now() - c0).count();
    // The floor, with as many packets as the round's Data packets.
    const uint64_t floor_packets = std::min<uint64_t>(frags * frames, 4000000);
    const double fp = i == 0 ? -1 : floor_ns(mtu - 80, floor_packets, false);
    const double fc = i == 0 ? -1 : floor_ns(mtu - 80, floor_packets, true);
    if (fp > 0) floor_plain.push_back(fp);
    if (fc > 0) floor_crc.push_back(fc);
    if (r.failed) {
      std::fprintf(stderr, "dpdk per-packet cost: %s\n", r.why.c_str());
      return 1;
    }
    if (i == 0 || packets == 0) continue;
    const double data_packets = double(frags) * frames;
    per_packet.push_back(s * 1e9 / data_packets);
    per_wire.push_back(s * 1e9 / double(packets));
    copy_ns.push_back(cs * 1e9 / data_packets);
    ratio.push_back(per_packet.back() / copy_ns.back());
    gbps = double(frame) * frames * 8 / s / 1e9;
  }
  bu_stats_t pp = bu_stats(per_packet.data(), per_packet.size());
  bu_stats_t pw = bu_stats(per_wire.data(), per_wire.size());
  const double crc = crc_ns(crc_fn(), mtu);
  bu_stats_t cp = bu_stats(copy_ns.data(), copy_ns.size());
  bu_stats_t ra = bu_stats(ratio.data(), ratio.size());
  std::printf(
      "dpdk per-packet cost on net_ring, MTU %u (%u-byte fragments), %d x %zu-byte frames, %d rounds\n", mtu,
      mtu - 80, frames, frame, rounds);
  std::printf("  dpdk   %8.1f ns/packet med (min %.1f, max %.1f) per Data packet, send to receipt;"
              " %.1f per packet on the wire (Acks too)   last round %.2f Gbit/s\n",
              pp.median, pp.min, pp.max, pw.median, gbps);
  std::printf("  crc32c %8.1f ns for one packet's %u bytes, alone (paid twice: computed, verified)\n", crc, mtu);
  std::printf("  memcpy %8.1f ns per fragment's bytes med (min %.1f)\n", cp.median, cp.min);
  std::printf("  ratio dpdk/memcpy (median of pairs) %.1f\n", ra.median);
  bu_stats_t fl = bu_stats(floor_plain.data(), floor_plain.size());
  bu_stats_t fc = bu_stats(floor_crc.data(), floor_crc.size());
  if (!floor_plain.empty() && !floor_crc.empty())
    std::printf(
        "  floor  %8.1f ns/packet med (min %.1f) through net_ring with no protocol; %.1f (min %.1f) with the "
        "transport's CRC-32C on each side (dpdk_ring_floor_peer, interleaved)\n",
        fl.median, fl.min, fc.median, fc.min);
  else
    std::printf("  floor  not measured (%s/bench/dpdk_ring_floor_peer not built or failed)\n",
                GENIE_BUILD_DIR);
  std::printf("  engine: %llu packets sent, %llu retransmitted, %llu CRC drops, %llu duplicates\n",
              (unsigned long long)g_stats[0], (unsigned long long)g_stats[2], (unsigned long long)g_stats[3],
              (unsigned long long)g_stats[4]);
  if (json) {
    std::fprintf(
        json,
        "{\"benchmark\": \"dpdk_packet_cost\", \"mtu\": %u, \"rounds\": %d, \"ns_per_packet\": %.2f, "
        "\"ns_per_wire_packet\": %.2f, \"crc_ns\": %.2f, \"memcpy_ns_per_fragment\": %.2f, \"ratio\": %.3f, "
        "\"floor_ns_per_packet\": %.2f, \"floor_crc_ns_per_packet\": %.2f}\n",
        mtu, rounds, pp.median, pw.median, crc, cp.median, ra.median, floor_plain.empty() ? -1.0 : fl.median,
        floor_crc.empty() ? -1.0 : fc.median);
    std::fclose(json);
  }
  r.tx->close();
  if (rx) rx->close();
  listener->close();
  uv_run(&loop, UV_RUN_DEFAULT);  // until both channels and the listener have closed
  uv_loop_close(&loop);
  return 0;
}
