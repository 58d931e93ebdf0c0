#!/usr/bin/env bash
# One `genie replay` test case (CTest replay.*; tools/replay/tests.cmake):
#   testdata PREFIX [SYSTEM [TOPOLOGY [MEMORY]]]  a trace of the test data on 4
#                  local ranks over TCP: exit 0, a sys[R] line per rank, 0 wrong
#   algo ALGO      every collective type, 4 ranks as [4] and [2,2] (with
#                  involved_dim both ways), 3 chunks, 2 in flight: 0 wrong
#   p2p            sends and receives matched by peer, tag and order; gzip;
#                  integer attributes in every member of the oneof
#   corrupt        one flipped byte on the wire is counted as wrong (exit 1)
#   outputs        --json and --trace (node and event level) are valid
#   bad            bad input: clear errors naming the file and node
#   deadlock       a receive with no send: reported with the waiting rank
#   unmatched_send a send no receive takes: reported with rank, peer, tag, node
#   policy         the system file's scheduling policy orders ready collectives
#   threads        a chain of nodes runs on one thread per rank; collectives in
#                  flight at once each have their own
#   pipelined      ring steps of large blocks move in segments (all verified)
#   staged         bytes that arrive before their receive is posted are
#                  counted (--json bytes_staged), and only those
#   prewarm        every collective buffer is reserved before the start: none
#                  is allocated during the run (each type, implementation, [4]
#                  and [2,2]); large ones are backed by huge pages
#   compute_real   --compute real: compute nodes run matrix products on Genie
#   ucx            a trace over the ucx plugin (--backend rdma; skipped unbuilt)
#   dpdk           2 local ranks over the dpdk plugin on a memif pair that the
#                  launcher sets up: collectives and sends verified, a flipped
#                  byte caught, nothing left behind; 4 ranks refused clearly
#                  without a port each, ranks whose port cannot start end the
#                  run at once; as root, 4 ranks on one Ethernet
#                  segment (net_af_packet on veths of a bridge, in a network
#                  namespace of the test, GENIE_DPDK_EAL with {rank})
#   mpi            --launch mpi under mpirun (skipped without Open MPI)
#   rendezvous     a hostile client at the rendezvous (a line without end,
#                  a wrong token, a flood of connections) neither costs rank 0
#                  unbounded memory nor stops the run, and a rank that comes
#                  as the flood leaves takes the room it freed; a rank without
#                  the run's token is refused, and the error says so
#   bench          bench/replay_vs_gloo.py once on tiny sizes (no timing asserted)
#   converter      metadata as Chakra's converters write it (a schema, no
#                  version), an unknown schema (a warning) and none at all
#   ctrl_deps      dangling, self and cyclic dependencies and CPU-side
#                  collectives: repaired with warnings and counts (default),
#                  ignored, or refused (--control-deps strict)
#   astra_cli      ASTRA-sim's own command line: ranks from the network
#                  file's npus_count, its other options noted, not refused
#   mismatch       ranks whose traces disagree, and a true deadlock that
#                  others wait on: reported within --timeout + 1 s
#   comm_groups    two communicator groups of 4 in an 8-rank trace: each
#                  collective with a pg_name over exactly its group's ranks
#   custom         a custom all-reduce (MSCCL-style per-rank traces named by
#                  the system file) over 8 ranks, run as written, verified
# Each of the last six checks the bytes each rank sent (--json bytes_sent).
# Cases run over Genie's TCP (--backend tcp) unless they name a backend.
# Env: GENIE_BUILD_DIR, GENIE_SOURCE_DIR, CHAKRA_TESTDATA. Exit 0 pass, 77 skip.
set -uo pipefail

