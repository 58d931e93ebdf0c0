#!/usr/bin/env bash
# DPDK transport throughput between processes (docs/dpdk.md), interleaved
# per round, on the same machine:
#   dpdk   genie_tensor_write/read of a 16 MiB remote tensor over a memif pair,
#          8 of each per client: the bytes over the calls' total time after
#          the first pair (goodput: a stall on a lost packet counts)
#   tcp    the same calls against the same server over its TCP data connection
#   iperf3 one TCP stream on 127.0.0.1 (the physical peer of both)
#   lossy  dpdk over a second memif pair whose two ends drop 1% of their
#          packets (the transport's loss hook: these kernels have no netem)
# Prints medians and the medians of the per-round ratios dpdk/tcp,
# dpdk/iperf3 and lossy/dpdk (goodput under 1% loss). Never a pass/fail on
# a time (BENCHMARKING.md).
#
# usage: bench/dpdk_throughput.sh [--quick] [--iters N] [--json FILE]
#   (GENIE_BUILD_DIR: the build directory, default ./build)
set -euo pipefail
B=${GENIE_BUILD_DIR:-build}
ROUNDS=5 MIB=16 REPS=8 JSON=
while [ $# -gt 0 ]; do
  case $1 in
    --quick) ROUNDS=1 MIB=1 REPS=1 ;;
    --iters) ROUNDS=$2; shift ;;
    --json) JSON=$2; shift ;;
    *) echo "usage: $0 [--quick] [--iters N] [--json FILE]" >&2; exit 2 ;;
  esac
  shift
done
[ -e "$B/libgenie_transport_dpdk.so" ] || { echo "dpdk throughput: skipped: no dpdk transport plugin in $B"; exit 0; }
TOOL="$B/tests/itest_tensor_tool"
TMP=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$TMP" /var/run/dpdk/gb-*-$$  # EAL's runtime directories of this run
}
trap cleanup EXIT
EAL="-l 0 --no-huge -m 256 --no-pci --no-telemetry --log-level=*:error"

serve() {  # NAME [ENV...]: a server offering dpdk on memif socket $TMP/NAME.sock; sets its port in PORT_NAME
  local name=$1; shift
  # Created here, not by the background job's redirection, so that the
  # first look below cannot run before the file exists (set -e).
  : >"$TMP/$name.out"
  env "$@" GENIE_SERVE_TRANSPORTS=dpdk \
    GENIE_DPDK_EAL="$EAL --file-prefix=gb-$name-$$ --vdev=net_memif0,role=server,socket=$TMP/$name.sock,bsize=9216" \
    "$B/genie" serve --port 0 >"$TMP/$name.out" 2>"$TMP/$name.err" &
  PIDS+=($!)
  for _ in $(seq 1 200); do
    local p; p=$(sed -n 's/^genie serve listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$TMP/$name.out")
    [ -n "$p" ] && { eval "PORT_$name=$p"; return 0; }
    sleep 0.05
  done
  echo "server $name did not start: $(cat "$TMP/$name.err")" >&2; exit 1
}
serve clean
serve lossy GENIE_DPDK_TEST_DROP=10
# iperf3's server on a port the kernel reports free (a fixed one may be a
# live connection's ephemeral port), listening before its first client;
# another port if it did not come up.
for _ in 1 2 3 4 5; do
  IPORT=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  iperf3 -s -p "$IPORT" >/dev/null 2>&1 &
  IPID=$!
  PIDS+=("$IPID")
  for _ in $(seq 1 40); do
    ss -Hltn "sport = :$IPORT" | grep -q . && break 2
    kill -0 "$IPID" 2>/dev/null || break
    sleep 0.05
  done
  kill "$IPID" 2>/dev/null || true
done
n=0
run() {  # KIND: prints the write+read bytes over their total time, as Gbit/s
  local kind=$1 out
  n=$((n + 1))
  case $kind in
    tcp) out=$(GENIE_TRANSPORT=tcp GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$PORT_clean \
               "$TOOL" throughput "$MIB" "$REPS") ;;
    dpdk|lossy)
      local name=clean port=$PORT_clean extra=()
      [ "$kind" = lossy ] && { name=lossy; port=$PORT_lossy; extra=(GENIE_DPDK_TEST_DROP=10); }
      out=$(env "${extra[@]}" GENIE_TRANSPORT=dpdk GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$port \
            GENIE_DPDK_EAL="$EAL --file-prefix=gb-c$n-$$ --vdev=net_memif0,role=client,socket=$TMP/$name.sock,bsize=9216" \
            "$TOOL" throughput "$MIB" "$REPS") ;;
    iperf3)
      # A client that finds no server prints its error in the JSON and
      # still exits 0; the server may also be slow to take the next test.
      local gbps
      for try in 1 2 3 4 5; do
        gbps=$(iperf3 -c 127.0.0.1 -p "$IPORT" -t 1 -J | /usr/bin/python3 -c \
          'import json,sys; print("%.3f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9))' \
          2>/dev/null) && break
        [ "$try" = 5 ] && { echo "iperf3: no result from its server on port $IPORT" >&2; exit 1; }
        sleep 0.2
      done
      echo "$gbps"
      return ;;
  esac
  awk '$7 == "overall" { printf "%.3f\n", $8 * 8 / 1000 }' <<<"$out"
}
for r in $(seq 0 "$ROUNDS"); do  # round 0 warms up
  line="$(run dpdk) $(run tcp) $(run iperf3) $(run lossy)"
  [ "$r" -gt 0 ] && echo "$line" >>"$TMP/rounds"
done
/usr/bin/python3 - "$TMP/rounds" "$MIB" "$ROUNDS" "$JSON" <<'PY'
import json, statistics as st, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
dpdk, tcp, ip, lossy = zip(*rows)
med = st.median
r_tcp = med([a / b for a, b, _, _ in rows]); r_ip = med([a / c for a, _, c, _ in rows])
r_loss = med([d / a for a, _, _, d in rows])
print(f"dpdk transport throughput: {sys.argv[2]} MiB remote tensor write+read, {sys.argv[3]} interleaved rounds (Gbit/s)")
for name, v in (("dpdk/memif", dpdk), ("genie tcp", tcp), ("iperf3", ip), ("dpdk 1% loss", lossy)):
    print(f"  {name:14s} median {med(v):7.2f}  (min {min(v):.2f}, max {max(v):.2f})")
print(f"  ratios (median of rounds): dpdk/tcp {r_tcp:.2f}  dpdk/iperf3 {r_ip:.3f}  lossy/lossless {r_loss:.2f}")
if sys.argv[4]:
    json.dump({"benchmark": "dpdk_throughput", "mib": int(sys.argv[2]), "rounds": len(rows),
               "gbps": {"dpdk": med(dpdk), "tcp": med(tcp), "iperf3": med(ip), "dpdk_lossy": med(lossy)},
               "ratio": {"dpdk_tcp": r_tcp, "dpdk_iperf3": r_ip, "lossy_lossless": r_loss}}, open(sys.argv[4], "w"))
PY
