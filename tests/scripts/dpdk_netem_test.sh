#!/usr/bin/env bash
# The dpdk transport over a real, lossy link: a veth pair between two
# network namespaces of this test, net_af_packet on each end, and netem
# (loss 1%, reordering, duplication 1%, corruption 0.1%) on both sides. A
# `genie serve` in one namespace offers dpdk, a client in the other demands
# it (--insecure: the namespaces are this test's own): every tensor arrives byte-exact or the call fails with a clear error,
# never corrupted. Needs root (namespaces). Where the kernel has no netem,
# the transport's own test hooks drop, duplicate, corrupt and reorder the
# same shares of packets instead (and the test says so).
set -euo pipefail
source "$(dirname "$0")/lib/servers.sh"
[ -e "$B/libgenie_transport_dpdk.so" ] || { echo "SKIP: the dpdk transport plugin is not built (no libdpdk)"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "SKIP: network namespaces need root"; exit 77; }
TOOL="$B/tests/itest_tensor_tool"
NA="genie-dpdk-a-$$" NB="genie-dpdk-b-$$"
netns_cleanup() {
  ip netns del "$NA" 2>/dev/null || true
  ip netns del "$NB" 2>/dev/null || true
  servers_cleanup
}
trap netns_cleanup EXIT
ip netns add "$NA" && ip netns add "$NB" || { echo "SKIP: cannot create network namespaces"; exit 77; }
ip link add vg0 netns "$NA" type veth peer name vg1 netns "$NB"
ip -n "$NA" addr add 10.231.0.1/24 dev vg0
ip -n "$NB" addr add 10.231.0.2/24 dev vg1
for ns in "$NA" "$NB"; do ip -n "$ns" link set lo up; done
ip -n "$NA" link set vg0 up
ip -n "$NB" link set vg1 up
NETEM="loss 1% delay 1ms reorder 25% 50% duplicate 1% corrupt 0.1%"
HOOKS=()
if ip netns exec "$NA" tc qdisc add dev vg0 root netem $NETEM 2>"$TMP/tc.err"; then
  ip netns exec "$NB" tc qdisc add dev vg1 root netem $NETEM
  echo "link: netem $NETEM"
else
  HOOKS=(GENIE_DPDK_TEST_DROP=10 GENIE_DPDK_TEST_DUP=10 GENIE_DPDK_TEST_CORRUPT=1 GENIE_DPDK_TEST_REORDER=20)
  echo "link: no netem here ($(cat "$TMP/tc.err")); the transport's test hooks instead: ${HOOKS[*]}"
fi

EAL="-l 0 --no-huge -m 256 --no-pci --no-shconf --no-telemetry --log-level=*:error"
: >"$TMP/srv.out"
ip netns exec "$NA" env "${HOOKS[@]}" GENIE_LOG_LEVEL=debug GENIE_SERVE_TRANSPORTS=dpdk \
  GENIE_DPDK_EAL="$EAL --vdev=net_af_packet0,iface=vg0" \
  "$GENIE" serve --host 10.231.0.1 --port 0 --insecure >"$TMP/srv.out" 2>"$TMP/srv.err" &
PIDS+=($!)
PORT=
for _ in $(seq 1 200); do
  PORT=$(sed -n 's/^genie serve listening on 10\.231\.0\.1:\([0-9]*\)$/\1/p' "$TMP/srv.out")
  [ -n "$PORT" ] && break
  sleep 0.05
done
[ -n "$PORT" ] || fail "the server in $NA did not start"

set +e
out=$(ip netns exec "$NB" env "${HOOKS[@]}" GENIE_TIMEOUT=60000 GENIE_TRANSPORT=dpdk GENIE_MASTER_ADDR=10.231.0.1 \
  GENIE_MASTER_PORT=$PORT GENIE_DPDK_EAL="$EAL --vdev=net_af_packet0,iface=vg1" \
  "$TOOL" roundtrip 1 4096 100000 1048576 4194304 4194304 2>"$TMP/client.err")
rc=$?
set -e
echo "$out"
case $rc in
  0) [ "$(grep -c ' ok$' <<<"$out")" = 6 ] || fail "not every tensor came back: $out" ;;
  1) fail "a tensor arrived corrupted over the lossy link" ;;
  3) grep -q "GENIE_ERR" "$TMP/client.err" || fail "a failed call without a clear error: $(cat "$TMP/client.err")"
     echo "note: a call failed with a clear error: $(tail -n 1 "$TMP/client.err")" ;;
  *) fail "tensor_tool exited with $rc" ;;
esac
grep -q "dpdk data connection" "$TMP/srv.err" || fail "the server saw no dpdk data connection"
echo "ok: tensors over dpdk/af_packet on a lossy, reordering, duplicating, corrupting link: byte-exact"