BUILD=${GENIE_BUILD_DIR:?GENIE_BUILD_DIR is not set}
SRC=${GENIE_SOURCE_DIR:?GENIE_SOURCE_DIR is not set}
DATA=${CHAKRA_TESTDATA:-$SRC/../shared/testdata/chakra}
GENIE=$BUILD/genie
GEN="/usr/bin/python3 $SRC/tools/replay/chakra_gen.py"
[ -x "$BUILD/genie-replay" ] || { echo "FAIL: $BUILD/genie-replay was not built" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || exit 1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# replay_ok NAME ARGS...: exit 0, one sys line per rank (RANKS, default 4),
# 0 wrong elements. Both run `genie replay` under the command in IN (none by
# default: `env`).
IN=(env)
replay_ok() {
  local name=$1
  shift
  timeout 300 "${IN[@]}" "$GENIE" replay --quiet --timeout 20 --backend tcp "$@" >out.txt 2>err.txt
  local rc=$?
  local lines
  lines=$(grep -cE '^sys\[[0-9]+\] finished, [0-9]+ cycles, exposed communication [0-9]+ cycles\.$' out.txt)
  if [ $rc -ne 0 ] || [ "$lines" -ne "${RANKS:-4}" ] || ! grep -q ', 0 wrong elements$' out.txt; then
    fail "$name: exit $rc, $lines sys lines"
    cat out.txt err.txt >&2
    return 1
  fi
  if grep -qE '^  [a-z_]+ ' out.txt && awk '$1 ~ /^[a-z_]+$/ && NF == 10 && $10 != 0 { bad = 1 } END { exit !bad }' out.txt; then
    fail "$name: a table row has wrong elements"
    return 1
  fi
  pass "$name"
}

# replay_fails NAME PATTERN ARGS...: exit 1 with PATTERN (grep -E) on stderr.
replay_fails() {
  local name=$1 pattern=$2
  shift 2
  timeout 120 "${IN[@]}" "$GENIE" replay --quiet --backend tcp "$@" >out.txt 2>err.txt
  local rc=$?
  if [ $rc -ne 1 ] || ! grep -qE "$pattern" err.txt; then
    fail "$name: exit $rc (want 1), stderr lacks /$pattern/"
    cat out.txt err.txt >&2
    return 1
  fi
  pass "$name: $(grep -E "$pattern" err.txt | head -1)"
}

# sent_bytes JSON EXPECTED...: each rank's bytes_sent in the --json report
# JSON is the one given for it (one value for every rank, or one per rank).
sent_bytes() {
  /usr/bin/python3 - "$@" <<'PY'
import json, sys
r = sorted(json.load(open(sys.argv[1]))["rank_reports"], key=lambda x: x["rank"])
want = [int(v) for v in sys.argv[2:]]
if len(want) == 1:
    want *= len(r)
got = [x["bytes_sent"] for x in r]
assert got == want, f"bytes sent per rank {got}, expected {want}"
PY
}

# A ring all-reduce of S bytes (a multiple of 4 * K) over K ranks sends
# 2 (K - 1) parts of S / K bytes from each rank.
ring_ar() { echo $((2 * ($2 - 1) * $1 / $2)); }

need_data() {
  [ -d "$DATA" ] || { echo "SKIP: the Chakra test data is not at $DATA (set CHAKRA_TESTDATA)"; exit 77; }
}

systems() {  # system files, one per implementation
  for algo in ring direct halvingDoubling doubleBinaryTree; do
    printf '{"scheduling-policy": "LIFO", "all-reduce-implementation": ["%s", "%s"], "all-gather-implementation": ["%s", "%s"], "reduce-scatter-implementation": ["%s", "%s"], "all-to-all-implementation": ["%s", "%s"], "preferred-dataset-splits": 3, "active-chunks-per-dimension": 2}\n' \
      $algo $algo $algo $algo $algo $algo $algo $algo >sys_$algo.json
  done
  echo '{"logical-dims": ["4"]}' >topo4.json
  echo '{"logical-dims": ["2", "2"]}' >topo22.json
}

case=${1:-}
case $case in
  testdata)
    need_data
    prefix=$DATA/$2
    args=(--workload "$prefix")
    [ -n "${3:-}" ] && args+=(--system "$DATA/$3")
    if [ -n "${4:-}" ]; then args+=(--logical-topology "$DATA/$4"); else args+=(--ranks 4); fi
    [ -n "${5:-}" ] && args+=(--memory "$DATA/$5")
    replay_ok "$2 ${3:-}" "${args[@]}"
    ;;
  algo)
    systems
    for t in all_reduce reduce_scatter all_gather all_to_all broadcast reduce gather scatter barrier; do
      $GEN coll c_$t --ranks 4 --type $t --size 10004 --iters 2 --compute 20
      replay_ok "$t $2 [4]" --workload c_$t --system sys_$2.json --logical-topology topo4.json
      replay_ok "$t $2 [2,2]" --workload c_$t --system sys_$2.json --logical-topology topo22.json
      for inv in 1,0 0,1; do
        $GEN coll i_$t --ranks 4 --type $t --size 4100 --involved $inv
        replay_ok "$t $2 [2,2] involved_dim $inv" --workload i_$t --system sys_$2.json --logical-topology topo22.json
      done
    done
    ;;
  p2p)
    $GEN p2p p --ranks 4 --size 65536
    replay_ok "sends and receives" --workload p --ranks 4
    grep -q '^# point to point: 24 sends and receives' out.txt || fail "p2p: not every send and receive ran"
    $GEN coll z --ranks 4 --type all_reduce --size 65536 --gzip
    [ "$(head -c 2 z.0.et | od -An -tx1 | tr -d ' ')" = "1f8b" ] || fail "gzip: the generator did not compress"
    replay_ok "gzip-wrapped trace" --workload z --ranks 4
    $GEN p2p mi --ranks 4 --size 4096 --mixed-ints
    replay_ok "integers in every member of the attribute oneof" --workload mi --ranks 4
    $GEN coll mc --ranks 4 --type all_gather --size 8192 --iters 3 --mixed-ints
    replay_ok "collectives with mixed integer members" --workload mc --ranks 4
    grep -qE '^  all_gather +32768 ' out.txt || fail "mixed ints: comm_size not read back as 8192"
    ;;
  corrupt)
    need_data
    GENIE_REPLAY_TEST_CORRUPT=2 replay_fails "a flipped byte" 'genie replay: [1-9][0-9]* wrong elements received' \
      --workload "$DATA/microbench_4npus/all_gather/all_gather" --ranks 4
    awk '$1 == "all_gather" { exit !($10 > 0) }' out.txt || fail "corrupt: the table's #wrong is 0"
    grep -qE ', [1-9][0-9]* wrong elements$' out.txt || fail "corrupt: the summary says 0 wrong"
    # The same trace without the hook verifies clean: the count comes from the flip.
    replay_ok "the same trace unflipped" --workload "$DATA/microbench_4npus/all_gather/all_gather" --ranks 4
    ;;
  outputs)
    $GEN coll o --ranks 4 --type all_reduce --size 65536 --iters 3 --compute 100
    for level in node event; do
      replay_ok "--trace-level $level" --workload o --ranks 4 --json r.json --trace t.json --trace-level $level
      /usr/bin/python3 - "$level" <<'PY' || fail "outputs: --json / --trace ($level) content"
