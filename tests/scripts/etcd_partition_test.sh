#!/usr/bin/env bash
# A network partition in a Genie cluster on etcd (docs/cluster.md, "A
# cluster on etcd"): etcd and three `genie serve` processes, each in a
# network namespace of its own, on a bridge (in a namespace of its own too:
# nothing of this host's network is touched). s3's link is taken down: its
# lease runs out, its key goes, s1 logs it lost and a client watching s1
# gets NODE_LOST; the link comes back up: s3 registers again and s1 sees it
# again (NODE_RECOVERED). Needs root (namespaces); every namespace is
# removed on every way out (trap). Bounded: about 20 s.
set -euo pipefail
source "$(dirname "$0")/lib/servers.sh"
source "$(dirname "$0")/lib/etcd.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: network namespaces need root"; exit 77; }
CTOOL="$B/tests/itest_cluster_tool"
NETS=(br e 1 2 3)
ns() { echo "genie-part-$1-$$"; }
netns_cleanup() {
  servers_cleanup
  for n in "${NETS[@]}"; do ip netns del "$(ns "$n")" 2>/dev/null || true; done
}
trap netns_cleanup EXIT
trap 'echo "FAIL: stopped (past 40 s, or interrupted)"; exit 1' TERM INT
# The whole test stays under 40 s: past that it fails (and cleans up).
( exec >/dev/null 2>&1; sleep 40; kill -TERM $$ ) &
PIDS+=($!)
for n in "${NETS[@]}"; do ip netns add "$(ns "$n")" || { echo "SKIP: cannot create network namespaces"; exit 77; }; done
BR=$(ns br)
ip -n "$BR" link add br0 type bridge
ip -n "$BR" link set br0 up
# addr NAME: the address of namespace NAME on the bridge.
addr() { case $1 in e) echo 10.232.0.10 ;; *) echo "10.232.0.$1" ;; esac; }
for n in e 1 2 3; do
  ip link add "v$n" netns "$(ns "$n")" type veth peer name "b$n" netns "$BR"
  ip -n "$BR" link set "b$n" master br0 up
  ip -n "$(ns "$n")" addr add "$(addr "$n")/24" dev "v$n"
  ip -n "$(ns "$n")" link set lo up
  ip -n "$(ns "$n")" link set "v$n" up
done

ENDPOINT="http://$(addr e):2379"
ip netns exec "$(ns e)" "$ETCD" --name p --data-dir "$TMP/etcd-data" --listen-client-urls "$ENDPOINT" \
  --advertise-client-urls "$ENDPOINT" --listen-peer-urls "http://$(addr e):2380" \
  --initial-advertise-peer-urls "http://$(addr e):2380" --initial-cluster "p=http://$(addr e):2380" \
  --log-level error >>"$TMP/etcd.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 200); do
  ip netns exec "$(ns e)" "$ETCDCTL" --endpoints "$ENDPOINT" --command-timeout=1s endpoint health >/dev/null 2>&1 && break
  sleep 0.1
done
keys() { ip netns exec "$(ns e)" "$ETCDCTL" --endpoints "$ENDPOINT" get --prefix /genie/p/nodes/ --keys-only | grep -v '^$' || true; }
[ -n "$(ip netns exec "$(ns e)" "$ETCDCTL" --endpoints "$ENDPOINT" endpoint health 2>&1 | grep healthy)" ] || fail "etcd did not start"
export GENIE_CLUSTER=p GENIE_ETCD_LEASE_TTL=2000

# serve N: `genie serve` s<N> in namespace N, on its bridge address (the
# namespaces are this test's own: --insecure); sets PORT<N>.
serve() {
  local n=$1 port=
  : >"$TMP/s$n.out"
  ip netns exec "$(ns "$n")" env GENIE_LOG_LEVEL=info "$GENIE" serve --host "$(addr "$n")" --port 0 --insecure \
    --node-id "s$n" --grace-ms 0 --etcd "$ENDPOINT" >"$TMP/s$n.out" 2>"$TMP/s$n.err" &
  PIDS+=($!)
  eval "PID$n=$!"
  for _ in $(seq 1 200); do
    port=$(sed -n "s/^genie serve listening on $(addr "$n" | sed 's/\./\\./g'):\([0-9]*\)\$/\1/p" "$TMP/s$n.out")
    [ -n "$port" ] && break
    sleep 0.05
  done
  [ -n "$port" ] || fail "s$n did not start"
  eval "PORT$n=$port"
}
serve 1; serve 2; serve 3
wait_for "$TMP/s1.err" "node s3 .*joined" 10 || fail "s1 did not see s3 join"
[ "$(keys | wc -l)" -eq 3 ] || fail "keys: $(keys)"
ip netns exec "$(ns 1)" env GENIE_MASTER_ADDR="$(addr 1)" GENIE_MASTER_PORT="$PORT1" GENIE_NODE_ID=watcher \
  GENIE_HEARTBEAT_INTERVAL=200 GENIE_HEARTBEAT_TIMEOUT=1000 "$CTOOL" watch 30 >"$TMP/watch.out" 2>"$TMP/watch.err" &
PIDS+=($!)
wait_for "$TMP/watch.out" '^ready' 10 || fail "the watcher did not start"
echo "ok: etcd and three servers in their own namespaces on a bridge; s1 sees s3"

# --- partition s3 ---------------------------------------------------------------
t0=$(now_ms)
ip -n "$(ns 3)" link set v3 down
for _ in $(seq 1 100); do keys | grep -q /s3 || break; sleep 0.1; done
keys | grep -q /s3 && fail "s3's key outlived its lease through the partition"
echo "s3's key expired $(( $(now_ms) - t0 )) ms after its link went down (lease TTL 2000 ms)"
wait_for "$TMP/s1.err" "node s3 lost" 10 || fail "s1 did not see s3 lost"
wait_for "$TMP/watch.out" 'NODE_LOST .*"id":"s3"' 10 || fail "the watcher on s1 got no NODE_LOST for s3"
wait_for "$TMP/s3.err" "cannot renew its registration" 10 || fail "s3 did not notice it was cut off"
kill -0 "$PID3" 2>/dev/null || fail "s3 exited in the partition"
echo "ok: partitioned s3's lease expired; s1 logged it lost and its watcher got NODE_LOST"

# --- heal -----------------------------------------------------------------------
ip -n "$(ns 3)" link set v3 up
wait_for "$TMP/s3.err" "registered again" 15 || fail "s3 did not register again after the partition healed"
for _ in $(seq 1 50); do keys | grep -q /s3 && break; sleep 0.1; done
keys | grep -q /s3 || fail "s3's key is not back: $(keys)"
wait_for "$TMP/s1.err" "node s3 recovered" 10 || fail "s1 did not see s3 again"
wait_for "$TMP/watch.out" 'NODE_RECOVERED .*"id":"s3"' 10 || fail "the watcher on s1 got no NODE_RECOVERED for s3"
echo "ok: the partition healed: s3 registered again and s1 sees it"
echo "PASS"
