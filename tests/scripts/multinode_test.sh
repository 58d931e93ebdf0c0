#!/usr/bin/env bash
# Multi-node execution across processes, on 127.0.0.1 only: a master and a
# worker (`genie serve --join`), both real `genie serve --port 0` processes,
# and clients in other processes (tests/integration/multinode_tool.c).
#   1. the worker joins; a graph split across the two servers runs with the
#      transfer between them and matches in-process execution;
#   2. a GPT-2-style decode loop (2 layers, KV cache per layer, layer 1's on
#      the worker): no KV-cache byte crosses between the servers after the
#      first step (only activations do), logits match in-process execution;
#   1b. a second server claiming node-b's id is refused (AUTH) and node-b
#      keeps serving; a worker registering an address other than the one it
#      connects from is refused;
#   2b. a second worker (node-c) joins: a graph with a weight on each worker
#      moves the activation between them directly, not through the master;
#      node-c then stops and leaves;
#   3. a device on a node that is not a worker is refused with the workers'
#      names; joining an unreachable master fails with CONNECTION;
#   4. the worker is a cluster node: a client of the master sees it (role
#      worker, its listen address, devices) in genie_cluster_state and in
#      `genie top --once`, and got NODE_JOINED when it joined;
#   5. the worker killed (SIGKILL): the client's NODE_LOST for it within
#      timeout + one interval; a graph bound to a tensor on it fails with
#      CONNECTION naming it, the same graph with the master's tensors runs
#      on the master alone; a device on it is refused (CONNECTION); the
#      worker restarted with the same node id re-joins (NODE_RECOVERED) and
#      gets work again;
#   6. the worker frozen (SIGSTOP: its connection stays up, its heartbeats
#      stop): NODE_LOST after the heartbeat timeout, the master places no
#      work there; SIGCONT: NODE_RECOVERED;
#   7. the worker stopping leaves the master serving; SIGTERM stops both.
set -euo pipefail
source "$(dirname "$0")/lib/servers.sh"
TOOL="$B/tests/itest_multinode_tool"
RTOOL="$B/tests/itest_remote_tool"
CTOOL="$B/tests/itest_cluster_tool"
export GENIE_TIMEOUT=20000
# Short heartbeats for every process (master, worker, clients).
# (The timeout leaves room for a loaded machine: a worker falsely marked lost
# would run the decode below on the master alone and fail it.)
export GENIE_HEARTBEAT_INTERVAL=250 GENIE_HEARTBEAT_TIMEOUT=3000

# --- 1. join and split ---------------------------------------------------------
GENIE_LOG_LEVEL=info start_server master --node-id node-a --grace-ms 0
MASTER_PORT=$PORT MASTER_PID=$SERVER_PID
# A client node of the master that watches the cluster's events throughout.
GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$MASTER_PORT GENIE_NODE_ID=watcher-1 \
  "$CTOOL" watch 600 >"$TMP/watch.out" 2>"$TMP/watch.err" &
WATCHER=$!; PIDS+=("$WATCHER")
wait_for "$TMP/watch.out" '^ready' 20 || fail "watcher did not start"
GENIE_LOG_LEVEL=info start_server worker --node-id node-b --grace-ms 0 --join 127.0.0.1:$MASTER_PORT
WORKER_PORT=$PORT WORKER_PID=$SERVER_PID
export GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$MASTER_PORT
# A node id belongs to its live registration: a second server claiming
# node-b is refused and node-b keeps serving (the split below runs there). A
# worker registers the address it connects from, not a third party's.
if "$GENIE" serve --port 0 --node-id node-b --join 127.0.0.1:$MASTER_PORT >"$TMP/takeover.out" 2>"$TMP/takeover.log"; then
  fail "a second server took over node-b's node id"
fi
grep -q "AUTH.*registered by another live session" "$TMP/takeover.log" || fail "takeover: $(cat "$TMP/takeover.log")"
if "$GENIE" serve --port 0 --host 127.0.0.2 --node-id node-x --join 127.0.0.1:$MASTER_PORT >"$TMP/elsewhere.out" 2>"$TMP/elsewhere.log"; then
  fail "a worker registered an address it does not connect from"
fi
grep -q "not the address the registration comes from" "$TMP/elsewhere.log" || fail "address: $(cat "$TMP/elsewhere.log")"
echo "ok 1b: a live worker's node id cannot be taken; a worker registers only its own address"
out=$("$TOOL" split node-b "$WORKER_PORT" 2>"$TMP/split.err") || fail "split: $out"
echo "$out" | head -c 300; echo

