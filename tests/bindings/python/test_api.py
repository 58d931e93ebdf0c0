"""The Python API over genie.h: contexts, tensors, graphs, futures."""

import json
import subprocess
import sys
import threading

import numpy as np
import pytest

import genie
from genie import seed


def mlp_graph(name="mlp"):
    g = genie.Graph(name)
    g.input("x", [4, 64], role="input")
    g.input("w1", [64, 128], role="weight")
    g.input("b1", [128], role="weight")
    mm = g.node("matmul", "fc1", ["x", "w1"], phase="forward", module="fc1", layer=0)
    h = g.node("add", "fc1.bias", [mm, "b1"], phase="forward", module="fc1", layer=0)
    y = g.node("relu", "act", [h], outputs="y", phase="forward", module="act", layer=0)
    g.output(y)
    return g


def test_version():
    assert genie.__version__ == genie.version()
    assert genie.ABI_VERSION == genie.capi.genie_abi_version()
    assert [int(p) for p in genie.version().split(".")] >= [0, 1, 0]


def test_context_embedded(ctx):
    assert ctx.embedded
    assert ctx.connected is True  # embedded: nothing to lose
    assert ctx.node_id
    assert "embedded" in repr(ctx)
    with pytest.raises(genie.UnsupportedError) as e:
        ctx.server_info()
    assert e.value.code == genie.capi.GENIE_ERR_UNSUPPORTED
    assert ctx.lost_tensors() == {"server": None, "address": None, "session": "embedded", "tensors": []}


@pytest.mark.parametrize("dtype,npd", [("f32", np.float32), ("f16", np.float16), ("i32", np.int32),
                                       ("i64", np.int64), ("bool", np.bool_), ("bf16", np.uint16)])
def test_tensor_roundtrip(ctx, dtype, npd):
    a = (np.arange(24).reshape(2, 3, 4) % 7).astype(npd)
    with ctx.from_numpy(a) if dtype != "bf16" else ctx.tensor([2, 3, 4], "bf16") as t:
        if dtype == "bf16":
            t.write(a)
        assert t.shape == (2, 3, 4) and t.dtype == dtype
        assert t.nbytes == a.nbytes
        assert t.device == "cpu:0"
        b = t.read()
        assert b.dtype == npd and b.shape == a.shape
        np.testing.assert_array_equal(a, b)


def test_scalar_tensor(ctx):
    # A scalar: shape () (ndim 0), one element.
    with ctx.tensor([], "f32") as t:
        assert t.shape == () and t.nbytes == 4
    with ctx.from_numpy(np.float32(4.5)) as t:
        assert t.shape == ()
        b = t.read()
        assert b.shape == () and b == np.float32(4.5)


def test_tensor_semantics(ctx):
    with ctx.tensor([4], "f16") as t:
        assert t.semantics == ("unknown", "unspecified", -1)
        t.set_semantics("decode", "kv_cache", 3)
        assert t.semantics == ("decode", "kv_cache", 3)
        with pytest.raises(genie.InvalidArgumentError):
            t.set_semantics("decode", "bogus", 3)
        with pytest.raises(genie.InvalidArgumentError) as e:
            t.set_semantics("decode", genie.capi.GENIE_NODE_ROLE_SERVER, 3)
        assert "genie_tensor_role_t" in e.value.detail
        with pytest.raises(genie.InvalidArgumentError):
            t.set_semantics("prefill", "weight", 65535)
        assert t.semantics == ("decode", "kv_cache", 3)
        t.set_semantics()
        assert t.semantics == ("unknown", "unspecified", -1)


def test_tensor_read_into_buffer_and_partial_write(ctx):
    t = ctx.tensor([8], "f32")
    out = np.full(8, 7, np.float32)
    assert t.read(out) is out  # straight into the caller's array
    np.testing.assert_array_equal(out, 0)
    t.write(np.array([1, 2], np.float32), offset=8)  # bytes 8..16
    np.testing.assert_array_equal(t.read(), [0, 0, 1, 2, 0, 0, 0, 0])
    t.write(memoryview(np.ones(8, np.float32)).cast("B"))  # any buffer, as raw bytes
    np.testing.assert_array_equal(np.asarray(t), 1)
    # A non-contiguous array is written by value.
    m = np.arange(16, dtype=np.float32).reshape(2, 8)[:, ::2]
    t2 = ctx.tensor([2, 4])
    t2.write(m)
    np.testing.assert_array_equal(t2.read(), m)


