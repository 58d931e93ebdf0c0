#!/usr/bin/env bash
# A bounded server against a hostile network (docs/security.md), across real
# processes on 127.0.0.1: raw sockets (tests/scripts/lib/rawpeer.py) against
# `genie serve`.
#   1. 20 connections each claiming a 64 MiB message before authenticating
#      are closed at their header, and 20 authenticated ones that send only
#      part of one leave the server's RSS within +50 MiB (buffers grow as
#      bytes arrive);
#   2. connections past the per-source limit are refused at once; a
#      handshake that never completes is closed at the handshake timeout;
#   3. 200 fake nodes with large statuses: every heartbeat reply stays
#      bounded, an oversized status is refused, and a new client still
#      starts (genie_init) and runs;
#   4. a peer that sends heartbeats and never reads is cut off and the
#      server's RSS stays bounded; so do 120 of them, each under its own
#      limit (the bound for all connections together);
#   5. failed authentications back off per source (connections refused for a
#      growing interval) and their log lines are rate-limited with a summary;
#   6. a session that receives nothing past the idle timeout ends and frees
#      its tensors; one that heartbeats is kept;
#   7. a heartbeat claiming a registered worker's node id from another
#      session is refused (it cannot mark the worker alive or rewrite it);
#   8. sessions that free a tensor under a stalled read of it and allocate
#      again keep the server's RSS within its memory budget;
#   9. SIGTERM stops the server within a bounded time (30 s; the flush grace
#      for clients that do not read is 5 s) whatever its clients are doing:
#      idle handshakes, half-sent messages, reads they never take.
set -euo pipefail
source "$(dirname "$0")/lib/servers.sh"
TOOL="$B/tests/itest_remote_tool"
PY=/usr/bin/python3
export PYTHONPATH="$(cd "$(dirname "$0")/lib" && pwd)"
# Sanitizer builds keep shadow memory and quarantines: RSS bounds are
# meaningful without them only.
RSS_SLACK_MIB=50
[ "${GENIE_SANITIZE:-0}" = "1" ] && RSS_SLACK_MIB=400

# --- 1. memory before and after authentication ------------------------------
start_server mem --max-connections-per-source 100
$PY - "$PORT" "$SERVER_PID" "$RSS_SLACK_MIB" <<'PY' || fail "step 1"
import sys, time
from rawpeer import *
port, pid, slack = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
base = rss_kib(pid)
claim = 64 << 20
# Before authenticating: a Hello claiming 64 MiB is refused at its header.
pre = []
for i in range(20):
    s = connect(port)
    s.sendall(header(HELLO, b"", msg_len=claim) + b"\0" * 4096)
    pre.append(s)
for s in pre:
    assert closed_by_server(s, 5), "a 64 MiB Hello before authentication was not refused"
    s.close()
# After authenticating: 20 sessions each send 256 KiB of a 64 MiB message.
post = []
for i in range(20):
    s = session(port, "mem-%d" % i)
    s.sendall(header(SERVER_INFO_REQUEST, b"", msg_len=claim) + b"\0" * (256 << 10))
    post.append(s)
time.sleep(1.0)
grown = (rss_kib(pid) - base) / 1024
print("RSS grew %.1f MiB with 20 x 64 MiB claimed" % grown)
assert grown < slack, "server RSS grew %.1f MiB (limit %d)" % (grown, slack)
for s in post:
    s.close()
PY
kill -0 "$SERVER_PID" || fail "server died in step 1"
echo "ok 1: a 64 MiB claim is refused before authentication and not allocated after it"

# --- 2. connection limits and the handshake timeout -------------------------
start_server limits --max-connections-per-source 10 --handshake-timeout-ms 1500
$PY - "$PORT" <<'PY' || fail "step 2"
import sys, time
from rawpeer import *
port = int(sys.argv[1])
t0 = time.time()
held = [connect(port) for _ in range(10)]
time.sleep(0.3)
extra = connect(port)
t = time.time()
assert closed_by_server(extra, 2), "an 11th connection from one address was not refused"
assert time.time() - t < 1.0, "the refusal was not at once"
# The 10 never send a Hello: each is closed at the 1.5 s handshake timeout.
for s in held:
    assert closed_by_server(s, 6), "a connection without a handshake was not closed"
took = time.time() - t0
assert 1.2 < took < 5, "handshake timeout took %.2f s (want about 1.5)" % took
print("idle handshakes closed after %.2f s" % took)
# The slots are free again (once the server has seen the closes): a full
# session works.
for attempt in range(50):
    try:
        session(port, "after-limit").close()
        break
    except (RuntimeError, EOFError, ConnectionResetError):
        time.sleep(0.1)
else:
    raise AssertionError("no session after the held connections closed")
