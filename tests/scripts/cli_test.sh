#!/usr/bin/env bash
# The `genie` CLI, the C sample and the benchmarks, end to end:
#  - `genie version`;
#  - the committed samples/graphs/transformer_block.json is what the sample
#    exports, and `genie run` on it prints the sample's checksum, twice alike;
#  - values from .npy files reach the graph (an add of two known arrays, a
#    dynamic dimension, broadcasting, int32), also from numpy-written files;
#  - every error path exits 1 or 2 (not a crash) with its reason on stderr;
#  - each benchmark runs once with --quick and writes its JSON.
# Env: GENIE_BUILD_DIR, GENIE_SOURCE_DIR (set by ctest). Exit 0 pass, 77 skip.
set -uo pipefail

BUILD=${GENIE_BUILD_DIR:?GENIE_BUILD_DIR is not set}
SRC=${GENIE_SOURCE_DIR:?GENIE_SOURCE_DIR is not set}
GENIE=$BUILD/genie
SAMPLE=$BUILD/sample_transformer_block
GRAPH=$SRC/samples/graphs/transformer_block.json

for bin in "$GENIE" "$SAMPLE"; do
  [ -x "$bin" ] || { echo "FAIL: $bin was not built" >&2; exit 1; }
done

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# checksum_of FILE NAME: the value on "checksum NAME VALUE".
checksum_of() { awk -v n="$2" '$1 == "checksum" && $2 == n { print $3 }' "$1"; }

