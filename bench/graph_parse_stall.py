#!/usr/bin/env python3
"""Another client's request while a server parses a large graph: two builds
of `genie serve` side by side (docs/security.md, "What a token holder can do
to other tenants").

    graph_parse_stall.py BEFORE_GENIE AFTER_GENIE [--nodes N] [--rounds R]

Each round starts each build's server (the side that goes first alternates),
and on it: client A submits a chain of N relu nodes over f32[4] (raw frames,
tests/scripts/lib/rawpeer.py); once A's last byte is sent and 100 ms have
passed, client B submits a one-node graph, already parsed and cached, and
times its answer. Printed per build: the median and range of B's latency and
of A's whole submission (parse and run), and the median of the per-round
ratios before/after of B's latency. A GENIE argument may be a command with
its environment, e.g. "env LD_LIBRARY_PATH=/old/build /old/build/genie".
The default N (60,000) is under the default node limit of both builds.
"""
import argparse
import os
import shlex
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "scripts", "lib"))
from rawpeer import field_bytes, field_varint, frame, read_frame, session, varint  # noqa: E402

TENSOR_ALLOC, TENSOR_ALLOC_REPLY, GRAPH_SUBMIT, GRAPH_DONE = 10, 11, 20, 22


def chain(nodes):
    out = ['{"format":"genie.graph","version":1,"name":"chain","inputs":[{"name":"x","dtype":"f32","shape":[4]}],"nodes":[']
    prev = "x"
    for i in range(nodes):
        out.append('%s{"name":"r%d","op":"relu","inputs":["%s"],"outputs":["v%d"]}' % ("," if i else "", i, prev, i))
        prev = "v%d" % i
    out.append('],"outputs":["%s"]}' % prev)
    return "".join(out)


def submit(json_text, tensor_id):
    binding = field_bytes(1, "x") + field_varint(2, tensor_id)
    return field_bytes(1, json_text) + field_bytes(2, binding)


def alloc(s, rid):
    s.sendall(frame(TENSOR_ALLOC, field_varint(1, 1) + field_bytes(2, varint(4)) + field_bytes(3, "cpu:0"), rid))
    mtype, _ = read_frame(s)
    assert mtype == TENSOR_ALLOC_REPLY, "allocation failed: type %d" % mtype
    return 1  # a session's first tensor


def start(genie):
    p = subprocess.Popen(shlex.split(genie) + ["serve", "--port", "0"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    if "listening on" not in line:
        p.kill()
        sys.exit("graph_parse_stall: %s did not start: %r" % (genie, line))
    return p, int(line.rsplit(":", 1)[1])


def one_round(genie, big, tiny):
    p, port = start(genie)
    try:
        a, b = session(port, "parse-a"), session(port, "parse-b")
        for s in (a, b):
            s.settimeout(600)
        xa, xb = alloc(a, 1), alloc(b, 1)
        b.sendall(frame(GRAPH_SUBMIT, submit(tiny, xb), 2))
        assert read_frame(b)[0] == GRAPH_DONE
        t0 = time.monotonic()
        a.sendall(frame(GRAPH_SUBMIT, submit(big, xa), 2))
        time.sleep(0.1)
        t1 = time.monotonic()
        b.sendall(frame(GRAPH_SUBMIT, submit(tiny, xb), 3))
        mtype, _ = read_frame(b)
        small_s = time.monotonic() - t1
        assert mtype == GRAPH_DONE, "the small graph failed: type %d" % mtype
        mtype, _ = read_frame(a)
        whole_s = time.monotonic() - t0
        assert mtype == GRAPH_DONE, "the large graph failed: type %d" % mtype
        a.close()
        b.close()
        return small_s, whole_s
    finally:
        p.terminate()
        p.wait(timeout=60)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--nodes", type=int, default=60000)
    ap.add_argument("--rounds", type=int, default=5)
    opt = ap.parse_args()
    big = chain(opt.nodes)
    tiny = chain(1)
    runs = {"before": [], "after": []}
    for r in range(opt.rounds):
        for side in (("before", "after") if r % 2 == 0 else ("after", "before")):
            runs[side].append(one_round(getattr(opt, side), big, tiny))
    print("another client's one-node graph while a %d-node graph (%d bytes of JSON) is parsed, "
          "%d rounds, sides alternating first" % (opt.nodes, len(big), opt.rounds))
    print("%-8s %16s %22s %18s" % ("build", "small p50 ms", "small min-max ms", "large p50 s"))
    for side in ("before", "after"):
        small = [x[0] * 1e3 for x in runs[side]]
        whole = [x[1] for x in runs[side]]
        print("%-8s %16.2f %12.2f-%-9.2f %18.2f" % (side, statistics.median(small), min(small), max(small),
                                                   statistics.median(whole)))
    ratios = [b[0] / a[0] for b, a in zip(runs["before"], runs["after"])]
    print("small request latency before/after, median of per-round ratios: %.1f (min-max %.1f-%.1f)"
          % (statistics.median(ratios), min(ratios), max(ratios)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
