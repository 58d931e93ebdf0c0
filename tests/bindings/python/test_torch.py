"""genie.torch: capture of ordinary nn.Modules and the lazy remote tensor.
Outputs must match torch eager within 1e-4 relative (f32)."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import genie  # noqa: E402
import genie.torch as gt  # noqa: E402
from models import GPT2Blocks, Block, SmallCNN, seeded  # noqa: E402

torch.set_num_threads(1)


def assert_matches(out, ref, rtol=1e-4):
    assert out.shape == ref.shape and out.dtype == ref.dtype
    err = (out - ref).abs().max().item()
    scale = ref.abs().max().item()
    assert err <= rtol * scale, f"max abs error {err} > {rtol} x max |ref| {scale}"
    torch.testing.assert_close(out, ref, rtol=rtol, atol=rtol * scale)


@pytest.fixture
def ctx():
    with genie.Context(use_env=False) as c:
        yield c


def test_gpt2_block_matches_eager(ctx):
    torch.manual_seed(0)
    block = seeded(Block(n_embd=128, n_head=4, block_size=64))
    x = torch.randn(1, 64, 128)
    with gt.capture(block, x, context=ctx, phase="prefill", modality="text") as cap:
        with torch.no_grad():
            assert_matches(cap(x), block(x))
            x2 = torch.randn(1, 64, 128)  # same shapes, new values
            assert_matches(cap(x2), block(x2))
            x3 = torch.randn(1, 17, 128)  # another sequence length: converted again
            assert_matches(cap(x3), block(x3))
        assert len(cap._variants) == 2
        # Parameters are resident once, shared by both variants; the causal
        # mask sliced from the buffer is folded per sequence length.
        assert set(cap.weights) == {n for n, _ in block.named_parameters()}


def test_gpt2_annotations(ctx):
    model = seeded(GPT2Blocks(n_layer=2, n_embd=64, n_head=4, block_size=32))
    x = torch.randn(1, 16, 64)
    with gt.capture(model, x, context=ctx, phase="prefill", modality="text") as cap:
        with torch.no_grad():
            assert_matches(cap(x), model(x))
        doc = json.loads(cap.graph.to_json())
        nodes = doc["nodes"]
        modules = {n["annotations"].get("module") for n in nodes}
        assert {"h.0.ln_1", "h.0.attn", "h.0.attn.c_attn", "h.1.mlp.c_fc", "h.1.mlp.gelu",
                "ln_f"} <= modules
        for n in nodes:
            a = n["annotations"]
            assert a["phase"] == "prefill" and a["modality"] == "text"
            if a["module"].startswith("h.1."):
                assert a["layer"] == 1
            if a["module"] == "ln_f":
                assert "layer" not in a
        # Parameters are graph inputs with role weight, bound to resident
        # tensors named by their qualified names; x is the only real input.
        roles = doc["roles"]
        assert roles["x"] == "input"
        for name, p in model.named_parameters():
            assert roles[name] == "weight", name
            assert name in cap.weights
        assert [roles[o] for o in cap.graph.outputs] == ["output"]
        ops = [n["op"] for n in nodes]
        assert {"linear", "layer_norm", "split", "reshape", "transpose", "gelu", "add"} <= set(ops)
        # The hand-written causal attention is one attention node per block.
        att = [n for n in nodes if n["op"] == "attention"]
        assert len(att) == 2 and "softmax" not in ops and "masked_fill" not in ops
        assert att[0]["attrs"]["causal"] == {"int": 1}
        assert att[0]["annotations"]["module"] == "h.0.attn"


def test_gpt2_block_unfused_and_masked_attention(ctx):
    torch.manual_seed(4)
    block = seeded(Block(n_embd=64, n_head=4, block_size=32), seed=4)
    x = torch.randn(1, 32, 64)
    with gt.capture(block, x, context=ctx, fuse_attention=False) as cap, torch.no_grad():
        assert_matches(cap(x), block(x))
        ops = [n["op"] for n in json.loads(cap.graph.to_json())["nodes"]]
        assert "attention" not in ops and {"masked_fill", "softmax", "matmul"} <= set(ops)
    # A mask that is not the causal one: fused with a mask input.
    with torch.no_grad():
        block.attn.bias.copy_(torch.rand(block.attn.bias.shape) > 0.5)
        block.attn.bias[..., 0] = 1  # every row attends somewhere
    with gt.capture(block, x, context=ctx) as cap, torch.no_grad():
        assert_matches(cap(x), block(x))
        att = [n for n in json.loads(cap.graph.to_json())["nodes"] if n["op"] == "attention"]
        assert len(att) == 1 and len(att[0]["inputs"]) == 4


def test_cnn_matches_eager(ctx):
    torch.manual_seed(1)
    cnn = seeded(SmallCNN(), seed=1)
    x = torch.randn(2, 3, 16, 16)
    with gt.capture(cnn, x, context=ctx, modality="vision") as cap:
        with torch.no_grad():
            assert_matches(cap(x), cnn(x))
        ops = [n["op"] for n in json.loads(cap.graph.to_json())["nodes"]]
        assert ops.count("conv2d") == 2 and "max_pool2d" in ops and "avg_pool2d" in ops
        assert "adaptive_avg_pool2d" in ops


def test_weights_are_a_snapshot_until_refreshed(ctx):
    lin = seeded(nn.Sequential(nn.Linear(8, 4), nn.ReLU()))
    x = torch.randn(3, 8)
    with gt.capture(lin, x, context=ctx) as cap:
        with torch.no_grad():
            before = lin(x)
            lin[0].bias.add_(1.0)
            assert_matches(cap(x), before)
            cap.refresh_weights()
            assert_matches(cap(x), lin(x))


def test_outputs_structure_and_functional_ops(ctx):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(16, 8) / 4)
            self.emb = nn.Embedding(10, 16)

        def forward(self, ids, x):
            e = self.emb(ids)                      # [4, 16]
            a, b = torch.chunk(e @ self.w, 2, dim=-1)
            h = F.silu(a) * torch.sigmoid(b) + torch.tanh(x)
            s = torch.cat([h, -h], dim=1).pow(2).mean(dim=-1, keepdim=True)
            z = torch.where(s > 0.01, s.sqrt(), torch.exp(s) - 1)
            return {"z": z, "parts": (h[:, 1:3], e.sum(0).unsqueeze(0))}

    m = seeded(M())
    ids = torch.tensor([1, 3, 5, 9])
    x = torch.randn(4, 4)
    with gt.capture(m, (ids, x), context=ctx) as cap:
        out = cap(ids, x)
        ref = m(ids, x)
        assert set(out) == {"z", "parts"}
        with torch.no_grad():
            assert_matches(out["z"], ref["z"])
            assert_matches(out["parts"][0], ref["parts"][0])
            assert_matches(out["parts"][1], ref["parts"][1])


def test_unsupported_op_names_op_and_module(ctx):
    class Inner(nn.Module):
        def forward(self, x):
            return torch.cumsum(x, dim=1)

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(4, 4), Inner())

        def forward(self, x):
            return self.enc(x)

    with pytest.raises(gt.UnsupportedOpError) as e:
        gt.capture(Outer(), torch.randn(2, 4), context=ctx)
    err = e.value
    assert isinstance(err, genie.UnsupportedError) and err.code == genie.capi.GENIE_ERR_UNSUPPORTED
    assert "torch.cumsum" in err.detail and "enc.1" in err.detail
    assert err.module_path == "enc.1"

    class Weird(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(4, 4)

        def forward(self, x):
            return self.rnn(x)[0]

    with pytest.raises(gt.UnsupportedOpError) as e:
        gt.capture(Weird(), torch.randn(3, 1, 4), context=ctx)
    assert "GRU" in e.value.detail and e.value.module_path == "rnn"


def test_batchnorm_in_training_mode_is_refused(ctx):
    cnn = SmallCNN().train()
    with pytest.raises(gt.UnsupportedOpError) as e:
        gt.capture(cnn, torch.randn(1, 3, 8, 8), context=ctx)
    assert "training mode" in e.value.detail and e.value.module_path == "features.1"


def test_lazy_remote_tensor(ctx):
    torch.manual_seed(2)
    xr, w, b = torch.randn(4, 64), torch.randn(64, 32) / 8, torch.randn(32)
    x = gt.remote(xr, context=ctx)
    y = torch.relu(x @ w + b)
    assert isinstance(y, gt.LazyTensor) and y.shape == (4, 32)
    q, k = (y * 2 - 1).softmax(-1).split(16, dim=1)
    r = (q + k).sum(-1)
    ref_q, ref_k = (torch.relu(xr @ w + b) * 2 - 1).softmax(-1).split(16, 1)
    assert_matches(r.cpu(), (ref_q + ref_k).sum(-1))
    lin = seeded(nn.Linear(64, 8))
    with torch.no_grad():
        o = F.gelu(lin(x))[1:3, ::2]
        ref = F.gelu(lin(xr))[1:3, ::2]
        assert_matches(o.cpu(), ref)
        assert_matches((o * 3).cpu(), ref * 3)  # continues from the resident result
    np.testing.assert_allclose(r.numpy(), r.cpu().numpy())
    with pytest.raises(gt.UnsupportedOpError) as e:
        torch.cumsum(x, 0)
    assert "torch.cumsum" in e.value.detail
