#!/usr/bin/env bash
# Custom ops across processes (docs/custom-ops.md, "Remote mode"), on
# 127.0.0.1 only, with the test op library (tests/ops/test_ops.c):
#   1. a server started without the op refuses a graph using it with
#      GENIE_ERR_UNKNOWN_OP naming the op, and keeps serving;
#   2. `genie serve --op-library` loads it: the same client gets the
#      kernel's results computed on the server;
#   3. a bad --op-library stops `genie serve` at start with the reason;
#   4. the C sample (samples/c/custom_op.c) runs and checks its values.
set -euo pipefail
source "$(dirname "$0")/lib/servers.sh"
TOOL="$B/tests/itest_custom_op_tool"
LIB=${GENIE_TEST_OP_LIBRARY:-$B/tests/libgenie_test_ops.so}
[ -x "$TOOL" ] || { echo "SKIP: $TOOL is not built"; exit 77; }
[ -f "$LIB" ] || { echo "SKIP: the test op library $LIB is not built"; exit 77; }
export GENIE_MASTER_ADDR=127.0.0.1 GENIE_TIMEOUT=20000

# --- 1. a server without the op ---------------------------------------------------
start_server plain
out=$(GENIE_MASTER_PORT=$PORT "$TOOL" "$LIB" || true)
echo "$out"
case "$out" in
  "error GENIE_ERR_UNKNOWN_OP"*"testlib.add_scalar"*) ;;
  *) fail "server without the op: got '$out'" ;;
esac
kill -0 "$SERVER_PID" || fail "the server died"
kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || fail "server exit status $?"
echo "ok 1: a server without the op refuses it, naming the op"

# --- 2. genie serve --op-library ---------------------------------------------------
start_server ops --op-library "$LIB"
out=$(GENIE_MASTER_PORT=$PORT "$TOOL" "$LIB" || true)
[ "$out" = "ok 1.5 2.5 3.5 4.5" ] || fail "server with the op: got '$out'"
echo "ok 2: genie serve --op-library runs the op ($out)"

# --- 3. a bad op library stops the server at start -----------------------------------
if "$GENIE" serve --port 0 --op-library "$TMP/missing.so" >"$TMP/bad.out" 2>"$TMP/bad.err"; then
  fail "genie serve started with a missing op library"
fi
grep -q "missing.so" "$TMP/bad.err" || fail "no reason given: $(cat "$TMP/bad.err")"
echo "ok 3: a bad --op-library is refused: $(head -n 1 "$TMP/bad.err")"

# --- 4. the sample ------------------------------------------------------------------
unset GENIE_MASTER_ADDR
if [ -x "$B/sample_custom_op" ]; then
  "$B/sample_custom_op" >"$TMP/sample.out" 2>&1 || fail "sample_custom_op: $(cat "$TMP/sample.out")"
  grep -q "custom op acme.swish: ok" "$TMP/sample.out" || fail "sample_custom_op printed no result"
  echo "ok 4: samples/c/custom_op.c"
else
  fail "$B/sample_custom_op was not built"
fi
