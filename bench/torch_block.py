#!/usr/bin/env python3
"""A GPT-2 transformer block written as an ordinary nn.Module (tests/bindings/
python/models.py), captured with genie.torch.capture and run through Genie
embedded, against the same module in PyTorch CPU eager: same process, same
input, same thread count on both sides, interleaved pairs (torch, Genie,
torch, Genie ...), median of the per-pair ratios Genie/torch, p50 and p99 of
each side. Each Genie call is the whole captured call as a user makes it:
input written, graph submitted and waited for, output read into a new torch
tensor.

    torch_block.py [--seq 128] [--hidden 768] [--heads 12] [--pairs 30]
                   [--threads N] [--quick] [--json FILE]

--threads N sets OpenBLAS (both sides), torch's intra-op threads and
Genie's worker threads to N (default: the number of CPUs); it must be set
before either library loads, so this program sets it in its environment.
"""

import argparse
import json
import os
import sys
import time


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--pairs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, 3 pairs: proves it runs")
    ap.add_argument("--json", metavar="FILE")
    opt = ap.parse_args()
    if opt.quick:
        opt.seq, opt.hidden, opt.heads, opt.pairs, opt.warmup = 16, 64, 4, 3, 1
    opt.threads = opt.threads or len(os.sched_getaffinity(0))
    return opt


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    opt = parse()
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "GENIE_NUM_THREADS"):
        os.environ[var] = str(opt.threads)
    os.environ.pop("GENIE_MASTER_ADDR", None)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                    "bindings", "python"))
    import torch
    import genie
    import genie.torch as gt
    from models import Block, seeded

    torch.set_num_threads(opt.threads)
    torch.manual_seed(0)
    block = seeded(Block(n_embd=opt.hidden, n_head=opt.heads, block_size=max(opt.seq, 1024)))
    x = torch.randn(opt.batch, opt.seq, opt.hidden)
    ctx = genie.Context(num_threads=opt.threads)
    cap = gt.capture(block, x, context=ctx, phase="prefill", modality="text")

    with torch.no_grad():
        ref = block(x)
        out = cap(x)
        err = ((out - ref).abs().max() / ref.abs().max()).item()
        for _ in range(opt.warmup):
            block(x)
            cap(x)
        t_torch, t_genie, ratios = [], [], []
        for _ in range(opt.pairs):
            t0 = time.perf_counter()
            block(x)
            t1 = time.perf_counter()
            cap(x)
            t2 = time.perf_counter()
            t_torch.append((t1 - t0) * 1e3)
            t_genie.append((t2 - t1) * 1e3)
            ratios.append((t2 - t1) / (t1 - t0))

    ratio = pct(ratios, 50)
    print(f"GPT-2 block b{opt.batch} s{opt.seq} d{opt.hidden} h{opt.heads}, f32, "
          f"{opt.threads} threads on both sides (OpenBLAS, torch intra-op, Genie workers), "
          f"{opt.pairs} interleaved pairs, torch {torch.__version__}")
    print(f"captured graph: {cap.graph.num_nodes} Genie nodes; max error vs eager "
          f"{err:.2e} relative to max |out|")
    print(f"{'':<22}{'p50 ms':>10}{'p99 ms':>10}")
    print(f"{'torch eager (CPU)':<22}{pct(t_torch, 50):>10.2f}{pct(t_torch, 99):>10.2f}")
    print(f"{'genie.torch capture':<22}{pct(t_genie, 50):>10.2f}{pct(t_genie, 99):>10.2f}")
    print(f"ratio genie/torch (median of pairs): {ratio:.3f}x  "
          f"[min {min(ratios):.3f}, max {max(ratios):.3f}]  goal <= 1.0x")
    if opt.json:
        with open(opt.json, "w") as f:
            json.dump({"benchmark": "torch_block", "quick": opt.quick, "batch": opt.batch,
                       "seq": opt.seq, "hidden": opt.hidden, "heads": opt.heads,
                       "threads": opt.threads, "pairs": opt.pairs,
                       "torch_p50_ms": pct(t_torch, 50), "torch_p99_ms": pct(t_torch, 99),
                       "genie_p50_ms": pct(t_genie, 50), "genie_p99_ms": pct(t_genie, 99),
                       "ratio_median": ratio, "max_rel_error": err}, f)
            f.write("\n")
    cap.close()
    ctx.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