# write_npy FILE DESCR SHAPE DATA: a version 1.0 .npy file, header padded to
# 64 bytes as numpy does; DATA is printf escapes of the raw bytes.
write_npy() {
  local file=$1 descr=$2 shape=$3 data=$4
  local dict="{'descr': '$descr', 'fortran_order': False, 'shape': $shape, }"
  local hlen=$(( (10 + ${#dict} + 1 + 63) / 64 * 64 - 10 ))
  {
    printf '\x93NUMPY\x01\x00'
    printf "\\x$(printf %02x $((hlen & 255)))\\x$(printf %02x $((hlen >> 8)))"
    printf '%s%*s\n' "$dict" $((hlen - ${#dict} - 1)) ''
    printf "$data"
  } > "$file"
}

# expect_error NAME WANT_IN_STDERR CMD...: CMD must exit 1 or 2 (a clean
# error, not a crash or a sanitizer abort) and say WANT_IN_STDERR on stderr.
expect_error() {
  local name=$1 want=$2
  shift 2
  "$@" > "$TMP/err.out" 2> "$TMP/err.txt"
  local rc=$?
  if [ "$rc" -ne 1 ] && [ "$rc" -ne 2 ]; then
    fail "$name: exit status $rc, expected 1 or 2"; cat "$TMP/err.txt" >&2
  elif ! grep -qF -- "$want" "$TMP/err.txt"; then
    fail "$name: stderr does not mention '$want':"; cat "$TMP/err.txt" >&2
  else
    pass "$name (exit $rc: $(head -n 1 "$TMP/err.txt"))"
  fi
}

# --- version -----------------------------------------------------------------
if "$GENIE" version > "$TMP/version.txt" && grep -qE '^genie [0-9]+\.[0-9]+\.[0-9]+ \(ABI [0-9]+\)' "$TMP/version.txt"; then
  pass "genie version: $(head -n 1 "$TMP/version.txt")"
else
  fail "genie version"; cat "$TMP/version.txt" >&2
fi
"$GENIE" help > /dev/null && "$GENIE" help run | grep '^checksum = ' >/dev/null || fail "genie help / help run"

# --- the transformer block: sample vs JSON graph --------------------------------
if "$SAMPLE" --json "$TMP/block.json" > /dev/null && cmp -s "$TMP/block.json" "$GRAPH"; then
  pass "committed $GRAPH is the sample's export"
else
  fail "$GRAPH differs from 'sample_transformer_block --json' (regenerate it)"
fi
"$SAMPLE" --repeat 1 > "$TMP/sample.txt" || fail "sample_transformer_block exited $?"
"$GENIE" run "$GRAPH" > "$TMP/run1.txt" || fail "genie run (1st) exited $?"
"$GENIE" run "$GRAPH" --repeat 2 > "$TMP/run2.txt" || fail "genie run (2nd) exited $?"
c_sample=$(checksum_of "$TMP/sample.txt" h.0.out)
c_run1=$(checksum_of "$TMP/run1.txt" h.0.out)
c_run2=$(checksum_of "$TMP/run2.txt" h.0.out)
if [ -n "$c_sample" ] && [ "$c_sample" = "$c_run1" ] && [ "$c_run1" = "$c_run2" ]; then
  pass "transformer block checksum $c_sample: sample = genie run = genie run again"
else
  fail "checksums differ: sample '$c_sample', run '$c_run1', run again '$c_run2'"
fi
grep -q '^output h.0.out shape \[1, 128, 768\] dtype f32$' "$TMP/run1.txt" || fail "genie run: output line"
grep -q '^latency p50 [0-9.]* ms min [0-9.]* ms (2 runs)$' "$TMP/run2.txt" || fail "genie run: latency line"

# A shorter block: a different graph, still the same checksum both ways.
"$SAMPLE" --seq 16 --json "$TMP/block16.json" > /dev/null || fail "sample --seq 16 --json"
"$SAMPLE" --seq 16 --repeat 1 > "$TMP/sample16.txt" || fail "sample --seq 16"
"$GENIE" run "$TMP/block16.json" > "$TMP/run16.txt" || fail "genie run seq 16"
c16=$(checksum_of "$TMP/sample16.txt" h.0.out)
if [ -n "$c16" ] && [ "$c16" = "$(checksum_of "$TMP/run16.txt" h.0.out)" ] && [ "$c16" != "$c_sample" ]; then
  pass "seq 16 block checksum $c16 agrees (and differs from seq 128)"
else
  fail "seq 16: sample '$c16', genie run '$(checksum_of "$TMP/run16.txt" h.0.out)'"
fi

# --- .npy inputs -------------------------------------------------------------------
# out = a + b with a [-1, 3] (dynamic) and b [3] (broadcast):
# a = [[1,2,3],[4,5,6]], b = [10,20,30] -> sum(out) = 21 + 2 * 60 = 141.
cat > "$TMP/add.json" <<'EOF'
{"format": "genie.graph", "version": 1, "name": "add2",
 "inputs": [{"name": "a", "dtype": "f32", "shape": [-1, 3]},
            {"name": "b", "dtype": "f32", "shape": [3]}],
 "nodes": [{"name": "add", "op": "add", "inputs": ["a", "b"], "outputs": ["out"]}],
 "outputs": ["out"]}
EOF
F1='\x00\x00\x80\x3f' F2='\x00\x00\x00\x40' F3='\x00\x00\x40\x40'
F4='\x00\x00\x80\x40' F5='\x00\x00\xa0\x40' F6='\x00\x00\xc0\x40'
write_npy "$TMP/a.npy" '<f4' '(2, 3)' "$F1$F2$F3$F4$F5$F6"
write_npy "$TMP/a1.npy" '<f4' '(1, 3)' "$F1$F2$F3"
write_npy "$TMP/b.npy" '<f4' '(3,)' '\x00\x00\x20\x41\x00\x00\xa0\x41\x00\x00\xf0\x41'
if "$GENIE" run "$TMP/add.json" --input a="$TMP/a.npy" --input b="$TMP/b.npy" > "$TMP/add.txt" &&
   [ "$(checksum_of "$TMP/add.txt" out)" = 141 ] &&
   grep -q '^output out shape \[2, 3\] dtype f32$' "$TMP/add.txt"; then
  pass "add of two .npy inputs: checksum 141, shape [2, 3]"
else
  fail "add of two .npy inputs"; cat "$TMP/add.txt" >&2
fi
# The dynamic dimension follows the file: a = [[1,2,3]] -> 6 + 60 = 66.
if "$GENIE" run "$TMP/add.json" --input a="$TMP/a1.npy" --input b="$TMP/b.npy" > "$TMP/add1.txt" &&
   [ "$(checksum_of "$TMP/add1.txt" out)" = 66 ]; then
  pass "dynamic dimension from the file: checksum 66"
else
  fail "dynamic dimension from the file"; cat "$TMP/add1.txt" >&2
fi

# int32: [7, -2] + [100, 1000] -> 1105.
cat > "$TMP/addi.json" <<'EOF'
{"format": "genie.graph", "version": 1,
 "inputs": [{"name": "p", "dtype": "i32", "shape": [2]}, {"name": "q", "dtype": "i32", "shape": [2]}],
 "nodes": [{"name": "add", "op": "add", "inputs": ["p", "q"], "outputs": ["s"]}],
 "outputs": ["s"]}
EOF
write_npy "$TMP/p.npy" '<i4' '(2,)' '\x07\x00\x00\x00\xfe\xff\xff\xff'
write_npy "$TMP/q.npy" '<i4' '(2,)' '\x64\x00\x00\x00\xe8\x03\x00\x00'
if "$GENIE" run "$TMP/addi.json" --input p="$TMP/p.npy" --input q="$TMP/q.npy" > "$TMP/addi.txt" &&
   [ "$(checksum_of "$TMP/addi.txt" s)" = 1105 ]; then
  pass "int32 .npy inputs: checksum 1105"
else
  fail "int32 .npy inputs"; cat "$TMP/addi.txt" >&2
fi
# One input from a file, one seeded: replacing q's seeded values by a file
# changes the checksum by exactly sum(file) - sum(seeded q).
"$GENIE" run "$TMP/addi.json" --input p="$TMP/p.npy" > "$TMP/seeded_q.txt" || fail "seeded q"
"$GENIE" run "$TMP/addi.json" --input p="$TMP/p.npy" --input q="$TMP/p.npy" > "$TMP/pp.txt" || fail "p + p"
[ "$(checksum_of "$TMP/pp.txt" s)" = 10 ] || fail "p + p: expected checksum 10"
seeded=$(checksum_of "$TMP/seeded_q.txt" s)
if [ -n "$seeded" ] && [ "$seeded" -ge 5 ] && [ "$seeded" -le 35 ]; then
  pass "seeded int32 values lie in 0..15 (p + seeded q = $seeded)"
else
  fail "seeded int32 checksum '$seeded' outside 5..35"
fi

# Files written by numpy itself (format 1.0 and 2.0).
if /usr/bin/python3 -c 'import numpy' 2> /dev/null; then
  /usr/bin/python3 - "$TMP" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
np.save(d + "/np_a.npy", np.arange(1, 7, dtype=np.float32).reshape(2, 3))
with open(d + "/np_b.npy", "wb") as f:
    np.lib.format.write_array(f, np.array([10, 20, 30], dtype=np.float32), version=(2, 0))
np.save(d + "/np_f64.npy", np.zeros((2, 3)))
np.save(d + "/np_fortran.npy", np.asfortranarray(np.zeros((2, 3), dtype=np.float32)))
EOF
  if "$GENIE" run "$TMP/add.json" --input a="$TMP/np_a.npy" --input b="$TMP/np_b.npy" > "$TMP/np.txt" &&
     [ "$(checksum_of "$TMP/np.txt" out)" = 141 ]; then
    pass "numpy-written .npy files (v1.0 and v2.0): checksum 141"
  else
    fail "numpy-written .npy files"; cat "$TMP/np.txt" >&2
  fi
  expect_error "float64 .npy" "'<f8' is not supported" "$GENIE" run "$TMP/add.json" --input a="$TMP/np_f64.npy" --input b="$TMP/b.npy"
  expect_error "Fortran-order .npy" "Fortran-order" "$GENIE" run "$TMP/add.json" --input a="$TMP/np_fortran.npy" --input b="$TMP/b.npy"
else
  fail "/usr/bin/python3 has no numpy (scripts/install-deps.sh installs python3-numpy)"
fi

# --- seeded values: the CLI follows the definition in its help ---------------------------
# Every dtype, cast to f32 so the output checksum shows the exact values; the
# expected checksums come from an independent Python rendering of the
# definition (FNV-1a 64, splitmix64, scale 1/sqrt(last dim), round to
# nearest even for f16/bf16).
cat > "$TMP/seeded.json" <<'EOF'
{"format": "genie.graph", "version": 1,
 "inputs": [{"name": "w", "dtype": "f32", "shape": [4, 16]},
            {"name": "h", "dtype": "f16", "shape": [3, 5]},
            {"name": "bf", "dtype": "bf16", "shape": [7]},
            {"name": "i", "dtype": "i64", "shape": [9]},
            {"name": "m", "dtype": "bool", "shape": [11]}],
 "nodes": [{"name": "cw", "op": "cast", "inputs": ["w"], "outputs": ["cw"], "attrs": {"dtype": {"string": "f32"}}},
           {"name": "ch", "op": "cast", "inputs": ["h"], "outputs": ["ch"], "attrs": {"dtype": {"string": "f32"}}},
           {"name": "cbf", "op": "cast", "inputs": ["bf"], "outputs": ["cbf"], "attrs": {"dtype": {"string": "f32"}}},
           {"name": "ci", "op": "cast", "inputs": ["i"], "outputs": ["ci"], "attrs": {"dtype": {"string": "f32"}}},
           {"name": "cm", "op": "cast", "inputs": ["m"], "outputs": ["cm"], "attrs": {"dtype": {"string": "f32"}}}],
 "outputs": ["cw", "ch", "cbf", "ci", "cm"]}
EOF
if [ -x /usr/bin/python3 ]; then
  /usr/bin/python3 - > "$TMP/seeded_expected.txt" <<'EOF'
import math, struct
M = (1 << 64) - 1
def f32(x): return struct.unpack("<f", struct.pack("<f", x))[0]
def bf16(x):
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFFFFFF
    return struct.unpack("<f", struct.pack("<I", (u >> 16) << 16))[0]
def seeded(name, dtype, shape):
    state = 0xCBF29CE484222325
    for b in name.encode():
        state = ((state ^ b) * 0x100000001B3) & M
    scale = 1.0 / math.sqrt(shape[-1])
    total = 0.0
    for _ in range(math.prod(shape)):
        state = (state + 0x9E3779B97F4A7C15) & M
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
        r = z ^ (z >> 31)
        f = f32(((r >> 40) / 16777216.0 * 2 - 1) * scale)
        v = {"f32": f, "f16": struct.unpack("<e", struct.pack("<e", f))[0], "bf16": bf16(f),
             "i64": r % 16, "bool": r & 1}[dtype]
        total += v
    return total
for out, name, dtype, shape in [("cw", "w", "f32", [4, 16]), ("ch", "h", "f16", [3, 5]),
                                ("cbf", "bf", "bf16", [7]), ("ci", "i", "i64", [9]),
                                ("cm", "m", "bool", [11])]:
    print("checksum %s %.6g" % (out, seeded(name, dtype, shape)))
EOF
  if "$GENIE" run "$TMP/seeded.json" > "$TMP/seeded.txt" &&
     diff <(grep '^checksum' "$TMP/seeded.txt") "$TMP/seeded_expected.txt" > "$TMP/seeded.diff"; then
    pass "seeded f32/f16/bf16/i64/bool values match the documented definition"
  else
    fail "seeded values differ from the definition:"; cat "$TMP/seeded.txt" "$TMP/seeded.diff" >&2
  fi
else
  echo "note: no /usr/bin/python3: seeded values not checked against the definition"
fi

# --- error paths ---------------------------------------------------------------------
printf '{"format": "genie.graph", "version": 1, "inputs": [' > "$TMP/bad.json"
write_npy "$TMP/a_i32.npy" '<i4' '(2, 3)' '\x01\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00\x04\x00\x00\x00\x05\x00\x00\x00\x06\x00\x00\x00'
write_npy "$TMP/b4.npy" '<f4' '(4,)' "$F1$F2$F3$F4"
write_npy "$TMP/a_short.npy" '<f4' '(2, 3)' "$F1$F2$F3"
write_npy "$TMP/a_big.npy" '>f4' '(2, 3)' "$F1$F2$F3$F4$F5$F6"
printf 'not an npy file' > "$TMP/junk.npy"
ADD=("$GENIE" run "$TMP/add.json")
expect_error "missing graph file" "No such file" "$GENIE" run "$TMP/nope.json"
expect_error "invalid JSON" "GENIE_ERR_PARSE" "$GENIE" run "$TMP/bad.json"
expect_error "unknown input name" "unknown input 'nope'" "${ADD[@]}" --input nope="$TMP/a.npy"
expect_error "input given twice" "given twice" "${ADD[@]}" --input b="$TMP/b.npy" --input b="$TMP/b.npy" --input a="$TMP/a.npy"
expect_error "missing .npy file" "No such file" "${ADD[@]}" --input a="$TMP/none.npy" --input b="$TMP/b.npy"
expect_error "npy of the wrong dtype" "holds i32" "${ADD[@]}" --input a="$TMP/a_i32.npy" --input b="$TMP/b.npy"
expect_error "npy of the wrong shape" "has shape [4]" "${ADD[@]}" --input a="$TMP/a.npy" --input b="$TMP/b4.npy"
expect_error "truncated npy" "truncated" "${ADD[@]}" --input a="$TMP/a_short.npy" --input b="$TMP/b.npy"
expect_error "big-endian npy" "big-endian" "${ADD[@]}" --input a="$TMP/a_big.npy" --input b="$TMP/b.npy"
expect_error "not an npy file" "not a .npy file" "${ADD[@]}" --input a="$TMP/junk.npy" --input b="$TMP/b.npy"
expect_error "dynamic input without a file" "dynamic shape" "${ADD[@]}" --input b="$TMP/b.npy"
expect_error "unknown flag" "unknown option '--bogus'" "$GENIE" run "$GRAPH" --bogus
expect_error "bad --repeat" "--repeat needs an integer" "$GENIE" run "$GRAPH" --repeat 0
# A seeded input larger than any machine's memory (40 TB): a Genie error,
# before the CLI tries to hold its values.
printf '{"version": 1, "name": "huge", "inputs": [{"name": "x", "dtype": "f32", "shape": [10000000000000]}],
 "nodes": [{"op": "relu", "name": "r", "inputs": ["x"], "outputs": ["y"]}], "outputs": ["y"]}\n' >"$TMP/huge.json"
expect_error "run: input beyond memory" "GENIE_ERR_OUT_OF_MEMORY" "$GENIE" run "$TMP/huge.json"
expect_error "run without a graph" "needs a graph file" "$GENIE" run
expect_error "unknown command" "unknown command 'frobnicate'" "$GENIE" frobnicate
expect_error "sample: unknown argument" "unknown argument" "$SAMPLE" --bogus

# --- benchmarks, once each on tiny sizes ------------------------------------------------
benches=("$BUILD"/bench/bench_*)
if [ -x "${benches[0]}" ]; then
  for b in "${benches[@]}"; do
    name=$(basename "$b")
    if "$b" --quick --json "$TMP/$name.json" > "$TMP/$name.txt" 2>&1 && [ -s "$TMP/$name.json" ]; then
      if /usr/bin/python3 -m json.tool "$TMP/$name.json" > /dev/null 2>&1 || ! [ -x /usr/bin/python3 ]; then
        pass "$name --quick"
      else
        fail "$name --json wrote invalid JSON"; cat "$TMP/$name.json" >&2
      fi
    else
      fail "$name --quick"; cat "$TMP/$name.txt" >&2
    fi
  done
else
  echo "note: no benchmarks built (GENIE_BUILD_BENCH=OFF)"
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all CLI checks passed"
