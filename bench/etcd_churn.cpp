// Membership churn against a real etcd (issue 36, "Scale"): an etcd started
// here on 127.0.0.1 (free ports, data in a temporary folder, stopped by its
// pid), 1,000 registrations as a `genie serve` makes them (a lease of the
// shortest TTL etcd grants, then a create-if-absent transaction) that are
// never renewed, so that etcd expires every one of them while the others
// are still registering; a member cache (cluster/member_cache.hpp) watches
// it all, as every server does. Reported: registrations/s, watch events/s
// (joins and expiries, from the first registration to the last event the
// cache received), the watch backlog (registrations made but not yet seen
// by the cache, sampled every 50) and this process's peak RSS before and
// after each round: two rounds, so that a backlog or memory that grows with
// the churn shows as a second round above the first.
//
// Without etcd installed (Debian etcd-server), or without the etcd store
// plugin (no libcurl at configure time), it says so and writes a JSON with
// "skipped". Never a pass/fail on a time (BENCHMARKING.md).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "bench_util.h"
#include "cluster/member_cache.hpp"
#include "cluster/store_plugin.hpp"
#include "tests/unit/etcd_testing.hpp"

using namespace genie;
using Clock = std::chrono::steady_clock;

namespace {

// This process's peak resident set (VmHWM), in MiB.
double peak_rss_mib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  return 0;
}

std::shared_ptr<MembershipStore> open_store(const std::string& endpoint) {
  StoreOptions o;
  o.endpoints = {endpoint};
  o.cluster = "churn";
  o.timeout_ms = 5000;
  for (int i = 0;; ++i) {
    try {
      return open_membership_store("etcd", o);
    } catch (const Error& e) {
      if (i >= 100 || e.code() == GENIE_ERR_UNSUPPORTED) throw;  // etcd electing itself: at most 10 s
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

struct Round {
  double reg_per_s = 0, events_per_s = 0, seconds = 0;
  size_t max_backlog = 0;
  double rss_before = 0, rss_after = 0;
  bool complete = false;
};

}  // namespace

int main(int argc, char** argv) {
  const bu_options_t o = bu_parse_args(argc, argv, " (registrations a round; default 1000, --quick 100)");
  const int n = o.iters ? o.iters : (o.quick ? 100 : 1000);
  const int rounds = o.quick ? 1 : 2;
  FILE* json = bu_json_open(o.json_path);
  if (testing::etcd_binary().empty()) {
    std::printf("etcd churn: skipped: etcd is not installed (Debian etcd-server)\n");
    if (json) std::fprintf(json, "{\"skipped\": \"etcd is not installed\"}\n");
    return 0;
  }
  ::setenv("GENIE_TRANSPORT_PATH", GENIE_BUILD_DIR, 0);
  testing::EtcdProcess etcd;
  if (!etcd.start()) {
    std::fprintf(stderr, "bench: etcd did not start\n");
    return 1;
  }
  std::vector<Round> out;
  try {
    std::shared_ptr<MembershipStore> writer;
    try {
      writer = open_store(etcd.endpoint());
    } catch (const Error& e) {
      if (e.code() != GENIE_ERR_UNSUPPORTED) throw;
      std::printf("etcd churn: skipped: the etcd store plugin is not built (%s)\n", e.detail().c_str());
      if (json) std::fprintf(json, "{\"skipped\": \"the etcd store plugin is not built\"}\n");
      return 0;
    }
    auto reader = open_store(etcd.endpoint());
    std::atomic<size_t> puts{0}, deletes{0};
    MemberCache cache(reader, [&](const MemberEvent& e) {
      (e.kind == MemberEvent::Kind::Put ? puts : deletes).fetch_add(1);
    });
    const std::string value = R"({"id":"x","role":"server","listen":"127.0.0.1:5555","devices":["cpu:0"]})";
    for (int r = 0; r < rounds; ++r) {
      Round rd;
      rd.rss_before = peak_rss_mib();
      const size_t puts0 = puts.load(), dels0 = deletes.load();
      const Clock::time_point t0 = Clock::now();
      for (int i = 0; i < n; ++i) {
        // The shortest TTL etcd grants (it rounds 1 s up to its minimum).
        const uint64_t lease = writer->grant(1000);
        writer->create("r" + std::to_string(r) + "-" + std::to_string(i), value, lease);
        if (i % 50 == 49)
          rd.max_backlog = std::max(rd.max_backlog, static_cast<size_t>(i + 1) - (puts - puts0));
      }
      rd.reg_per_s = n / std::chrono::duration<double>(Clock::now() - t0).count();
      // Every one joins and expires: 2n events; etcd expires a lease within
      // a few seconds of its TTL. At most 60 s.
      const Clock::time_point deadline = Clock::now() + std::chrono::seconds(60);
      while ((puts - puts0 < static_cast<size_t>(n) || deletes - dels0 < static_cast<size_t>(n)) &&
             Clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      rd.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      rd.complete = puts - puts0 >= static_cast<size_t>(n) && deletes - dels0 >= static_cast<size_t>(n);
      rd.events_per_s = static_cast<double>((puts - puts0) + (deletes - dels0)) / rd.seconds;
      rd.rss_after = peak_rss_mib();
      out.push_back(rd);
      if (!rd.complete || cache.size() != 0) {
        std::fprintf(stderr,
                     "bench: round %d: %zu joins and %zu expiries of %d seen, %zu left in the cache\n", r,
                     puts - puts0, deletes - dels0, n, cache.size());
        return 1;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench: %s\n", e.what());
    return 1;
  }
  std::printf(
      "etcd churn: %d registrations a round (lease never renewed: each joins and expires), a member cache "
      "watching; etcd on 127.0.0.1\n",
      n);
  for (size_t r = 0; r < out.size(); ++r)
    std::printf(
        "  round %zu: %7.0f registrations/s   %7.0f watch events/s (%d in %.2f s)   max backlog %zu   "
        "peak RSS %.1f -> %.1f MiB\n",
        r + 1, out[r].reg_per_s, out[r].events_per_s, 2 * n, out[r].seconds, out[r].max_backlog,
        out[r].rss_before, out[r].rss_after);
  if (json) {
    std::fprintf(json, "{\"registrations\": %d, \"rounds\": [", n);
    for (size_t r = 0; r < out.size(); ++r)
      std::fprintf(json,
                   "%s{\"registrations_per_s\": %.1f, \"events_per_s\": %.1f, \"seconds\": %.3f, "
                   "\"max_backlog\": %zu, \"peak_rss_mib_before\": %.2f, \"peak_rss_mib_after\": %.2f}",
                   r ? ", " : "", out[r].reg_per_s, out[r].events_per_s, out[r].seconds, out[r].max_backlog,
                   out[r].rss_before, out[r].rss_after);
    std::fprintf(json, "]}\n");
    std::fclose(json);
  }
  return 0;
}