import json, sys
level = sys.argv[1]
r = json.load(open("r.json"))
assert r["ranks"] == 4 and r["wrong"] == 0, r
assert len(r["rank_reports"]) == 4 and all(x["finished_ns"] > 0 for x in r["rank_reports"])
c = r["collectives"][0]
assert c["collective"] == "all_reduce" and c["count"] == 3 and c["busbw_gbps"] > 0, c
t = json.load(open("t.json"))
ev = [e for e in t["traceEvents"] if e["ph"] == "X"]
assert sorted({e["pid"] for e in ev}) == [0, 1, 2, 3]
comp = [e for e in ev if e["cat"] == "comp"]
assert len(comp) == 12 and all(e["dur"] >= 100 for e in comp), comp[:2]
has_send = any(e["cat"] in ("send", "recv") for e in ev)
assert has_send == (level == "event"), level
PY
    done
    "$GENIE" replay --quiet --workload o --ranks 4 --json r2.json >/dev/null 2>&1
    [ ! -e t2.json ] || fail "outputs: a trace file without --trace"
    ;;
  bad)
    need_data
    $GEN truncated tr --ranks 4
    replay_fails "truncated file" 'tr\.3\.et: .*truncated' --workload tr --ranks 4
    head -c 300 "$SRC/README.md" >junk.0.et
    replay_fails "not a Chakra file" 'junk\.0\.et: .*(not a Chakra trace|truncated)' --workload junk --ranks 1
    $GEN badtype bt --ranks 4
    replay_fails "unknown node type" "bt\.2\.et: node 2 'mystery': unknown node type 42" --workload bt --ranks 4
    replay_fails "topology disagrees with the workload" 'logical_topology_8\.json.*files for ranks 0\.\.3 only' \
      --workload "$DATA/genie_allgather/ALL_GATHER" --logical-topology "$DATA/genie_allgather/logical_topology_8.json"
    replay_fails "topology disagrees with --ranks" 'has 8 ranks, the run has 4' \
      --workload "$DATA/genie_allgather/ALL_GATHER" --ranks 4 --logical-topology "$DATA/genie_allgather/logical_topology_8.json"
    replay_fails "more files than ranks" 'file for rank 3 .* run has 3 ranks' --workload "$DATA/genie_allgather/ALL_GATHER" --ranks 3
    echo '{"all-reduce-implementation": ["bogus"]}' >badsys.json
    replay_fails "unknown implementation" "badsys\.json: all-reduce-implementation: unknown implementation 'bogus'" \
      --workload "$DATA/genie_allgather/ALL_GATHER" --ranks 4 --system badsys.json
    replay_fails "missing file" 'nothere\.0\.et: No such file' --workload nothere --ranks 2
    "$GENIE" replay --ranks 4 >/dev/null 2>err.txt
    [ $? -eq 2 ] && grep -q -- '--workload' err.txt && pass "no --workload: usage error" || fail "no --workload: not a usage error"
    ;;
  deadlock)
    # Rank 0 finishes without the send rank 1 waits for: rank 1 learns it
    # from rank 0's end, at once.
    $GEN unmatched u --ranks 4
    start=$(date +%s)
    replay_fails "receive without a send" \
      "deadlock: rank 1 waits for a receive from rank 0 tag 99 \(u\.1\.et: node 2 'lonely_recv'\), but rank 0 finished its trace without sending it" \
      --workload u --ranks 4 --timeout 30
    grep -q 'deadlock: rank 1 waited for data that never came' err.txt || fail "deadlock: no summary of the waiting ranks"
    [ $(($(date +%s) - start)) -lt 30 ] || fail "deadlock: reported only after --timeout, not when rank 0 ended"
    [ "$(grep -c '^sys\[' out.txt)" -eq 3 ] || fail "deadlock: the three other ranks should have finished"
    ;;
  unmatched_send)
    $GEN unmatched_send us --ranks 4
    replay_fails "send without a receive" \
      "rank 3: GENIE_ERR_PROTOCOL: 1 unmatched send: rank 2 sent rank 3 4096 bytes under tag 5 .*\(us\.2\.et: node 2 'stray_send'\)" \
      --workload us --ranks 4 --timeout 5
    [ "$(grep -c '^sys\[' out.txt)" -eq 3 ] || fail "unmatched send: the three other ranks should have finished"
    ;;
  policy)
    # Four collectives ready at once: FIFO issues them in file order, LIFO
    # the last first, on every rank.
    $GEN coll ind --ranks 4 --type all_reduce --size 65536 --iters 4 --independent
    for pol in FIFO LIFO; do
      echo "{\"scheduling-policy\": \"$pol\", \"preferred-dataset-splits\": 2}" >pol.json
      replay_ok "scheduling-policy $pol" --workload ind --ranks 4 --system pol.json --json pol_$pol.json
      /usr/bin/python3 - "$pol" <<'PY' || fail "policy $pol: issue order"
import json, sys
want = [0, 1, 2, 3] if sys.argv[1] == "FIFO" else [3, 2, 1, 0]
got = [r["issue_order"] for r in json.load(open(f"pol_{sys.argv[1]}.json"))["rank_reports"]]
assert got == [want] * 4, got
PY
    done
    ;;
  threads)
    # Barriers and all-reduces, each depending on the one before: the thread
    # that finishes a node runs the next, so one thread runs them all.
    # Four independent all-reduces are in flight at once: more than one.
    $GEN coll chain --ranks 4 --type all_reduce --size 65536 --iters 5 --barrier
    $GEN coll ind --ranks 4 --type all_reduce --size 65536 --iters 4 --independent
    replay_ok "a chain" --workload chain --ranks 4 --json chain.json
    replay_ok "independent collectives" --workload ind --ranks 4 --json ind.json
    /usr/bin/python3 - <<'PY' || fail "threads: node_threads"
import json
f = lambda n: [r["node_threads"] for r in sorted(json.load(open(n))["rank_reports"], key=lambda r: r["rank"])]
assert f("chain.json") == [1] * 4, ("a chain should run on one thread per rank", f("chain.json"))
assert all(t >= 2 for t in f("ind.json")), ("collectives in flight at once need a thread each", f("ind.json"))
PY
    ;;
  pipelined)
    # Blocks of several 512 KiB segments (uneven), on [4] and [2,2], one
    # chunk and 3 chunks with 2 in flight: every element verified.
    systems
    echo '{"all-gather-implementation": ["ring"], "all-reduce-implementation": ["ring"], "reduce-scatter-implementation": ["ring"], "genie-segment-bytes": 524288}' >sys_ring.json
    echo '{"preferred-dataset-splits": 3, "active-chunks-per-dimension": 2, "genie-segment-bytes": 524288}' >sys_chunks.json
    echo '{"genie-segment-bytes": 524288}' >sys_seg.json
    for t in all_reduce all_gather reduce_scatter; do
      $GEN coll big_$t --ranks 4 --type $t --size 3145740 --iters 2
      replay_ok "$t 3 MiB ring [4]" --workload big_$t --system sys_ring.json --logical-topology topo4.json
      replay_ok "$t 3 MiB ring [2,2]" --workload big_$t --system sys_ring.json --logical-topology topo22.json
      replay_ok "$t 3 MiB 3 chunks" --workload big_$t --system sys_chunks.json --ranks 4
    done
    # The segments are real: a ring all-gather of 3 MiB blocks waits for
    # 3 steps x 7 segments of 512 KiB per rank, or 3 x 2 of the default
    # 2 MiB.
    replay_ok "segment events" --workload big_all_gather --system sys_seg.json --ranks 4 --trace seg.json \
      --trace-level event
    replay_ok "segment events, default size" --workload big_all_gather --ranks 4 --trace seg2.json --trace-level event
    /usr/bin/python3 - <<'PY' || fail "pipelined: a ring step was not split into segments"
import collections, json
for f, per in (("seg.json", 21), ("seg2.json", 6)):
    ev = [e for e in json.load(open(f))["traceEvents"] if e["ph"] == "X" and e["cat"] == "recv"]
    n = collections.Counter(e["pid"] for e in ev)
    assert sorted(n) == [0, 1, 2, 3] and all(v == 2 * per for v in n.values()), (f, n)
PY
    # A byte flipped in a segmented all-reduce is counted.
    GENIE_REPLAY_TEST_CORRUPT=1 replay_fails "a flipped byte in a segmented all-reduce" \
      'genie replay: [1-9][0-9]* wrong elements received' --workload big_all_reduce --ranks 4
    ;;
  staged)
    # Rank 1 sends rank 0 1 MiB; in `late` rank 0 computes 300 ms before
    # posting its receive (the bytes wait in staging and are copied once
    # more), in `early` rank 1 computes first (they land in place).
    /usr/bin/python3 - "$SRC/tools/replay" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import chakra_gen as g
