#!/usr/bin/env python3
"""A nanoGPT-style GPT written as an ordinary nn.Module (tests/bindings/python/
models.py: GPT), generating greedily through genie.torch.KVCacheGenerator
(prefill graph, then one decode graph per token with the KV cache resident
where the graphs run), against two comparisons measured in the same run:

  1. torch eager, same process, same thread count: prefill is model(prompt),
     a decode step is model(token, past_kv, pos) with the cache as torch
     tensors. Genie embedded vs eager.
  2. the same KVCacheGenerator against a `genie serve` on 127.0.0.1 (a
     separate process, same thread count): remote over loopback vs embedded.

Each comparison runs interleaved pairs of whole generations (A, B, A, B ...)
after a warm-up; per pair the prefill time and the median decode-step time
of each side give a ratio; the table reports the median of the per-pair
ratios, and p50/p99 of each side over all pairs (prefill) or all steps
(decode). Genie's times are the caller's: writing the token and position,
submitting, waiting and reading the last logits row (decode), or writing the
prompt and reading the last row (prefill). Tokens are checked equal to
eager greedy decoding.

    torch_gpt.py [--layers 4] [--embd 384] [--heads 6] [--vocab 4096]
                 [--prompt 64] [--new 16] [--pairs 7] [--threads N]
                 [--genie PATH] [--no-remote] [--quick] [--json FILE]

--threads N sets OpenBLAS, torch's intra-op threads and Genie's worker
threads (this process and the server) to N (default: the number of CPUs).
--genie is the genie CLI that serves the remote side (default:
$GENIE_BUILD_DIR/genie, else build/genie beside this file's repository).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time


def nanogpt(opt):
    """The model both nanoGPT benchmarks run (this one and
    bench/links/torch_gpt_links.py): OpenBLAS, torch and Genie set to
    opt.threads, the tests' models.GPT seeded to opt's sizes. Returns
    (model, prompt [1, opt.prompt], eager greedy tokens for opt.new more)."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "GENIE_NUM_THREADS"):
        os.environ[var] = str(opt.threads)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                    "bindings", "python"))
    import torch
    from genie.torch.generate import greedy_eager
    from models import GPT, seeded

    torch.set_num_threads(opt.threads)
    torch.manual_seed(0)
    model = seeded(GPT(vocab_size=opt.vocab, block_size=opt.prompt + opt.new, n_layer=opt.layers,
                       n_head=opt.heads, n_embd=opt.embd))
    idx = torch.randint(0, opt.vocab, (1, opt.prompt))
    return model, idx, greedy_eager(model, idx, opt.new)


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--embd", type=int, default=384)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--new", type=int, default=16, help="tokens generated per run")
    ap.add_argument("--pairs", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--genie", metavar="PATH")
    ap.add_argument("--no-remote", action="store_true")
    ap.add_argument("--quick", action="store_true", help="tiny sizes, 2 pairs: proves it runs")
    ap.add_argument("--json", metavar="FILE")
    opt = ap.parse_args()
    if opt.quick:
        opt.layers, opt.embd, opt.heads, opt.vocab = 2, 64, 4, 128
        opt.prompt, opt.new, opt.pairs, opt.warmup = 8, 4, 2, 1
    opt.threads = opt.threads or len(os.sched_getaffinity(0))
    if opt.genie is None:
        here = os.path.dirname(os.path.abspath(__file__))
        build = os.environ.get("GENIE_BUILD_DIR") or os.path.join(here, "..", "build")
        opt.genie = os.path.join(build, "genie")
    return opt


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def start_server(path, threads):
    proc = subprocess.Popen([path, "serve", "--port", "0", "--threads", str(threads), "--grace-ms", "200"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = proc.stdout.readline()
    m = re.match(r"genie serve listening on 127\.0\.0\.1:(\d+)$", line.strip())
    if not m:
        proc.kill()
        raise SystemExit(f"torch_gpt: {path} serve did not print its port: {line!r}")
    return proc, int(m.group(1))


def main():
    opt = parse()
    for var in ("GENIE_MASTER_ADDR", "GENIE_MASTER_PORT"):
        os.environ.pop(var, None)
    model, idx, want = nanogpt(opt)
    import torch
    import genie
    from genie.torch import KVCacheGenerator

    def eager_run():
        """(prefill ms, [decode step ms], tokens) with torch eager and a KV cache."""
        with torch.no_grad():
            t0 = time.perf_counter()
            logits, past = model(idx)
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            prefill = (time.perf_counter() - t0) * 1e3
            toks, steps = [idx, nxt], []
            for s in range(opt.new - 1):
                t1 = time.perf_counter()
                logits, past = model(nxt, past, torch.tensor([opt.prompt + s]))
                nxt = logits[:, -1].argmax(-1, keepdim=True)
                steps.append((time.perf_counter() - t1) * 1e3)
                toks.append(nxt)
        return prefill, steps, torch.cat(toks, 1)

    def genie_run(gen):
        toks, st = gen.generate(idx, opt.new)
        return st["prefill_ms"], st["decode_ms"], toks

    def compare(run_a, run_b):
        """Interleaved pairs of whole generations; returns the samples."""
        for _ in range(opt.warmup):
            run_a()
            run_b()
        r = {"a_pre": [], "b_pre": [], "a_dec": [], "b_dec": [], "pre_ratio": [], "dec_ratio": [],
             "tokens_equal": True}
        for _ in range(opt.pairs):
            pa, da, ta = run_a()
            pb, db, tb = run_b()
            r["tokens_equal"] &= torch.equal(ta, want) and torch.equal(tb, want)
            r["a_pre"].append(pa)
            r["b_pre"].append(pb)
            r["a_dec"] += da
            r["b_dec"] += db
            r["pre_ratio"].append(pb / pa)
            r["dec_ratio"].append(pct(db, 50) / pct(da, 50))
        return r

    embedded = genie.Context(num_threads=opt.threads, use_env=False)
    gen_e = KVCacheGenerator(model, context=embedded, name="gpt")
    eager_vs_genie = compare(eager_run, lambda: genie_run(gen_e))

    remote_vs_embedded, server, bytes_step = None, None, None
    if not opt.no_remote:
        if not os.access(opt.genie, os.X_OK):
            raise SystemExit(f"torch_gpt: no genie CLI at {opt.genie} (pass --genie, or --no-remote)")
        server, port = start_server(opt.genie, opt.threads)
        remote = genie.Context("127.0.0.1", port, num_threads=opt.threads, use_env=False)
        gen_r = KVCacheGenerator(model, context=remote, name="gpt")
        last = {}

        def remote_run():
            toks, st = gen_r.generate(idx, opt.new)
            last.update(st)
            return st["prefill_ms"], st["decode_ms"], toks

        remote_vs_embedded = compare(lambda: genie_run(gen_e), remote_run)
        bytes_step = last["bytes_per_step"][-1]

    print(f"nanoGPT-style GPT: {opt.layers} layers, d{opt.embd}, {opt.heads} heads, vocab {opt.vocab}, "
          f"tied LM head; batch 1, prompt {opt.prompt}, {opt.new} new tokens greedy; f32")
    print(f"{opt.threads} threads on every side (OpenBLAS, torch intra-op, Genie workers, server); "
          f"{opt.pairs} interleaved pairs of whole generations after {opt.warmup} warm-up; "
          f"torch {torch.__version__}")

    def table(title, r, a_name, b_name, goal):
        print(f"\n{title}   (tokens equal to eager greedy: {'yes' if r['tokens_equal'] else 'NO'})")
        print(f"{'':<34}{'p50 ms':>10}{'p99 ms':>10}{'samples':>9}")
        for label, key in (("prefill", "pre"), ("decode step", "dec")):
            for name, side in ((a_name, "a"), (b_name, "b")):
                xs = r[f"{side}_{key}"]
                print(f"{label + ' ' + name:<34}{pct(xs, 50):>10.2f}{pct(xs, 99):>10.2f}{len(xs):>9}")
        for label, key in (("prefill", "pre_ratio"), ("decode step", "dec_ratio")):
            xs = r[key]
            print(f"ratio {label} {b_name}/{a_name} (median of pairs): {pct(xs, 50):.3f}x "
                  f"[min {min(xs):.3f}, max {max(xs):.3f}]  {goal}")

    table("Genie embedded vs torch eager", eager_vs_genie, "torch eager", "genie", "goal <= 1.0x")
    if remote_vs_embedded:
        table("Genie remote (loopback server) vs embedded", remote_vs_embedded, "embedded", "remote",
              "goal <= 1.10x")
        print(f"remote decode step on the wire: graph submission {bytes_step['graph']} bytes "
              f"(the token inside it), "
              f"written {bytes_step['written']} bytes, read {bytes_step['read']} bytes "
              f"({bytes_step.get('returned', 0)} inside the completion; the KV cache stays on the server)")

    if opt.json:
        def summary(r):
            return {k: (pct(v, 50) if isinstance(v, list) else v) for k, v in r.items()}
        with open(opt.json, "w") as f:
            json.dump({"benchmark": "torch_gpt", "quick": opt.quick, "layers": opt.layers,
                       "embd": opt.embd, "heads": opt.heads, "vocab": opt.vocab,
                       "prompt": opt.prompt, "new": opt.new, "threads": opt.threads,
                       "pairs": opt.pairs, "eager_vs_genie_p50": summary(eager_vs_genie),
                       "remote_vs_embedded_p50": summary(remote_vs_embedded)
                       if remote_vs_embedded else None, "remote_bytes_per_step": bytes_step}, f)
            f.write("\n")
    gen_e.close()
    embedded.close()
    if server is not None:
        gen_r.close()
        remote.close()
        server.terminate()
        server.wait(20)
    ok = eager_vs_genie["tokens_equal"] and (remote_vs_embedded is None or remote_vs_embedded["tokens_equal"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