def test_graph_builder_and_json(ctx):
    g = mlp_graph()
    g.validate()
    assert g.num_nodes == 3
    assert g.nodes == [("fc1", "matmul"), ("fc1.bias", "add"), ("act", "relu")]
    assert g.nodes[2].name == "act" and g.nodes[2].op == "relu"
    assert g.inputs == ["x", "w1", "b1"]
    assert g.outputs == ["y"]
    assert g.value_info("y") == ("f32", (4, 128))
    doc = json.loads(g.to_json())
    fc1 = next(n for n in doc["nodes"] if n["name"] == "fc1")
    assert fc1["annotations"]["module"] == "fc1"
    assert fc1["annotations"]["phase"] == "forward"
    assert fc1["annotations"]["layer"] == 0
    g2 = genie.Graph.from_json(g.to_json())
    assert g2.hash == g.hash
    assert g2.to_json() == g.to_json()
    # attributes of every Python type
    g3 = genie.Graph()
    g3.input("x", [2, 3, 4])
    g3.node("softmax", "sm", ["x"], attrs={"axis": 1})
    g3.node("reshape", "rs", ["sm.out"], attrs={"shape": (4, 6)})
    g3.node("gelu", "ge", ["rs.out"], attrs={"approximate": "tanh"})
    g3.node("dropout", "do", ["ge.out"], attrs={"p": 0.25})
    g3.output("do.out")
    g3.validate()
    attrs = {n["name"]: n.get("attrs") for n in json.loads(g3.to_json())["nodes"]}
    assert attrs["rs"]["shape"] == {"ints": [4, 6]}


def test_submit_and_results(ctx):
    g = mlp_graph()
    x = seed.values("x", [4, 64])
    w1 = seed.values("w1", [64, 128])
    b1 = seed.values("b1", [128])
    w1t, b1t = ctx.from_numpy(w1), ctx.from_numpy(b1)  # resident
    expect = np.maximum(x @ w1 + b1, 0)
    out = ctx.run(g, {"x": x, "w1": w1t, "b1": b1t})
    np.testing.assert_allclose(out["y"], expect, rtol=1e-5, atol=1e-6)
    with ctx.submit(g, {"x": x, "w1": w1t, "b1": b1t}) as fut:
        fut.wait()
        assert fut.done()
        assert fut.exec_ns > 0
        (y,) = fut.result()
        with y:
            assert y.shape == (4, 128)
            np.testing.assert_allclose(y.numpy(), expect, rtol=1e-5, atol=1e-6)
        with fut.output("y") as y2:
            np.testing.assert_allclose(y2.numpy(), expect, rtol=1e-5, atol=1e-6)
        with pytest.raises(genie.NotFoundError) as e:
            fut.output("nope")
        assert e.value.code == genie.capi.GENIE_ERR_NOT_FOUND and "nope" in e.value.detail
        with pytest.raises(genie.NotFoundError):
            fut.output(1)


def test_callbacks_take_the_gil(ctx):
    g = mlp_graph()
    feeds = {"x": np.ones((4, 64), np.float32), "w1": np.ones((64, 128), np.float32),
             "b1": np.zeros(128, np.float32)}
    done = threading.Event()
    seen = []

    fut = ctx.submit(g, feeds)

    def on_done(f):
        seen.append((f is fut, f.done(), threading.get_ident()))
        with f.output(0) as t:  # allowed in a callback
            seen.append(float(t.read()[0, 0]))
        done.set()

    fut.add_done_callback(on_done)
    assert done.wait(30)
    assert seen[0][0] and seen[0][1]
    assert seen[1] == 64.0
    with pytest.raises(genie.InvalidArgumentError):  # one callback per future
        fut.add_done_callback(on_done)
    fut.close()
    # Already complete: runs at once, on this thread.
    with ctx.submit(g, feeds) as f2:
        f2.wait()
        here = []
        f2.add_done_callback(lambda f: here.append(threading.get_ident()))
        assert here == [threading.get_ident()]


def test_callback_exception_does_not_crash(ctx, monkeypatch):
    g = mlp_graph()
    feeds = {"x": np.ones((4, 64), np.float32), "w1": np.ones((64, 128), np.float32),
             "b1": np.zeros(128, np.float32)}
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u.exc_type))
    with ctx.submit(g, feeds) as f:
        f.wait()
        f.add_done_callback(lambda f: 1 / 0)
    assert reported == [ZeroDivisionError]


def test_many_threads_submit(ctx):
    g = mlp_graph()
    w1 = ctx.from_numpy(np.ones((64, 128), np.float32))
    b1 = ctx.from_numpy(np.zeros(128, np.float32))
    errors_seen = []

    def work(i):
        try:
            for _ in range(5):
                out = ctx.run(g, {"x": np.full((4, 64), i, np.float32), "w1": w1, "b1": b1})
                assert out["y"][0, 0] == 64.0 * i
        except Exception as e:  # pragma: no cover - reported below
            errors_seen.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors_seen


