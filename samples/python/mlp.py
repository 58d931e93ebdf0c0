#!/usr/bin/env python3
"""A 2-layer MLP through Genie from Python, the same program as
samples/c/mlp.c (and the Go and Rust samples): they print the same checksum.

    y = relu(x @ w1 + b1) @ w2 + b2      x[4,64] w1[64,128] b1[128] w2[128,32] b2[32]

Weights are allocated once as resident tensors (on the server in remote
mode), the graph carries semantic annotations (phase, module, layer, roles),
and values are seeded by name (genie.seed = include/genie_seed.h).

    python3 samples/python/mlp.py                      # embedded
    GENIE_MASTER_ADDR=host GENIE_MASTER_PORT=5555 python3 samples/python/mlp.py
"""

import sys

import genie
from genie import seed

SHAPES = {"x": [4, 64], "w1": [64, 128], "b1": [128], "w2": [128, 32], "b2": [32]}


def build_graph():
    g = genie.Graph("mlp")
    g.input("x", SHAPES["x"], role="input")
    for name in ("w1", "b1", "w2", "b2"):
        g.input(name, SHAPES[name], role="weight")
    ann = dict(phase="forward")
    h = g.node("matmul", "fc1", ["x", "w1"], outputs="fc1.mm", module="fc1", layer=0, **ann)
    h = g.node("add", "fc1.bias", [h, "b1"], outputs="fc1.out", module="fc1", layer=0, **ann)
    h = g.node("relu", "act", [h], outputs="act.out", module="act", layer=0, **ann)
    h = g.node("matmul", "fc2", [h, "w2"], outputs="fc2.mm", module="fc2", layer=1, **ann)
    g.node("add", "fc2.bias", [h, "b2"], outputs="y", module="fc2", layer=1, **ann)
    g.set_role("fc1.out", "activation")
    g.set_role("y", "output")
    g.output("y")
    return g.validate()


def main():
    with genie.Context() as ctx:  # remote when GENIE_MASTER_ADDR is set
        mode = "embedded" if ctx.embedded else "remote"
        graph = build_graph()
        weights = {n: ctx.from_numpy(seed.values(n, SHAPES[n])) for n in ("w1", "b1", "w2", "b2")}
        x = ctx.from_numpy(seed.values("x", SHAPES["x"]))
        with ctx.submit(graph, {"x": x, **weights}) as fut:
            (y,) = fut.result()
            with y:
                values = y.numpy()
        print(f"mode {mode}")
        print(f"output y shape [{', '.join(map(str, values.shape))}] dtype {y.dtype}")
        print(f"checksum y = {seed.checksum(values):.4f}")
        for t in (x, *weights.values()):
            t.close()
        graph.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
