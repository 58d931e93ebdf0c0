#!/usr/bin/env python3
"""The Python side of the per-call binding overhead benchmark: one
submission of a tiny graph (out = a + b, two f32 [4] tensors, resident) and
the wait for it, embedded, through the idiomatic API
(Context.submit + Future.wait + Future.close) — the same C calls as
bench/binding_overhead.c, which bench/binding_overhead.sh runs beside this
program and divides by.

    binding_overhead.py [--iters N] [--quick] [--json FILE]

Prints exactly one line on stdout: `per_call_ns <mean ns per call>` over N
timed calls (default 20000; --quick 200) after N/10 untimed ones. On stderr:
the same through the raw SWIG layer (genie.capi), for where the time goes.
"""

import argparse
import json
import os
import sys
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=0, help="timed calls (default 20000; --quick: 200)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", metavar="FILE")
    opt = ap.parse_args()
    iters = opt.iters or (200 if opt.quick else 20000)
    os.environ.pop("GENIE_MASTER_ADDR", None)  # embedded: the call, not a network

    import genie
    from genie import capi

    with genie.Context() as ctx:
        if not ctx.embedded:
            print("bench: unset GENIE_MASTER_ADDR: this benchmark runs embedded", file=sys.stderr)
            return 1
        g = genie.Graph("tiny_add")
        g.input("a", [4])
        g.input("b", [4])
        g.node("add", "add", ["a", "b"], outputs="out")
        g.output("out")
        a = ctx.from_numpy(np.array([1, 2, 3, 4], np.float32))
        b = ctx.from_numpy(np.array([10, 20, 30, 40], np.float32))
        feeds = {"a": a, "b": b}

        def idiomatic():
            fut = ctx.submit(g, feeds)
            fut.wait()
            fut.close()

        pairs = [("a", a._h), ("b", b._h)]

        def raw():
            f = capi.genie_graph_submit(ctx._h, g._h, pairs)
            capi.genie_future_wait(f, -1)
            capi.genie_future_destroy(f)

        def per_call_ns(fn):
            for _ in range(iters // 10):
                fn()
            t0 = time.perf_counter_ns()
            for _ in range(iters):
                fn()
            return (time.perf_counter_ns() - t0) / iters

        with ctx.submit(g, feeds) as fut:  # the graph computes what it should
            assert fut.numpy()["out"].tolist() == [11, 22, 33, 44]
        ns = per_call_ns(idiomatic)
        raw_ns = per_call_ns(raw)
        print(f"per_call_ns {ns:.1f}")
        print(f"python: {ns:.1f} ns per call (Context.submit + Future.wait + close), "
              f"{raw_ns:.1f} ns through genie.capi directly; {iters} calls", file=sys.stderr)
        if opt.json:
            with open(opt.json, "w") as f:
                json.dump({"benchmark": "binding_overhead", "language": "python", "iters": iters,
                           "per_call_ns": round(ns, 1), "capi_per_call_ns": round(raw_ns, 1)}, f)
                f.write("\n")
        a.close()
        b.close()
        g.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
