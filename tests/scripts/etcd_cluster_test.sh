#!/usr/bin/env bash
# A Genie cluster on a 3-member etcd cluster (docs/cluster.md, "A cluster on
# etcd"), on 127.0.0.1 only, each member with its data in $TMP: servers given
# all three endpoints keep their registrations and keep seeing new members
# when the member they were talking to is killed (etcd keeps its quorum).
set -euo pipefail
source "$(dirname "$0")/lib/servers.sh"
source "$(dirname "$0")/lib/etcd.sh"

declare -a CP PP EPIDS
for i in 0 1 2; do CP[$i]=$(free_port); PP[$i]=$(free_port); done
INITIAL="m0=http://127.0.0.1:${PP[0]},m1=http://127.0.0.1:${PP[1]},m2=http://127.0.0.1:${PP[2]}"
for i in 0 1 2; do
  "$ETCD" --name "m$i" --data-dir "$TMP/m$i" --listen-client-urls "http://127.0.0.1:${CP[$i]}" \
    --advertise-client-urls "http://127.0.0.1:${CP[$i]}" --listen-peer-urls "http://127.0.0.1:${PP[$i]}" \
    --initial-advertise-peer-urls "http://127.0.0.1:${PP[$i]}" --initial-cluster "$INITIAL" \
    --initial-cluster-state new --log-level error >>"$TMP/etcd$i.log" 2>&1 &
  EPIDS[$i]=$!
  PIDS+=("${EPIDS[$i]}")
done
ALL="http://127.0.0.1:${CP[0]},http://127.0.0.1:${CP[1]},http://127.0.0.1:${CP[2]}"
for _ in $(seq 1 300); do
  "$ETCDCTL" --endpoints "$ALL" --command-timeout=1s endpoint health >/dev/null 2>&1 && break
  sleep 0.1
done
"$ETCDCTL" --endpoints "$ALL" --command-timeout=1s endpoint health >/dev/null 2>&1 || fail "the etcd cluster did not start"
keys() { "$ETCDCTL" --endpoints "$ALL" get --prefix /genie/c3/nodes/ --keys-only 2>/dev/null | grep -v '^$' || true; }
export GENIE_CLUSTER=c3 GENIE_ETCD_LEASE_TTL=2000

# Both servers talk to m0 first (the first endpoint).
GENIE_LOG_LEVEL=info start_server a --node-id a --grace-ms 0 --etcd "$ALL"
A=$SERVER_PID
GENIE_LOG_LEVEL=info start_server b --node-id b --grace-ms 0 --etcd "$ALL"
wait_for "$TMP/a.err" "node b .*joined" 10 || fail "a did not see b"
kill -9 "${EPIDS[0]}"
# Three lease periods: the registrations must have been renewed through m1/m2.
sleep 6.5
kill -0 "$A" || fail "a exited when an etcd member died"
[ "$(keys | wc -l)" -eq 2 ] || fail "registrations lost with one etcd member down: $(keys)"
GENIE_LOG_LEVEL=info start_server c --node-id c --grace-ms 0 --etcd "$ALL"
wait_for "$TMP/a.err" "node c .*joined" 10 || fail "a's watch did not move to a live member: c not seen"
echo "ok: one etcd member of three killed: registrations renewed, watches moved on, a new server seen"
echo "PASS"
