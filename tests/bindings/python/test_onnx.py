"""ONNX import (genie_graph_import_onnx through Context.import_onnx): the
capture tests' models exported with torch.onnx.export (static shapes) run in
Genie within 1e-4 relative of torch eager; initializers are resident weights
(role weight), module paths come from the exporter's node names; a node Genie
cannot map is named in the error; `genie run MODEL.onnx` runs a model."""

import io
import json
import re
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

import genie  # noqa: E402
from models import MLPMixer, ResNet, bert_case, nanogpt_case, seeded  # noqa: E402
from test_torch import assert_matches  # noqa: E402

torch.set_num_threads(1)


def export(model, args, input_names, output_names=None, opset=17):
    f = io.BytesIO()
    torch.onnx.export(model, args, f, input_names=input_names, output_names=output_names,
                      opset_version=opset, do_constant_folding=True, dynamo=False)
    return f.getvalue()


def flat(x):
    if isinstance(x, (tuple, list)):
        return [t for item in x for t in flat(item)]
    return [x]


def check_model(ctx, model, args, input_names, output_names=None, opset=17):
    """Exports, imports and runs `model`; compares every output with eager.
    Returns the imported model's graph JSON as a dict. With python3-onnx
    installed, the export is checked by ONNX's own checker first and handed
    over as an onnx.ModelProto."""
    data = export(model, args, input_names, output_names, opset)
    try:
        import onnx
    except ImportError:
        onnx = None
    if onnx is not None:
        data = onnx.load_from_string(data)
        onnx.checker.check_model(data)
    with torch.no_grad():
        refs = flat(model(*args))
    with ctx.import_onnx(data) as m:
        assert m.inputs == list(input_names)
        graph = json.loads(m.graph.to_json())
        for name in m.weights:
            assert graph["roles"][name] == "weight"
        out = m.run({n: a.numpy() for n, a in zip(input_names, args)})
        assert len(out) == len(refs)
        for got, ref in zip(out.values(), refs):
            assert_matches(torch.from_numpy(got), ref)
        # A second run reuses the resident weights.
        again = m.run({n: a.numpy() for n, a in zip(input_names, args)})
        assert all(np.array_equal(a, b) for a, b in zip(out.values(), again.values()))
    return graph


def ops_of(graph):
    return [n["op"] for n in graph["nodes"]]


@pytest.mark.parametrize("opset", [13, 17])
def test_nanogpt(ctx, opset):
    model, idx = nanogpt_case()
    g = check_model(ctx, model, (idx,), ["idx"], opset=opset)
    ops = ops_of(g)
    # The position arange, its embedding, the mask slices and the shape
    # arithmetic are constants folded at import: one embedding (the tokens)
    # is left. The exact GELU, written with Erf, is recognised.
    assert ops.count("embedding") == 1 and ops.count("softmax") == 2 and ops.count("gelu") == 2
    # LayerNormalization exists from opset 17; before, it is spelled out.
    assert ops.count("layer_norm") == (5 if opset >= 17 else 0)
    # Module paths and layers from torch.onnx.export's scoped node names.
    ann = [n.get("annotations", {}) for n in g["nodes"]]
    assert {"module": "h.1.attn.c_attn", "layer": 1} in ann


def test_bert_encoder_with_padding_mask(ctx):
    model, ids, mask = bert_case()
    g = check_model(ctx, model, (ids, mask), ["input_ids", "attention_mask"], ["hidden", "pooled"])
    assert ops_of(g).count("gelu") == 2  # the Erf form of exact GELU, recognised


def test_resnet_batchnorm(ctx):
    torch.manual_seed(2)
    model = seeded(ResNet(layers=(2, 1, 1)), seed=2)
    g = check_model(ctx, model, (torch.randn(2, 3, 32, 32),), ["x"], ["logits"])
    ops = ops_of(g)
    # torch.onnx.export folds eval-mode batch norm into the convolutions.
    assert ops.count("conv2d") == 11 and "max_pool2d" in ops and "adaptive_avg_pool2d" in ops


def test_mlp_mixer(ctx):
    torch.manual_seed(3)
    model = seeded(MLPMixer(image=32, patch=8, channels=64, depth=2), seed=3)
    check_model(ctx, model, (torch.randn(2, 3, 32, 32),), ["x"])


