#!/usr/bin/env python3
"""The three PyTorch 2 paths into Genie on one model, against PyTorch eager
at the same thread count, in one run:

  eager     model(...) in torch, this process;
  device    the model on device="remote_accelerator:0" (genie.init): each
            operation recorded, one Genie graph per value read;
  compile   torch.compile(model, backend="genie");
  capture   genie.torch.capture(model, example) (the graph traced once).

The model is the Llama-style decoder of tests/bindings/python/llama.py.
Measured per path: a prefill of --prompt tokens, and a decode step (one
token, the KV cache of the prompt as input; on the device path the cache is
resident on the device from the prefill), reading the last logits row to
the host. Interleaved rounds (eager, device, compile, capture, eager, ...)
after a warm-up; p50 and p99 over all rounds; ratios of medians. Then the
device path's per-operation overhead: a chain of --ops element-wise ops
recorded and run as one graph, per op, beside eager's per op.

    torch_paths.py [--layers 2] [--dim 256] [--heads 4] [--vocab 2048]
                   [--prompt 64] [--rounds 20] [--threads 1] [--ops 200]
                   [--remote HOST:PORT] [--quick] [--json FILE]

Goals (issue "The Python front door"): device decode step <= 1.2x
compile's; both <= 1.0x eager at one thread.
"""

