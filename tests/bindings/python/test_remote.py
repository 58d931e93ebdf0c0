"""Against a real `genie serve --port 0` (another process): the Python API in
remote mode, the captured GPT-2 block and the lazy tensor."""

import os
import subprocess
import sys

import numpy as np
import pytest

import genie


@pytest.fixture
def rctx(serve):
    with genie.Context(f"127.0.0.1:{serve}", use_env=False, timeout_ms=30000) as c:
        yield c


def test_remote_context_tensors_and_errors(rctx):
    assert not rctx.embedded
    t = rctx.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4))
    assert t.device.startswith("remote:")
    np.testing.assert_array_equal(t.read(), np.arange(12).reshape(3, 4))
    with pytest.raises(genie.SizeMismatchError):
        t.write(b"\0" * 100)
    with pytest.raises(genie.DtypeMismatchError):
        t.write(np.zeros((3, 4), np.int64))
    assert rctx.server_info()["tensors"] >= 1
    t.close()
    with pytest.raises(genie.InvalidHandleError):
        t.read()


def test_captured_block_runs_remote(rctx):
    torch = pytest.importorskip("torch")
    from models import Block, seeded
    from test_torch import assert_matches
    import genie.torch as gt

    torch.manual_seed(3)
    block = seeded(Block(n_embd=128, n_head=4, block_size=64), seed=3)
    x = torch.randn(1, 64, 128)
    with gt.capture(block, x, context=rctx, phase="prefill", modality="text") as cap:
        # The weights live on the server.
        assert all(t.device.startswith("remote:") for t in cap.weights.values())
        with torch.no_grad():
            assert_matches(cap(x), block(x))
            x2 = torch.randn(1, 64, 128)
            assert_matches(cap(x2), block(x2))
        assert rctx.server_info()["graphs_executed"] >= 2


def test_lazy_tensor_remote(rctx):
    torch = pytest.importorskip("torch")
    import genie.torch as gt
    from test_torch import assert_matches

    xr, w = torch.randn(8, 32), torch.randn(32, 16)
    x = gt.remote(xr, context=rctx)
    y = torch.softmax(x @ w, dim=-1) * 2
    assert_matches(y.cpu(), torch.softmax(xr @ w, -1) * 2)


def test_sample_remote_matches_embedded(serve):
    sample = os.path.join(os.path.dirname(__file__), "..", "..", "..", "samples", "python", "mlp.py")
    env = dict(os.environ)
    env.pop("GENIE_MASTER_ADDR", None)
    emb = subprocess.run([sys.executable, sample], env=env, check=True, capture_output=True, text=True)
    env.update(GENIE_MASTER_ADDR="127.0.0.1", GENIE_MASTER_PORT=str(serve))
    rem = subprocess.run([sys.executable, sample], env=env, check=True, capture_output=True, text=True)
    assert "mode embedded" in emb.stdout and "mode remote" in rem.stdout
    line = [ln for ln in emb.stdout.splitlines() if ln.startswith("checksum y = ")]
    assert line and line == [ln for ln in rem.stdout.splitlines() if ln.startswith("checksum y = ")]
    assert float(line[0].split()[-1]) != 0.0


def test_tls_settings_reach_the_library(tmp_path):
    missing = str(tmp_path / "server.pem")
    with pytest.raises(genie.InvalidArgumentError) as e:
        genie.Server(port=0, use_env=False, tls_cert=missing)  # no key
    assert "private key" in e.value.detail
    # The files are read when the server starts: the missing one is named.
    with pytest.raises(genie.InvalidArgumentError) as e:
        genie.Server(port=0, use_env=False, tls_cert=missing, tls_key=missing,
                     tls_ca=str(tmp_path / "ca.pem"))
    assert "server.pem" in e.value.detail


def test_blind_mode_matches_semantic(serve):
    """Context(semantics=False): the same results, weights sent every run,
    one remote call per operation (genie_config_set_semantics)."""
    g = genie.Graph("blind")
    g.input("x", [4, 16])
    g.input("w", [16, 32], role="weight")
    g.node("matmul", "mm", ["x", "w"], outputs="h")
    g.node("relu", "act", ["h"], outputs="y")
    g.output("y")
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(4, 16)
    w = np.linspace(-2, 2, 512, dtype=np.float32).reshape(16, 32)
    out = {}
    for semantics in (True, False):
        with genie.Context(f"127.0.0.1:{serve}", use_env=False, semantics=semantics) as c:
            wt = c.from_numpy(w)
            assert wt.device == "remote:0"
            before = c.server_info()["client"]
            out[semantics] = c.run(g, {"x": x, "w": wt})["y"]
            after = c.server_info()["client"]
            assert after["semantics"] is semantics
            sent = after["tensor_bytes_written"] - before["tensor_bytes_written"]
            calls = after["graph_submits_full"] - before["graph_submits_full"]
            # Blind: x and w travel with the run, each of the two operations
            # is a call. Semantic: one call, x (small, in host memory) inside it.
            assert (sent, calls) == ((x.nbytes + w.nbytes, 2) if not semantics else (0, 1))
            if semantics:
                assert after["graph_bytes_sent"] - before["graph_bytes_sent"] > x.nbytes
    np.testing.assert_array_equal(out[True], out[False])
    np.testing.assert_allclose(out[True], np.maximum(x @ w, 0), rtol=1e-5, atol=1e-5)