PY
grep -q "connections to this server, the limit per address" "$TMP/limits.err" || fail "no refusal logged"
grep -q "handshake timeout" "$TMP/limits.err" || fail "no handshake timeout logged"
echo "ok 2: the per-address limit refuses at once; silent handshakes close at the timeout"

# --- 3 and 4. the cluster view under 200 fake nodes; a non-reader -----------
GENIE_HEARTBEAT_INTERVAL=1000 GENIE_HEARTBEAT_TIMEOUT=30000 \
  start_server view --max-connections-per-source 0 --max-connections 0
VIEW_PORT=$PORT VIEW_PID=$SERVER_PID
$PY - "$PORT" "$SERVER_PID" "$RSS_SLACK_MIB" >"$TMP/fake.out" 2>&1 <<'PY' &
import json, sys, time
from rawpeer import *
port, pid, slack = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def status(node, pad):
    return json.dumps({"id": node, "host": "fake", "role": "client", "last_heartbeat_ms": 0,
                       "devices": ["d%03d-" % k + "x" * 240 for k in range(pad)]})
def heartbeat(node, pad, rid=1):
    return frame(HEARTBEAT, field_bytes(1, status(node, pad)), rid)
nodes = []
biggest = 0
for i in range(200):
    s = session(port, "fake-%d" % i)
    s.sendall(heartbeat("fake-%d" % i, 60))   # about 15 KiB each
    mtype, msg = read_frame(s)
    assert mtype == HEARTBEAT_REPLY, "heartbeat %d answered with type %d: %r" % (i, mtype, msg[:300])
    biggest = max(biggest, len(msg))
    nodes.append(s)
print("200 fake nodes: largest heartbeat reply %d bytes" % biggest)
assert biggest <= (4 << 20) + 4096, "a heartbeat reply of %d bytes" % biggest
# An oversized status is refused.
s = session(port, "fat")
s.sendall(heartbeat("fat", 200))
mtype, msg = read_frame(s)
assert mtype == ERROR_REPLY and b"node status of" in msg, "a 50 KiB status was not refused: %r" % msg[:200]
print("ready", flush=True)
# Step 4: one node heartbeats without reading; the server must cut it off.
base = rss_kib(pid)
s = session(port, "deaf")
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
sent, cut = 0, False
try:
    for k in range(3000):
        s.sendall(heartbeat("deaf", 1, rid=k + 2))
        sent += 1
except OSError:
    cut = True
if not cut:
    cut = closed_by_server(s, 10)
grown = (rss_kib(pid) - base) / 1024
print("non-reader: %d heartbeats sent, cut off %s, RSS grew %.1f MiB" % (sent, cut, grown))
assert cut, "a peer that never reads was not cut off after %d heartbeats" % sent
assert grown < slack + 40, "server RSS grew %.1f MiB under a non-reader" % grown
# Many non-readers, each far under its own 32 MiB: their replies (the
# view, about 3 MiB each) add up to 2.5 GB unless the server bounds them
# all together (256 MiB).
base = rss_kib(pid)
many = []
for i in range(120):
    m = session(port, "deaf-%d" % i)
    m.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    for k in range(7):
        try:
            m.sendall(heartbeat("deaf-%d" % i, 1, rid=k + 2))
        except OSError:
            break
    many.append(m)
time.sleep(2)
grown = (rss_kib(pid) - base) / 1024
print("non-readers: 120 sessions x 7 heartbeats of about 3 MiB each, RSS grew %.1f MiB" % grown)
assert grown < 256 + slack + 64, "server RSS grew %.1f MiB under 120 non-readers" % grown
for m in many:
    m.close()
print("done", flush=True)
time.sleep(30)
PY
FAKES=$!; PIDS+=("$FAKES")
wait_for "$TMP/fake.out" '^ready' 120 || fail "fake nodes: $(cat "$TMP/fake.out")"
# A new client still starts and runs against a master with 200 nodes.
GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$VIEW_PORT GENIE_TIMEOUT=20000 "$TOOL" info >"$TMP/newclient.out" ||
  fail "a new client could not start beside 200 fake nodes: $(cat "$TMP/newclient.out")"
echo "ok 3: 200 fake nodes: replies bounded, oversized status refused, new clients start"
wait_for "$TMP/fake.out" '^done' 120 || fail "non-reader: $(cat "$TMP/fake.out")"
grep "non-reader" "$TMP/fake.out"
kill -0 "$VIEW_PID" || fail "server died under the fake nodes"
echo "ok 4: a heartbeat sender that never reads is cut off; RSS bounded"
kill "$FAKES" 2>/dev/null || true

