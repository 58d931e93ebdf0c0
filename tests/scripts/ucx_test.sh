#!/usr/bin/env bash
# The UCX data transport between processes, on 127.0.0.1 only: a real
# `genie serve` offering ucx (GENIE_SERVE_TRANSPORTS), clients that demand
# it (GENIE_TRANSPORT=ucx: no silent fall back to TCP).
#   1. tensors of 1 B .. 64 MiB written and read back intact, whole and in
#      slices, over UCX's shared memory and over UCX's TCP;
#   2. the transformer-block sample gives the same checksum over UCX as
#      embedded;
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

# --- 1. bytes intact, over shared memory and over TCP ------------------------
for tls in "tcp,self,sm" "tcp"; do
  export UCX_TLS=$tls
  if [ "$tls" = tcp ]; then export UCX_NET_DEVICES=lo; else unset UCX_NET_DEVICES; fi
  GENIE_SERVE_TRANSPORTS=tcp,ucx start_server "ucx-${tls//,/-}"
  out=$(GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$PORT GENIE_TRANSPORT=ucx \
        "$TOOL" 1 4096 100000 $((8 << 20)) $((64 << 20)) 2>"$TMP/tool.err") || fail "transfer over ucx ($tls): $(cat "$TMP/tool.err")"
  [ "$(grep -c ' ok$' <<<"$out")" = 5 ] || fail "not every size came back over ucx ($tls): $out"
  echo "ok 1: 1 B .. 64 MiB intact over ucx (UCX_TLS=$tls)"
  # --- 2. the transformer block: same checksum over UCX as embedded ---------
  if [ "$tls" = "tcp,self,sm" ]; then
    emb=$("$SAMPLE" --seq 32 --repeat 1 | checksum)
    rem=$(GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$PORT GENIE_TRANSPORT=ucx "$SAMPLE" --seq 32 --repeat 2 | checksum)
    [ -n "$emb" ] && [ "$emb" = "$rem" ] || fail "sample checksum over ucx '$rem' != embedded '$emb'"
    echo "ok 2: transformer block over ucx = embedded (checksum $rem)"
  fi
  kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || fail "server exited $? on SIGTERM"
done

# --- 3. demanded but not offered ----------------------------------------------
start_server tcp-only
out=$(GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$PORT GENIE_TRANSPORT=ucx "$TOOL" 16 2>&1 || true)
grep -q "GENIE_ERR_UNSUPPORTED" <<<"$out" && grep -q "does not offer it" <<<"$out" ||
  fail "a client demanding ucx from a tcp-only server was not refused clearly: $out"
echo "ok 3: ucx demanded from a server without it: refused ($(grep -o "data transport 'ucx'.*" <<<"$out" | head -c 120))"
echo "ucx_test: all passed"
