"""genie.torch.capture on whole models written the usual ways (models.py):
nanoGPT, a BERT encoder with padding masks, a ResNet with batch norm folded
for inference, an MLP-Mixer and torchvision's resnet18. Each matches torch
eager within 1e-4 relative; the graph is checked for what capture must do
with the model's idioms (constants folded, attention fused, tied weights)."""

import json

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

import genie  # noqa: E402
import genie.torch as gt  # noqa: E402
from models import MLPMixer, ResNet, bert_case, nanogpt_case, seeded  # noqa: E402
from test_torch import assert_matches  # noqa: E402

torch.set_num_threads(1)


def ops_of(cap):
    return [n["op"] for n in json.loads(cap.graph.to_json())["nodes"]]


def test_nanogpt(ctx):
    model, idx = nanogpt_case()
    with gt.capture(model, idx, context=ctx, phase="prefill", modality="text") as cap, torch.no_grad():
        logits, present = cap(idx)
        ref_logits, ref_present = model(idx)
        assert_matches(logits, ref_logits)
        assert len(present) == 2
        for (k, v), (rk, rv) in zip(present, ref_present):
            assert_matches(k, rk)
            assert_matches(v, rv)
        ops = ops_of(cap)
        # Causal attention from the mask buffer slice, fused; no arange or
        # mask work left in the graph (constants), two attentions.
        assert ops.count("attention") == 2 and "masked_fill" not in ops and "softmax" not in ops
        # The LM head shares the embedding matrix: one resident tensor.
        assert model.lm_head.weight is model.transformer.wte.weight
        assert "transformer.wte.weight" in cap.weights and "lm_head.weight" not in cap.weights
        roles = json.loads(cap.graph.to_json())["roles"]
        assert roles["idx"] == "input"
        # Another prompt length traces again.
        idx2 = torch.randint(0, 128, (1, 7))
        assert_matches(cap(idx2)[0], model(idx2)[0])
        # With a KV cache passed in (nested input structure).
        past = [(k[:1, :, :10], v[:1, :, :10]) for k, v in ref_present]
        step = torch.randint(0, 128, (1, 1))
        out, pres = cap(step, past)
        ref_out, ref_pres = model(step, past)
        assert_matches(out, ref_out)
        assert_matches(pres[1][0], ref_pres[1][0])


def test_bert_encoder_with_padding_mask(ctx):
    model, ids, mask = bert_case()
    with gt.capture(model, (ids, mask), context=ctx, modality="text") as cap, torch.no_grad():
        h, pooled = cap(ids, mask)
        ref_h, ref_pooled = model(ids, mask)
        assert_matches(h, ref_h)
        assert_matches(pooled, ref_pooled)
        # Another padding pattern, same shapes: same graph, new values.
        mask2 = torch.ones(3, 16, dtype=torch.long)
        mask2[0, 3:] = 0
        assert_matches(cap(ids, mask2)[0], model(ids, mask2)[0])
        assert len(cap._variants) == 1
        ops = ops_of(cap)
        # The additive padding mask goes into the fused attention node.
        assert ops.count("attention") == 2 and "softmax" not in ops


def test_resnet_batchnorm_folded(ctx):
    torch.manual_seed(2)
    model = seeded(ResNet(layers=(2, 1, 1)), seed=2)
    x = torch.randn(2, 3, 32, 32)
    with gt.capture(model, x, context=ctx, modality="vision") as cap, torch.no_grad():
        assert_matches(cap(x), model(x))
        ops = ops_of(cap)
        assert ops.count("conv2d") == 1 + 2 * 4 + 2  # stem, 4 blocks, 2 downsamples
        assert "max_pool2d" in ops and "adaptive_avg_pool2d" in ops
        # Each BatchNorm is a per-channel scale and shift (mul, add).
        assert ops.count("mul") == 11 and not any("batch" in o for o in ops)


def test_mlp_mixer(ctx):
    torch.manual_seed(3)
    model = seeded(MLPMixer(image=32, patch=8, channels=64, depth=2), seed=3)
    x = torch.randn(2, 3, 32, 32)
    with gt.capture(model, x, context=ctx, modality="vision") as cap, torch.no_grad():
        assert_matches(cap(x), model(x))
        assert "reduce_mean" in ops_of(cap)


def test_torchvision_resnet18(ctx):
    tv = pytest.importorskip("torchvision", reason="torchvision is not installed (scripts/python-env.sh installs it)")
    torch.manual_seed(4)
    model = seeded(tv.models.resnet18(num_classes=100), seed=4)
    x = torch.randn(1, 3, 64, 64)
    with gt.capture(model, x, context=ctx, modality="vision") as cap, torch.no_grad():
        assert_matches(cap(x), model(x))
        assert ops_of(cap).count("conv2d") == 20


def test_data_dependent_python_is_refused(ctx):
    class Branchy(nn.Module):
        def forward(self, x):
            if x.sum() > 0:  # control flow on a value: cannot be specialised
                return x * 2
            return x

    with pytest.raises(gt.UnsupportedOpError) as e:
        gt.capture(Branchy(), torch.randn(3), context=ctx)
    assert "__bool__" in e.value.detail

    class Writes(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("cache", torch.zeros(4, 3))

        def forward(self, x):
            self.cache[0] = x  # a traced value written into a buffer
            return self.cache * 1

    with pytest.raises(gt.UnsupportedOpError) as e:
        gt.capture(Writes(), torch.randn(3), context=ctx)
    assert "__setitem__" in e.value.detail

    class InPlaceView(nn.Module):
        def forward(self, x):
            y = x.view(-1)
            y.mul_(2)  # changes x through its view
            return x + 1

    with pytest.raises(gt.UnsupportedOpError) as e:
        gt.capture(InPlaceView(), torch.randn(2, 3), context=ctx)
    assert "view" in e.value.detail


def test_shape_idioms(ctx):
    class Idioms(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(8, 8)

        def forward(self, x):
            B, T, C = x.shape
            n = x.size(-1) // 2
            a, b = x.chunk(2, dim=-1)
            z = torch.zeros(B, T, n) + torch.ones(T, n) * 0.5 + torch.full((n,), 2.0)
            m = torch.tril(torch.ones(T, T)).bool()
            s = (a @ b.transpose(-1, -2)).masked_fill(~m, float("-inf")).softmax(-1)
            y = self.proj(torch.cat([s @ a, z], dim=-1).reshape(B * T, C)).view(B, T, -1)
            y = y.mT.contiguous().mT + x.new_zeros(x.shape[-1:])
            y = y.reshape(B * T, -1).T.T.view(B, T, C)
            y = y * (len(x) + x.dim())
            return y.relu_()

    m = seeded(Idioms())
    x = torch.randn(2, 5, 8)
    with gt.capture(m, x, context=ctx) as cap, torch.no_grad():
        assert_matches(cap(x), m(x))
