#!/usr/bin/env python3
"""The captured nanoGPT (tests/bindings/python/models.py: GPT) decoding
greedily through genie.torch.KVCacheGenerator three ways, across one link
(bench/links/run.sh runs it in the client namespace of each emulated link):

  local     embedded mode, in this process;
  semantic  remote: weights uploaded once, the KV caches resident on the
            server between steps, graph deltas (the default);
  blind     remote with semantics=False (genie_config_set_semantics 0,
            GENIE_SEMANTICS=off): one remote call per operation, weights and
            caches sent with every step (API remoting).

Whole generations (prefill + --new decode steps) run interleaved, the order
rotating every round, after a warm-up; the tokens of every generation are
checked equal to torch eager greedy decoding (exit 1 if not). Reports per
side the prefill p50, the decode step p50/p99 (over every step of every
round), tokens/s (1 / step p50), the bytes on the wire per decode step each
way (the client's counters: graph submissions and tensor writes up, tensor
reads down; differences between consecutive steps), what the network adds
per step (median over rounds of remote step p50 - local step p50), and the
ratios semantic/local and blind/semantic (medians of per-round ratios of the
step p50s, and of the prefills).

    torch_gpt_links.py --server HOST:PORT [--layers 2] [--embd 128]
        [--heads 4] [--vocab 512] [--prompt 16] [--new 32] [--rounds 5]
        [--threads N] [--label NAME] [--quick] [--json FILE]

GENIE_AUTH_TOKEN is the server's token, if it has one. Needs the Python
binding on PYTHONPATH (<build>/bindings/python) and PyTorch (the project's
environment: scripts/python-env.sh).
"""

import argparse
import json
import os
import sys
import time

SIDES = ("local", "semantic", "blind")


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", required=True, metavar="HOST:PORT")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--embd", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--new", type=int, default=33, help="tokens generated: the prefill's, then one per decode step")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--label", default="")
    ap.add_argument("--quick", action="store_true", help="tiny sizes, 1 round of 4 steps: proves it runs")
    ap.add_argument("--json", metavar="FILE")
    opt = ap.parse_args()
    if opt.quick:
        opt.layers, opt.embd, opt.heads, opt.vocab, opt.prompt, opt.new, opt.rounds = 2, 64, 4, 128, 8, 5, 1
    host, _, port = opt.server.rpartition(":")
    if not host or not port.isdigit():
        ap.error(f"--server '{opt.server}' is not HOST:PORT")
    opt.host, opt.port = host, int(port)
    return opt


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def counters(ctx):
    """(bytes up, bytes down) so far on this context's client (0 embedded)."""
    if ctx.embedded:
        return 0, 0
    c = ctx.server_info()["client"]
    # Down: reads, and completions (outputs that came back inside them).
    return (c["graph_bytes_sent"] + c["tensor_bytes_written"],
            c["tensor_bytes_read"] + c.get("completion_bytes", 0))


