#!/usr/bin/env bash
# A real Prometheus scrapes a real `genie serve --metrics-port 0`
# (docs/observability.md): Debian's prometheus server, on 127.0.0.1, with a
# generated scrape config. A client writes and reads tensors of known sizes
# and submits a decode-phase graph a known number of times; the test then
# asks Prometheus's HTTP query API (/api/v1/query) that
#   - graphs completed (phase decode) == graphs submitted == the submissions,
#     none failed, and each of the graph's ops timed once per submission;
#   - tensor bytes written == the bytes the client wrote (exactly), and
#     the TCP transport's received bytes are within 3% of them (frames);
#   - the endpoint itself answers with the documented names.
# Also: metrics are off unless asked (no "metrics on" line), a bad
# --metrics-port is refused, and beyond loopback without authentication the
# server refuses to start.
# Skips (77) only where prometheus is not installed or this build has no
# Prometheus support. Bounded: every wait has a deadline; every process is
# killed by its pid at exit.
set -euo pipefail
SRC=${GENIE_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
. "$SRC/tests/scripts/lib/servers.sh"

pass() { echo "ok: $*"; }
PROM=$(command -v prometheus || true)
[ -n "$PROM" ] || { echo "SKIP: the prometheus server is not installed (apt-get install prometheus)"; exit 77; }
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 77; }

# Off unless asked; a bad port is a usage error.
start_server plain
sleep 0.2
grep -q "metrics" "$TMP/plain.out" && fail "a server without --metrics-port announced metrics"
kill "$SERVER_PID"
"$GENIE" serve --metrics-port 70000 >/dev/null 2>"$TMP/badport.err" && fail "--metrics-port 70000 was accepted"
grep -q "metrics-port" "$TMP/badport.err" || fail "--metrics-port 70000: no message naming the flag"
pass "metrics off by default; --metrics-port 70000 refused"

# Unsupported build: skip with the server's own reason.
if ! "$GENIE" serve --port 0 --metrics-port 0 >"$TMP/probe.out" 2>"$TMP/probe.err" & then :; fi
PROBE=$!
PIDS+=("$PROBE")
for _ in $(seq 1 200); do
  grep -q "metrics on port" "$TMP/probe.out" && break
  if ! kill -0 "$PROBE" 2>/dev/null; then
    grep -q "UNSUPPORTED\|not supported" "$TMP/probe.err" && { echo "SKIP: $(tail -n1 "$TMP/probe.err")"; exit 77; }
    fail "genie serve --metrics-port 0 exited: $(cat "$TMP/probe.err")"
  fi
  sleep 0.05
done
kill "$PROBE" 2>/dev/null || true

# Beyond loopback without authentication: refused at start.
if "$GENIE" serve --port 0 --metrics-port 0 --metrics-addr 0.0.0.0 >"$TMP/open.out" 2>"$TMP/open.err"; then
  fail "metrics on 0.0.0.0 without authentication were served"
fi
grep -q "refusing to serve metrics on 0.0.0.0" "$TMP/open.err" || fail "no refusal naming 0.0.0.0: $(cat "$TMP/open.err")"
pass "metrics beyond loopback without authentication refused"

start_server metered --metrics-port 0
MPORT=""
for _ in $(seq 1 200); do
  MPORT=$(sed -n 's/^genie serve metrics on port \([0-9]*\)$/\1/p' "$TMP/metered.out")
  [ -n "$MPORT" ] && break
  sleep 0.05
done
[ -n "$MPORT" ] || fail "no 'genie serve metrics on port' line"
curl -sf "http://127.0.0.1:$MPORT/metrics" >"$TMP/first.txt" || fail "GET /metrics on port $MPORT failed"
for name in genie_sessions genie_tensor_memory_bytes genie_memory_budget_bytes genie_cluster_nodes; do
  grep -q "^$name" "$TMP/first.txt" || fail "/metrics lacks $name"
done
pass "/metrics answers on 127.0.0.1:$MPORT"

# Prometheus on a free loopback port, scraping every second.
PPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: genie
    static_configs:
      - targets: ["127.0.0.1:$MPORT"]
EOF
"$PROM" --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/tsdb" \
  --web.listen-address="127.0.0.1:$PPORT" >"$TMP/prometheus.out" 2>"$TMP/prometheus.err" &
PIDS+=("$!")