size = [("comm_size", 1 << 20), ("comm_tag", 5)]
for prefix, slow in (("late", 0), ("early", 1)):
    for r in range(4):
        nodes = []
        if r == slow:
            nodes.append(g.node(1, "think", g.COMP, [], 300000))
        if r == 0:
            nodes.append(g.node(2, "recv", g.RECV, [1] if slow == 0 else [], 0, [("comm_src", 1)] + size))
        if r == 1:
            nodes.append(g.node(2, "send", g.SEND, [1] if slow == 1 else [], 0, [("comm_dst", 0)] + size))
        g.write(prefix, r, nodes)
PY
    replay_ok "a receive posted late" --workload late --ranks 4 --json late.json
    replay_ok "a receive posted early" --workload early --ranks 4 --json early.json
    /usr/bin/python3 - <<'PY' || fail "staged: bytes_staged does not count the bytes that waited"
import json
f = lambda n: [x["bytes_staged"] for x in sorted(json.load(open(n))["rank_reports"], key=lambda x: x["rank"])]
assert f("late.json") == [1 << 20, 0, 0, 0], f("late.json")
assert f("early.json") == [0, 0, 0, 0], f("early.json")
PY
    ;;
  prewarm)
    # Every buffer a collective takes is at least the pool's 64 KiB here
    # (1 MiB in 3 chunks), so each one the reservation missed is counted.
    systems
    for t in all_reduce reduce_scatter all_gather all_to_all broadcast reduce gather scatter; do
      $GEN coll pw_$t --ranks 4 --type $t --size 1048576 --iters 2
      for algo in ring direct halvingDoubling doubleBinaryTree; do
        for topo in topo4 topo22; do
          replay_ok "$t $algo $topo" --workload pw_$t --system sys_$algo.json --logical-topology $topo.json \
            --json pw.json || continue
          /usr/bin/python3 - <<'PY' || fail "prewarm: $t $algo $topo allocated collective buffers during the run"
import json
r = json.load(open("pw.json"))["rank_reports"]
assert all(x["buffers_prewarmed"] > 0 for x in r), [x["buffers_prewarmed"] for x in r]
assert all(x["buffers_allocated"] == 0 for x in r), [x["buffers_allocated"] for x in r]
PY
        done
      done
    done
    # Buffers of 2 MiB and more ask for transparent huge pages: a 16 MiB
    # all-gather's buffer is backed by them (unless the kernel has them off).
    thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)
    case $thp in
      *"[always]"*|*"[madvise]"*)
        $GEN coll hp --ranks 4 --type all_gather --size 16777216
        replay_ok "huge pages" --workload hp --ranks 4 --json hp.json
        /usr/bin/python3 - <<'PY' || fail "prewarm: a 64 MiB buffer is not backed by huge pages"
import json
r = json.load(open("hp.json"))["rank_reports"]
assert all(x["huge_page_bytes"] >= 32 << 20 for x in r), [x["huge_page_bytes"] for x in r]
PY
        ;;
      *) echo "skip: huge pages: transparent huge pages are off here (${thp:-no /sys/kernel/mm/transparent_hugepage})" ;;
    esac
    ;;
  compute_real)
    # num_ops 2 * 768^3: a product of side 768 per compute node, 3 per rank;
    # timed: none. Without num_ops the side comes from the duration.
    $GEN coll cr --ranks 4 --type all_reduce --size 65536 --iters 3 --compute 1 --num-ops 905969664
    $GEN coll cd --ranks 4 --type all_reduce --size 65536 --iters 2 --compute 5000
    replay_ok "--compute real from num_ops" --workload cr --ranks 4 --compute real --json real.json
    replay_ok "--compute timed" --workload cr --ranks 4 --compute timed --json timed.json
    replay_ok "--compute real from the duration" --workload cd --ranks 4 --compute real --json dur.json
    /usr/bin/python3 - <<'PY' || fail "compute_real: the products run do not match the nodes"
