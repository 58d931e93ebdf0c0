#!/usr/bin/env bash
# No single master (docs/cluster.md, "Placing across the cluster"): three
# `genie serve --etcd` on 127.0.0.1, none joined to another, an etcd
# started here (data in $TMP, stopped by pid).
#   1. each server adds the other two (from its etcd cache), never itself
#   2. a client entering at s1 runs a two-stage graph with w1 on s2 and w2 on
#      s3: s1 plans it across them, s2 runs a stage, the result equals
#      in-process execution (tests/integration/multinode_tool.c, peers)
#   3. kill -9 of s2: the graph bound to its tensor fails with CONNECTION
#      (within the lease TTL: s1's calls to another server wait at most
#      that); its key expires, s1 drops it; the graph then fails naming s2,
#      and the next graph runs on s1 and s3
#   4. a client entering through etcd, its entry server killed -9: its next
#      call fails with CONNECTION (within the lease TTL: its reconnect
#      window) naming the tensor and the server; genie_context_lost_tensors
#      lists the tensors that lived there by name, its host tensor is
#      untouched; genie_init again reaches the other server and the graph
#      runs there; the last server stops on SIGTERM
set -euo pipefail
source "$(dirname "$0")/lib/servers.sh"
source "$(dirname "$0")/lib/etcd.sh"
TOOL="$B/tests/itest_multinode_tool"

EC=$(free_port); EP=$(free_port)
ENDPOINT="http://127.0.0.1:$EC"
"$ETCD" --name t --data-dir "$TMP/etcd-data" --listen-client-urls "$ENDPOINT" --advertise-client-urls "$ENDPOINT" \
  --listen-peer-urls "http://127.0.0.1:$EP" --initial-advertise-peer-urls "http://127.0.0.1:$EP" \
  --initial-cluster "t=http://127.0.0.1:$EP" --log-level error >>"$TMP/etcd.log" 2>&1 &
PIDS+=("$!")
for _ in $(seq 1 200); do
  "$ETCDCTL" --endpoints "$ENDPOINT" --command-timeout=1s endpoint health >/dev/null 2>&1 && break
  sleep 0.1
done
keys() { "$ETCDCTL" --endpoints "$ENDPOINT" get --prefix /genie/p1/nodes/ --keys-only | grep -v '^$' || true; }
export GENIE_CLUSTER=p1 GENIE_ETCD_LEASE_TTL=4000 GENIE_TIMEOUT=20000

# --- 1. every server places on the others -------------------------------------
for s in s1 s2 s3; do
  GENIE_LOG_LEVEL=info start_server "$s" --node-id "$s" --grace-ms 0 --etcd "$ENDPOINT"
  eval "P_$s=\$PORT PID_$s=\$SERVER_PID"
done
for s in s1 s2 s3; do
  for o in s1 s2 s3; do
    [ "$s" = "$o" ] && continue
    wait_for "$TMP/$s.err" "server $o at .* added" 30 || fail "$s did not add $o for placement"
  done
  grep -q "server $s at .* added" "$TMP/$s.err" && fail "$s added itself"
done
"$ETCDCTL" --endpoints "$ENDPOINT" get /genie/p1/nodes/s2 --print-value-only | grep -q '"profile":{"device":"cpu:0","peak_flops"' \
  || fail "s2's key carries no calibration profile"
echo "ok 1: each server added the other two from etcd, never itself"

# --- 2 and 3. placed across servers; kill -9 of one ---------------------------
mkfifo "$TMP/ctl"
GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$P_s1 "$TOOL" peers s2 "$P_s2" s3 "$P_s3" <"$TMP/ctl" \
  >"$TMP/tool.out" 2>"$TMP/tool.err" &
TOOL_PID=$!; PIDS+=("$TOOL_PID")
exec 3>"$TMP/ctl"
wait_for "$TMP/tool.out" '^ready' 60 || fail "the client did not place the graph: $(cat "$TMP/tool.err")"
kill -9 "$PID_s2"
t0=$(now_ms)
echo dead >&3
wait_for "$TMP/tool.out" 'graph needing the dead s2' 30 || fail "the graph needing s2 did not fail"
wait_for "$TMP/s1.err" "server s2 no longer used for placement" 20 || fail "s1 did not drop s2"
echo "s1 dropped s2 $(( $(now_ms) - t0 )) ms after kill -9 (lease TTL 4000 ms)"
keys | grep -q /s2 && fail "s2's key outlived its lease"
echo expired >&3
exec 3>&-
wait "$TOOL_PID" || fail "peers client: $(cat "$TMP/tool.err")"
cat "$TMP/tool.out" | grep -v '^ready'
grep -q '^ok peers' "$TMP/tool.out" || fail "no 'ok peers'"
echo "ok 3: a killed server fails the graph that needed it; the next graph runs on the others"

# --- 4. a client's entry server dies ---------------------------------------------
mkfifo "$TMP/ctl2"
GENIE_ETCD_ENDPOINTS=$ENDPOINT "$TOOL" lost <"$TMP/ctl2" >"$TMP/lost.out" 2>"$TMP/lost.err" &
LOST_PID=$!; PIDS+=("$LOST_PID")
exec 4>"$TMP/ctl2"
wait_for "$TMP/lost.out" '^ready' 60 || fail "the etcd client did not start: $(cat "$TMP/lost.err")"
ENTRY=$(sed -n 's/^entered //p' "$TMP/lost.out")
case "$ENTRY" in
  s1) kill -9 "$PID_s1"; LEFT=s3 ;;
  s3) kill -9 "$PID_s3"; LEFT=s1 ;;
  *) fail "the client entered '$ENTRY'" ;;
esac
echo dead >&4
exec 4>&-
wait "$LOST_PID" || fail "lost client: $(cat "$TMP/lost.err")"
grep -v '^ready' "$TMP/lost.out"
grep -q '^ok lost' "$TMP/lost.out" || fail "no 'ok lost'"
echo "ok 4: the entry server's death: CONNECTION naming the lost tensors, listed by name; genie_init again reached $LEFT"

# A server holding sessions on others stops cleanly.
eval "LEFT_PID=\$PID_$LEFT"
kill -TERM "$LEFT_PID"
for _ in $(seq 1 200); do kill -0 "$LEFT_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$LEFT_PID" 2>/dev/null && fail "$LEFT did not stop on SIGTERM"
echo "PASS"
