#!/usr/bin/env bash
# Semantic vs blind disaggregation across emulated datacenter links.
#
# For each link profile, two topologies, each checked in the same run
# (iperf3, and a TCP ping-pong of 64-byte messages, across the same link):
#
# 1. Point to point: a client namespace and a server namespace joined by a
#    link made of two TUN devices and genie_linkemu (bench/links/linkemu.c),
#    which holds every packet for the one-way delay (this kernel has no
#    netem); the rate limit is tc tbf on each TUN device. TUN rather than
#    veth: a veth pair hands packets from one namespace to the other inside
#    the kernel, past any user-space program, so nothing could delay them.
#    `genie serve` runs in the server namespace; in the client's:
#    bench_semantic_vs_blind (a C decode loop and a small CNN) and
#    torch_gpt_links.py (the captured nanoGPT through the Python binding),
#    each local, semantic remote and blind remote, outputs checked equal.
# 2. Three servers: a client and servers A (master), B and C (workers
#    joined to A: genie serve --join) in four namespaces, one TUN device
#    each, joined by genie_linkemu in hub mode (packets routed by
#    destination address, each held for the one-way delay; tbf on every
#    device): every pair of them is one emulated link apart, as hosts on one
#    switch. bench_vqa_links runs in the client namespace (a VQA-style model
#    sharded over the three servers, local / split / one server / blind).
#
# Usage (root): bench/links/run.sh BUILD_DIR [--quick] [--json-dir DIR]
#   profiles: LINK_PROFILES="25g25 10g100" (RATEgDELAY: Gbit/s, one-way us)
#   LINK_WORKLOADS="p2p hub" (which topologies; default both)
# The nanoGPT needs the project's Python environment (scripts/python-env.sh)
# and the Python binding in BUILD_DIR; without them it is skipped with the
# reason, the rest runs. GENIE_SANITIZE=1 (a sanitizer build, as ctest
# says) preloads the sanitizer runtimes into its Python.
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
VQA=$BUILD/bench/bench_vqa_links
GENIE=$BUILD/genie
SRC=$(cd "$HERE/../.." && pwd)
PROFILES=${LINK_PROFILES:-"25g25 10g100"}
[ "$QUICK" = 1 ] && PROFILES=${LINK_PROFILES:-"10g100"}
WORKLOADS=${LINK_WORKLOADS:-"p2p hub"}

