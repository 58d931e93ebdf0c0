#!/usr/bin/env python3
"""Two builds of Genie against each other on the same benchmarks, in one
run: for each benchmark, ROUNDS rounds, each running the "before" build and
the "after" build back to back (which goes first alternates), and for each
figure the median of the per-round ratios after/before beside the medians of
both sides.

    ab_builds.py BEFORE_BUILD_DIR AFTER_BUILD_DIR [--rounds N] [--only NAME,...]
                 [--json FILE]

Each benchmark's figure is its own comparison ratio where it has one (Genie
against OpenBLAS, the floor, raw TCP, PyTorch eager), so the machine's drift
between runs cancels; see ../shared/BENCHMARKING.md. A build directory needs
the benchmark programs (bench/bench_*) and, for torch_block, the Python
binding (bindings/python). The benchmark sources are each build's own only
where they differ; the Python benchmark is this checkout's.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def matmul(d):
    out = {}
    for r in d["results"]:
        out[f"matmul {r['m']}x{r['k']}x{r['n']} Genie/OpenBLAS GFLOP/s"] = r["ratio"]["median"]
    return out


def block(d):
    return {"transformer block floor/Genie (higher is better)": d["floor_over_genie"]["median"],
            "transformer block Genie p50 ms": d["genie_ms"]["p50"]}


def rpc(d):
    out = {}
    for s in d["series"]:
        if s["name"].startswith("Genie"):
            out[f"rpc: {s['name']} / raw ping-pong (p50)"] = s["ratio_to_raw"]
    return out


def throughput(d):
    out = {}
    for r in d["rows"]:
        mib = r["bytes"] / (1 << 20)
        size = f"{mib:g} MiB" if mib >= 1 else f"{r['bytes'] // 1024} KiB"
        out[f"tensor write {size} GB/s"] = r["write_gbps"]
        out[f"tensor read {size} GB/s"] = r["read_gbps"]
        if "write_stream" in r:
            out[f"tensor write in a stream {size} GB/s"] = r["write_stream"]["gbps"]
        # Each against plain TCP making the same calls in the same run: the
        # machine's drift between the two builds' runs cancels.
        for key, label in (("write_after_read", "write"), ("read", "read"), ("write_stream", "write in a stream")):
            if isinstance(r.get(key), dict) and "per_raw" in r[key]:
                out[f"tensor {label} {size} / plain TCP"] = r[key]["per_raw"]
    return out


def remote_block(d):
    return {"remote block remote/embedded (p50 pairs)": d["ratio_median"],
            "remote block remote p50 ms": d["remote_p50_ms"]}


def torch_block(d):
    return {"torch block Genie/torch (p50 pairs)": d["ratio_median"],
            "torch block Genie p50 ms": d["genie_p50_ms"]}


# name -> (its command for a build dir and a JSON path, its figures from the JSON)
BENCHES = {
    "matmul": (lambda b, j: [f"{b}/bench/bench_matmul", "--iters", "7", "--json", j], matmul),
    "block": (lambda b, j: [f"{b}/bench/bench_transformer_block", "--iters", "30", "--json", j], block),
    "rpc": (lambda b, j: [f"{b}/bench/bench_rpc_roundtrip", "--iters", "5", "--json", j], rpc),
    "throughput": (lambda b, j: [f"{b}/bench/bench_tensor_throughput", "--iters", "2", "--json", j],
                   throughput),
    "remote_block": (lambda b, j: [f"{b}/bench/bench_remote_block", "--iters", "15", "--json", j], remote_block),
    "torch_block": (lambda b, j: ["/usr/bin/python3", os.path.join(HERE, "torch_block.py"), "--threads", "1",
                                  "--pairs", "10", "--json", j], torch_block),
}


def run_once(build, name, cmd_of, figures_of):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    env = dict(os.environ)
    if name == "torch_block":
        env["PYTHONPATH"] = os.path.join(build, "bindings", "python")
    try:
        subprocess.run(cmd_of(build, path), check=True, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
        with open(path) as f:
            return figures_of(json.load(f))
    except subprocess.CalledProcessError as e:
        sys.exit(f"ab_builds: {name} failed on {build}:\n{e.stderr}")
    finally:
        os.unlink(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default=",".join(BENCHES))
    ap.add_argument("--json", metavar="FILE")
    opt = ap.parse_args()
    report = {}
    for name in opt.only.split(","):
        cmd_of, figures_of = BENCHES[name]
        runs = {"before": [], "after": []}
        run_once(opt.before, name, cmd_of, figures_of)  # warm-up: caches, calibration files
        run_once(opt.after, name, cmd_of, figures_of)
        for r in range(opt.rounds):
            order = ("before", "after") if r % 2 == 0 else ("after", "before")
            for side in order:
                runs[side].append(run_once(getattr(opt, side), name, cmd_of, figures_of))
        print(f"\n{name} ({opt.rounds} rounds, sides alternating first)")
        print(f"  {'figure':<58}{'before':>10}{'after':>10}{'after/before':>14}  (min-max)")
        for key in runs["before"][0]:
            b = [x[key] for x in runs["before"]]
            a = [x[key] for x in runs["after"]]
            ratios = [y / x for x, y in zip(b, a) if x]
            row = {"before": statistics.median(b), "after": statistics.median(a),
                   "ratio": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios)}
            report[key] = row
            print(f"  {key:<58}{row['before']:>10.4g}{row['after']:>10.4g}{row['ratio']:>14.3f}"
                  f"  ({row['ratio_min']:.3f}-{row['ratio_max']:.3f})")
    if opt.json:
        with open(opt.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
