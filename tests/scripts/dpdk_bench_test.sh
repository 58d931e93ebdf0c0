#!/usr/bin/env bash
# bench/dpdk_throughput.sh runs once on tiny sizes and writes valid JSON
# (no assertion on any figure), and the floor peer of bench_dpdk_packet_cost
# checks its CRCs. bench_dpdk_packet_cost runs with the other
# benchmark programs in cli_test.sh.
set -euo pipefail
B=${GENIE_BUILD_DIR:?GENIE_BUILD_DIR is not set}
[ -e "$B/libgenie_transport_dpdk.so" ] || { echo "SKIP: the dpdk transport plugin is not built (no libdpdk)"; exit 77; }
command -v iperf3 >/dev/null || { echo "SKIP: iperf3 is not installed (scripts/install-deps.sh)"; exit 77; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
bash "$GENIE_SOURCE_DIR/bench/dpdk_throughput.sh" --quick --json "$TMP/out.json"
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert set(d["gbps"]) == {"dpdk","tcp","iperf3","dpdk_lossy"}, d' \
  "$TMP/out.json"
echo "ok: bench/dpdk_throughput.sh --quick"

# The floor under the per-packet cost (bench/dpdk/ring_floor.cpp): the peer
# moves packets and checks every CRC with the transport's own function, and
# bench_dpdk_packet_cost reports it beside the transport.
if [ -x "$B/bench/dpdk_ring_floor_peer" ]; then
  "$B/bench/dpdk_ring_floor_peer" 64 20000 1 crc "$B/libgenie_transport_dpdk.so" >"$TMP/floor.json"
  /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["crc"] == "genie_dpdk_crc32c" and d["crc_errors"] == 0 and d["ns_per_packet"][0] > 0, d' \
    "$TMP/floor.json"
  "$B/bench/bench_dpdk_packet_cost" --quick --json "$TMP/cost.json" >/dev/null
  /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["floor_ns_per_packet"] > 0 and d["floor_crc_ns_per_packet"] > 0, d' \
    "$TMP/cost.json"
  echo "ok: the per-packet floor, with the transport's CRC"
fi
