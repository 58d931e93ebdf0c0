#!/usr/bin/env bash
# A Genie cluster on a real etcd (docs/cluster.md, "A cluster on etcd"), on
# 127.0.0.1 only: etcd started here with free ports and its data in $TMP,
# stopped and restarted by pid; `genie serve --etcd` processes registering.
#   1. etcd unreachable at start: genie serve fails naming the endpoint
#   2. three servers register (keys under /genie/<cluster>/nodes/ with a
#      lease); a duplicate live node id is refused
#   3. a client given only the etcd endpoints enters through a live server;
#      genie top --etcd and genie discover --etcd list every server
#   4. kill -9 of a server: its key expires within the lease TTL, s1 logs it
#      lost, its watcher gets NODE_LOST; a client whose first choice is a
#      killed server whose key still lives falls over to the next one
#   5. etcd stopped mid-run: servers keep serving from their view; restarted:
#      registrations renew and a server started afterwards is seen
set -euo pipefail
source "$(dirname "$0")/lib/servers.sh"
source "$(dirname "$0")/lib/etcd.sh"
CTOOL="$B/tests/itest_cluster_tool"
RTOOL="$B/tests/itest_remote_tool"

EC=$(free_port); EP=$(free_port)
ENDPOINT="http://127.0.0.1:$EC"
start_etcd() {
  "$ETCD" --name t --data-dir "$TMP/etcd-data" --listen-client-urls "$ENDPOINT" --advertise-client-urls "$ENDPOINT" \
    --listen-peer-urls "http://127.0.0.1:$EP" --initial-advertise-peer-urls "http://127.0.0.1:$EP" \
    --initial-cluster "t=http://127.0.0.1:$EP" --log-level error >>"$TMP/etcd.log" 2>&1 &
  ETCD_PID=$!
  PIDS+=("$ETCD_PID")
  for _ in $(seq 1 200); do
    "$ETCDCTL" --endpoints "$ENDPOINT" --command-timeout=1s endpoint health >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  fail "etcd did not start"
}
keys() { "$ETCDCTL" --endpoints "$ENDPOINT" get --prefix /genie/c1/nodes/ --keys-only | grep -v '^$' || true; }
export GENIE_CLUSTER=c1 GENIE_ETCD_LEASE_TTL=2000

# --- 1. etcd unreachable at start ---------------------------------------------
DEAD="http://127.0.0.1:$(free_port)"
if "$GENIE" serve --port 0 --etcd "$DEAD" >"$TMP/dead.out" 2>"$TMP/dead.err"; then fail "serve started without etcd"; fi
grep -q "CONNECTION.*$DEAD" "$TMP/dead.err" || fail "unreachable etcd: $(cat "$TMP/dead.err")"
if "$GENIE" discover --etcd "$DEAD" >"$TMP/ddead.out" 2>"$TMP/ddead.err"; then fail "discover listed a dead etcd"; fi
grep -q "CONNECTION.*$DEAD" "$TMP/ddead.err" || fail "discover, unreachable etcd: $(cat "$TMP/ddead.err")"
echo "ok 1: etcd unreachable at start names the endpoint"

# --- 2. three servers register; a duplicate is refused ------------------------
start_etcd
GENIE_LOG_LEVEL=info start_server s1 --node-id s1 --grace-ms 0 --etcd "$ENDPOINT"
P1=$PORT S1=$SERVER_PID
GENIE_LOG_LEVEL=info start_server s2 --node-id s2 --grace-ms 0 --etcd "$ENDPOINT"
P2=$PORT S2=$SERVER_PID
GENIE_LOG_LEVEL=info start_server s3 --node-id s3 --grace-ms 0 --etcd "$ENDPOINT"
P3=$PORT S3=$SERVER_PID
[ "$(keys | wc -l)" -eq 3 ] || fail "keys: $(keys)"
"$ETCDCTL" --endpoints "$ENDPOINT" get /genie/c1/nodes/s2 --print-value-only | grep -q "\"listen\":\"127.0.0.1:$P2\"" \
  || fail "s2's value: $("$ETCDCTL" --endpoints "$ENDPOINT" get /genie/c1/nodes/s2)"
lease=$("$ETCDCTL" --endpoints "$ENDPOINT" get /genie/c1/nodes/s2 -w json | python3 -c 'import json,sys; print(json.load(sys.stdin)["kvs"][0].get("lease",0))')
[ "$lease" != 0 ] || fail "s2's key has no lease"
if "$GENIE" serve --port 0 --node-id s2 --etcd "$ENDPOINT" >"$TMP/dup.out" 2>"$TMP/dup.err"; then fail "a second live s2 registered"; fi
grep -q "node id 's2' is already registered" "$TMP/dup.err" || fail "duplicate: $(cat "$TMP/dup.err")"
wait_for "$TMP/s1.err" "node s3 .*joined" 10 || fail "s1 did not see s3 join"
echo "ok 2: three servers registered with leases; a duplicate live node id refused"

# --- 3. a client enters through etcd ------------------------------------------
GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$P1 GENIE_NODE_ID=watcher GENIE_HEARTBEAT_INTERVAL=200 \
  GENIE_HEARTBEAT_TIMEOUT=1000 "$CTOOL" watch 60 >"$TMP/watch.out" 2>"$TMP/watch.err" &
