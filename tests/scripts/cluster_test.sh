#!/usr/bin/env bash
# The cluster across processes, on 127.0.0.1 only: real `genie serve` masters
# started with --port 0, nodes in other processes (itest_cluster_tool).
#   1. `genie discover` without and with a server: probes reported, the
#      server reachable with an RTT, the full DPDK probe in a child process;
#   2. a node joins: the master's view in its state and in `genie top --once`;
#   3. the master killed (SIGKILL): the node's NODE_LOST, within timeout +
#      one interval (measured, with a generous bound for a loaded machine);
#   4. the master restarted on the same port with the same node id:
#      NODE_RECOVERED (the node kept probing it);
#   5. a master unreachable at init: a clear error within the timeout;
#   6. GPU events from another process's point of view: the test NVML library
#      drives GPU_UNAVAILABLE / GPU_OVERHEATED / HEALTH_CHANGED in a watcher.
set -euo pipefail
source "$(dirname "$0")/lib/servers.sh"
TOOL="$B/tests/itest_cluster_tool"
unset GENIE_NVML_LIBRARY GENIE_TEST_NVML_FILE
export GENIE_HEARTBEAT_INTERVAL=100 GENIE_HEARTBEAT_TIMEOUT=600 GENIE_TIMEOUT=5000

# --- 1. discovery --------------------------------------------------------------
"$GENIE" discover --no-dpdk >"$TMP/disc.out" || fail "genie discover --no-dpdk exited $?"
grep -q '^  rdma ' "$TMP/disc.out" && grep -q '^selection: tcp' "$TMP/disc.out" || fail "discover output: $(cat "$TMP/disc.out")"
"$GENIE" discover --json >"$TMP/disc.json" || fail "genie discover --json exited $?"
/usr/bin/python3 - "$TMP/disc.json" <<'PY' || fail "discover JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["dpdk"]["probed"] is True, d["dpdk"]
assert isinstance(d["dpdk"]["reason"], str) and d["dpdk"]["reason"], d["dpdk"]
assert "available" in d["rdma"] and d["rdma"]["reason"], d["rdma"]
assert d["selection"]["selected"] == "tcp", d["selection"]
assert [b["backend"] for b in d["backends"]["local"]] == ["tcp", "rdma", "dpdk", "dpdk_gpudev", "ucx"]
assert d["ucx"]["probed"] is True and d["ucx"]["reason"], d["ucx"]
print("dpdk probe:", d["dpdk"]["reason"], "in %.0f ms" % d["dpdk"]["probe_ms"])
PY
GENIE_NODE_ID=master-a GENIE_LOG_LEVEL=info start_server m1 --port 0
"$GENIE" discover "127.0.0.1:$PORT" --no-dpdk >"$TMP/disc2.out" || fail "genie discover 127.0.0.1:$PORT exited $?"
grep -q "reachable: Genie server master-a; rtt p50" "$TMP/disc2.out" || fail "discover with a server: $(cat "$TMP/disc2.out")"
rc=0; "$GENIE" discover 127.0.0.1:1 --no-dpdk >"$TMP/disc3.out" || rc=$?
[ "$rc" = 1 ] && grep -q "not reachable" "$TMP/disc3.out" || fail "discover of a closed port: exit $rc, $(cat "$TMP/disc3.out")"
echo "ok 1: discover reports every probe, the server's RTT, an unreachable port"

# --- 2. a node joins -------------------------------------------------------------
export GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$PORT
GENIE_NODE_ID=watcher-1 "$TOOL" watch 60 >"$TMP/watch.out" 2>"$TMP/watch.err" &
watcher=$!; PIDS+=("$watcher")
wait_for "$TMP/watch.out" '^ready' 10 || fail "watcher did not start"
wait_for "$TMP/watch.out" 'BACKEND_SELECTED .*"backend":"tcp"' 5 || fail "no BACKEND_SELECTED"
wait_for "$TMP/m1.err" 'node watcher-1 .* joined' 5 || fail "the master did not log the node joining"
GENIE_NODE_ID=top-1 "$GENIE" top "127.0.0.1:$PORT" --once >"$TMP/top.out" 2>"$TMP/top.err" || fail "genie top --once exited $?"
grep -q '^master-a ' "$TMP/top.out" && grep -q '^watcher-1 ' "$TMP/top.out" || fail "top does not list master-a and watcher-1: $(cat "$TMP/top.out")"
grep -q '^traffic sessions' "$TMP/top.out" || fail "top shows no traffic line"
# top was a node too: the watcher learns of it from the master, and of its
# loss once the master has not heard from it for the timeout.
wait_for "$TMP/watch.out" 'NODE_JOINED .*"id":"top-1"' 10 || fail "the watcher saw no NODE_JOINED for top-1"
wait_for "$TMP/watch.out" 'NODE_LOST .*"id":"top-1"' 10 || fail "the watcher saw no NODE_LOST for top-1"
echo "ok 2: the master tracks nodes; genie top --once lists them; a peer's join and loss reach the others"

