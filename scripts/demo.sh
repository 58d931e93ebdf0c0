#!/usr/bin/env bash
# The demo behind `make demo`: one GPT-2 transformer block run two ways that
# must agree to the last printed digit:
#   1. built call by call through genie.h (samples/c/transformer_block.c);
#   2. loaded from samples/graphs/transformer_block.json by `genie run`.
# Both fill every input and weight with the same seeded values (a function
# of each input's name), so equal checksums mean the same computation.
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
trap 'rm -rf "$TMP"' EXIT

# field FILE KEY N: the Nth word of the first line starting with KEY.
field() { awk -v k="$2" -v n="$3" '$1 == k { print $n; exit }' "$1"; }

echo "== 1. C API: samples/c/transformer_block.c (embedded mode, resident weights, $REPEAT runs)"
"$SAMPLE" --repeat "$REPEAT" | tee "$TMP/sample.txt"
echo
echo "== 2. CLI: genie run $GRAPH --repeat $REPEAT"
"$GENIE" run "$GRAPH" --repeat "$REPEAT" | tee "$TMP/cli.txt"
echo

c_api=$(field "$TMP/sample.txt" checksum 3)
c_cli=$(field "$TMP/cli.txt" checksum 3)
if [ -z "$c_api" ] || [ "$c_api" != "$c_cli" ]; then
  echo "DEMO FAILED: checksums differ: C API '$c_api', genie run '$c_cli'" >&2
  exit 1
fi

# Tokens = every dimension of the output but the last (batch x sequence).
tokens=$(awk '$1 == "output" { s = $0; sub(/.*shape \[/, "", s); sub(/\].*/, "", s);
              n = split(s, d, ", "); t = 1; for (i = 1; i < n; i++) t *= d[i]; print t; exit }' "$TMP/cli.txt")
p50_api=$(field "$TMP/sample.txt" latency 3)
p50_cli=$(field "$TMP/cli.txt" latency 3)
echo "== Result"
echo "   checksums agree: $c_api (C API) = $c_cli (genie run)"
awk -v a="$p50_api" -v c="$p50_cli" -v t="$tokens" 'BEGIN {
  printf "   latency p50: %.2f ms (C API), %.2f ms (genie run)\n", a, c
  printf "   throughput:  %.0f tokens/s (C API), %.0f tokens/s (genie run), %d tokens per run\n",
         t / (a / 1000), t / (c / 1000), t }'
