#!/usr/bin/env bash
# Multi-node execution across processes, on 127.0.0.1 only: a master and a
# worker (`genie serve --join`), both real `genie serve --port 0` processes,
# and clients in other processes (tests/integration/multinode_tool.c).
#   1. the worker joins; a graph split across the two servers runs with the
#      transfer between them and matches in-process execution;
#   2. a GPT-2-style decode loop (2 layers, KV cache per layer, layer 1's on
#      the worker): no KV-cache byte crosses between the servers after the
#      first step (only activations do), logits match in-process execution;
#   3. a device on a node that is not a worker is refused with the workers'
#      names; joining an unreachable master fails with CONNECTION;
#   4. the worker stopping leaves the master serving; SIGTERM stops both.
set -euo pipefail
B="$GENIE_BUILD_DIR"
GENIE="$B/genie"
TOOL="$B/tests/itest_multinode_tool"
RTOOL="$B/tests/itest_remote_tool"
TMP=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$TMP"/*.err; do [ -s "$f" ] && { echo "--- $f"; tail -n 20 "$f"; }; done
  exit 1
}
unset GENIE_MASTER_ADDR GENIE_MASTER_PORT GENIE_AUTH_TOKEN GENIE_NODE_ID
export GENIE_TIMEOUT=20000

# start_server NAME ARGS...: starts `genie serve --port 0 ARGS`, sets PORT
# and SERVER_PID.
start_server() {
  local name=$1; shift
  "$GENIE" serve --port 0 "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" &
  SERVER_PID=$!
  PIDS+=("$SERVER_PID")
  for _ in $(seq 1 400); do
    PORT=$(sed -n 's/^genie serve listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$TMP/$name.out")
    [ -n "$PORT" ] && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || fail "server $name exited at start"
    sleep 0.05
  done
  fail "server $name did not print its port"
}

# --- 1. join and split ---------------------------------------------------------
start_server master --node-id node-a --grace-ms 0
MASTER_PORT=$PORT MASTER_PID=$SERVER_PID
start_server worker --node-id node-b --grace-ms 0 --join 127.0.0.1:$MASTER_PORT
WORKER_PORT=$PORT WORKER_PID=$SERVER_PID
export GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$MASTER_PORT
out=$("$TOOL" split node-b "$WORKER_PORT" 2>"$TMP/split.err") || fail "split: $out"
echo "$out" | head -c 300; echo

# --- 2. decode with a KV cache across the two servers --------------------------
out=$("$TOOL" decode node-b 8 2>"$TMP/decode.err") || fail "decode: $out"
echo "$out" | head -n 1

# --- 3. refusals --------------------------------------------------------------
# (GENIE_MASTER_* in the environment point clients at the master: they do
# not make a server join, nor change where --join goes.)
if "$GENIE" serve --port 0 --node-id node-c --join 127.0.0.1:1 >"$TMP/nojoin.out" 2>"$TMP/nojoin.err"; then
  fail "joining an unreachable master succeeded"
fi
grep -q "CONNECTION" "$TMP/nojoin.err" || fail "unreachable master: $(cat "$TMP/nojoin.err")"
: >"$TMP/nojoin.err"

# --- 4. the worker leaves; the master keeps serving; clean stops ---------------
kill -TERM "$WORKER_PID"
wait "$WORKER_PID" || fail "worker exit status $? after SIGTERM"
for _ in $(seq 1 100); do
  info=$("$RTOOL" info) || fail "master info after the worker left"
  echo "$info" | grep -q '"workers":0' && break
  sleep 0.05
done
echo "$info" | grep -q '"workers":0' || fail "the master still lists the worker: $info"
out=$("$TOOL" split node-b "$WORKER_PORT" 2>"$TMP/gone.err") && fail "a device of a worker that left was accepted"
grep -q "UNSUPPORTED" "$TMP/gone.err" || fail "worker gone: $(cat "$TMP/gone.err")"
: >"$TMP/gone.err"
kill -TERM "$MASTER_PID"
wait "$MASTER_PID" || fail "master exit status $? after SIGTERM"
echo "multinode_test: ok"
