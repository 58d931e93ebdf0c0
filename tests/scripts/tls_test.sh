#!/usr/bin/env bash
# TLS across real processes, on 127.0.0.1 only (docs/security.md, "TLS"):
# a throwaway CA, server and client certificates made with the openssl
# command for this run; `genie serve --tls-cert --tls-key --tls-ca`:
#   1. `genie run` with the CA and a client certificate gets the same
#      checksum as embedded;
#   2. without a client certificate, with a certificate of another CA, and
#      in plaintext, genie_init fails naming the reason, and the server
#      keeps serving;
#   2b. under mutual TLS a node id must be named by the client certificate
#      (its CN, or a URI genie:<node-id>): another id is refused;
#   3. `genie serve` refuses TLS half-configured (--tls-cert without
#      --tls-key) and, beyond loopback, TLS without --tls-ca or a token.
set -euo pipefail
source "$(dirname "$0")/lib/servers.sh"
unset GENIE_TLS_CA GENIE_TLS_CERT GENIE_TLS_KEY GENIE_TLS_SERVER_NAME
command -v openssl >/dev/null || { echo "SKIP: the openssl command is needed to make test certificates"; exit 77; }

P="$TMP/pki"
mkdir -p "$P"
ca() { openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "/CN=$1" \
         -keyout "$P/$1.key" -out "$P/$1.pem" 2>/dev/null; }
cert() {  # NAME CA SAN
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
    -keyout "$P/$1.key" -out "$P/$1.csr" 2>/dev/null
  echo "subjectAltName=$3" >"$P/$1.ext"
  openssl x509 -req -days 1 -in "$P/$1.csr" -CA "$P/$2.pem" -CAkey "$P/$2.key" -CAcreateserial \
    -extfile "$P/$1.ext" -out "$P/$1.pem" 2>/dev/null
}
ca ca
ca other
cert server ca "IP:127.0.0.1"
cert client ca "DNS:client,URI:genie:tls-client"
cert stranger other "DNS:stranger"

checksum() { awk '$1 == "checksum" { print $3; exit }'; }
GRAPH="$GENIE_SOURCE_DIR/samples/graphs/transformer_block.json"
export GENIE_TIMEOUT=20000

# --- 1. a round trip over mutual TLS -----------------------------------------
start_server tls --tls-cert "$P/server.pem" --tls-key "$P/server.key" --tls-ca "$P/ca.pem"
emb=$("$GENIE" run "$GRAPH" | checksum)
rem=$(GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$PORT GENIE_TLS_CA="$P/ca.pem" GENIE_NODE_ID=tls-client \
      GENIE_TLS_CERT="$P/client.pem" GENIE_TLS_KEY="$P/client.key" "$GENIE" run "$GRAPH" | checksum)
[ -n "$emb" ] && [ "$emb" = "$rem" ] || fail "checksum over TLS '$rem' != embedded '$emb'"
echo "ok 1: over mutual TLS, the same checksum as embedded ($rem)"

# --- 2. refusals name their reason --------------------------------------------
refused() {  # WANT ENV...
  local want=$1; shift
  local out
  if out=$(env GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$PORT "$@" "$GENIE" run "$GRAPH" 2>&1); then
    fail "admitted ($*): $out"
  fi
  grep -q "$want" <<<"$out" || fail "refusal ($*) does not say '$want': $out"
}
refused "requires a client certificate" GENIE_TLS_CA="$P/ca.pem"
refused "TLS" GENIE_TLS_CA="$P/ca.pem" GENIE_TLS_CERT="$P/stranger.pem" GENIE_TLS_KEY="$P/stranger.key"
refused "certificate was refused" GENIE_TLS_CA="$P/other.pem" GENIE_TLS_CERT="$P/client.pem" \
  GENIE_TLS_KEY="$P/client.key"
refused "this server requires TLS" GENIE_NODE_ID=plain
refused "is not named by the client certificate" GENIE_TLS_CA="$P/ca.pem" GENIE_TLS_CERT="$P/client.pem" \
  GENIE_TLS_KEY="$P/client.key" GENIE_NODE_ID=worker-1
grep -q "node id 'worker-1' is not named by the client certificate" "$TMP/tls.err" ||
  fail "the server did not log the refused node id: $(tail -5 "$TMP/tls.err")"
rem=$(GENIE_MASTER_ADDR=127.0.0.1 GENIE_MASTER_PORT=$PORT GENIE_TLS_CA="$P/ca.pem" GENIE_NODE_ID=client \
      GENIE_TLS_CERT="$P/client.pem" GENIE_TLS_KEY="$P/client.key" "$GENIE" run "$GRAPH" | checksum)
[ "$emb" = "$rem" ] || fail "the server stopped serving after the refusals"
echo "ok 2: no client certificate, a foreign one, a foreign CA, plaintext and a node id the certificate does not name are refused with the reason"

# --- 3. settings the server refuses --------------------------------------------
if out=$("$GENIE" serve --port 0 --tls-cert "$P/server.pem" 2>&1); then fail "--tls-cert alone accepted"; fi
grep -q "tls-key" <<<"$out" || fail "--tls-cert alone: $out"
if out=$(timeout 10 "$GENIE" serve --host 0.0.0.0 --port 0 --tls-cert "$P/server.pem" --tls-key "$P/server.key" 2>&1); then
  fail "TLS without client certificates or a token accepted beyond loopback"
fi
grep -q "without authentication" <<<"$out" || fail "TLS without --tls-ca beyond loopback: $out"
echo "ok 3: half-configured TLS, and TLS that authenticates nobody beyond loopback, are refused"