import argparse
import copy
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "bindings", "python"))


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ops", type=int, default=200)
    ap.add_argument("--remote", metavar="HOST:PORT", help="a genie serve to run on (default: embedded)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes, 3 rounds: proves it runs")
    ap.add_argument("--json", metavar="FILE")
    opt = ap.parse_args()
    if opt.quick:
        opt.layers, opt.dim, opt.heads, opt.vocab, opt.prompt, opt.rounds, opt.ops = 1, 64, 4, 128, 8, 3, 20
    return opt


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    opt = parse()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(opt.threads))
    import torch
    import genie
    import genie.torch as gt
    from llama import llama
    torch.set_num_threads(opt.threads)
    if opt.remote:
        host, port = opt.remote.rsplit(":", 1)
        genie.init(master_addr=host, master_port=int(port))
    else:
        genie.init(num_threads=opt.threads)
    dev = "remote_accelerator:0"
    model = llama(seed=0, vocab=opt.vocab, dim=opt.dim, n_layers=opt.layers, n_heads=opt.heads,
                  hidden=opt.dim * 8 // 3, max_positions=opt.prompt + 8)
    T = opt.prompt
    idx = torch.randint(0, opt.vocab, (1, T))
    pos = torch.arange(T).unsqueeze(0)
    tok = torch.randint(0, opt.vocab, (1, 1))
    tpos = torch.tensor([[T]])
    with torch.no_grad():
        ref_logits, past = model(idx, pos)
        ref_step, _ = model(tok, tpos, past)

    mdev = copy.deepcopy(model).to(dev)
    ctx = genie.get_context()
    compiled = torch.compile(model, backend="genie", options={"context": ctx})
    cap_prefill = gt.capture(model, (idx, pos), ctx)
    cap_decode = gt.capture(model, (tok, tpos, past), ctx)

    def eager_prefill():
        with torch.no_grad():
            return model(idx, pos)[0][:, -1, :]

    def eager_step():
        with torch.no_grad():
            return model(tok, tpos, past)[0][:, -1, :]

    _, dev_past = mdev(idx.to(dev), pos.to(dev))
    torch.remote_accelerator.synchronize()

    def device_prefill():
        logits, _ = mdev(idx.to(dev), pos.to(dev))
        return logits[:, -1, :].cpu()

    def device_step():
        logits, _ = mdev(tok.to(dev), tpos.to(dev), dev_past)
        return logits[:, -1, :].cpu()

    def compile_prefill():
        return compiled(idx, pos)[0][:, -1, :]

    def compile_step():
        return compiled(tok, tpos, past)[0][:, -1, :]

    def capture_prefill():
        return cap_prefill(idx, pos)[0][:, -1, :]

    def capture_step():
        return cap_decode(tok, tpos, past)[0][:, -1, :]

    paths = {"eager": (eager_prefill, eager_step), "device": (device_prefill, device_step),
             "compile": (compile_prefill, compile_step), "capture": (capture_prefill, capture_step)}
    for name, (pf, st) in paths.items():  # warm-up and correctness
        torch.testing.assert_close(pf(), ref_logits[:, -1, :], rtol=1e-3, atol=1e-3)
        torch.testing.assert_close(st(), ref_step[:, -1, :], rtol=1e-3, atol=1e-3)
    times = {(n, k): [] for n in paths for k in ("prefill", "decode")}
    for _ in range(opt.rounds):
        for name, (pf, st) in paths.items():
            t0 = time.perf_counter()
            pf()
            t1 = time.perf_counter()
            st()
            t2 = time.perf_counter()
            times[(name, "prefill")].append((t1 - t0) * 1e3)
            times[(name, "decode")].append((t2 - t1) * 1e3)

    # Per-op overhead of the device path: a chain of element-wise ops.
    x_host = torch.randn(64)
    x_dev = x_host.to(dev)

    def chain(x):
        for _ in range(opt.ops):
            x = x * 1.0001 + 0.5
        return x

    chain(x_dev).cpu()
    dev_op, eager_op = [], []
    for _ in range(max(3, opt.rounds // 2)):
        t0 = time.perf_counter()
        chain(x_dev).cpu()
        t1 = time.perf_counter()
        chain(x_host)
        t2 = time.perf_counter()
        dev_op.append((t1 - t0) * 1e6 / (2 * opt.ops))
        eager_op.append((t2 - t1) * 1e6 / (2 * opt.ops))

    where = f"remote {opt.remote}" if opt.remote else "embedded"
    print(f"torch_paths: Llama-style, {opt.layers} layers, dim {opt.dim}, vocab {opt.vocab}, prompt {T}, "
          f"{opt.threads} thread(s), {where}, torch {torch.__version__}, {opt.rounds} rounds")
    print(f"{'path':<9} {'prefill p50 ms':>15} {'p99':>8} {'decode p50 ms':>14} {'p99':>8}")
    med = {}
    for name in paths:
        pf, st = times[(name, "prefill")], times[(name, "decode")]
        med[name] = (pct(pf, 50), pct(st, 50))
        print(f"{name:<9} {pct(pf, 50):>15.3f} {pct(pf, 99):>8.3f} {pct(st, 50):>14.3f} {pct(st, 99):>8.3f}")
    r = {
        "decode device/compile (goal <= 1.2)": med["device"][1] / med["compile"][1],
        "decode device/eager (goal <= 1.0)": med["device"][1] / med["eager"][1],
        "decode compile/eager (goal <= 1.0)": med["compile"][1] / med["eager"][1],
        "decode capture/eager": med["capture"][1] / med["eager"][1],
        "prefill device/eager": med["device"][0] / med["eager"][0],
        "prefill compile/eager": med["compile"][0] / med["eager"][0],
        "prefill capture/eager": med["capture"][0] / med["eager"][0],
    }
    for k, v in r.items():
        print(f"ratio {k}: {v:.3f}")
    print(f"device per-op overhead: p50 {pct(dev_op, 50):.2f} us/op (eager {pct(eager_op, 50):.2f} us/op), "
          f"{opt.ops * 2} ops recorded and run as one graph")
    if opt.json:
        with open(opt.json, "w") as f:
            json.dump({"config": vars(opt), "p50_ms": med, "ratios": r,
                       "device_us_per_op": pct(dev_op, 50), "eager_us_per_op": pct(eager_op, 50)}, f, indent=1)
    cap_prefill.close()
    cap_decode.close()
    genie.shutdown()


if __name__ == "__main__":
    main()