# --- 2. decode with a KV cache across the two servers --------------------------
out=$("$TOOL" decode node-b 8 2>"$TMP/decode.err") || fail "decode: $out"
echo "$out" | head -n 1

# --- 2b. worker to worker, directly ---------------------------------------------
GENIE_LOG_LEVEL=info start_server workerc --node-id node-c --grace-ms 0 --join 127.0.0.1:$MASTER_PORT
WC_PORT=$PORT WC_PID=$SERVER_PID
out=$("$TOOL" direct node-b "$WORKER_PORT" node-c "$WC_PORT" 2>"$TMP/direct.err") || fail "direct: $out"
echo "$out" | head -n 1
kill -TERM "$WC_PID"; wait "$WC_PID" 2>/dev/null || true

# --- 3. refusals --------------------------------------------------------------
# (GENIE_MASTER_* in the environment point clients at the master: they do
# not make a server join, nor change where --join goes.)
if "$GENIE" serve --port 0 --node-id node-c --join 127.0.0.1:1 >"$TMP/nojoin.out" 2>"$TMP/nojoin.err"; then
  fail "joining an unreachable master succeeded"
fi
grep -q "CONNECTION" "$TMP/nojoin.err" || fail "unreachable master: $(cat "$TMP/nojoin.err")"
: >"$TMP/nojoin.err"

# --- 4. the worker is a cluster node -------------------------------------------
wait_for "$TMP/watch.out" 'NODE_JOINED .*"id":"node-b"' 10 || fail "the watcher saw no NODE_JOINED for node-b"
"$CTOOL" state >"$TMP/state.json" 2>"$TMP/state.err" || fail "cluster state"
/usr/bin/python3 - "$TMP/state.json" "$WORKER_PORT" <<'PY' || fail "node-b in the cluster state: $(cat "$TMP/state.json")"
import json, sys
s = json.load(open(sys.argv[1]))
nodes = {n["id"]: n for n in s["nodes"]}
b = nodes["node-b"]
assert b["role"] == "worker" and b["status"] == "alive", b
assert b["listen"] == "127.0.0.1:" + sys.argv[2], b
assert b["devices"] == ["cpu:0"], b
assert b["last_heartbeat_ms"] > 0 and "gpus" in b and b["health"], b
assert nodes["node-a"]["role"] == "server", nodes["node-a"]
PY
GENIE_NODE_ID=top-1 "$GENIE" top "127.0.0.1:$MASTER_PORT" --once >"$TMP/top.out" 2>"$TMP/top.err" || fail "genie top --once exited"
grep -q '^node-b  *worker  *alive' "$TMP/top.out" && grep -q "serves 127.0.0.1:$WORKER_PORT  devices cpu:0" "$TMP/top.out" \
  || fail "top does not list the worker: $(cat "$TMP/top.out")"
# Rates over --once's interval: top's own requests moved TCP bytes.
grep -Eq '^rates graphs [0-9.]+/s .*tcp received [0-9.]+ [kMG]?B/s' "$TMP/top.out" \
  && ! grep -Eq 'tcp received 0 B/s' "$TMP/top.out" || fail "top shows no moving rates: $(cat "$TMP/top.out")"
echo "ok 4: the worker is a cluster node (state, NODE_JOINED, genie top)"

# --- 5. the worker killed, then restarted with the same node id ------------------
mkfifo "$TMP/ctl"
"$TOOL" survive node-b <"$TMP/ctl" >"$TMP/survive.out" 2>"$TMP/survive.err" &
SURVIVOR=$!; PIDS+=("$SURVIVOR")
exec 3>"$TMP/ctl"
wait_for "$TMP/survive.out" '^ready' 30 || fail "survive: did not start: $(cat "$TMP/survive.err")"
t0=$(now_ms)
kill -9 "$WORKER_PID"; wait "$WORKER_PID" 2>/dev/null || true
wait_for "$TMP/watch.out" 'NODE_LOST .*"id":"node-b"' 10 || fail "no NODE_LOST for the killed worker within 10 s"
lost_ms=$(( $(now_ms) - t0 ))
# Timeout 3000 ms + interval 250 ms (its connection closing tells the master
# at once); the bound leaves room for a loaded machine.
[ "$lost_ms" -lt 6000 ] || fail "NODE_LOST took $lost_ms ms (timeout 3000 + interval 250)"
echo "dead" >&3
wait_for "$TMP/survive.out" '^device on the dead worker' 30 || fail "survive (worker dead): $(cat "$TMP/survive.err")"
grep '^tensor on the dead worker\|^device on the dead worker' "$TMP/survive.out"
GENIE_LOG_LEVEL=info start_server worker2 --node-id node-b --grace-ms 0 --join 127.0.0.1:$MASTER_PORT
WORKER_PORT=$PORT WORKER_PID=$SERVER_PID
wait_for "$TMP/watch.out" 'NODE_RECOVERED .*"id":"node-b"' 10 || fail "no NODE_RECOVERED for the restarted worker"
echo "back $WORKER_PORT" >&3
exec 3>&-
wait "$SURVIVOR" || fail "survive exited $?: $(cat "$TMP/survive.err")"
grep -q '^ok survive' "$TMP/survive.out" || fail "survive: $(cat "$TMP/survive.out")"
echo "ok 5: worker killed -> NODE_LOST after $lost_ms ms; master alone; restarted -> NODE_RECOVERED, used again"