import json
f = lambda n: [x["compute_flops"] for x in json.load(open(n))["rank_reports"]]
assert f("real.json") == [3 * 905969664] * 4, f("real.json")
assert f("timed.json") == [0] * 4, f("timed.json")
assert all(v > 0 for v in f("dur.json")), f("dur.json")
PY
    "$GENIE" replay --workload cr --ranks 4 --compute fast >/dev/null 2>err.txt
    [ $? -eq 2 ] && grep -q -- '--compute takes timed or real' err.txt || fail "--compute fast: not a usage error"
    ;;
  ucx)
    [ -e "$BUILD/libgenie_transport_ucx.so" ] || { echo "SKIP: the ucx transport plugin was not built (no libucx-dev)"; exit 77; }
    export UCX_TLS=${UCX_TLS:-tcp,self,sm} UCX_WARN_UNUSED_ENV_VARS=n
    [ "${GENIE_SANITIZE:-0}" = 1 ] && export UCX_MEM_EVENTS=no
    $GEN coll uc --ranks 4 --type all_reduce --size 1048580 --iters 2
    replay_ok "all-reduce over ucx" --workload uc --ranks 4 --backend rdma
    grep -q '^# 4 ranks over ucx' out.txt || fail "ucx: the run did not use the ucx transport"
    $GEN p2p up --ranks 4 --size 65536
    replay_ok "sends and receives over ucx" --workload up --ranks 4 --backend rdma
    # auto: local ranks take ucx (cma between the processes) when it loads.
    replay_ok "all-reduce, auto on local ranks" --workload uc --ranks 4 --backend auto
    grep -q '^# 4 ranks over ucx' out.txt || fail "ucx: --backend auto on local ranks did not pick ucx"
    # auto is the default.
    timeout 300 "$GENIE" replay --quiet --workload uc --ranks 4 >out.txt 2>err.txt || fail "ucx: the default backend failed"
    grep -q '^# 4 ranks over ucx' out.txt || fail "ucx: the default backend on local ranks is not ucx"
    ;;
  dpdk)
    [ -e "$BUILD/libgenie_transport_dpdk.so" ] || { echo "SKIP: the dpdk transport plugin was not built (no libdpdk-dev)"; exit 77; }
    export TMPDIR=$TMP  # where the launcher makes the memif socket's directory
    runtime=/var/run/dpdk
    [ "$(id -u)" = 0 ] || runtime=${XDG_RUNTIME_DIR:-/tmp}/dpdk
    before=$(ls "$runtime" 2>/dev/null | grep -c '^genie-replay-')
    $GEN coll dg --ranks 2 --type all_gather --size 1048580 --iters 3 --barrier
    RANKS=2 replay_ok "all-gather over a memif pair" --workload dg --ranks 2 --backend dpdk
    grep -q '^# 2 ranks over dpdk' out.txt || fail "dpdk: the run did not use the dpdk transport"
    $GEN coll dr --ranks 2 --type all_reduce --size 65540 --iters 2
    RANKS=2 replay_ok "all-reduce over a memif pair" --workload dr --ranks 2 --backend dpdk
    $GEN p2p dp --ranks 2 --size 65536
    RANKS=2 replay_ok "sends and receives over a memif pair" --workload dp --ranks 2 --backend dpdk
    GENIE_REPLAY_TEST_CORRUPT=1 replay_fails "a flipped byte over dpdk" 'genie replay: [1-9][0-9]* wrong elements received' \
      --workload dg --ranks 2 --backend dpdk
    $GEN coll d4 --ranks 4 --type all_gather --size 4096
    replay_fails "4 local ranks over dpdk" 'joins two ranks by a memif pair, and the run has 4' \
      --workload d4 --ranks 4 --backend dpdk
    [ -z "$(ls -d "$TMP"/genie-replay-* 2>/dev/null)" ] || fail "dpdk: the memif socket's directory was left behind"
    after=$(ls "$runtime" 2>/dev/null | grep -c '^genie-replay-')
    [ "$after" = "$before" ] || fail "dpdk: EAL runtime directories were left in $runtime"
    GENIE_DPDK_EAL="--no-huge -m 128 --no-pci --no-telemetry --file-prefix=genie-rn$$-{rank}" \
      replay_fails "ranks whose EAL has no port" 'rank [01] exited before the run started' \
      --workload dr --ranks 2 --backend dpdk
    grep -q 'there is no DPDK port' err.txt || fail "dpdk: the ranks did not say why their port could not start"
    rm -rf "$runtime"/genie-rn$$-*
    GENIE_DPDK_EAL="--no-huge --vdev=net_null0" replay_fails "one GENIE_DPDK_EAL for 4 ranks" \
      'each needs a port and a file prefix of its own: write \{rank\}' --workload d4 --ranks 4 --backend dpdk
    # 4 ranks whose ports share one Ethernet segment: every Syn is broadcast
    # and heard by all; each rank listens on an endpoint of its own.
    ns=genie-replay-$$
    if [ "$(id -u)" != 0 ] || ! ip netns add "$ns" 2>/dev/null; then
      echo "note: not root or no network namespaces: 4 ranks on a shared segment not run"
    else
      trap 'ip netns del "$ns" 2>/dev/null; rm -rf "$TMP" "$runtime"/genie-rs$$-*' EXIT
      ip -n "$ns" link set lo up
      ip -n "$ns" link add gbr type bridge && ip -n "$ns" link set gbr up || fail "dpdk: cannot make a bridge"
      # DPDK's af_packet joins a PACKET_FANOUT group numbered from its pid and
      # its interface: indices far apart keep the ranks' groups apart.
      for r in 0 1 2 3; do
        ip -n "$ns" link add gv$r index $((4096 * (r + 1))) type veth peer name gp$r &&
          ip -n "$ns" link set gp$r master gbr &&
          ip -n "$ns" link set gp$r up && ip -n "$ns" link set gv$r up || fail "dpdk: cannot make veth $r"
      done
      IN=(ip netns exec "$ns" env "GENIE_DPDK_EAL=--no-huge -m 256 --no-pci --no-telemetry --log-level=*:warning --file-prefix=genie-rs$$-{rank} --vdev=net_af_packet0,iface=gv{rank}")
      $GEN coll da --ranks 4 --type all_reduce --size 100004 --iters 2
      replay_ok "all-reduce, 4 ranks on a shared segment" --workload da --ranks 4 --backend dpdk
      grep -q '^# 4 ranks over dpdk' out.txt || fail "dpdk: the shared-segment run did not use dpdk"
      $GEN p2p dq --ranks 4 --size 65536
      replay_ok "sends and receives, 4 ranks on a shared segment" --workload dq --ranks 4 --backend dpdk
      IN=(env)
    fi
    ;;
  mpi)
    command -v mpirun >/dev/null || { echo "SKIP: mpirun (Open MPI) is not installed"; exit 77; }
    $GEN coll m --ranks 4 --type all_reduce --size 65536 --iters 2
    port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    extra=()
    [ "$(id -u)" = 0 ] && extra+=(--allow-run-as-root)
    timeout 120 mpirun "${extra[@]}" --oversubscribe -np 4 --mca btl self,tcp -x PATH \
      "$BUILD/genie-replay" --launch mpi --rendezvous 127.0.0.1:$port --workload m --quiet >out.txt 2>err.txt
    rc=$?
    if [ $rc -ne 0 ] && grep -qiE 'not enough slots|could not|ORTE|PMIx|orted' err.txt && [ "$(grep -c '^sys\[' out.txt)" -eq 0 ]; then
      echo "SKIP: mpirun cannot start 4 local processes here:"; head -5 err.txt; exit 77
    fi
    if [ $rc -ne 0 ] || [ "$(grep -c '^sys\[' out.txt)" -ne 4 ] || ! grep -q ', 0 wrong elements$' out.txt; then
      fail "mpi: exit $rc"
      cat out.txt err.txt >&2
    else
      pass "mpirun -np 4"
    fi
    ;;
  rendezvous)
    # Two ranks as mpirun would start them (OMPI_COMM_WORLD_*), rank 0
    # hosting the rendezvous; a hostile client goes first.
    $GEN coll rv --ranks 2 --type all_reduce --size 65536 --iters 2
    port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    rank() {  # rank() R TOKEN OUT: one rank in the background
      env OMPI_COMM_WORLD_RANK=$1 OMPI_COMM_WORLD_SIZE=2 GENIE_REPLAY_TOKEN=$2 timeout 120 "$BUILD/genie-replay" \
        --launch mpi --rendezvous 127.0.0.1:$port --backend tcp --workload rv --quiet --timeout 5 >$3.out 2>$3.err &
    }
    rank 0 s3cret r0
    r0=$!
    /usr/bin/python3 - "$port" "$r0" >stopped.txt <<'PY' || fail "rendezvous: the hostile client's connections were not dropped"
import os, signal, socket, sys, time
port = int(sys.argv[1])
def conn():
    for _ in range(100):
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            time.sleep(0.05)
    raise SystemExit("rank 0's rendezvous never listened")
def closed_by_server(s):
    s.settimeout(5)
    try:
        while s.recv(65536):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
