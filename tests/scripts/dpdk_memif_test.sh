#!/usr/bin/env bash
# The dpdk transport between processes over a memif pair: a real `genie
# serve` offering dpdk (GENIE_SERVE_TRANSPORTS) on the server end of a
# net_memif port, clients demanding it (GENIE_TRANSPORT=dpdk) on the client
# end, each process with its own EAL (--file-prefix). Without hugepages.
#   1. tensors of 1 B to 8 MiB written and read back through the C API are
#      byte-exact, and the server says the data came over dpdk;
#   2. the transformer-block sample gives the same checksum remote (data
#      over memif) as embedded.
#   3. each process removes its EAL runtime directory when it exits.
set -euo pipefail
source "$(dirname "$0")/lib/servers.sh"
[ -e "$B/libgenie_transport_dpdk.so" ] || { echo "SKIP: the dpdk transport plugin is not built (no libdpdk)"; exit 77; }
TOOL="$B/tests/itest_tensor_tool"
SAMPLE="$B/sample_transformer_block"
checksum() { awk '$1 == "checksum" && !seen { print $3; seen = 1 }'; }  # reads all: no SIGPIPE

SOCK="$TMP/memif.sock"
# EAL keeps a runtime directory per --file-prefix: remove this test's.
trap 'servers_cleanup; rm -rf /var/run/dpdk/genie-s$$ /var/run/dpdk/genie-c$$-*' EXIT
EAL="-l 0 --no-huge -m 256 --no-pci --no-telemetry --log-level=*:error"
export GENIE_TIMEOUT=30000
GENIE_LOG_LEVEL=debug GENIE_SERVE_TRANSPORTS=dpdk \
  GENIE_DPDK_EAL="$EAL --file-prefix=genie-s$$ --vdev=net_memif0,role=server,socket=$SOCK" start_server memif
client() {
  GENIE_TRANSPORT=dpdk GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$PORT \
    GENIE_DPDK_EAL="$EAL --file-prefix=genie-c$$-$1 --vdev=net_memif0,role=client,socket=$SOCK" "${@:2}"
}

# --- 1. byte-exact tensors ---------------------------------------------------
out=$(client 1 "$TOOL" roundtrip 1 1000 65536 1000001 8388608 2>"$TMP/client1.err") ||
  fail "roundtrip over memif failed: $out"
[ "$(grep -c ' ok$' <<<"$out")" = 5 ] || fail "roundtrip over memif: $out"
wait_for "$TMP/memif.err" "dpdk data connection" 5 || fail "the server saw no dpdk data connection"
echo "ok 1: tensors of 1 B to 8 MiB byte-exact over dpdk/memif"

# --- 2. the transformer block, remote over memif = embedded ----------------
emb=$("$SAMPLE" --seq 32 --repeat 1 | checksum)
rem=$(client 2 "$SAMPLE" --seq 32 --repeat 2 2>"$TMP/client2.err" | checksum) ||
  fail "the transformer block over memif failed"
[ -n "$emb" ] && [ "$emb" = "$rem" ] || fail "sample checksum over memif '$rem' != embedded '$emb'"
echo "ok 2: transformer block over dpdk/memif agrees with embedded (checksum $rem)"

# --- 3. EAL's runtime directories go with their processes -------------------
# Both clients exited normally; the server stops on SIGTERM. EAL never
# removes a --file-prefix's directory; the transport does at exit.
if [ "$(id -u)" = 0 ]; then RUNTIME=/var/run/dpdk; else RUNTIME=${XDG_RUNTIME_DIR:-/tmp}/dpdk; fi
for d in "genie-c$$-1" "genie-c$$-2"; do
  [ ! -e "$RUNTIME/$d" ] || fail "a client left EAL's runtime directory $RUNTIME/$d: $(ls -A "$RUNTIME/$d")"
done
[ -e "$RUNTIME/genie-s$$" ] || fail "the running server has no runtime directory $RUNTIME/genie-s$$ (the check above proves nothing)"
kill -TERM "$SERVER_PID"
wait "$SERVER_PID" || fail "the server did not stop cleanly on SIGTERM"
[ ! -e "$RUNTIME/genie-s$$" ] || fail "the stopped server left $RUNTIME/genie-s$$: $(ls -A "$RUNTIME/genie-s$$")"
echo "ok 3: the clients' and the server's EAL runtime directories are removed at exit"