# --- 3. the master killed ----------------------------------------------------------
t0=$(now_ms)
kill -9 "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true
wait_for "$TMP/watch.out" 'NODE_LOST .*"id":"master-a"' 10 || fail "no NODE_LOST for the killed master within 10 s"
lost_ms=$(( $(now_ms) - t0 ))
# Timeout 600 ms + interval 100 ms; the bound leaves room for a loaded machine.
[ "$lost_ms" -lt 5000 ] || fail "NODE_LOST took $lost_ms ms (timeout 600 + interval 100)"
echo "ok 3: master killed -> NODE_LOST after $lost_ms ms (timeout 600 ms + interval 100 ms)"

# --- 4. the master restarted on the same port --------------------------------------
old=$PORT
GENIE_NODE_ID=master-a GENIE_LOG_LEVEL=info start_server m2 --port "$old"
t0=$(now_ms)
wait_for "$TMP/watch.out" 'NODE_RECOVERED .*"id":"master-a"' 10 || fail "no NODE_RECOVERED after the master came back"
echo "ok 4: master restarted -> NODE_RECOVERED after $(( $(now_ms) - t0 )) ms"
kill -TERM "$watcher"; wait "$watcher" || fail "watcher exited $?"

# --- 5. unreachable master at init -------------------------------------------------
kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || true
t0=$(now_ms)
rc=0; GENIE_TIMEOUT=2000 "$TOOL" state >"$TMP/unreach.out" 2>&1 || rc=$?
took=$(( $(now_ms) - t0 ))
[ "$rc" = 3 ] && grep -q "GENIE_ERR_CONNECTION .*unreachable" "$TMP/unreach.out" || fail "unreachable master: exit $rc: $(cat "$TMP/unreach.out")"
[ "$took" -lt 4000 ] || fail "the unreachable master was reported after $took ms (timeout 2000 ms)"
echo "ok 5: unreachable master -> $(head -c 120 "$TMP/unreach.out") ($took ms)"
unset GENIE_MASTER_ADDR GENIE_MASTER_PORT

# --- 6. GPU events through the test NVML library, in another process -------------
if [ -n "${GENIE_TEST_NVML_LIBRARY:-}" ]; then
  export GENIE_NVML_LIBRARY="$GENIE_TEST_NVML_LIBRARY" GENIE_TEST_NVML_FILE="$TMP/gpus"
  echo "GPU-X 10 40 8192 512" >"$TMP/gpus"
  GENIE_GPU_POLL_INTERVAL=50 GENIE_HEALTH_INTERVAL=50 "$TOOL" watch 30 >"$TMP/gpuwatch.out" 2>"$TMP/gpuwatch.err" &
  gw=$!; PIDS+=("$gw")
  wait_for "$TMP/gpuwatch.out" '^ready' 10 || fail "GPU watcher did not start"
  echo "GPU-X 97 40 8192 512" >"$TMP/gpus.new"; mv "$TMP/gpus.new" "$TMP/gpus"
  wait_for "$TMP/gpuwatch.out" 'GPU_UNAVAILABLE .*"utilization":97' 10 || fail "no GPU_UNAVAILABLE at 97 %"
  echo "GPU-X 30 92 8192 512" >"$TMP/gpus.new"; mv "$TMP/gpus.new" "$TMP/gpus"
  wait_for "$TMP/gpuwatch.out" 'GPU_OVERHEATED .*"temperature_c":92' 10 || fail "no GPU_OVERHEATED at 92 C"
  wait_for "$TMP/gpuwatch.out" 'GPU_AVAILABLE .*"utilization":30' 10 || fail "no GPU_AVAILABLE at 30 %"
  wait_for "$TMP/gpuwatch.out" 'HEALTH_CHANGED .*"to":"DEGRADED"' 10 || fail "no HEALTH_CHANGED to DEGRADED"
  GENIE_NODE_ID=top-node "$GENIE" top --once >"$TMP/top2.out" || fail "genie top --once (embedded) exited $?"
  grep -q 'gpu 0 GPU-X .*HOT' "$TMP/top2.out" || fail "top does not show the hot GPU: $(cat "$TMP/top2.out")"
  kill -TERM "$gw"; wait "$gw" || fail "GPU watcher exited $?"
  echo "ok 6: GPU_UNAVAILABLE, GPU_OVERHEATED, GPU_AVAILABLE, HEALTH_CHANGED from the test NVML library"
else
  fail "GENIE_TEST_NVML_LIBRARY is not set (run through ctest)"
fi
echo "cluster_test: all passed"