def main():
    opt = parse()
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from torch_gpt import nanogpt
    model, idx, want = nanogpt(opt)
    import torch
    import genie
    from genie.torch import KVCacheGenerator
    token = os.environ.get("GENIE_AUTH_TOKEN") or None

    ctxs, gens = {}, {}
    ctxs["local"] = genie.Context(num_threads=opt.threads, use_env=False)
    for side in ("semantic", "blind"):
        ctxs[side] = genie.Context(opt.host, opt.port, num_threads=opt.threads, use_env=False,
                                   auth_token=token, semantics=(side == "semantic"))
    for side in SIDES:
        gens[side] = KVCacheGenerator(model, context=ctxs[side], name="gpt")

    def run(side):
        """(prefill ms, [step ms], [(up, down) per step], tokens equal)."""
        ctx, per_step = ctxs[side], []

        def on_step(i, st):
            per_step.append(counters(ctx))

        toks, st = gens[side].generate(idx, opt.new, on_step=on_step)
        moved = [(b[0] - a[0], b[1] - a[1]) for a, b in zip(per_step, per_step[1:])]
        return st["prefill_ms"], st["decode_ms"], moved, torch.equal(toks, want)

    for side in SIDES:  # warm-up: captures, weight uploads, plan caches
        run(side)
    res = {s: {"pre": [], "steps": [], "p50s": [], "up": [], "down": []} for s in SIDES}
    ratio = {"sl_step": [], "bs_step": [], "sl_pre": [], "bs_pre": []}
    equal = True
    for r in range(opt.rounds):
        for j in range(len(SIDES)):
            side = SIDES[(r + j) % len(SIDES)]
            pre, steps, moved, ok = run(side)
            equal &= ok
            d = res[side]
            d["pre"].append(pre)
            d["steps"] += steps
            d["p50s"].append(pct(steps, 50))
            d["up"] += [m[0] for m in moved]
            d["down"] += [m[1] for m in moved]
        p = {s: res[s]["p50s"][-1] for s in SIDES}
        ratio["sl_step"].append(p["semantic"] / p["local"])
        ratio["bs_step"].append(p["blind"] / p["semantic"])
        ratio["sl_pre"].append(res["semantic"]["pre"][-1] / res["local"]["pre"][-1])
        ratio["bs_pre"].append(res["blind"]["pre"][-1] / res["semantic"]["pre"][-1])

    steps = opt.new - 1
    print(f"captured nanoGPT (models.GPT: {opt.layers} layers, d{opt.embd}, {opt.heads} heads, vocab "
          f"{opt.vocab}), prompt {opt.prompt}, prefill + {steps} decode steps greedy, KVCacheGenerator; "
          f"{opt.rounds} rounds of whole generations per side interleaved after a warm-up; "
          f"{opt.threads} thread(s); server {opt.server}{', link ' + opt.label if opt.label else ''}; "
          f"tokens {'equal to eager greedy on all three sides' if equal else 'DIFFER'}")
    print()
    print(f"{'side':<9}{'prefill ms':>11}{'p50 ms':>9}{'p99 ms':>9}{'tok/s':>8}{'up B/step':>12}"
          f"{'down B/step':>13}{'added ms':>10}")
    out = {"bench": "torch_gpt_links", "link": opt.label or opt.server, "quick": opt.quick,
           "layers": opt.layers, "embd": opt.embd, "heads": opt.heads, "vocab": opt.vocab,
           "prompt": opt.prompt, "decode_steps": steps, "rounds": opt.rounds, "tokens_equal": equal}
    for side in SIDES:
        d = res[side]
        added = pct([a - b for a, b in zip(d["p50s"], res["local"]["p50s"])], 50)
        up = pct(d["up"], 50) if d["up"] else 0
        down = pct(d["down"], 50) if d["down"] else 0
        p50, p99 = pct(d["steps"], 50), pct(d["steps"], 99)
        print(f"{side:<9}{pct(d['pre'], 50):>11.2f}{p50:>9.3f}{p99:>9.3f}{1e3 / p50:>8.1f}{up:>12.0f}"
              f"{down:>13.0f}{added:>10.3f}")
        out[side] = {"prefill_ms": pct(d["pre"], 50), "p50_ms": p50, "p99_ms": p99, "tokens_per_s": 1e3 / p50,
                     "up_bytes_per_step": up, "down_bytes_per_step": down, "added_ms": added}
    print()
    print(f"per round (step p50): semantic/local {pct(ratio['sl_step'], 50):.3f}, blind/semantic "
          f"{pct(ratio['bs_step'], 50):.3f}; prefill: semantic/local {pct(ratio['sl_pre'], 50):.3f}, "
          f"blind/semantic {pct(ratio['bs_pre'], 50):.3f} (medians of per-round ratios)")
    sem, bl = out["semantic"], out["blind"]
    both = sem["up_bytes_per_step"] + sem["down_bytes_per_step"]
    print(f"network added per step: semantic {sem['added_ms']:.3f} ms = "
          f"{100 * sem['added_ms'] / out['local']['p50_ms']:.1f}% of the local step, blind {bl['added_ms']:.3f} ms; "
          f"bytes per step (both ways): blind / semantic = "
          f"{(bl['up_bytes_per_step'] + bl['down_bytes_per_step']) / both if both else 0:.0f}x")
    out.update({k: pct(v, 50) for k, v in ratio.items()})
    if opt.json:
        with open(opt.json, "w") as f:
            json.dump(out, f)
            f.write("\n")
    for side in SIDES:
        gens[side].close()
        ctxs[side].close()
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
