"""The binding on the CUDA backend (docs/cuda.md): tensors with
device="cuda:0" and graphs run where their weights live. Without a usable
GPU the allocation fails with the backend's reason, which is checked; the
tests that need the GPU skip with it."""

import numpy as np
import pytest

import genie


def _cuda_or_skip(ctx):
    try:
        ctx.tensor([1], device="cuda:0").close()
    except genie.UnsupportedError as e:
        pytest.skip(f"cuda:0 is unavailable: {e.detail}")


def test_cuda_unavailable_says_why(ctx):
    try:
        t = ctx.tensor([4], device="cuda:0")
    except genie.UnsupportedError as e:
        assert "cuda:0" in e.detail
        assert "CUDA" in e.detail or "cuda" in e.detail
        return
    assert t.device == "cuda:0"
    t.close()


def test_tensor_round_trip_on_cuda(ctx):
    _cuda_or_skip(ctx)
    a = np.arange(4096, dtype=np.float32).reshape(64, 64) * 0.5
    with ctx.from_numpy(a, device="cuda:0") as t:
        assert t.device == "cuda:0"
        np.testing.assert_array_equal(t.numpy(), a)
    h = np.arange(300, dtype=np.float16)
    with ctx.from_numpy(h, device="cuda:0") as t:
        np.testing.assert_array_equal(t.numpy(), h)


def test_mlp_with_weights_on_cuda_matches_cpu(ctx):
    _cuda_or_skip(ctx)
    g = genie.Graph("mlp")
    g.input("x", [8, 64], role="input")
    g.input("w1", [128, 64], role="weight")
    g.input("b1", [128], role="weight")
    g.input("w2", [16, 128], role="weight")
    h = g.node("linear", "fc1", ["x", "w1", "b1"])
    a = g.node("relu", "act", [h])
    g.node("linear", "fc2", [a, "w2"], outputs="y")
    g.output("y")
    rng = np.random.default_rng(1)
    arrays = {n: rng.standard_normal(s).astype(np.float32) * 0.1
              for n, s in {"x": (8, 64), "w1": (128, 64), "b1": (128,), "w2": (16, 128)}.items()}
    want = ctx.run(g, arrays)["y"]
    weights = {n: ctx.from_numpy(v, device="cuda:0") for n, v in arrays.items() if n != "x"}
    try:
        got = ctx.run(g, {"x": arrays["x"], **weights})["y"]
    finally:
        for t in weights.values():
            t.close()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