# --- 5. failed authentications back off; their log lines are bounded --------
printf 'hardening-token-0123456789\n' >"$TMP/token"
start_server auth --auth-token-file "$TMP/token" --session-idle-ms 2000
$PY - "$PORT" <<'PY' || fail "step 5"
import sys, time
from rawpeer import *
port = int(sys.argv[1])
challenged = refused = 0
t0 = time.time()
while time.time() - t0 < 3.0:
    s = connect(port)
    s.sendall(hello("guesser"))
    try:
        mtype, msg = read_frame(s)
        if mtype == CHALLENGE:
            challenged += 1
            s.sendall(frame(AUTH_RESPONSE, field_bytes(1, b"\0" * 32), 2))
            read_frame(s)
        else:
            assert mtype == ERROR_REPLY, "type %d" % mtype
            assert b"failed authentications" in msg, msg[:200]
            refused += 1
    except (EOFError, ConnectionResetError):
        refused += 1
    s.close()
print("3 s of wrong tokens: %d answered with a challenge, %d refused" % (challenged, refused))
assert challenged <= 12, "%d wrong tokens answered in 3 s: no back-off" % challenged
assert refused > 0
PY
# The refusals are logged at most 20 per 10 s, then summarised.
wait_for "$TMP/auth.err" "refused-connection messages suppressed" 20 || fail "no summary of suppressed log lines"
lines=$(grep -c "closed connection from" "$TMP/auth.err" || true)
[ "$lines" -le 25 ] || fail "$lines log lines for refused connections in 3 s (want at most 25)"
# The right token still works once the back-off has passed.
sleep 0.5
for _ in $(seq 1 80); do
  GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$PORT GENIE_AUTH_TOKEN=hardening-token-0123456789 \
    "$TOOL" info >/dev/null 2>&1 && break
  sleep 0.5
done
GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$PORT GENIE_AUTH_TOKEN=hardening-token-0123456789 \
  "$TOOL" info >/dev/null || fail "the right token refused after the back-off"
echo "ok 5: failed authentications back off; $lines log lines and a summary"

# --- 6. idle sessions expire ------------------------------------------------
GENIE_LOG_LEVEL=info start_server idle --session-idle-ms 1500 --grace-ms 60000
export GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$PORT
tensors() { "$TOOL" info | sed -n 's/.*"tensors": *\([0-9]*\).*/\1/p'; }
# A client that sends nothing (no heartbeats) holding 8 tensors, and one
# that heartbeats every 300 ms holding 4.
GENIE_HEARTBEAT_INTERVAL=86400000 GENIE_HEARTBEAT_TIMEOUT=86400000 "$TOOL" hold 8 >"$TMP/silent.out" &
PIDS+=("$!")
GENIE_HEARTBEAT_INTERVAL=300 GENIE_HEARTBEAT_TIMEOUT=3000 "$TOOL" hold 4 >"$TMP/live.out" &
PIDS+=("$!")
wait_for "$TMP/silent.out" ready 20 || fail "silent holder did not start"
wait_for "$TMP/live.out" ready 20 || fail "live holder did not start"
[ "$(tensors)" = "12" ] || fail "server should hold 12 tensors, has $(tensors)"
for _ in $(seq 1 100); do [ "$(tensors)" = "4" ] && break; sleep 0.1; done
[ "$(tensors)" = "4" ] || fail "the idle session's tensors not freed: $(tensors) held"
grep -q "ended (idle for" "$TMP/idle.err" || fail "no log line for the idle session's end"
sleep 2
[ "$(tensors)" = "4" ] || fail "the heartbeating session was expired too: $(tensors) held"
echo "ok 6: an idle session expires and frees its tensors; a live one stays"

# --- 7. a worker's record belongs to its session ----------------------------
unset GENIE_MASTER_ADDR GENIE_MASTER_PORT
start_server master7 --node-id m7
M7=$PORT
start_server worker7 --node-id w7 --join 127.0.0.1:$M7
$PY - "$M7" <<'PY' || fail "step 7"
import json, sys
from rawpeer import *
port = int(sys.argv[1])
s = session(port, "w7")
status = json.dumps({"id": "w7", "host": "spoof", "role": "worker", "last_heartbeat_ms": 0,
                     "gpus": [{"index": 0, "name": "invented", "memory_total": 1 << 40}]})
s.sendall(frame(HEARTBEAT, field_bytes(1, status), 2))
mtype, msg = read_frame(s)
assert mtype == ERROR_REPLY and b"registered by another session" in msg, (mtype, msg[:300])
print("spoofed heartbeat refused")
PY
"$GENIE" top 127.0.0.1:$M7 --once >"$TMP/top7.out" 2>&1 || fail "genie top: $(cat "$TMP/top7.out")"
grep -q w7 "$TMP/top7.out" || fail "the worker is not in the view: $(cat "$TMP/top7.out")"
! grep -q invented "$TMP/top7.out" || fail "the spoofed status reached the view"
echo "ok 7: a registered worker's node id cannot be heartbeated by another session"

