#!/usr/bin/env bash
# Remote execution across processes, on 127.0.0.1 only: real `genie serve`
# servers started with --port 0, clients in other processes.
#   1. the transformer-block sample and `genie run` give the same checksum
#      remote as embedded;
#   2. authentication: no token / wrong token refused with GENIE_ERR_AUTH,
#      the right token admitted;
#   3. garbage on the port closes that connection only: the server keeps
#      serving;
#   4. a client killed mid-transfer: its tensors are freed after the grace
#      period; a client killed holding tensors likewise;
#   5. the server killed mid-call: the client's future completes with
#      GENIE_ERR_CONNECTION within its timeout (no hang), and the context
#      says it is connected before and no longer connected after;
#   6. SIGTERM stops the server cleanly (exit 0);
#   7. the server stopped (SIGSTOP) mid-call: its connections stay up, yet
#      the future waited on without a timeout fails with GENIE_ERR_CONNECTION
#      within the client's timeout.
set -euo pipefail
source "$(dirname "$0")/lib/servers.sh"
TOOL="$B/tests/itest_remote_tool"
SAMPLE="$B/sample_transformer_block"

checksum() { awk '$1 == "checksum" { print $3; exit }'; }

# --- 1. same results remote and embedded -------------------------------------
start_server main --grace-ms 300
export GENIE_TIMEOUT=20000
emb=$("$SAMPLE" --seq 32 --repeat 1 | checksum)
rem=$(GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$PORT "$SAMPLE" --seq 32 --repeat 2 | checksum)
[ -n "$emb" ] && [ "$emb" = "$rem" ] || fail "sample checksum remote '$rem' != embedded '$emb'"
emb=$("$GENIE" run "$GENIE_SOURCE_DIR/samples/graphs/transformer_block.json" | checksum)
rem=$(GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$PORT "$GENIE" run \
      "$GENIE_SOURCE_DIR/samples/graphs/transformer_block.json" | checksum)
[ "$emb" = "$rem" ] || fail "genie run checksum remote '$rem' != embedded '$emb'"
echo "ok 1: remote and embedded agree (checksum $rem)"

export GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$PORT
info() { "$TOOL" info | sed -n 's/.*"tensors": *\([0-9]*\).*/\1/p'; }

# --- 3. garbage on the port -------------------------------------------------
/usr/bin/python3 - "$PORT" <<'PY'
import socket, sys, os
port = int(sys.argv[1])
for payload in [b"GET / HTTP/1.0\r\n\r\n", os.urandom(4096), b"GNIE" + b"\xff" * 60, b"\x00" * 3]:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        s.settimeout(5)
        while s.recv(4096):
            pass
    except OSError:
        pass
    s.close()
PY
kill -0 "$SERVER_PID" || fail "server died on garbage input"
[ -n "$(info)" ] || fail "server does not answer after garbage input"
echo "ok 3: garbage closed only its own connections; the server still serves"

# --- 4. clients killed: their tensors are freed after the grace period -------
# Earlier clients' sessions may still be in their grace period: start from 0.
for _ in $(seq 1 100); do [ "$(info)" = "0" ] && break; sleep 0.1; done
[ "$(info)" = "0" ] || fail "earlier sessions still hold $(info) tensors"
"$TOOL" hold 8 >"$TMP/hold.out" &
hold=$!; PIDS+=("$hold")
for _ in $(seq 1 200); do grep -q ready "$TMP/hold.out" && break; sleep 0.05; done
[ "$(info)" = "8" ] || fail "server should hold 8 tensors, has $(info)"
kill -9 "$hold"; wait "$hold" 2>/dev/null || true
"$TOOL" write-loop >"$TMP/writer.out" &
writer=$!; PIDS+=("$writer")
for _ in $(seq 1 200); do grep -q writing "$TMP/writer.out" && break; sleep 0.05; done
sleep 0.3
kill -9 "$writer"; wait "$writer" 2>/dev/null || true
for _ in $(seq 1 100); do [ "$(info)" = "0" ] && break; sleep 0.1; done
[ "$(info)" = "0" ] || fail "tensors of killed clients not freed after the grace period: $(info) left"
echo "ok 4: killed clients' tensors freed after the grace period"

