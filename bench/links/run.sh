#!/usr/bin/env bash
# Semantic vs blind disaggregation across emulated datacenter links.
#
# For each link profile: a client namespace and a server namespace joined
# by a point-to-point link made of two TUN devices and genie_linkemu
# (bench/links/linkemu.c), which holds every packet for the one-way delay
# (this kernel has no netem); the rate limit is tc tbf on each TUN device.
# TUN rather than veth: a veth pair hands packets from one namespace to the
# other inside the kernel, past any user-space program, so nothing could
# delay them. The link is checked in the same run (iperf3, and a TCP
# ping-pong of 64-byte messages), then `genie serve` runs in the server
# namespace and bench_semantic_vs_blind in the client namespace (a decode
# loop local, semantic remote and blind remote, outputs checked equal).
#
# Usage (root): bench/links/run.sh BUILD_DIR [--quick] [--json-dir DIR]
#   profiles: LINK_PROFILES="25g25 10g100" (RATEgDELAY: Gbit/s, one-way us)
# Exit 77 (skipped, with the reason) without root, ip/tc, TUN or iperf3.
# Bounded: every step has a timeout; namespaces, processes and devices go
# on exit (trap).
set -euo pipefail

BUILD=${1:?usage: bench/links/run.sh BUILD_DIR [--quick] [--json-dir DIR]}
shift
QUICK=0
JSON_DIR=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --json-dir) JSON_DIR=${2:?--json-dir needs a directory}; shift ;;
    *) echo "usage: bench/links/run.sh BUILD_DIR [--quick] [--json-dir DIR]" >&2; exit 2 ;;
  esac
  shift
done
BUILD=$(cd "$BUILD" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
EMU=$BUILD/bench/genie_linkemu
BENCH=$BUILD/bench/bench_semantic_vs_blind
GENIE=$BUILD/genie
PROFILES=${LINK_PROFILES:-"25g25 10g100"}
[ "$QUICK" = 1 ] && PROFILES=${LINK_PROFILES:-"10g100"}

skip() { echo "links: skipped: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, TUN devices, tc)"
command -v ip >/dev/null && command -v tc >/dev/null || skip "ip or tc missing (iproute2)"
[ -c /dev/net/tun ] || skip "no /dev/net/tun"
command -v iperf3 >/dev/null || skip "iperf3 missing (apt-get install -y iperf3)"
for bin in "$EMU" "$BENCH" "$GENIE"; do
  [ -x "$bin" ] || { echo "links: $bin is missing: build it first" >&2; exit 1; }
done

# Names of this run only (other runs may share the machine).
TAG=g$$
NC=${TAG}c
NS=${TAG}s
TMP=$(mktemp -d)
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
  ip netns del "$NC" 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
}
trap 'cleanup; rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM

TOKEN=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
CADDR=10.77.$(( $$ % 250 )).1
SADDR=10.77.$(( $$ % 250 )).2

run_profile() {
  local prof=$1 gbit=${1%%g*} us=${1#*g}
  local rate_bit=$(( gbit * 1000000000 ))
  local burst=$(( rate_bit / 8 / 1000 ))  # a millisecond's worth
  [ "$burst" -lt 65536 ] && burst=65536
  echo "== link $prof: $gbit Gbit/s (tc tbf), $us us one way (genie_linkemu)"
  ip netns add "$NC"
  ip netns add "$NS"
  ip -n "$NC" link set lo up
  ip -n "$NS" link set lo up
  "$EMU" --ns-a "$NC" --dev-a gl0 --ns-b "$NS" --dev-b gl1 --delay-us "$us" --seconds 900 \
    >"$TMP/emu.out" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 100); do
    ip -n "$NS" link show gl1 >/dev/null 2>&1 && break
    sleep 0.02
  done
  ip -n "$NC" addr add "$CADDR/32" peer "$SADDR/32" dev gl0
  ip -n "$NS" addr add "$SADDR/32" peer "$CADDR/32" dev gl1
  ip -n "$NC" link set gl0 mtu 9000 txqueuelen 10000 up
  ip -n "$NS" link set gl1 mtu 9000 txqueuelen 10000 up
  tc -n "$NC" qdisc add dev gl0 root tbf rate "${gbit}gbit" burst "$burst" latency 5ms
  tc -n "$NS" qdisc add dev gl1 root tbf rate "${gbit}gbit" burst "$burst" latency 5ms

  # The link's own figures, in the same run.
  local secs=3
  [ "$QUICK" = 1 ] && secs=1
  timeout 30 ip netns exec "$NS" iperf3 -s -1 -B "$SADDR" >/dev/null 2>&1 &
  PIDS+=($!)
  sleep 0.3
  timeout 30 ip netns exec "$NC" iperf3 -c "$SADDR" -t "$secs" -f g >"$TMP/iperf.txt" 2>&1 || true
  awk '/receiver/ { printf "   iperf3 (one TCP stream, %s s): %s %s\n", "'"$secs"'", $(NF-2), $(NF-1) }' "$TMP/iperf.txt"
  timeout 30 ip netns exec "$NS" python3 "$HERE/pingpong.py" serve "$SADDR" 7101 &
  PIDS+=($!)
  timeout 30 ip netns exec "$NC" python3 "$HERE/pingpong.py" "$SADDR" 7101 200 | sed 's/^/   /'

  # genie serve in the server namespace; the benchmark in the client's.
  GENIE_AUTH_TOKEN=$TOKEN timeout 600 ip netns exec "$NS" "$GENIE" serve --host "$SADDR" --port 0 \
    >"$TMP/serve.out" 2>"$TMP/serve.err" &
  PIDS+=($!)
  local port=""
  for _ in $(seq 1 200); do
    port=$(sed -n 's/^genie serve listening on .*:\([0-9]*\)$/\1/p' "$TMP/serve.out")
    [ -n "$port" ] && break
    sleep 0.05
  done
  [ -n "$port" ] || { cat "$TMP/serve.err" >&2; echo "links: genie serve did not start" >&2; return 1; }
  local args=()
  [ "$QUICK" = 1 ] && args+=(--quick)
  [ -n "$JSON_DIR" ] && args+=(--json "$JSON_DIR/semantic_vs_blind_$prof.json")
  local sent0 recv0
  sent0=$(ip netns exec "$NC" cat /sys/class/net/gl0/statistics/tx_bytes)
  recv0=$(ip netns exec "$NC" cat /sys/class/net/gl0/statistics/rx_bytes)
  GENIE_AUTH_TOKEN=$TOKEN GENIE_BENCH_SERVER="$SADDR:$port" GENIE_BENCH_LABEL="$prof" \
    timeout 600 ip netns exec "$NC" "$BENCH" "${args[@]}" | sed 's/^/   /'
  echo "   bytes on the link during the benchmark (IP packets, all three sides' setup included):" \
    "$(( $(ip netns exec "$NC" cat /sys/class/net/gl0/statistics/tx_bytes) - sent0 )) up," \
    "$(( $(ip netns exec "$NC" cat /sys/class/net/gl0/statistics/rx_bytes) - recv0 )) down"
  cleanup
  sed 's/^/   /' "$TMP/emu.out"
  echo
}

echo "machine: $(nproc) cores, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo), kernel $(uname -r)"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
echo
for prof in $PROFILES; do
  case "$prof" in
    *g*) run_profile "$prof" ;;
    *) echo "links: profile '$prof' is not RATEgDELAY (e.g. 25g25)" >&2; exit 2 ;;
  esac
done