# --- 6. the worker frozen: heartbeats stop, the connection stays -----------------
n_lost=$(grep -c 'NODE_LOST .*"id":"node-b"' "$TMP/watch.out")
n_rec=$(grep -c 'NODE_RECOVERED .*"id":"node-b"' "$TMP/watch.out")
t0=$(now_ms)
kill -STOP "$WORKER_PID"
for _ in $(seq 1 300); do
  [ "$(grep -c 'NODE_LOST .*"id":"node-b"' "$TMP/watch.out")" -gt "$n_lost" ] && break
  sleep 0.05
done
[ "$(grep -c 'NODE_LOST .*"id":"node-b"' "$TMP/watch.out")" -gt "$n_lost" ] || { kill -CONT "$WORKER_PID"; fail "no NODE_LOST for the frozen worker"; }
lost_ms=$(( $(now_ms) - t0 ))
# Its last heartbeat went at most one interval before the freeze.
[ "$lost_ms" -ge 2750 ] || { kill -CONT "$WORKER_PID"; fail "NODE_LOST after $lost_ms ms, before the timeout: not from heartbeats"; }
info=$("$RTOOL" info) || { kill -CONT "$WORKER_PID"; fail "master info with the worker frozen"; }
grep -q '"workers":0' <<<"$info" || { kill -CONT "$WORKER_PID"; fail "the master still places work on the lost worker: $info"; }
rc=0; "$TOOL" split node-b "$WORKER_PORT" >"$TMP/frozen.out" 2>"$TMP/frozen.err" || rc=$?
kill -CONT "$WORKER_PID"
[ "$rc" = 3 ] && grep -q "CONNECTION.*node-b.*lost" "$TMP/frozen.err" || fail "a device on the lost worker: exit $rc: $(cat "$TMP/frozen.err")"
: >"$TMP/frozen.err"
for _ in $(seq 1 200); do
  [ "$(grep -c 'NODE_RECOVERED .*"id":"node-b"' "$TMP/watch.out")" -gt "$n_rec" ] && break
  sleep 0.05
done
[ "$(grep -c 'NODE_RECOVERED .*"id":"node-b"' "$TMP/watch.out")" -gt "$n_rec" ] || fail "no NODE_RECOVERED after SIGCONT"
out=$("$TOOL" split node-b "$WORKER_PORT" 2>"$TMP/thawed.err") || fail "split after the worker recovered: $out"
echo "ok 6: worker frozen -> NODE_LOST after $lost_ms ms (timeout 3000), no work placed there; SIGCONT -> recovered, used"

# --- 7. the worker leaves; the master keeps serving; clean stops ---------------
kill -TERM "$WORKER_PID"
wait "$WORKER_PID" || fail "worker exit status $? after SIGTERM"
for _ in $(seq 1 100); do
  info=$("$RTOOL" info) || fail "master info after the worker left"
  grep -q '"workers":0' <<<"$info" && break
  sleep 0.05
done
grep -q '"workers":0' <<<"$info" || fail "the master still lists the worker: $info"
out=$("$TOOL" split node-b "$WORKER_PORT" 2>"$TMP/gone.err") && fail "a device of a worker that left was accepted"
grep -q "CONNECTION.*node-b.*gone" "$TMP/gone.err" || fail "worker gone: $(cat "$TMP/gone.err")"
: >"$TMP/gone.err"
out=$("$TOOL" split node-x "$WORKER_PORT" 2>"$TMP/never.err") && fail "a device of a node that never joined was accepted"
grep -q "UNSUPPORTED.*node-x.*neither" "$TMP/never.err" || fail "never a worker: $(cat "$TMP/never.err")"
: >"$TMP/never.err"
kill -TERM "$WATCHER"; wait "$WATCHER" || fail "watcher exited $?"
kill -TERM "$MASTER_PID"
wait "$MASTER_PID" || fail "master exit status $? after SIGTERM"
echo "multinode_test: ok"
