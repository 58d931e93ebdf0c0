# Shared by the multi-process test scripts (source it after `set -euo
# pipefail`): a scratch directory removed at exit, every started process
# killed at exit, failure reporting with the processes' logs, and starting a
# real `genie serve` on 127.0.0.1 with its port read back.
#
# Sets B (the build directory), GENIE (the CLI), TMP and PIDS (add the pid of
# every background process to it). Clears the GENIE_* variables that would
# point a client somewhere or name it, so each test sets what it means.
B=${GENIE_BUILD_DIR:?GENIE_BUILD_DIR is not set}
GENIE="$B/genie"
TMP=$(mktemp -d)
PIDS=()
servers_cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap servers_cleanup EXIT
unset GENIE_MASTER_ADDR GENIE_MASTER_PORT GENIE_AUTH_TOKEN GENIE_NODE_ID

# fail MESSAGE: prints it and the tail of every process's log, exits 1.
fail() {
  echo "FAIL: $*"
  for f in "$TMP"/*.err "$TMP"/*.out; do [ -s "$f" ] && { echo "--- $f"; tail -n 20 "$f"; }; done
  exit 1
}

# start_server NAME [ARGS...]: starts `genie serve --port 0 ARGS` (a --port
# in ARGS wins) logging to $TMP/NAME.out and .err; sets PORT and SERVER_PID.
# Environment assignments before the call reach the server.
start_server() {
  local name=$1; shift
  : >"$TMP/$name.out"  # the background job may not have opened it yet when sed looks
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

# wait_for FILE PATTERN SECONDS: until a line of FILE matches (status 1 if
# none did in time).
wait_for() {
  for _ in $(seq 1 $(($3 * 20))); do grep -q "$2" "$1" && return 0; sleep 0.05; done
  return 1
}
now_ms() { date +%s%3N; }
