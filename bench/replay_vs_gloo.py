#!/usr/bin/env python3
"""`genie replay` collectives vs Gloo over TCP, 4 local ranks.

For all-gather and all-reduce at each size per rank, a Chakra trace of
ITERS collectives (each after a barrier, as Gloo's side barriers before each
iteration) replays on 4 local ranks over the transport `--backend` names
(default `auto`: what `genie replay` picks by itself, printed per row;
`--backend tcp` gives Genie's own TCP transport), and
gloo_collectives_peer runs the same collective with Gloo's ring over its
TCP transport on 127.0.0.1. Runs are interleaved (Genie, Gloo, Genie, ...)
after one warm-up pair; each run's figure is the mean over its iterations
of the slowest rank's time, as bus bandwidth (nccl-tests conventions:
all-reduce 2(n-1)/n, all-gather (n-1)/n of the gathered size). Prints the
medians, min-max and the median of the per-pair ratios Genie/Gloo, and the
wrong elements Genie's ranks counted (Gloo's side checks its result too).

usage: replay_vs_gloo.py [--build DIR] [--pairs N] [--iters K] [--system FILE]
                         [--backend auto|tcp|rdma|dpdk] [--sizes 1048576,16777216]
                         [--quick] [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
GEN = os.path.join(HERE, "..", "tools", "replay", "chakra_gen.py")
RANKS = 4


def genie_run(build, prefix, op, backend, system):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        extra = ["--system", system] if system else []
        subprocess.run([os.path.join(build, "genie-replay"), "--workload", prefix, "--ranks", str(RANKS), "--quiet",
                        "--backend", backend, "--json", out.name] + extra, check=True, stdout=subprocess.DEVNULL)
        report = json.load(open(out.name))
    row = next(c for c in report["collectives"] if c["collective"] == op)
    return row["busbw_gbps"], report["wrong"], report["transport"]


def gloo_run(gloo, op, size, iters):
    out = subprocess.run([gloo, "allreduce" if op == "all_reduce" else "allgather", str(size), str(iters), str(RANKS)],
                         check=True, capture_output=True, text=True).stdout
    t_us = statistics.mean(json.loads(out.strip().splitlines()[-1])["time_us"])
    if op == "all_reduce":
        return size / (t_us * 1e3) * 2 * (RANKS - 1) / RANKS
    return RANKS * size / (t_us * 1e3) * (RANKS - 1) / RANKS


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.environ.get("GENIE_BUILD_DIR", os.path.join(HERE, "..", "build")))
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--sizes", default="1048576,16777216")
    p.add_argument("--backend", default="auto", help="genie replay's --backend (default auto)")
    p.add_argument("--system", default="", help="an ASTRA-sim system file (default: ring, one chunk)")
    p.add_argument("--quick", action="store_true", help="tiny sizes, one pair (for make test)")
    p.add_argument("--json", default="")
    a = p.parse_args()
    if a.quick:
        a.pairs, a.iters, a.sizes = 1, 2, "65536"
    sizes = [int(s) for s in a.sizes.split(",")]
    gloo = os.path.join(a.build, "bench", "gloo_collectives_peer")
    have_gloo = os.access(gloo, os.X_OK)
    if not have_gloo:
        print(f"# Gloo row not built ({gloo} missing: install libgloo-dev and rebuild)")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for op in ("all_gather", "all_reduce"):
            for size in sizes:
                prefix = os.path.join(tmp, f"{op}_{size}")
                subprocess.run([sys.executable, GEN, "coll", prefix, "--ranks", str(RANKS), "--type", op, "--size",
                                str(size), "--iters", str(a.iters), "--barrier"], check=True)
                genie, ref, ratios, wrong, transport = [], [], [], 0, a.backend
                for pair in range(a.pairs + (0 if a.quick else 1)):  # the first pair warms up
                    g, w, transport = genie_run(a.build, prefix, op, a.backend, a.system)
                    wrong += w
                    r = gloo_run(gloo, op, size, a.iters) if have_gloo else None
                    if pair == 0 and not a.quick:
                        continue
                    genie.append(g)
                    if r:
                        ref.append(r)
                        ratios.append(g / r)
                rows.append({"collective": op, "bytes_per_rank": size, "ranks": RANKS, "iters": a.iters,
                             "pairs": a.pairs, "transport": transport, "genie_busbw_gbps": genie,
                             "gloo_busbw_gbps": ref, "ratio": ratios, "genie_wrong": wrong})
    print(f"# {RANKS} local ranks, {a.iters} collectives per run, {a.pairs} interleaved pairs; busbw in GB/s,"
          " median (min-max); ratio = median of per-pair Genie/Gloo")
    print(f"{'collective':<11} {'size/rank':>10} {'genie transport':>15} {'genie busbw':>22} {'gloo busbw':>22}"
          f" {'ratio':>6} {'#wrong':>7}")

    def fmt(v):
        return f"{statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})" if v else "-"

    for r in rows:
        ratio = f"{statistics.median(r['ratio']):.2f}" if r["ratio"] else "-"
        print(f"{r['collective']:<11} {r['bytes_per_rank']:>10} {r['transport']:>15} {fmt(r['genie_busbw_gbps']):>22} "
              f"{fmt(r['gloo_busbw_gbps']):>22} {ratio:>6} {r['genie_wrong']:>7}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 1 if any(r["genie_wrong"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
