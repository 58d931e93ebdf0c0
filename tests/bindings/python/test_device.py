"""The remote_accelerator device (PrivateUse1): factories, moves, printing,
nn.Module.to, lazy graphs, errors; a Llama-style model embedded and against
a real `genie serve`; greedy generation with the KV cache resident on the
server."""

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

import genie  # noqa: E402
import genie.torch as gt  # noqa: E402
from genie.torch.device import RemoteTensor  # noqa: E402
from llama import greedy, llama  # noqa: E402

torch.set_num_threads(1)
DEV = "remote_accelerator:0"


@pytest.fixture(params=["embedded", "remote"])
def where(request, serve, monkeypatch):
    monkeypatch.delenv("GENIE_MASTER_ADDR", raising=False)
    genie.shutdown()
    if request.param == "embedded":
        genie.init()
    else:
        genie.init(master_addr="127.0.0.1", master_port=serve)
    yield request.param
    genie.shutdown()


def test_before_init_is_a_clear_error():
    genie.shutdown()
    gt.device.register()
    with pytest.raises(genie.StateError) as e:
        torch.randn(3, device=DEV)
    assert "genie.init" in e.value.detail
    assert torch.remote_accelerator.device_count() == 0


def test_tensors_on_the_device(where):
    torch.manual_seed(0)
    x = torch.randn(64, 64, device=DEV)
    torch.manual_seed(0)
    ref = torch.randn(64, 64)  # the host's generator: the same values
    assert isinstance(x, RemoteTensor) and x.device.type == "remote_accelerator"
    assert x.shape == (64, 64) and x.dtype == torch.float32
    y = torch.relu(x @ x + 1.0).sum(-1)
    assert y._gnode.op is not None  # recorded, not run
    torch.testing.assert_close(y.cpu(), torch.relu(ref @ ref + 1.0).sum(-1), rtol=1e-4, atol=1e-4)
    assert y._gnode.source is not None  # now resident
    assert np.allclose(y.numpy(), y.cpu().numpy())
    assert y[0].item() == pytest.approx(float(y.cpu()[0]), rel=1e-6)
    assert len(y.tolist()) == 64
    text = repr(torch.ones(2, device=DEV))
    assert text == "tensor([1., 1.], device='remote_accelerator:0')"
    assert "remote_accelerator" in str(torch.zeros(3, device=DEV) + 2)
    z = torch.arange(6, device=DEV).reshape(2, 3)
    assert z.cpu().tolist() == [[0, 1, 2], [3, 4, 5]]
    c = torch.tensor([1.0, -2.0]).to(DEV)
    assert isinstance(c, RemoteTensor) and torch.abs(c).cpu().tolist() == [1.0, 2.0]
    assert torch.zeros_like(c).cpu().tolist() == [0.0, 0.0]
    assert c.to(torch.float16).cpu().dtype == torch.float16
    assert (c > 0).cpu().tolist() == [True, False]
    a = torch.ones(3, device=DEV)
    a.add_(2)  # in place: rebinds a
    assert a.cpu().tolist() == [3.0, 3.0, 3.0]
    assert torch.remote_accelerator.device_count() >= 1
    torch.remote_accelerator.synchronize()


def test_module_to_device_and_parameters_stay(where):
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).eval()
    x = torch.randn(5, 16)
    ref = model(x)
    m = copy.deepcopy(model).to(DEV)
    for p in m.parameters():
        assert isinstance(p, RemoteTensor) and isinstance(p, nn.Parameter) and p.requires_grad
    out = m(x.to(DEV))
    torch.testing.assert_close(out.cpu(), ref.detach(), rtol=1e-4, atol=1e-5)
    w = m[0].weight._gnode.source
    assert w is not None  # uploaded once, resident
    out2 = m(x.to(DEV))
    torch.testing.assert_close(out2.cpu(), ref.detach(), rtol=1e-4, atol=1e-5)
    assert m[0].weight._gnode.source is w
    m2 = copy.deepcopy(model).remote_accelerator()
    assert isinstance(m2[0].weight, RemoteTensor)
    with pytest.raises(genie.UnsupportedError) as e:
        out.sum().backward()
    assert "inference" in e.value.detail


def test_unsupported_op_names_op_and_module(where):
    class Odd(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Linear(4, 4)

        def forward(self, x):
            return torch.cumsum(self.inner(x), dim=-1)

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = Odd()

        def forward(self, x):
            return self.body(x)

    m = Outer().to(DEV)
    with pytest.raises(gt.UnsupportedOpError) as e:
        m(torch.randn(2, 4).to(DEV))
    assert "cumsum" in str(e.value) and e.value.module_path == "body"
    with pytest.raises(gt.UnsupportedOpError):
        x = torch.ones(3, device=DEV)
        x[0] = 2.0


def test_bad_device_index(where):
    with pytest.raises(genie.GenieError) as e:
        torch.randn(2, device="remote_accelerator:7")
    assert "remote_accelerator:7" in str(e.value)


def test_llama_on_the_device_matches_eager(where):
    model = llama(seed=1)
    idx = torch.randint(0, 96, (1, 12))
    pos = torch.arange(12).unsqueeze(0)
    with torch.no_grad():
        ref, ref_past = model(idx, pos)
    m = copy.deepcopy(model).to(DEV)
    logits, past = m(idx.to(DEV), pos.to(DEV))
    torch.testing.assert_close(logits.cpu(), ref, rtol=1e-3, atol=1e-4)
    torch.testing.assert_close(past[1][0].cpu(), ref_past[1][0], rtol=1e-3, atol=1e-4)


def test_generation_keeps_the_kv_cache_on_the_server(serve, monkeypatch):
    monkeypatch.delenv("GENIE_MASTER_ADDR", raising=False)
    genie.shutdown()
    genie.init(master_addr="127.0.0.1", master_port=serve)
    try:
        model = llama(seed=2)
        idx = torch.randint(0, 96, (1, 7))
        with torch.no_grad():
            ref, _ = greedy(model, idx, 10)
        assert len(set(ref[0, 7:].tolist())) > 2
        m = copy.deepcopy(model).to(DEV)
        ctx = genie.get_context()
        held = []
        tokens = idx.clone()
        logits, past = m(idx.to(DEV), torch.arange(7).unsqueeze(0).to(DEV))
        for step in range(10):
            nxt = logits[:, -1, :].cpu().argmax(-1, keepdim=True)
            tokens = torch.cat([tokens, nxt], dim=1)
            # The cache is resident where it was computed: nothing of it is on the host.
            for k, v in past:
                assert k._gnode.source is not None and k._gnode.host is None
                assert "remote" in k._gnode.source.device
            held.append(ctx.server_info()["tensor_bytes"])
            if step == 9:
                break
            p = torch.tensor([[tokens.shape[1] - 1]])
            logits, past = m(nxt.to(DEV), p.to(DEV), past)
        assert tokens.tolist() == ref.tolist()
        # One position more of k and v, per layer, each step (f32), while the
        # previous step's cache is freed: the server holds one cache. (The
        # first step also drops the prompt's logits and inputs.)
        step_bytes = 2 * 2 * 64 * 4
        growth = [b - a for a, b in zip(held, held[1:])]
        assert all(g == step_bytes for g in growth[1:]), growth
    finally:
        genie.shutdown()