skip() { echo "links: skipped: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, TUN devices, tc)"
command -v ip >/dev/null && command -v tc >/dev/null || skip "ip or tc missing (iproute2)"
[ -c /dev/net/tun ] || skip "no /dev/net/tun"
command -v iperf3 >/dev/null || skip "iperf3 missing (apt-get install -y iperf3)"
for bin in "$EMU" "$BENCH" "$VQA" "$GENIE"; do
  [ -x "$bin" ] || { echo "links: $bin is missing: build it first" >&2; exit 1; }
done

# The nanoGPT's Python: the project's environment with the binding built.
PY=$("$SRC/scripts/python-env.sh" --path)
GPT_SKIP=""
if [ ! -x "$PY" ]; then
  GPT_SKIP="the project's Python environment is missing ($PY: run scripts/python-env.sh)"
elif [ ! -d "$BUILD/bindings/python/genie" ]; then
  GPT_SKIP="the Python binding was not built in $BUILD"
elif ! "$PY" -c 'import torch' 2>/dev/null; then
  GPT_SKIP="PyTorch is missing from $PY"
fi

# Names of this run only (other runs may share the machine).
TAG=g$$
NC=${TAG}c
NS=${TAG}s
NB=${TAG}b
NCC=${TAG}w
TMP=$(mktemp -d)
PIDS=()
cleanup() {
  local p n
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
  for n in "$NC" "$NS" "$NB" "$NCC"; do ip netns del "$n" 2>/dev/null || true; done
}
trap 'cleanup; rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM

TOKEN=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
CADDR=10.77.$(( $$ % 250 )).1
SADDR=10.77.$(( $$ % 250 )).2
BADDR=10.77.$(( $$ % 250 )).3
WADDR=10.77.$(( $$ % 250 )).4

# tbf on device $2 of namespace $1 at $3 Gbit/s (a millisecond's burst).
shape() {
  local burst=$(( $3 * 1000000000 / 8 / 1000 ))
  [ "$burst" -lt 65536 ] && burst=65536
  ip -n "$1" link set "$2" mtu 9000 txqueuelen 10000 up
  tc -n "$1" qdisc add dev "$2" root tbf rate "${3}gbit" burst "$burst" latency 5ms
}

# The link's own figures from namespace $1 to address $3 in namespace $2,
# printed with the label $4: iperf3 (one TCP stream) and the ping-pong.
check_link() {
  local secs=3 port=$(( 7100 + RANDOM % 100 ))
  [ "$QUICK" = 1 ] && secs=1
  timeout 30 ip netns exec "$2" iperf3 -s -1 -B "$3" >/dev/null 2>&1 &
  PIDS+=($!)
  sleep 0.3
  timeout 30 ip netns exec "$1" iperf3 -c "$3" -t "$secs" -f g >"$TMP/iperf.txt" 2>&1 || true
  awk '/receiver/ { printf "   %s iperf3 (one TCP stream, %s s): %s %s\n", "'"$4"'", "'"$secs"'", $(NF-2), $(NF-1) }' \
    "$TMP/iperf.txt"
  timeout 30 ip netns exec "$2" python3 "$HERE/pingpong.py" serve "$3" "$port" &
  PIDS+=($!)
  timeout 30 ip netns exec "$1" python3 "$HERE/pingpong.py" "$3" "$port" 200 | sed "s/^/   $4 /"
}

# Starts `genie serve` in namespace $1 on address $2, writing its output to
# $3.out/.err (further arguments go to genie serve); sets PORT.
start_serve() {
  local ns=$1 addr=$2 out=$3
  shift 3
  : >"$out.out"
  GENIE_AUTH_TOKEN=$TOKEN timeout 900 ip netns exec "$ns" "$GENIE" serve --host "$addr" --port 0 "$@" \
    >"$out.out" 2>"$out.err" &
  PIDS+=($!)
  PORT=""
  for _ in $(seq 1 300); do
    PORT=$(sed -n 's/^genie serve listening on .*:\([0-9]*\)$/\1/p' "$out.out")
    [ -n "$PORT" ] && return 0
    sleep 0.05
  done
  cat "$out.err" >&2
  echo "links: genie serve in $ns did not start" >&2
  return 1
}

# Waits until device $2 exists in namespace $1 (genie_linkemu makes it).
wait_dev() {
  for _ in $(seq 1 100); do
    ip -n "$1" link show "$2" >/dev/null 2>&1 && return 0
    sleep 0.02
  done
  echo "links: genie_linkemu made no $2 in $1: $(cat "$TMP/emu.out")" >&2
  return 1
}

# Bytes the client's device $1 sent and received so far.
dev_bytes() {
  echo "$(ip netns exec "$NC" cat /sys/class/net/"$1"/statistics/tx_bytes)" \
    "$(ip netns exec "$NC" cat /sys/class/net/"$1"/statistics/rx_bytes)"
}

# Topology 1: client and one server, point to point.
run_p2p() {
  local prof=$1 gbit=$2 us=$3
  echo "== link $prof, point to point: $gbit Gbit/s (tc tbf), $us us one way (genie_linkemu)"
  ip netns add "$NC"
  ip netns add "$NS"
  ip -n "$NC" link set lo up
  ip -n "$NS" link set lo up
  "$EMU" --ns-a "$NC" --dev-a gl0 --ns-b "$NS" --dev-b gl1 --delay-us "$us" --seconds 900 \
    >"$TMP/emu.out" 2>&1 &
  PIDS+=($!)
  wait_dev "$NS" gl1
  ip -n "$NC" addr add "$CADDR/32" peer "$SADDR/32" dev gl0
  ip -n "$NS" addr add "$SADDR/32" peer "$CADDR/32" dev gl1
  shape "$NC" gl0 "$gbit"
  shape "$NS" gl1 "$gbit"
  check_link "$NC" "$NS" "$SADDR" "client->server"

  # genie serve in the server namespace; the benchmarks in the client's.
  start_serve "$NS" "$SADDR" "$TMP/serve"
  local port=$PORT args=() before after
  [ "$QUICK" = 1 ] && args+=(--quick)
  [ -n "$JSON_DIR" ] && args+=(--json "$JSON_DIR/semantic_vs_blind_$prof.json")
  before=$(dev_bytes gl0)
  GENIE_AUTH_TOKEN=$TOKEN GENIE_BENCH_SERVER="$SADDR:$port" GENIE_BENCH_LABEL="$prof" \
    timeout 600 ip netns exec "$NC" "$BENCH" "${args[@]}" | sed 's/^/   /'
  after=$(dev_bytes gl0)
  set -- $before $after
  echo "   bytes on the link during the C benchmark (IP packets, all three sides' setup included):" \
    "$(( $3 - $1 )) up, $(( $4 - $2 )) down"
  echo
  if [ -n "$GPT_SKIP" ]; then
    echo "   nanoGPT: skipped: $GPT_SKIP"
  else
    args=()
    [ "$QUICK" = 1 ] && args+=(--quick)
    [ -n "$JSON_DIR" ] && args+=(--json "$JSON_DIR/torch_gpt_links_$prof.json")
    local pyenv=()
    if [ "${GENIE_SANITIZE:-0}" = 1 ]; then
      # libgenie carries ASan/UBSan: their runtimes first, leak checks off
      # (the interpreter's own heap), as tests/scripts/python_test.sh does.
      pyenv=(LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
        ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0:abort_on_error=1 PYTHONMALLOC=malloc)
    fi
    GENIE_AUTH_TOKEN=$TOKEN PYTHONPATH="$BUILD/bindings/python" \
      timeout 600 ip netns exec "$NC" env "${pyenv[@]}" "$PY" "$HERE/torch_gpt_links.py" \
      --server "$SADDR:$port" --label "$prof" "${args[@]}" | sed 's/^/   /'
  fi
  cleanup
  sed 's/^/   /' "$TMP/emu.out"
  echo
}

# Topology 2: client, master A and workers B and C on one emulated switch.
run_hub() {
  local prof=$1 gbit=$2 us=$3 n dev addr k
  local names=("$NC" "$NS" "$NB" "$NCC") addrs=("$CADDR" "$SADDR" "$BADDR" "$WADDR")
  echo "== link $prof, three servers: client, master A, workers B and C, every pair one link apart:" \
    "$gbit Gbit/s (tc tbf on each device), $us us one way (genie_linkemu hub)"
  local ports=()
  for k in 0 1 2 3; do
    ip netns add "${names[$k]}"
    ip -n "${names[$k]}" link set lo up
    ports+=(--port "${names[$k]},gh$k,${addrs[$k]}")
  done
  "$EMU" "${ports[@]}" --delay-us "$us" --seconds 900 >"$TMP/emu.out" 2>&1 &
  PIDS+=($!)
  for k in 0 1 2 3; do
    n=${names[$k]} dev=gh$k addr=${addrs[$k]}
    wait_dev "$n" "$dev"
    ip -n "$n" addr add "$addr/24" dev "$dev"
    shape "$n" "$dev" "$gbit"
  done
  check_link "$NC" "$NS" "$SADDR" "client->A"
  check_link "$NS" "$NB" "$BADDR" "A->B"

  start_serve "$NS" "$SADDR" "$TMP/serve-a" --node-id vqa-a
  local port=$PORT
  start_serve "$NB" "$BADDR" "$TMP/serve-b" --node-id vqa-b --join "$SADDR:$port"
  start_serve "$NCC" "$WADDR" "$TMP/serve-c" --node-id vqa-c --join "$SADDR:$port"
  local args=() before after
  [ "$QUICK" = 1 ] && args+=(--quick)
  [ -n "$JSON_DIR" ] && args+=(--json "$JSON_DIR/vqa_links_$prof.json")
  before=$(dev_bytes gh0)
  GENIE_AUTH_TOKEN=$TOKEN GENIE_BENCH_SERVER="$SADDR:$port" GENIE_VQA_WORKERS=vqa-b,vqa-c \
    GENIE_BENCH_LABEL="$prof" timeout 600 ip netns exec "$NC" "$VQA" "${args[@]}" | sed 's/^/   /'
  after=$(dev_bytes gh0)
  set -- $before $after
  echo "   bytes on the client's link during the benchmark (IP packets, setup included):" \
    "$(( $3 - $1 )) up, $(( $4 - $2 )) down"
  cleanup
  sed 's/^/   /' "$TMP/emu.out"
  echo
}

run_profile() {
  local prof=$1 gbit=${1%%g*} us=${1#*g} w
  for w in $WORKLOADS; do
    case "$w" in
      p2p) run_p2p "$prof" "$gbit" "$us" ;;
      hub) run_hub "$prof" "$gbit" "$us" ;;
      *) echo "links: workload '$w' is not p2p or hub" >&2; exit 2 ;;
    esac
  done
}

echo "machine: $(nproc) cores, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo), kernel $(uname -r)"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ), load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
for prof in $PROFILES; do
  case "$prof" in
    [0-9]*g[0-9]*) run_profile "$prof" ;;
    *) echo "links: profile '$prof' is not RATEgDELAY (e.g. 25g25)" >&2; exit 2 ;;
  esac
done