# A line that never ends: dropped once it passes the line bound, not held.
s = conn()
try:
    for _ in range(64):
        s.sendall(b"x" * 65536)
except (ConnectionResetError, BrokenPipeError):
    pass
assert closed_by_server(s), "a 4 MiB line was held"
# A HELLO without the run's token: dropped, and it takes no rank's place.
s = conn()
s.sendall(b"HELLO 1 2 tcp 127.0.0.1:1 guess\n")
assert closed_by_server(s), "a HELLO with the wrong token was kept"
# A flood of silent connections: those past the bound are closed at once.
flood = [conn() for _ in range(100)]
time.sleep(0.5)
shut = sum(closed_by_server(x) for x in flood[80:])
assert shut == 20, f"{shut} of the last 20 silent connections were closed"
# The flood leaves while rank 0 is stopped, so that its closes and rank 1's
# connection reach rank 0 at once: rank 1 must take a place they freed.
def stat_field(path, k):  # field k after the command name of a /proc stat file
    try:
        with open(path) as f:
            return f.read().rsplit(")", 1)[1].split()[k]
    except (OSError, IndexError):
        return None
launcher = str(sys.argv[2])  # timeout(1), whose child is rank 0
ranks = [int(d) for d in os.listdir("/proc") if d.isdigit() and stat_field(f"/proc/{d}/stat", 1) == launcher]
assert len(ranks) == 1, f"rank 0's process not found under {launcher}"
os.kill(ranks[0], signal.SIGSTOP)
def stopped(pid):  # every thread of it
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    return all(stat_field(f"/proc/{pid}/task/{t}/stat", 0) == "T" for t in tasks)
for _ in range(500):
    if stopped(ranks[0]):
        break
    time.sleep(0.01)
assert stopped(ranks[0]), "rank 0 did not stop"
for x in flood:
    x.close()