# --- 6. SIGTERM stops the server cleanly -------------------------------------
kill -TERM "$SERVER_PID"
rc=0; wait "$SERVER_PID" || rc=$?
[ "$rc" = "0" ] || fail "server exited $rc on SIGTERM"
echo "ok 6: SIGTERM stops the server with exit 0"

# --- 2. authentication -------------------------------------------------------
printf 's3cret-token-0123456\n' >"$TMP/token"
start_server auth --auth-token-file "$TMP/token"
export GENIE_MASTER_PORT=$PORT
out=$(GENIE_AUTH_TOKEN= "$TOOL" info 2>&1 || true)
grep -q GENIE_ERR_AUTH <<<"$out" || fail "client without a token not refused with GENIE_ERR_AUTH: $out"
out=$(GENIE_AUTH_TOKEN=wrong-token-0123456789 "$TOOL" info 2>&1 || true)
grep -q GENIE_ERR_AUTH <<<"$out" || fail "client with a wrong token not refused with GENIE_ERR_AUTH: $out"
GENIE_AUTH_TOKEN=s3cret-token-0123456 "$TOOL" info >/dev/null || fail "client with the right token refused"
kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || true
echo "ok 2: tokens checked (none and wrong refused, right admitted)"

# --- 5. server killed mid-call -----------------------------------------------
start_server victim
export GENIE_MASTER_PORT=$PORT GENIE_TIMEOUT=5000
"$TOOL" slow-graph >"$TMP/slow.out" 2>"$TMP/slow.err" &
client=$!; PIDS+=("$client")
for _ in $(seq 1 200); do grep -q submitted "$TMP/slow.out" && break; sleep 0.05; done
grep -q submitted "$TMP/slow.out" || { cat "$TMP/slow.err"; fail "slow graph not submitted"; }
start=$(date +%s)
kill -9 "$SERVER_PID"
rc=0
for _ in $(seq 1 150); do kill -0 "$client" 2>/dev/null || break; sleep 0.1; done
kill -0 "$client" 2>/dev/null && fail "client still waiting 15 s after the server died"
wait "$client" || rc=$?
grep -q GENIE_ERR_CONNECTION "$TMP/slow.out" || fail "future did not complete with GENIE_ERR_CONNECTION: $(cat "$TMP/slow.out")"
conn=$(sed -n 's/^connected //p' "$TMP/slow.out" | tr '\n' ' ')
[ "$conn" = "1 0 " ] || fail "genie_context_is_connected before/after the server died: '$conn', want '1 0 '"
echo "ok 5: server killed mid-call -> GENIE_ERR_CONNECTION after $(( $(date +%s) - start )) s"
# --- 7. server stopped mid-call (SIGSTOP: its connections stay up) -----------
# The client hears nothing while its graph waits: within the timeout it
# treats the server as lost and the future fails, however long it was
# waited on (genie_future_wait(f, -1)).
start_server frozen
export GENIE_MASTER_PORT=$PORT GENIE_TIMEOUT=2000
"$TOOL" slow-graph >"$TMP/frozen.out" 2>"$TMP/frozen.err" &
client=$!; PIDS+=("$client")
for _ in $(seq 1 200); do grep -q submitted "$TMP/frozen.out" && break; sleep 0.05; done
grep -q submitted "$TMP/frozen.out" || { cat "$TMP/frozen.err"; fail "slow graph not submitted"; }
start=$(date +%s)
kill -STOP "$SERVER_PID"
for _ in $(seq 1 150); do kill -0 "$client" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$client" 2>/dev/null; then
  kill -CONT "$SERVER_PID"
  fail "client still waiting 15 s after the server stopped (timeout 2 s)"
fi
kill -CONT "$SERVER_PID"
wait "$client" || true
grep -q GENIE_ERR_CONNECTION "$TMP/frozen.out" || fail "future did not fail with GENIE_ERR_CONNECTION: $(cat "$TMP/frozen.out")"
grep -q "sent nothing for" "$TMP/frozen.err" || fail "the detail does not say the server went silent: $(cat "$TMP/frozen.err")"
echo "ok 7: server stopped mid-call -> GENIE_ERR_CONNECTION after $(( $(date +%s) - start )) s"
echo "remote_test: all passed"
