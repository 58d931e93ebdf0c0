#!/usr/bin/env bash
# The UCX data transport between processes, on 127.0.0.1 only: a real
# `genie serve` offering ucx (GENIE_SERVE_TRANSPORTS), clients that demand
# it (GENIE_TRANSPORT=ucx: no silent fall back to TCP).
#   1. tensors of 1 B .. 64 MiB written and read back intact, whole and in
#      slices, over UCX's shared memory and over UCX's TCP;
#   2. the transformer-block sample gives the same checksum over UCX as
#      embedded;
#   1b. UCX has no RMA lane between these local processes (it would
#      emulate RMA through the server's CPU), so every size goes framed;
#      with GENIE_UCX_RMA=always the large ones move by RMA (the server's
#      get/put into the client's registered buffer), the small ones framed;
#   1c. local peers' rendezvous payloads move by UCX shared memory (cma);
#   4. GENIE_BACKEND=ucx selects the ucx backend (genie discover says it
#      is usable and why rdma is not) and carries the data over ucx;
#   5. a server killed in the middle of transfers over ucx: the client's
#      call fails with GENIE_ERR_CONNECTION, it does not hang;
#   3. a client demanding ucx from a server that does not offer it is
#      refused with GENIE_ERR_UNSUPPORTED naming the reason.
# UCX runs over TCP and shared memory here (UCX_TLS, UCX_NET_DEVICES); on
# InfiniBand or RoCE the same code path takes the verbs transports.
set -euo pipefail
source "$(dirname "$0")/lib/servers.sh"
[ -f "$B/libgenie_transport_ucx.so" ] || { echo "SKIP: the ucx transport is not built (UCX not found)"; exit 77; }
TOOL="$B/tests/itest_transfer_tool"
SAMPLE="$B/sample_transformer_block"
checksum() { awk '$1 == "checksum" { print $3; exit }'; }
export GENIE_TIMEOUT=30000 UCX_WARN_UNUSED_ENV_VARS=n
# UCX's memory hooks and LeakSanitizer's exit-time scan do not mix.
[ "${GENIE_SANITIZE:-0}" = 1 ] && export UCX_MEM_EVENTS=no

# --- 1. bytes intact, over shared memory and over TCP ------------------------
for tls in "tcp,self,sm" "tcp"; do
  export UCX_TLS=$tls
  if [ "$tls" = tcp ]; then export UCX_NET_DEVICES=lo; else unset UCX_NET_DEVICES; fi
  # The server allows RMA that UCX emulates (GENIE_UCX_RMA=always, for the
  # forced run in 1b; docs/ucx.md, "Software-emulated RMA"); clients
  # without it never use RMA here.
  GENIE_UCX_RMA=always GENIE_SERVE_TRANSPORTS=tcp,ucx start_server "ucx-${tls//,/-}"
  out=$(GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$PORT GENIE_TRANSPORT=ucx GENIE_LOG_LEVEL=debug \
        "$TOOL" 1 4096 100000 $((8 << 20)) $((64 << 20)) 2>"$TMP/tool.err") || fail "transfer over ucx ($tls): $(cat "$TMP/tool.err")"
  [ "$(grep -c ' ok$' <<<"$out")" = 5 ] || fail "not every size came back over ucx ($tls): $out"
  echo "ok 1: 1 B .. 64 MiB intact over ucx (UCX_TLS=$tls)"
  # Local peers: with shared memory allowed, UCX moves rendezvous payloads
  # by cma (one copy between the processes), not TCP; with UCX_TLS=tcp every
  # lane is TCP.
  lanes=$(grep -m1 "lanes: " "$TMP/tool.err" || true)
  if [ "$tls" = tcp ]; then
    [ -n "$lanes" ] && ! grep -Eq '(sysv|posix|cma)/memory' <<<"$lanes" || fail "UCX_TLS=tcp but lanes: $lanes"
    echo "ok 1c: ${lanes#*ucx: }"
  elif ! ucx_info -d 2>/dev/null | grep -q 'Transport: cma'; then
    echo "skip 1c: UCX offers no cma here (ptrace restrictions?): ${lanes#*ucx: }"
  else
    grep -Eq 'cma/memory \(rma_bw' <<<"$lanes" || fail "local peers' bulk lanes not on shared memory: $lanes"
    echo "ok 1c: ${lanes#*ucx: }"
  fi
  # No RMA lane here (shared memory with peer-failure handling, or TCP):
  # everything framed, the large payloads by rendezvous.
  grep -q "no RMA lane: bulk bytes go as rendezvous payloads" <<<"$lanes" ||
    fail "expected no RMA lane between local processes: $lanes"
  rma=$(grep -c "by RMA over ucx" "$TMP/tool.err" || true)
  [ "$rma" = 0 ] || fail "RMA that UCX emulates was used ($rma transfers): $(grep -i rma "$TMP/tool.err" | head)"
  # The RMA path itself (as on RDMA hardware), forced: 100000 B written and
  # read (its 50000 B slice is framed), 8 MiB and 64 MiB written whole, as
  # a slice, and read.
  out=$(GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$PORT GENIE_TRANSPORT=ucx GENIE_LOG_LEVEL=debug GENIE_UCX_RMA=always GENIE_LOCAL_RMA=0 \
        "$TOOL" 100000 $((8 << 20)) $((64 << 20)) 2>"$TMP/tool.err") || fail "RMA over ucx ($tls): $(cat "$TMP/tool.err")"
  [ "$(grep -c ' ok$' <<<"$out")" = 3 ] || fail "not every size came back by RMA over ucx ($tls): $out"
  rma=$(grep -c "by RMA over ucx" "$TMP/tool.err" || true)
  [ "$rma" = 8 ] || fail "expected 8 transfers by RMA over ucx, saw $rma: $(grep -i rma "$TMP/tool.err" | head)"
  echo "ok 1b: framed where UCX has no RMA lane; with GENIE_UCX_RMA=always 64 KiB and more by RMA ($rma)"
  # --- 2. the transformer block: same checksum over UCX as embedded ---------
  if [ "$tls" = "tcp,self,sm" ]; then
    emb=$("$SAMPLE" --seq 32 --repeat 1 | checksum)
    rem=$(GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$PORT GENIE_TRANSPORT=ucx "$SAMPLE" --seq 32 --repeat 2 | checksum)
    [ -n "$emb" ] && [ "$emb" = "$rem" ] || fail "sample checksum over ucx '$rem' != embedded '$emb'"
    echo "ok 2: transformer block over ucx = embedded (checksum $rem)"
  fi
  kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || fail "server exited $? on SIGTERM"