print(ranks[0])
PY
    stopped=$(cat stopped.txt)
    rank 1 s3cret r1
    if [ -n "$stopped" ]; then
      # Rank 1 waits in the listener's queue (its Recv-Q) before rank 0 goes on.
      for _ in $(seq 300); do
        [ "$(ss -Hltn "sport = :$port" | awk '{print $2}')" -ge 1 ] 2>/dev/null && break
        sleep 0.1
      done
      kill -CONT "$stopped"
    fi
    wait $r0; rc0=$?
    wait
    if [ $rc0 -ne 0 ] || ! grep -q ', 0 wrong elements$' r0.out; then
      fail "rendezvous: the run did not survive the hostile client (rank 0 exit $rc0)"
      cat r0.out r0.err r1.err >&2
    else
      pass "a hostile client at the rendezvous"
    fi
    # A rank without the token is not one of the run's.
    rank 0 s3cret r0
    r0=$!
    rank 1 wrong r1
    wait $r0; rc0=$?
    wait
    if [ $rc0 -ne 1 ] || ! grep -q "without this run's token" r0.err; then
      fail "rendezvous: a rank with the wrong token (rank 0 exit $rc0)"
      cat r0.out r0.err >&2
    else
      pass "a rank without the run's token is refused"
    fi
    ;;
  bench)
    /usr/bin/python3 "$SRC/bench/replay_vs_gloo.py" --build "$BUILD" --quick --json b.json >out.txt 2>err.txt
    rc=$?
    cat out.txt
    if [ $rc -ne 0 ] || ! /usr/bin/python3 -c 'import json; r = json.load(open("b.json")); assert len(r) == 2 and all(x["genie_busbw_gbps"][0] > 0 and x["genie_wrong"] == 0 for x in r)'; then
      fail "bench: exit $rc"
      cat err.txt >&2
    else
      pass "replay_vs_gloo.py --quick"
    fi
    ;;
  converter)
    # The same all-reduce with the metadata each writer leaves: a version
    # (chakra_gen's default), a converter's schema attribute and no version,
    # an unknown schema, no metadata at all.
    $GEN coll v --ranks 4 --type all_reduce --size 65536
    replay_ok "metadata with a version" --workload v --ranks 4 --json v.json && sent_bytes v.json "$(ring_ar 65536 4)" ||
      fail "converter: version"
    ! grep -q 'warning' err.txt || fail "converter: a warning for a known version: $(cat err.txt)"
    $GEN coll s --ranks 4 --type all_reduce --size 65536 --schema 1.0.2-chakra.0.0.4
    replay_ok "a schema attribute and no version" --workload s --ranks 4 --json s.json &&
      sent_bytes s.json "$(ring_ar 65536 4)" || fail "converter: schema"
    ! grep -q 'warning' err.txt || fail "converter: a warning for a known schema: $(cat err.txt)"
    $GEN coll u --ranks 4 --type all_reduce --size 65536 --schema 9.9-other
    replay_ok "an unknown schema" --workload u --ranks 4 --json u.json && sent_bytes u.json "$(ring_ar 65536 4)" ||
      fail "converter: unknown schema"
    grep -q "^genie replay: warning: u\.0\.et: schema '9\.9-other' is not the one this reader follows .*(the same in 3 other files)$" \
      err.txt || fail "converter: no one-line warning for the unknown schema: $(cat err.txt)"
    $GEN coll e --ranks 4 --type all_reduce --size 65536 --schema ""
    replay_ok "empty metadata" --workload e --ranks 4 && grep -q 'neither a version nor a schema' err.txt ||
      fail "converter: empty metadata: $(cat err.txt)"
    ;;
  ctrl_deps)
    $GEN converted cv --ranks 4 --size 65536 --schema 1.0.2-chakra.0.0.4
    replay_ok "converted trace, --control-deps repair (default)" --workload cv --ranks 4 --json cv.json &&
      sent_bytes cv.json "$(ring_ar 65536 4)" || fail "ctrl_deps: repair"
    for w in "dropped 1 dependency on nodes the file does not have (1 control, 0 data; the first: node 1 'aten::mm' on node 999)" \
             "dropped 1 dependency of a node on itself (1 control, 0 data; the first: node 2 'record_param_comms')" \
             "broke 2 dependency cycles (each node depends on the next): 3 'step_a' -> 4 'step_b' -> 3 'step_a': dropped the control dependency of node 3 on node 4; 6 'loop_a' -> 7 'loop_b' -> 6 'loop_a': dropped the data dependency of node 6 on node 7" \
             "1 COMM_COLL_NODE with is_cpu_op and no comm_type (the CPU side of a collective; the first: node 2 'record_param_comms') ran as compute"; do
      grep -qF "$w" err.txt || fail "ctrl_deps: no warning '$w'"
    done
    [ "$(grep -c 'warning: cv\.0\.et: ' err.txt)" -eq 4 ] || fail "ctrl_deps: not 4 warnings, one line each: $(cat err.txt)"
    replay_ok "converted trace, --control-deps ignore" --workload cv --ranks 4 --control-deps ignore --json ig.json &&
      sent_bytes ig.json "$(ring_ar 65536 4)" || fail "ctrl_deps: ignore"
    ! grep -q 'control dependenc' err.txt || fail "ctrl_deps: ignore still repaired control dependencies: $(cat err.txt)"
    grep -qF "6 'loop_a' -> 7 'loop_b'" err.txt || fail "ctrl_deps: ignore did not break the data cycle"
    replay_fails "converted trace, --control-deps strict" "cv\.0\.et: node 1 'aten::mm': depends on node 999, which the file does not have" \
      --workload cv --ranks 4 --control-deps strict
    "$GENIE" replay --workload cv --ranks 4 --control-deps loose >/dev/null 2>err.txt
    [ $? -eq 2 ] && grep -q -- '--control-deps takes repair, ignore or strict' err.txt || fail "--control-deps loose: not a usage error"
    ;;
  astra_cli)
    # ASTRA-sim's command line as its examples run it, with every option of
    # its analytical frontend; the rank count only in the network file.
    $GEN coll a --ranks 4 --type all_reduce --size 65536 --iters 2
    printf 'topology: [ Ring ]\nnpus_count: [ 4 ]  # NPUs\nbandwidth: [ 50.0 ]  # GB/s\nlatency: [ 500.0 ]  # ns\n' >net.yml
    echo '{"memory-type": "NO_MEMORY_EXPANSION"}' >mem.json
    echo '{"scheduling-policy": "LIFO", "all-reduce-implementation": ["ring"], "preferred-dataset-splits": 4}' >sys.json
    replay_ok "ASTRA-sim's command line" --workload-configuration=a --system-configuration=sys.json \
      --network-configuration=net.yml --remote-memory-configuration=mem.json --comm-group-configuration=empty \
      --num-queues-per-dim=1 --comm-scale=1 --injection-scale=1 --rendezvous-protocol=false \
      --logging-configuration=log.toml --logging-folder=logs --json a.json &&
      sent_bytes a.json "$((2 * $(ring_ar 65536 4)))" || fail "astra_cli: the run"
    for opt in --num-queues-per-dim --comm-scale --injection-scale --rendezvous-protocol --logging-configuration --logging-folder; do
      [ "$(grep -c "^genie replay: note: $opt " err.txt)" -eq 1 ] || fail "astra_cli: no one-line note for $opt"
    done
    grep -q '^genie replay: note: --network-configuration net.yml: npus_count gives the ranks per dimension \[4\]' err.txt ||
      fail "astra_cli: no note for the network file"
    # A block list of two dimensions: [2, 2], each dimension its own ring stage.
    printf 'topology:\n  - Ring\n  - Ring\nnpus_count:\n  - 2\n  - 2\n' >net22.yml
    $GEN coll i --ranks 4 --type all_reduce --size 65536 --involved 1,0
    RANKS=4 replay_ok "npus_count [2, 2], involved_dim 1,0" --workload i --network-configuration net22.yml --json i.json &&
      sent_bytes i.json "$(ring_ar 65536 2)" || fail "astra_cli: npus_count block list"
    replay_fails "npus_count disagrees with --ranks" 'network file net\.yml \(npus_count\) has 4 ranks, the run has 2' \
      --workload a --network-configuration net.yml --ranks 2
    printf 'topology: [ Ring ]\n' >nonpus.yml
    replay_fails "a network file without npus_count" 'network file nonpus\.yml: no npus_count' \
      --workload a --network-configuration nonpus.yml
    # ns-3's command line: a logical topology, and a network file of ns-3's
    # own format (no npus_count): noted, the topology gives the ranks.
    echo '{"logical-dims": ["4"]}' >topo4.json
    printf 'ENABLE_QCN 1\nUSE_DYNAMIC_PFC_THRESHOLD 1\n' >config.txt
    replay_ok "ns-3's command line" --workload-configuration=a --network-configuration=config.txt \
      --logical-topology-configuration=topo4.json --comm-group-configuration=empty --htsim-proto=roce ||
      fail "astra_cli: ns-3's command line"
    grep -q 'note: --network-configuration config.txt: it has no npus_count; the logical topology gives the ranks' err.txt ||
      fail "astra_cli: no note for ns-3's network file: $(cat err.txt)"
    "$GENIE" replay --workload a >/dev/null 2>err.txt
    [ $? -eq 2 ] && grep -q -- 'give --ranks N, a --logical-topology file or a --network-configuration file' err.txt ||
      fail "astra_cli: no rank count: not a usage error"
    ;;
  mismatch)
    # Rank 3's trace has one all-reduce fewer: the rank waiting for it learns
    # when rank 3's end arrives, not after --timeout.
    $GEN mismatch mm --ranks 4 --size 65536
    start=$(date +%s)
    replay_fails "traces that disagree" \
      "deadlock: rank 0 waits for a receive from rank 3 .* but rank 3 finished its trace without sending it" \
      --workload mm --ranks 4 --timeout 30
    [ $(($(date +%s) - start)) -lt 30 ] || fail "mismatch: reported only after --timeout"
    grep -q "rank 1: GENIE_ERR_CANCELLED: rank 0 stopped on a failure" err.txt || fail "mismatch: rank 1 not told rank 0 stopped"
    # Ranks 0 and 1 wait for each other (a true deadlock); ranks 2 and 3
    # start waiting for them 1 s later. Ranks 0 and 1 report after --timeout,
    # and their ends stop the others at once: a peer's end is not a byte
    # moving, so it does not start their timeouts over (which took up to 3
    # timeouts).
    $GEN crossed cx --ranks 4
    start=$(date +%s)
    replay_fails "a deadlock that others wait on" "deadlock: rank [01] waited 6 s with no data moving for a receive from rank [01] tag 1[01]" \
      --workload cx --ranks 4 --timeout 6
    took=$(($(date +%s) - start))
    [ $took -lt 11 ] || fail "mismatch: the deadlock took $took s to report (--timeout 6)"
    grep -q "rank 2: GENIE_ERR_CANCELLED: rank 1 stopped on a failure" err.txt || fail "mismatch: rank 2 not told rank 1 stopped"
    ;;
  comm_groups)
    # Two groups of 4 in an 8-rank trace (interleaved ranks): an all-reduce
    # and a broadcast in each group, then an all-reduce over all 8.
    $GEN groups g --ranks 8 --size 65536 --groups "0,2,4,6;1,3,5,7"
    RANKS=8 replay_ok "two groups of 4" --workload g --ranks 8 --comm-group-configuration g.groups.json --json g.json || true
    # Ring all-reduces over 4 and over 8; the broadcast is a chain from each
    # group's first rank (0 and 1): every member but the last sends it once.
    want=()
    for r in 0 1 2 3 4 5 6 7; do
      b=$(( $(ring_ar 65536 4) + $(ring_ar 65536 8) ))
      [ $r -lt 6 ] && b=$((b + 65536))
      want+=($b)
    done
    sent_bytes g.json "${want[@]}" || fail "comm_groups: bytes sent"
    /usr/bin/python3 - <<'PY' || fail "comm_groups: the collectives' rows"
