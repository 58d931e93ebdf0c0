#!/usr/bin/env bash
# The demo behind `make demo`: one GPT-2 transformer block (batch 1, seq 128,
# hidden 768, 12 heads) run three ways that must agree to the last printed
# digit:
#   1. embedded: built call by call through genie.h
#      (samples/c/transformer_block.c), executed in-process;
#   2. remote: the same program against a `genie serve` started here on
#      127.0.0.1 (GENIE_MASTER_ADDR/PORT): weights resident on the server;
#   3. the CLI: samples/graphs/transformer_block.json through `genie run`.
# Every input and weight gets the same seeded values (a function of its
# name), so equal checksums mean the same computation.
# Usage: scripts/demo.sh BUILD_DIR   (DEMO_REPEAT=N to time N runs, default 20)
set -euo pipefail

BUILD=${1:?usage: scripts/demo.sh BUILD_DIR}
BUILD=$(cd "$BUILD" && pwd)
cd "$(dirname "$0")/.."
SAMPLE=$BUILD/sample_transformer_block
GENIE=$BUILD/genie
GRAPH=samples/graphs/transformer_block.json
REPEAT=${DEMO_REPEAT:-20}

for bin in "$SAMPLE" "$GENIE"; do
  [ -x "$bin" ] || { echo "demo: $bin is missing: build first (make build)" >&2; exit 1; }
done
TMP=$(mktemp -d)
SERVER=""
cleanup() {
  [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" 2>/dev/null
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