PIDS+=($!)
wait_for "$TMP/watch.out" '^ready' 20 || fail "watcher did not start"
GENIE_ETCD_ENDPOINTS=$ENDPOINT "$RTOOL" info >"$TMP/mlp.out" 2>"$TMP/mlp.err" || fail "client through etcd: $(cat "$TMP/mlp.out")"
"$GENIE" top --etcd "$ENDPOINT" --cluster c1 --once >"$TMP/top.out" 2>"$TMP/top.err" || fail "genie top --etcd: $(cat "$TMP/top.err")"
for s in s1 s2 s3; do grep -q "$s" "$TMP/top.out" || fail "genie top --etcd does not list $s: $(cat "$TMP/top.out")"; done
"$GENIE" discover --etcd "$ENDPOINT" --cluster c1 >"$TMP/disc.out" 2>"$TMP/disc.err" || fail "genie discover --etcd: $(cat "$TMP/disc.err")"
grep -q "^3 member(s)" "$TMP/disc.out" || fail "discover --etcd: $(cat "$TMP/disc.out")"
for i in 1 2 3; do
  grep -Eq "^  s$i +server +127.0.0.1:$(eval echo "\$P$i") +HEALTHY" "$TMP/disc.out" || fail "discover --etcd, s$i: $(cat "$TMP/disc.out")"
done
"$GENIE" discover --etcd "$ENDPOINT" --cluster c1 --json | python3 -c '
import json, sys
j = json.load(sys.stdin)
assert j["cluster"] == "c1" and j["revision"] > 0, j
assert [m["id"] for m in j["members"]] == ["s1", "s2", "s3"], j
assert all(m["role"] == "server" and m["devices"] == ["cpu:0"] for m in j["members"]), j' || fail "discover --etcd --json"
GENIE_CLUSTER=other "$GENIE" discover --etcd "$ENDPOINT" | grep -q "^0 member(s)" || fail "another cluster's namespace is not empty"
echo "ok 3: a client given only etcd endpoints reached a registered server; genie top and discover --etcd list the three"

# --- 4. kill -9 of a server -----------------------------------------------------
kill -9 "$S2"
t0=$(now_ms)
for _ in $(seq 1 100); do keys | grep -q /s2 || break; sleep 0.1; done
keys | grep -q /s2 && fail "s2's key outlived its lease"
echo "s2's key expired $(( $(now_ms) - t0 )) ms after kill -9 (lease TTL 2000 ms)"
wait_for "$TMP/s1.err" "node s2 lost" 10 || fail "s1 did not see s2 lost"
"$GENIE" discover --etcd "$ENDPOINT" --cluster c1 | grep -q "^  s2 " && fail "discover --etcd still lists the dead s2"
wait_for "$TMP/watch.out" 'NODE_LOST .*"id":"s2"' 10 || fail "the watcher on s1 got no NODE_LOST for s2"
# A client whose first choice (cluster/entry.hpp: a rendezvous hash of the
# client's and the server's ids, FNV-1a) is s1, entering while s1's key
# still lives after kill -9: it tries s1, then s3.
CID=$(python3 -c '
def fnv(s):
    h = 1469598103934665603
    for c in s.encode(): h = ((h ^ c) * 1099511628211) % 2**64
    return h
print(next(f"c{i}" for i in range(1000) if fnv(f"c{i}/s1") < fnv(f"c{i}/s3")))')
kill -9 "$S1"
GENIE_ETCD_ENDPOINTS=$ENDPOINT GENIE_NODE_ID=$CID GENIE_LOG_LEVEL=info "$RTOOL" info >"$TMP/entry.out" 2>"$TMP/entry.err" \
  || fail "entering while s1's key lives: $(cat "$TMP/entry.out")"
if keys | grep -q /s1; then
  grep -q "server s1 .*did not answer.*trying s3" "$TMP/entry.err" || fail "no fallback from s1 to s3: $(cat "$TMP/entry.err")"
  echo "client $CID: s1 (killed, key still alive) did not answer; entered through s3"
fi
for _ in $(seq 1 100); do keys | grep -q /s1 || break; sleep 0.1; done
GENIE_ETCD_ENDPOINTS=$ENDPOINT "$RTOOL" info >"$TMP/mlp2.out" 2>"$TMP/mlp2.err" || fail "after the kills: $(cat "$TMP/mlp2.out")"
echo "ok 4: a killed server's key expired, NODE_LOST at the others, clients enter through the survivor"

# --- 5. etcd stopped and restarted mid-run ---------------------------------------
kill -9 "$ETCD_PID"; wait "$ETCD_PID" 2>/dev/null || true
GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$P3 "$RTOOL" info >"$TMP/mlp3.out" 2>"$TMP/mlp3.err" \
  || fail "s3 without etcd: $(cat "$TMP/mlp3.out")"
wait_for "$TMP/s3.err" "cannot renew its registration" 10 || fail "s3 did not notice etcd gone"
kill -0 "$S3" || fail "s3 exited when etcd went"
start_etcd
wait_for "$TMP/s3.err" "reachable again" 20 || fail "s3 did not renew after etcd returned"
keys | grep -q /s3 || fail "s3 is not registered after etcd returned: $(keys)"
GENIE_LOG_LEVEL=info start_server s4 --node-id s4 --grace-ms 0 --etcd "$ENDPOINT"
wait_for "$TMP/s3.err" "node s4 .*joined" 20 || fail "s3 did not see s4 after etcd returned"
echo "ok 5: servers serve on without etcd, renew when it returns, and see new members"
echo "PASS"
