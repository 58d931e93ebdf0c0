#!/usr/bin/env bash
# The demo behind `make demo`: one GPT-2 transformer block (batch 1, seq 128,
# hidden 768, 12 heads) run three ways that must agree to the last printed
# digit:
#   1. embedded: built call by call through genie.h
#      (samples/c/transformer_block.c), executed in-process;
#   2. remote: the same program against a `genie serve` started here on
#      127.0.0.1 (GENIE_MASTER_ADDR/PORT): weights resident on the server;
#   3. the CLI: samples/graphs/transformer_block.json through `genie run`;
#   4. a cluster: a worker joins a master (`genie serve --join`), `genie top
#      --once` shows both, and the Python MLP sample runs against the master;
#   5. what the semantics buy: a GPT-2-style decode loop embedded, remote
#      with semantics on and remote in blind mode (GENIE_SEMANTICS=off:
#      one remote call per operation, weights and KV cache sent every step),
#      bytes per step and step latency side by side (bench_semantic_vs_blind
#      on loopback; docs/benchmarks.md has the figures across emulated
#      datacenter links).
# Every input and weight gets the same seeded values (a function of its
# name), so equal checksums mean the same computation.
# Usage: scripts/demo.sh BUILD_DIR   (DEMO_REPEAT=N to time N runs, default 20)
set -euo pipefail

BUILD=${1:?usage: scripts/demo.sh BUILD_DIR}
BUILD=$(cd "$BUILD" && pwd)
cd "$(dirname "$0")/.."
SAMPLE=$BUILD/sample_transformer_block
THESIS=$BUILD/bench/bench_semantic_vs_blind
GENIE=$BUILD/genie
GRAPH=samples/graphs/transformer_block.json
REPEAT=${DEMO_REPEAT:-20}

for bin in "$SAMPLE" "$GENIE"; do
  [ -x "$bin" ] || { echo "demo: $bin is missing: build first (make build)" >&2; exit 1; }
done
TMP=$(mktemp -d)
SERVER=""
WORKER=""
cleanup() {
  for p in $WORKER $SERVER; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  rm -rf "$TMP"
}
trap cleanup EXIT
unset GENIE_MASTER_ADDR GENIE_MASTER_PORT

# field FILE KEY N: the Nth word of the first line starting with KEY.
field() { awk -v k="$2" -v n="$3" '$1 == k { print $n; exit }' "$1"; }

echo "== 1. embedded: samples/c/transformer_block.c ($REPEAT runs)"
"$SAMPLE" --repeat "$REPEAT" | tee "$TMP/embedded.txt"
echo

echo "== 2. remote: genie serve on 127.0.0.1, the same program against it ($REPEAT runs)"
"$GENIE" serve --host 127.0.0.1 --port 0 >"$TMP/serve.out" 2>"$TMP/serve.err" &
SERVER=$!
PORT=""
for _ in $(seq 1 100); do
  PORT=$(sed -n 's/^genie serve listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$TMP/serve.out")
  [ -n "$PORT" ] && break
  sleep 0.05
done
[ -n "$PORT" ] || { cat "$TMP/serve.err" >&2; echo "DEMO FAILED: genie serve did not start" >&2; exit 1; }
echo "   genie serve listening on 127.0.0.1:$PORT"
GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$PORT "$SAMPLE" --repeat "$REPEAT" | tee "$TMP/remote.txt"
kill -TERM "$SERVER"
wait "$SERVER" || { echo "DEMO FAILED: genie serve did not stop cleanly" >&2; exit 1; }
SERVER=""
echo "   genie serve stopped"
echo

echo "== 3. CLI: genie run $GRAPH --repeat $REPEAT"
"$GENIE" run "$GRAPH" --repeat "$REPEAT" | tee "$TMP/cli.txt"
echo

echo "== 4. cluster: a master and a worker that joins it; genie top --once; the Python MLP sample"
# wait_port NAME: the port `genie serve` printed to $TMP/NAME.out.
wait_port() {
  local port=""
  for _ in $(seq 1 100); do
    port=$(sed -n 's/^genie serve listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$TMP/$1.out")
    [ -n "$port" ] && { echo "$port"; return 0; }
    sleep 0.05
  done
  cat "$TMP/$1.err" >&2
  echo "DEMO FAILED: genie serve ($1) did not start" >&2
  return 1
}
"$GENIE" serve --node-id node-a --port 0 >"$TMP/master.out" 2>"$TMP/master.err" &
SERVER=$!
MPORT=$(wait_port master)
"$GENIE" serve --node-id node-b --port 0 --join "127.0.0.1:$MPORT" >"$TMP/worker.out" 2>"$TMP/worker.err" &
WORKER=$!
wait_port worker >/dev/null
"$GENIE" top "127.0.0.1:$MPORT" --once | tee "$TMP/top.txt" | grep -v '^backend '
grep -q '^node-b  *worker  *alive' "$TMP/top.txt" || { echo "DEMO FAILED: the worker is not in genie top" >&2; exit 1; }
if [ -f "$BUILD/bindings/python/genie/__init__.py" ]; then
  GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$MPORT PYTHONPATH="$BUILD/bindings/python" \
    /usr/bin/python3 samples/python/mlp.py
else
  echo "   (Python binding not built: swig or python3-dev missing)"
fi
kill -TERM "$WORKER" "$SERVER"
wait "$WORKER" "$SERVER" || true
SERVER="" WORKER=""
echo

echo "== 5. semantics on vs off: a decode loop, local / semantic remote / blind remote (loopback)"
if [ -x "$THESIS" ]; then
  "$THESIS" --iters 16
else
  echo "   (benchmarks not built: GENIE_BUILD_BENCH=OFF)"
fi
echo

c_emb=$(field "$TMP/embedded.txt" checksum 3)
c_rem=$(field "$TMP/remote.txt" checksum 3)
c_cli=$(field "$TMP/cli.txt" checksum 3)
if [ -z "$c_emb" ] || [ "$c_emb" != "$c_rem" ] || [ "$c_emb" != "$c_cli" ]; then
  echo "DEMO FAILED: checksums differ: embedded '$c_emb', remote '$c_rem', genie run '$c_cli'" >&2
  exit 1
fi

# Tokens = every dimension of the output but the last (batch x sequence).
tokens=$(awk '$1 == "output" { s = $0; sub(/.*shape \[/, "", s); sub(/\].*/, "", s);
              n = split(s, d, ", "); t = 1; for (i = 1; i < n; i++) t *= d[i]; print t; exit }' "$TMP/cli.txt")
p50_emb=$(field "$TMP/embedded.txt" latency 3)
p50_rem=$(field "$TMP/remote.txt" latency 3)
p50_cli=$(field "$TMP/cli.txt" latency 3)
echo "== Result"
echo "   checksums agree: $c_emb (embedded) = $c_rem (remote) = $c_cli (genie run)"
awk -v e="$p50_emb" -v r="$p50_rem" -v c="$p50_cli" -v t="$tokens" 'BEGIN {
  printf "   latency p50: %.2f ms embedded, %.2f ms remote (%+.1f%%), %.2f ms genie run\n", e, r, (r / e - 1) * 100, c
  printf "   throughput:  %.0f tokens/s embedded, %.0f tokens/s remote, %d tokens per run\n",
         t / (e / 1000), t / (r / 1000), t }'