# --- 8. tensors freed under stalled reads stay charged -----------------------
start_server stalled --memory-budget $((256 << 20))
$PY - "$PORT" "$SERVER_PID" "$RSS_SLACK_MIB" <<'PY' || fail "step 8"
import socket, sys, time
from rawpeer import *
port, pid, slack = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
TENSOR_ALLOC, TENSOR_WRITE, TENSOR_READ, TENSOR_FREE = 10, 12, 13, 14
MIB32 = 32 << 20
def alloc(s, rid):  # f32[8 Mi]: 32 MiB
    s.sendall(frame(TENSOR_ALLOC, field_varint(1, 1) + field_bytes(2, varint(8 << 20)) + field_bytes(3, "cpu:0"), rid))
def write(s, tid, rid):
    msg = field_varint(1, tid)
    s.sendall(header(TENSOR_WRITE, msg, rid, payload_len=MIB32) + msg + b"\x5a" * MIB32)
base = rss_kib(pid)
held = []
refused = 0
for i in range(8):
    # Tensor 1 written, read by a client that never reads (the reply stalls
    # in flight, holding it), freed; then tensor 2 allocated and written:
    # 64 MiB in memory per session, 512 MiB for 8 against a 256 MiB budget.
    s = session(port, "stall-%d" % i)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    alloc(s, 2)
    f = read_frame(s)
    if f[0] != 11:
        assert f[0] == ERROR_REPLY and b"memory budget" in f[1], f
        refused += 1
        s.close()
        continue
    write(s, 1, 3)
    f = read_frame(s)
    assert f[0] == 7, "the first write failed: %r" % (f,)
    s.sendall(frame(TENSOR_READ, field_varint(1, 1) + field_varint(3, MIB32), 4))
    s.sendall(frame(TENSOR_FREE, field_varint(1, 1), 5))
    alloc(s, 6)
    try:
        write(s, 2, 7)
    except OSError:
        pass  # refused: the server closed the connection
    held.append(s)
time.sleep(1.0)
grown = (rss_kib(pid) - base) / 1024
print("8 sessions freeing under stalled reads and allocating again: %d refused, RSS grew %.1f MiB "
      "(budget 256 MiB)" % (refused, grown))
assert grown < 256 + slack + 32, "server RSS grew %.1f MiB past a 256 MiB budget" % grown
for s in held:
    s.close()
PY
kill -0 "$SERVER_PID" || fail "server died in step 8"
echo "ok 8: tensors freed under stalled reads stay charged; RSS within the budget"

# --- 9. SIGTERM stops the server whatever its clients do ---------------------
start_server sigterm
$PY - "$PORT" "$SERVER_PID" <<'PY' || fail "step 9"
import os, signal, socket, sys, time
from rawpeer import *
port, pid = int(sys.argv[1]), int(sys.argv[2])
TENSOR_ALLOC, TENSOR_WRITE, TENSOR_READ = 10, 12, 13
MIB32 = 32 << 20
held = []
for i in range(20):  # idle: never a Hello
    held.append(connect(port))
for i in range(5):  # a message header claiming 1 MiB, then 1 KiB of it
    s = session(port, "half-%d" % i)
    s.sendall(header(SERVER_INFO_REQUEST, b"", msg_len=1 << 20) + b"\0" * 1024)
    held.append(s)
for i in range(4):  # a 32 MiB read the client never takes
    s = session(port, "noread-%d" % i)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(frame(TENSOR_ALLOC, field_varint(1, 1) + field_bytes(2, varint(8 << 20)) + field_bytes(3, "cpu:0"), 2))
    assert read_frame(s)[0] == 11, "the allocation failed"
    msg = field_varint(1, 1)
    s.sendall(header(TENSOR_WRITE, msg, 3, payload_len=MIB32) + msg + b"\x5a" * MIB32)
    assert read_frame(s)[0] == 7, "the write failed"
    s.sendall(frame(TENSOR_READ, field_varint(1, 1) + field_varint(3, MIB32), 4))
    held.append(s)
time.sleep(0.5)
def alive():
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
t0 = time.monotonic()
os.kill(pid, signal.SIGTERM)
while alive() and time.monotonic() - t0 < 30:
    time.sleep(0.05)
took = time.monotonic() - t0
assert not alive(), "the server still runs 30 s after SIGTERM"
print("SIGTERM with 29 hostile connections open: the server exited after %.1f s" % took)
for s in held:
    s.close()
PY
rc=0; wait "$SERVER_PID" || rc=$?
[ "$rc" = "0" ] || fail "the server exited $rc on SIGTERM"
echo "ok 9: SIGTERM stops the server in a bounded time whatever its clients do"