# query EXPR: the value of an instant query's single result ("" if none).
query() {
  curl -sf --get "http://127.0.0.1:$PPORT/api/v1/query" --data-urlencode "query=$1" 2>/dev/null |
    python3 -c 'import json,sys
r=json.load(sys.stdin)["data"]["result"]
print(r[0]["value"][1] if r else "")' 2>/dev/null || true
}
# wait_query EXPR WANT SECONDS: until the query's value is WANT.
wait_query() {
  local v=""
  for _ in $(seq 1 $(($3 * 4))); do
    v=$(query "$1")
    [ "$v" = "$2" ] && return 0
    sleep 0.25
  done
  echo "query $1: '$v', expected '$2'"
  return 1
}
wait_query 'up{job="genie"}' 1 60 || fail "prometheus never scraped the server"
pass "prometheus scrapes the server"

# value EXPR: an instant query's value, 0 when it has no result.
value() {
  local v
  v=$(query "$1")
  echo "${v:-0}"
}
# same A B: whether two values are equal numbers.
same() { python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) == float(sys.argv[2]) else 1)" "$1" "$2"; }

# The workload: first a decode-phase graph submitted N times ...
export GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$PORT
cat >"$TMP/decode.json" <<'EOF'
{"format":"genie.graph","version":1,"name":"decode_step",
 "inputs":[{"name":"x","dtype":"f32","shape":[2,3]},{"name":"w","dtype":"f32","shape":[4,3]}],
 "nodes":[{"name":"fc","op":"linear","inputs":["x","w"],"outputs":["h"],"annotations":{"layer":0,"phase":"decode"}},
          {"name":"act","op":"relu","inputs":["h"],"outputs":["y"],"annotations":{"phase":"decode"}}],
 "outputs":["y"]}
EOF
N=25
"$GENIE" run "$TMP/decode.json" --repeat $N >"$TMP/run.out" 2>"$TMP/run.err" || fail "genie run failed"
wait_query 'sum(genie_graphs_completed_total{phase="decode"})' $N 30 || fail "graphs completed != $N"
same "$(value 'sum(genie_graphs_submitted_total{phase="decode"})')" $N || fail "graphs submitted != $N"
same "$(value 'sum(genie_graphs_failed_total)')" 0 || fail "graphs failed"
same "$(value 'sum(genie_graph_duration_seconds_count{phase="decode"})')" $N ||
  fail "the duration histogram did not count $N graphs"
for op in linear relu; do
  same "$(value "sum(genie_op_duration_seconds_count{op=\"$op\"})")" $N || fail "op $op not timed $N times"
done
pass "graphs submitted = completed = $N (phase decode), none failed; each op timed $N times"

# ... then tensors of known sizes written and read back.
W0=$(value 'sum(genie_tensor_bytes_total{direction="write"})')
R0=$(value 'sum(genie_transport_bytes_total{transport="tcp",direction="received"})')
"$B/tests/itest_tensor_tool" roundtrip 1048576 4194304 3000000 >"$TMP/tool.out" 2>"$TMP/tool.err" ||
  fail "tensor_tool roundtrip failed"
unset GENIE_MASTER_ADDR GENIE_MASTER_PORT
WRITTEN=$((1048576 + 4194304 + 3000000))
WANT=$(python3 -c "import sys; print(int(float(sys.argv[1])) + int(sys.argv[2]))" "$W0" "$WRITTEN")
wait_query 'sum(genie_tensor_bytes_total{direction="write"})' "$WANT" 30 ||
  fail "tensor bytes written did not grow by $WRITTEN"
R1=$(value 'sum(genie_transport_bytes_total{transport="tcp",direction="received"})')
python3 - "$R0" "$R1" "$WRITTEN" <<'EOF' || fail "tcp bytes received ($R0 -> $R1) not within 3% above $WRITTEN"
import sys
got, want = float(sys.argv[2]) - float(sys.argv[1]), float(sys.argv[3])
print(f"tcp received {got:.0f} bytes for {want:.0f} written ({100 * (got / want - 1):.2f}% more: frames)")
sys.exit(0 if want <= got <= want * 1.03 else 1)
EOF
READ=$(value 'sum(genie_tensor_bytes_total{direction="read"})')
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= int(sys.argv[2]) else 1)" "$READ" "$WRITTEN" ||
  fail "tensor bytes read $READ < $WRITTEN"
pass "tensor bytes written grew by exactly $WRITTEN, tcp received within 3%, read $READ >= $WRITTEN"
echo "PASS"
