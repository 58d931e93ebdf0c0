#!/usr/bin/env bash
# bench/dpdk_throughput.sh runs once on tiny sizes and writes valid JSON
# (no assertion on any figure). bench_dpdk_packet_cost runs with the other
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
