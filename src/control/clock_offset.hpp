// The offset between this process's steady clock and a server's, NTP-style,
// from round trips on the control connection (ClockProbe): a sample is the
// client's time when the probe left (t0), the server's time when it
// answered, and the client's time when the answer arrived (t1). The sample
// of least round-trip time bounds the error best: the server's time lies
// somewhere within [t0, t1] on the client's clock, so taking its middle is
// off by at most half that round trip.
#pragma once

#include <cstdint>
#include <vector>

namespace genie {

struct ClockSample {
  uint64_t t0_ns = 0;      // client: the probe left
  uint64_t server_ns = 0;  // server: it answered
  uint64_t t1_ns = 0;      // client: the answer arrived
};

struct ClockOffset {
  bool known = false;
  // server time = client time + offset_ns, within +-error_ns.
  int64_t offset_ns = 0;
  uint64_t error_ns = 0;
  uint64_t rtt_ns = 0;  // the round trip of the sample taken
  int samples = 0;      // round trips measured
};

// The estimate from the sample of least round-trip time (offset = server -
// (t0 + t1) / 2, error = rtt / 2); not known without a sample (samples with
// t1 < t0 are ignored).
inline ClockOffset estimate_clock_offset(const std::vector<ClockSample>& samples) {
  ClockOffset best;
  for (const ClockSample& s : samples) {
    if (s.t1_ns < s.t0_ns) continue;
    const uint64_t rtt = s.t1_ns - s.t0_ns;
    if (best.known && rtt >= best.rtt_ns) continue;
    best.known = true;
    best.rtt_ns = rtt;
    const uint64_t mid = s.t0_ns + rtt / 2;
    best.offset_ns = static_cast<int64_t>(s.server_ns - mid);  // two's complement: negative when behind
    best.error_ns = (rtt + 1) / 2;
  }
  best.samples = static_cast<int>(samples.size());
  return best;
}

}  // namespace genie