import json
rows = {(c["collective"], c["pg_name"]): c for c in json.load(open("g.json"))["collectives"]}
for g in ("1", "2"):
    c = rows[("all_reduce", g)]
    assert c["ranks"] == 4 and c["count"] == 1 and c["wrong"] == 0, c
    # busbw of a group of 4: algbw * 2 (4 - 1) / 4
    assert abs(c["busbw_gbps"] - c["algbw_gbps"] * 1.5) < 1e-9 * max(1, c["busbw_gbps"]), c
    assert rows[("broadcast", g)]["ranks"] == 4
w = rows[("all_reduce", "")]
assert w["ranks"] == 8 and abs(w["busbw_gbps"] - w["algbw_gbps"] * 1.75) < 1e-9 * max(1, w["busbw_gbps"]), w
PY
    grep -qE '^  all_reduce@1 ' out.txt && grep -qE '^  all_reduce@2 ' out.txt || fail "comm_groups: no table row per group"
    # Without the file: a warning, and every collective over all 8 ranks.
    RANKS=8 replay_ok "pg_name without a group file" --workload g --ranks 8 --json all.json &&
      sent_bytes all.json $(( 2 * $(ring_ar 65536 8) + 65536 )) $(( 2 * $(ring_ar 65536 8) + 65536 )) \
        $(( 2 * $(ring_ar 65536 8) + 65536 )) $(( 2 * $(ring_ar 65536 8) + 65536 )) $(( 2 * $(ring_ar 65536 8) + 65536 )) \
        $(( 2 * $(ring_ar 65536 8) + 65536 )) $(( 2 * $(ring_ar 65536 8) + 65536 )) $(( 2 * $(ring_ar 65536 8) )) ||
      fail "comm_groups: without the file"
    grep -q "2 collectives name a communicator group (pg_name; the first: node 1 'group_all_reduce' names '1') and there is no --comm-group-configuration: they run over all ranks" err.txt ||
      fail "comm_groups: no warning without the file: $(cat err.txt)"
    echo '{"1": [0, 1, 2, 3], "2": [4, 5, 6, 7]}' >wrong.json
    replay_fails "a rank outside its pg_name's group" "g\.1\.et: node 1 'group_all_reduce': pg_name '2': rank 1 is not in that group of wrong\.json" \
      --workload g --ranks 8 --comm-group-configuration wrong.json
    echo '{"1": [0, 2, 4, 6]}' >few.json
    replay_fails "a pg_name the file lacks" "pg_name '2' is not a group of few\.json \('1'\)" \
      --workload g --ranks 8 --comm-group-configuration few.json
    echo '{"1": [0, 2, 9]}' >range.json
    replay_fails "a rank beyond the run" "range\.json: group '1' holds something other than a rank of this run \(0\.\.7\)" \
      --workload g --ranks 8 --comm-group-configuration range.json
    ;;
  custom)
    # The workload's two all-reduces of 1 MiB run the custom ring of 8 KiB
    # messages (ASTRA-sim's rule: the implementation's sizes, not the
    # workload's): 2 x 14 messages of 8192 bytes per rank, where Genie's
    # ring would send 2 x 2 x 7/8 MiB.
    $GEN coll w --ranks 8 --type all_reduce --size 1048576 --iters 2
    $GEN custom_ring ring8 --ranks 8 --size 8192
    echo '{"scheduling-policy": "FIFO", "preferred-dataset-splits": 4, "all-reduce-implementation-custom": ["ring8"]}' >custom.json
    RANKS=8 replay_ok "a custom all-reduce over 8 ranks" --workload w --ranks 8 --system custom.json --json c.json &&
      sent_bytes c.json $((2 * 14 * 8192)) || fail "custom: bytes sent"
    /usr/bin/python3 - <<'PY' || fail "custom: not every message was verified"
import json
r = json.load(open("c.json"))
assert r["wrong"] == 0
c = r["collectives"][0]
assert c["collective"] == "all_reduce" and c["count"] == 2 and c["ranks"] == 8, c
PY
    GENIE_REPLAY_TEST_CORRUPT=2 RANKS=8 replay_fails "a flipped byte in a custom collective" \
      'genie replay: [1-9][0-9]* wrong elements received' --workload w --ranks 8 --system custom.json
    echo '{"all-reduce-implementation-custom": ["nothere"]}' >missing.json
    replay_fails "a custom implementation without its traces" \
      'missing\.json: all-reduce-implementation-custom names nothere, and nothere\.0\.et is missing' \
      --workload w --ranks 8 --system missing.json
    $GEN custom_ring ring4 --ranks 4 --size 8192
    echo '{"all-reduce-implementation-custom": ["ring4"]}' >short.json
    replay_fails "a custom implementation for fewer ranks" 'ring4\.4\.et is missing' --workload w --ranks 8 --system short.json
    $GEN groups g --ranks 8 --size 65536 --groups "0,2,4,6;1,3,5,7"
    replay_fails "a custom implementation for a communicator group" \
      "g\.0\.et: node 1 'group_all_reduce': a collective of communicator group '1' with the system file's custom implementation" \
      --workload g --ranks 8 --system custom.json --comm-group-configuration g.groups.json
    echo '{"all-reduce-implementation-custom": ["ring8", "ring8"]}' >two.json
    replay_fails "two custom entries" 'all-reduce-implementation-custom must be a list of one trace prefix' \
      --workload w --ranks 8 --system two.json
    ;;
  *)
    echo "usage: replay_case.sh testdata|algo|p2p|corrupt|outputs|bad|deadlock|unmatched_send|policy|pipelined|compute_real|ucx|mpi|bench ..." >&2
    exit 2
    ;;
esac
[ $failures -eq 0 ] || { echo "$failures failure(s)" >&2; exit 1; }
echo "PASS"