done

# --- 4. GENIE_BACKEND=ucx -----------------------------------------------------
export UCX_TLS=tcp,self,sm; unset UCX_NET_DEVICES
disc=$(GENIE_BACKEND=ucx GENIE_DPDK_PROBE=0 "$GENIE" discover 2>&1) || fail "genie discover: $disc"
grep -Eq '^  ucx +usable: UCX transports: .*tcp/lo' <<<"$disc" || fail "discover does not say ucx is usable: $disc"
grep -Eq '^  rdma +(usable|not usable)' <<<"$disc" || fail "discover does not say whether rdma is usable: $disc"
grep -q 'selection: ucx' <<<"$disc" || fail "GENIE_BACKEND=ucx not selected: $disc"
GENIE_SERVE_TRANSPORTS=tcp,ucx start_server backend-ucx
out=$(GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$PORT GENIE_BACKEND=ucx GENIE_LOG_LEVEL=debug \
      "$TOOL" $((1 << 20)) 2>"$TMP/backend.err") || fail "GENIE_BACKEND=ucx transfer: $(cat "$TMP/backend.err")"
grep -q "ucx: channel to .* lanes: " "$TMP/backend.err" || fail "GENIE_BACKEND=ucx did not carry the data over ucx"
echo "ok 4: GENIE_BACKEND=ucx selected (discover: $(grep -E '^  rdma' <<<"$disc" | head -c 100)...) and used"
kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || true

# --- 5. a server that dies mid-transfer: a clear error, no hang ----------------
# The client's calls must fail with GENIE_ERR_CONNECTION once its reconnect
# attempts (bounded by GENIE_TIMEOUT) give up; `timeout` bounds the run, so
# a hang fails the test instead of stalling it.
GENIE_SERVE_TRANSPORTS=tcp,ucx start_server dies
set +e
GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$PORT GENIE_TRANSPORT=ucx GENIE_TIMEOUT=5000 \
  timeout 60 "$TOOL" $(for _ in $(seq 1 40); do echo $((32 << 20)); done) >"$TMP/dies.out" 2>"$TMP/dies.err" &
tool=$!
set -e
wait_for "$TMP/dies.out" "roundtrip" 30 || fail "no transfer over ucx before the kill: $(cat "$TMP/dies.err")"
kill -KILL "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true
rc=0; wait "$tool" || rc=$?
[ "$rc" != 124 ] || fail "the client hung after its server died: $(tail -3 "$TMP/dies.err")"
[ "$rc" = 3 ] && grep -q "GENIE_ERR_CONNECTION" "$TMP/dies.err" ||
  fail "a dead server did not give a connection error (exit $rc): $(cat "$TMP/dies.out" "$TMP/dies.err" | tail -3)"
echo "ok 5: server killed mid-transfer over ucx: $(grep -m1 -o 'GENIE_ERR_CONNECTION.*' "$TMP/dies.err" | head -c 140)"

# --- 3. demanded but not offered ----------------------------------------------
start_server tcp-only
out=$(GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$PORT GENIE_TRANSPORT=ucx "$TOOL" 16 2>&1 || true)
grep -q "GENIE_ERR_UNSUPPORTED" <<<"$out" && grep -q "does not offer it" <<<"$out" ||
  fail "a client demanding ucx from a tcp-only server was not refused clearly: $out"
echo "ok 3: ucx demanded from a server without it: refused ($(grep -o "data transport 'ucx'.*" <<<"$out" | head -c 120))"
echo "ucx_test: all passed"
