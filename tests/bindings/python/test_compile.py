"""torch.compile(model, backend="genie") and genie.torch.capture on a
Llama-style model, embedded and against a real `genie serve`, matching
eager; module paths reach the graph; recompiles on a new shape; unsupported
ops named."""

import json

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

import genie  # noqa: E402
import genie.torch as gt  # noqa: E402
from llama import llama  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(params=["embedded", "remote"])
def context(request, serve):
    ctx = genie.Context(use_env=False) if request.param == "embedded" else \
        genie.Context("127.0.0.1", serve, use_env=False)
    with ctx:
        yield ctx


def compiled(model, ctx):
    torch._dynamo.reset()
    return torch.compile(model, backend="genie", options={"context": ctx})


def test_compile_llama_matches_eager(context):
    model = llama(seed=4)
    for T in (10, 6):  # a new shape: Dynamo recompiles (or goes dynamic); both run
        idx = torch.randint(0, 96, (2, T))
        pos = torch.arange(T).unsqueeze(0).expand(2, T)
        with torch.no_grad():
            ref, ref_past = model(idx, pos)
        cm = compiled(model, context) if T == 10 else cm  # noqa: F821
        logits, past = cm(idx, pos)
        torch.testing.assert_close(logits, ref, rtol=1e-3, atol=1e-4)
        torch.testing.assert_close(past[0][1], ref_past[0][1], rtol=1e-3, atol=1e-4)


def test_compile_annotates_module_paths_and_keeps_weights_resident(context):
    model = llama(seed=5)
    backend = gt.compile.genie_backend
    seen = []

    def spy(gm, example_inputs, **kw):
        fn = backend(gm, example_inputs, **kw)
        seen.append(fn)
        return fn

    torch._dynamo.reset()
    cm = torch.compile(model, backend=spy, options={"context": context})
    idx = torch.randint(0, 96, (1, 8))
    pos = torch.arange(8).unsqueeze(0)
    cm(idx, pos)
    v = next(iter(seen[0]._variants.values()))
    graph = json.loads(v.graph.to_json())
    notes = [n.get("annotations", {}) for n in graph["nodes"]]
    modules = {a.get("module") for a in notes}
    assert "layers.1.self_attn" in modules and "layers.0.mlp.gate_proj" in modules, modules
    assert any(a.get("layer") == 1 for a in notes)
    assert "layers.0.mlp.gate_proj.weight" in seen[0]._weights
    w = seen[0]._weights["layers.0.mlp.gate_proj.weight"]
    cm(idx, pos)
    assert seen[0]._weights["layers.0.mlp.gate_proj.weight"] is w  # not uploaded again
    with torch.no_grad():  # a changed parameter is uploaded again before the next call
        model.lm_head.weight.mul_(0.5)
        ref, _ = model(idx, pos)
    got, _ = cm(idx, pos)
    torch.testing.assert_close(got, ref, rtol=1e-3, atol=1e-4)


def test_compile_unsupported_op_is_named(context):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)

        def forward(self, x):
            return torch.cumsum(self.proj(x), dim=-1)

    cm = compiled(M(), context)
    with pytest.raises(Exception) as e:
        cm(torch.randn(2, 4))
    err = e.value
    while err is not None and not isinstance(err, gt.UnsupportedOpError):
        err = err.__cause__ or err.__context__
    assert err is not None, repr(e.value)
    assert "cumsum" in str(err)


def test_capture_llama_matches_eager(context):
    model = llama(seed=6)
    idx = torch.randint(0, 96, (1, 9))
    pos = torch.arange(9).unsqueeze(0)
    with torch.no_grad():
        ref, _ = model(idx, pos)
    with gt.capture(model, (idx, pos), context) as cap:
        logits, past = cap(idx, pos)
        graph = json.loads(cap.graph.to_json())
    torch.testing.assert_close(logits, ref, rtol=1e-3, atol=1e-4)
    assert any(n["op"] == "attention" for n in graph["nodes"])
