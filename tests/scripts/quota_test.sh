#!/usr/bin/env bash
# Quotas and the memory budget of `genie serve`, across real processes
# (docs/security.md, "Quotas and the memory budget"):
#  1. three graphs whose outputs (4 GiB each, from 128 KiB of inputs) pass
#     the server's budget fail with OUT_OF_MEMORY naming the graph, its
#     largest value, the server and the budget, before anything runs: the
#     server's RSS stays within +64 MiB and it keeps serving;
#  2. a session's tensor quota and byte quota (flags and GENIE_* variables)
#     refuse the allocation past them, naming the quota, the use and the
#     limit, while another session is unaffected;
#  3. the default budget is at most the available memory and the memory
#     cgroup's headroom, not the physical memory;
#  4. `genie run` with absurd JSON dimensions (1e300, negative, fractional,
#     beyond int64) gives a Genie error naming the field, not a crash.
# Env: GENIE_BUILD_DIR. Exit 0 pass, 1 fail.
set -euo pipefail
source "$(dirname "$0")/lib/servers.sh"
[ -x "$GENIE" ] || fail "$GENIE was not built"

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
client() { GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$1 "$GENIE" run "${@:2}"; }

# An outer product: x f32[32768,1] times y f32[1,32768] is 4 GiB of output.
cat >"$TMP/outer.json" <<'JSON'
{"format":"genie.graph","version":1,"name":"outer","inputs":[{"name":"x","dtype":"f32","shape":[32768,1]},
{"name":"y","dtype":"f32","shape":[1,32768]}],"nodes":[{"name":"mm","op":"matmul","inputs":["x","y"],
"outputs":["z"]}],"outputs":["z"]}
JSON
cat >"$TMP/small.json" <<'JSON'
{"format":"genie.graph","version":1,"name":"small","inputs":[{"name":"a","dtype":"f32","shape":[4,4]},
{"name":"b","dtype":"f32","shape":[4,4]},{"name":"c","dtype":"f32","shape":[4,4]}],"nodes":[
{"name":"s1","op":"add","inputs":["a","b"],"outputs":["t"]},{"name":"s2","op":"add","inputs":["t","c"],
"outputs":["u"]}],"outputs":["u"]}
JSON

# 1. Graphs over the budget.
start_server budget --memory-budget 268435456
rss0=$(rss_kb "$SERVER_PID")
for i in 1 2 3; do
  if client "$PORT" "$TMP/outer.json" >"$TMP/outer$i.out" 2>"$TMP/outer$i.err"; then
    fail "graph $i over the budget ran"
  fi
done
grep -q "GENIE_ERR_OUT_OF_MEMORY" "$TMP/outer3.err" || fail "no OUT_OF_MEMORY: $(cat "$TMP/outer3.err")"
for want in "graph 'outer'" "'z' f32\[32768, 32768\]" "memory budget" "268435456" "server "; do
  grep -q "$want" "$TMP/outer3.err" || fail "the error does not name $want: $(cat "$TMP/outer3.err")"
done
rss1=$(rss_kb "$SERVER_PID")
[ $((rss1 - rss0)) -lt 65536 ] || fail "server RSS grew from $rss0 to $rss1 KiB"
client "$PORT" "$TMP/small.json" >"$TMP/small.out" 2>&1 || fail "the server stopped serving: $(cat "$TMP/small.out")"
grep -q "^checksum u" "$TMP/small.out" || fail "no output after the refusals"
echo "ok 1: 3 graphs over the budget refused, RSS $rss0 -> $rss1 KiB"

# 2. Session quotas: tensors (flag), bytes (environment).
start_server tensors --session-max-tensors 2
if client "$PORT" "$TMP/small.json" >/dev/null 2>"$TMP/t.err"; then fail "a third tensor passed the quota of 2"; fi
grep -q "GENIE_ERR_OUT_OF_MEMORY.*session tensor quota.*quota of 2 tensors" "$TMP/t.err" ||
  fail "tensor quota error: $(cat "$TMP/t.err")"
GENIE_SESSION_MAX_BYTES=100 start_server bytes
if client "$PORT" "$TMP/small.json" >/dev/null 2>"$TMP/b.err"; then fail "192 bytes passed a 100-byte quota"; fi
grep -q "GENIE_ERR_OUT_OF_MEMORY.*session byte quota: 64 more bytes.*with 64 held.*quota of 100 bytes" "$TMP/b.err" ||
  fail "byte quota error: $(cat "$TMP/b.err")"
# The graph's own output counts too: 3 inputs of 64 bytes and 2 values of
# 64 bytes need 320 bytes.
GENIE_SESSION_MAX_BYTES=250 start_server graphbytes
if client "$PORT" "$TMP/small.json" >/dev/null 2>"$TMP/g.err"; then fail "a graph passed the byte quota"; fi
grep -q "graph 'small'.*session byte quota: 128 more bytes.*quota of 250 bytes" "$TMP/g.err" ||
  fail "graph byte quota error: $(cat "$TMP/g.err")"
GENIE_SESSION_MAX_BYTES=320 start_server fits
client "$PORT" "$TMP/small.json" >/dev/null 2>"$TMP/f.err" || fail "320 bytes did not fit 320: $(cat "$TMP/f.err")"
echo "ok 2: session tensor and byte quotas"

# 3. The default budget.
GENIE_LOG_LEVEL=info start_server auto
wait_for "$TMP/auto.err" "memory budget" 10 || fail "no budget logged"
budget=$(sed -n 's/.*memory budget \([0-9]*\) bytes.*/\1/p' "$TMP/auto.err" | head -1)
avail=$(awk '/^MemAvailable:/ { printf "%.0f", $2 * 1024 }' /proc/meminfo)
[ -n "$budget" ] && [ "$budget" -gt 0 ] || fail "budget '$budget'"
# Memory may have been freed since the server read it: allow 10%.
[ "$budget" -le $((avail * 11 / 10)) ] || fail "budget $budget is above the available memory $avail"
for f in /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes; do
  limit=$(cat "$f" 2>/dev/null || echo max)
  case $limit in max | '' | *[!0-9]*) continue ;; esac
  [ "$limit" -ge $((1 << 60)) ] && continue
  [ "$budget" -le "$limit" ] || fail "budget $budget is above the cgroup limit $limit ($f)"
done
echo "ok 3: default budget $budget bytes (available $avail)"

# 4. Absurd JSON dimensions.
for dim in 1e300 -5 2.5 '"99999999999999999999"' 9007199254740993; do
  sed "s/\\[32768,1\\]/[$dim,1]/" "$TMP/outer.json" >"$TMP/absurd.json"
  set +e
  "$GENIE" run "$TMP/absurd.json" >"$TMP/absurd.out" 2>"$TMP/absurd.err"
  rc=$?
  set -e
  [ "$rc" -eq 1 ] || fail "dimension $dim: exit $rc: $(cat "$TMP/absurd.err")"
  grep -q "GENIE_ERR_[A-Z_]*: inputs\[0\]" "$TMP/absurd.err" || fail "dimension $dim: $(cat "$TMP/absurd.err")"
done
echo "ok 4: absurd dimensions are Genie errors naming the field"
echo "PASS"