def test_torchvision_resnet18(ctx):
    tv = pytest.importorskip("torchvision", reason="torchvision is not installed (scripts/python-env.sh installs it)")
    torch.manual_seed(4)
    model = seeded(tv.models.resnet18(num_classes=100), seed=4)
    g = check_model(ctx, model, (torch.randn(1, 3, 64, 64),), ["x"])
    assert ops_of(g).count("conv2d") == 20


def test_unsupported_node_is_named(ctx):
    class Cumulative(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return torch.cumsum(self.fc(x), dim=1)

    data = export(Cumulative().eval(), (torch.randn(2, 4),), ["x"])
    with pytest.raises(genie.UnsupportedError) as e:
        ctx.import_onnx(data)
    assert "CumSum" in e.value.detail and "/CumSum" in e.value.detail


def test_malformed_bytes(ctx):
    data = export(seeded(nn.Linear(4, 3)), (torch.randn(2, 4),), ["x"])
    with pytest.raises(genie.ParseError):
        ctx.import_onnx(data[: len(data) // 2])
    with pytest.raises(genie.ParseError):
        ctx.import_onnx(b"\xff" * 16)


def test_symbolic_dimensions_refused(ctx):
    f = io.BytesIO()
    torch.onnx.export(seeded(nn.Linear(4, 3)), (torch.randn(2, 4),), f, input_names=["x"],
                      dynamic_axes={"x": {0: "batch"}}, dynamo=False)
    with pytest.raises(genie.UnsupportedError) as e:
        ctx.import_onnx(f.getvalue())
    assert "symbolic dimension 'batch'" in e.value.detail


def test_remote_weights_resident_on_server(serve):
    torch.manual_seed(5)
    model = seeded(ResNet(layers=(1, 1, 1)), seed=5)
    x = torch.randn(1, 3, 32, 32)
    data = export(model, (x,), ["x"])
    with genie.Context("127.0.0.1", serve, use_env=False) as ctx, ctx.import_onnx(data) as m:
        assert all(t.device.startswith("remote") for t in m.weights.values())
        weight_bytes = sum(t.nbytes for t in m.weights.values())
        info = ctx.server_info()
        assert info["tensor_bytes"] >= weight_bytes
        out = m.run({"x": x.numpy()})
        # The weights crossed once, at import: a submission carries the
        # graph and references to them, not their bytes.
        sent = ctx.server_info()["client"]["graph_bytes_sent"] - info["client"]["graph_bytes_sent"]
        assert 0 < sent < weight_bytes / 4
        with torch.no_grad():
            assert_matches(torch.from_numpy(next(iter(out.values()))), model(x))


def test_genie_run_cli(genie_bin, tmp_path):
    model = seeded(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)))
    path = tmp_path / "mlp.onnx"
    path.write_bytes(export(model, (torch.randn(3, 8),), ["x"], ["y"]))
    r = subprocess.run([genie_bin, "run", str(path), "--repeat", "2"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^model .*mlp\.onnx: \d+ nodes, 1 input .*4 weights \(\d+ bytes, resident\), 1 output$",
                     r.stdout, re.M), r.stdout
    assert "output y shape [3, 4] dtype f32" in r.stdout
    (tmp_path / "bad.onnx").write_bytes(path.read_bytes()[:100])
    r = subprocess.run([genie_bin, "run", str(tmp_path / "bad.onnx")], capture_output=True, text=True)
    assert r.returncode == 1 and "GENIE_ERR_PARSE" in r.stderr


def test_import_from_path(ctx, tmp_path):
    model = seeded(nn.Linear(4, 3))
    x = torch.randn(2, 4)
    path = tmp_path / "linear.onnx"
    path.write_bytes(export(model, (x,), ["x"], ["y"]))
    for p in (path, str(path)):
        with ctx.import_onnx(p) as m:
            assert m.inputs == ["x"] and m.outputs == ["y"] and len(m.weights) == 2
            with torch.no_grad():
                assert_matches(torch.from_numpy(m.run({"x": x.numpy()})["y"]), model(x))