def test_seed_matches_c_generator(genie_bin, tmp_path):
    """genie.seed reimplements include/genie_seed.h exactly: `genie run`
    seeds its inputs with it and prints the output's checksum."""
    assert seed.fnv1a64("") == 0xcbf29ce484222325
    assert seed.fnv1a64("a") == 0xaf63dc4c8601ec8c
    g = genie.Graph("seeded")
    g.input("h.0.attn.q", [3, 5, 7])
    g.input("ids", [11], "i64")
    g.input("flags", [9], "bool")
    g.input("half", [2, 6], "f16")
    g.node("neg", "n", ["h.0.attn.q"], outputs="q")
    g.node("abs", "a", ["ids"], outputs="i")
    g.node("cast", "c", ["flags"], outputs="f", attrs={"dtype": "i32"})
    g.node("cast", "h", ["half"], outputs="hf", attrs={"dtype": "f32"})
    g.output("q", "i", "f", "hf")
    path = tmp_path / "seeded.json"
    path.write_text(g.to_json())
    out = subprocess.run([genie_bin, "run", str(path)], check=True, capture_output=True,
                         text=True).stdout
    printed = {line.split()[1]: line.split()[2] for line in out.splitlines()
               if line.startswith("checksum ")}
    mine = {"q": -seed.checksum(seed.values("h.0.attn.q", [3, 5, 7])),
            "i": seed.checksum(seed.values("ids", [11], "i64")),
            "f": seed.checksum(seed.values("flags", [9], "bool")),
            "hf": seed.checksum(seed.values("half", [2, 6], "f16").astype(np.float32))}
    for name, value in mine.items():
        assert printed[name] == f"{value:.6g}", (name, printed, mine)


def test_settings_by_name():
    """Context(settings=...) and Server(server_settings=...) reach
    genie_config_set_int/_string and genie_server_config_set_*: checked by
    the library, and in force."""
    with pytest.raises(genie.InvalidArgumentError, match="below 1"):
        genie.Context(use_env=False, settings={"timeout_ms": -5})
    with pytest.raises(genie.InvalidArgumentError, match="'max_sessions' is a server's setting"):
        genie.Context(use_env=False, settings={"max_sessions": 4})
    with pytest.raises(genie.InvalidArgumentError, match="no_such_setting"):
        genie.Context(use_env=False, settings={"no_such_setting": 1})
    with pytest.raises(genie.InvalidArgumentError, match="bad name"):
        genie.Context(use_env=False, settings={"cluster": "bad name!"})
    with pytest.raises(TypeError, match="timeout_ms"):
        genie.Context(use_env=False, settings={"timeout_ms": 1.5})
    with pytest.raises(genie.InvalidArgumentError, match="not a setting of a server alone"):
        genie.Server(port=0, use_env=False, server_settings={"timeout_ms": 5})
    # A server's own setting in force: one session at most.
    with genie.Server(port=0, use_env=False, server_settings={"max_sessions": 1}) as srv:
        with genie.Context("127.0.0.1", srv.port, use_env=False,
                           settings={"timeout_ms": 10000, "graph_deltas": False}) as rc:
            assert rc.connected is True
            with pytest.raises(genie.ConnectionError, match="limit"):
                genie.Context("127.0.0.1", srv.port, use_env=False, timeout_ms=10000)


def test_in_process_server_and_remote_context():
    with genie.Server(port=0, use_env=False) as srv:
        assert srv.port > 0
        with genie.Context("127.0.0.1", srv.port, use_env=False, timeout_ms=20000) as rc:
            assert not rc.embedded
            assert rc.connected is True
            g = mlp_graph()
            w1 = rc.from_numpy(np.ones((64, 128), np.float32))
            assert w1.device.startswith("remote:")
            out = rc.run(g, {"x": np.ones((4, 64), np.float32), "w1": w1,
                             "b1": np.zeros(128, np.float32)})
            assert out["y"][3, 127] == 64.0
            info = rc.server_info()
            assert info["tensors"] >= 1
            lost = rc.lost_tensors()
            assert lost["session"] == "connected" and lost["tensors"] == [], lost
            w1.close()



def test_trace_start_stop(tmp_path):
    path = tmp_path / "trace.json"
    genie.trace_start(path)
    genie.trace_start(path)  # the same path again does nothing
    with pytest.raises(genie.InvalidArgumentError):
        genie.trace_start(tmp_path / "other.json")
    genie.trace_stop()
    doc = json.loads(path.read_text())
    assert "traceEvents" in doc
    genie.trace_stop()  # nothing recorded: nothing to do
