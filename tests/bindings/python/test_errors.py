"""Bad input raises the genie exception of its status with .code and
.detail, and never crashes the interpreter."""

import builtins

import numpy as np
import pytest

import genie
from genie import capi, errors


def codes_in_header():
    return {name: getattr(capi, name) for name in dir(capi) if name.startswith("GENIE_ERR_")}


def test_every_status_has_a_class():
    codes = codes_in_header()
    assert len(codes) == 22
    for name, code in codes.items():
        cls = errors.BY_CODE[code]
        assert cls.code == code and cls.name == name == capi.genie_status_str(code)
        e = genie.from_status(code, "why")
        assert type(e) is cls and isinstance(e, genie.GenieError)
        assert e.code == code and e.detail == "why" and name in str(e)
    assert genie.from_status(-999, "x").code == -999  # a code this version does not know


def test_families_and_builtin_bases():
    assert issubclass(genie.InvalidArgumentError, (genie.UsageError, ValueError))
    assert issubclass(genie.DtypeMismatchError, TypeError)
    assert issubclass(genie.NotFoundError, LookupError)
    assert issubclass(genie.TimeoutError, (genie.RemoteError, builtins.TimeoutError))
    assert issubclass(genie.ConnectionError, builtins.ConnectionError)
    assert issubclass(genie.ShutdownError, genie.StateError)
    assert issubclass(genie.OutOfMemoryError, (genie.ResourceError, MemoryError))


def test_wrong_dtype(ctx):
    t = ctx.tensor([2, 2], "f32")
    with pytest.raises(genie.DtypeMismatchError) as e:
        t.write(np.zeros((2, 2), np.float64))
    assert e.value.code == capi.GENIE_ERR_DTYPE_MISMATCH and "float64" in e.value.detail
    with pytest.raises(genie.DtypeMismatchError):
        t.read(np.zeros((2, 2), np.int32))
    with pytest.raises(genie.DtypeMismatchError):
        ctx.tensor([2], "f64")
    with pytest.raises(genie.DtypeMismatchError):
        ctx.from_numpy(np.zeros(3, np.complex64))
    # A graph input bound to a tensor of another dtype: the C library's check.
    g = genie.Graph()
    g.input("x", [2, 2], "f32")
    g.node("relu", "r", ["x"])
    g.output("r.out")
    with pytest.raises(genie.DtypeMismatchError) as e:
        ctx.submit(g, {"x": ctx.tensor([2, 2], "i32")})
    assert e.value.code == -4 and "x" in e.value.detail


def test_wrong_size_buffer(ctx):
    t = ctx.tensor([4, 4], "f32")
    with pytest.raises(genie.SizeMismatchError) as e:
        t.write(np.zeros(3, np.float32))
    assert e.value.code == capi.GENIE_ERR_SIZE_MISMATCH
    with pytest.raises(genie.SizeMismatchError) as e:
        t.write(b"\0" * 65)  # raw bytes: the C library's check
    assert "64 bytes" in e.value.detail
    with pytest.raises(genie.SizeMismatchError):
        t.write(np.zeros(4, np.float32), offset=56)
    with pytest.raises(genie.SizeMismatchError):
        t.read(np.zeros(15, np.float32))
    with pytest.raises(BufferError):  # read into a read-only buffer
        t.read(b"\0" * 64)
    g = genie.Graph()
    with pytest.raises(genie.SizeMismatchError):
        capi.genie_graph_add_constant(g._h, "c", capi.GENIE_DTYPE_F32, [4], b"\0" * 15)
    # A graph input bound to a tensor of another shape.
    g.input("x", [2, 2], "f32")
    g.node("relu", "r", ["x"])
    g.output("r.out")
    with pytest.raises(genie.ShapeMismatchError):
        ctx.submit(g, {"x": ctx.tensor([3, 2])})


def test_closed_handles(ctx):
    t = ctx.tensor([2])
    t.close()
    t.close()  # idempotent
    for call in (t.read, lambda: t.write(np.zeros(2, np.float32)), lambda: t.device):
        with pytest.raises(genie.InvalidHandleError) as e:
            call()
        assert e.value.code == capi.GENIE_ERR_INVALID_HANDLE and e.value.detail
    g = genie.Graph()
    g.close()
    with pytest.raises(genie.InvalidHandleError):
        g.input("x", [1])
    with pytest.raises(genie.InvalidHandleError):
        g.validate()
    with genie.Context(use_env=False) as c2:
        g = genie.Graph()
        g.input("x", [2])
        g.node("relu", "r", ["x"])
        g.output("r.out")
        x = c2.from_numpy(np.ones(2, np.float32))
        f = c2.submit(g, {"x": x})
        f.wait()
        f.close()
        with pytest.raises(genie.InvalidHandleError):
            f.wait()
        with pytest.raises(genie.InvalidHandleError):
            f.result()
    # The context is shut down: its tensors answer SHUTDOWN, then close fine.
    with pytest.raises(genie.ShutdownError) as e:
        x.read()
    assert e.value.code == capi.GENIE_ERR_SHUTDOWN
    x.close()
    with pytest.raises(genie.InvalidHandleError):
        c2.tensor([1])
    # A raw handle used after its destroy is refused even once new tensors
    # took its memory, and they are not touched.
    t = ctx.tensor([2])
    stale = t._h
    t.close()
    fresh = [ctx.from_numpy(np.full(2, i, np.float32)) for i in range(32)]
    with pytest.raises(genie.InvalidHandleError) as e:
        capi.genie_tensor_write(stale, 0, np.full(2, -1, np.float32))
    assert "destroyed" in e.value.detail
    for i, f2 in enumerate(fresh):
        np.testing.assert_array_equal(f2.read(), np.full(2, i, np.float32))
        f2.close()
    # A handle of the wrong kind, or no handle at all: SWIG checks the type.
    with pytest.raises(TypeError):
        capi.genie_tensor_read(ctx._h, 0, bytearray(4))
    with pytest.raises(TypeError):
        capi.genie_tensor_read(42, 0, bytearray(4))


def test_unknown_op_and_graph_errors(ctx):
    g = genie.Graph()
    g.input("x", [2, 3])
    with pytest.raises(genie.UnknownOpError) as e:
        g.node("matmull", "n", ["x", "x"])
    assert e.value.code == capi.GENIE_ERR_UNKNOWN_OP
    assert "matmull" in e.value.detail
    with pytest.raises(genie.InvalidAttributeError) as e:
        g.node("softmax", "s", ["x"], attrs={"axes": 1})
    assert e.value.code == -8
    with pytest.raises(genie.InvalidAttributeError):
        g.set_attr("s", "axis", object())
    g.node("matmul", "mm", ["x", "x"])
    g.output("mm.out")
    with pytest.raises(genie.ShapeMismatchError) as e:
        g.validate()
    assert "mm" in e.value.detail
    g2 = genie.Graph()
    g2.input("x", [2])
    g2.node("relu", "r", ["nope"])
    g2.output("r.out")
    with pytest.raises(genie.InvalidGraphError) as e:
        g2.validate()
    assert "nope" in e.value.detail
    g3 = genie.Graph()
    g3.input("x", [2])
    g3.node("relu", "r", ["x"])
    g3.output("r.out")
    with pytest.raises(genie.InvalidGraphError):  # unbound input
        ctx.submit(g3, {})
    with pytest.raises(genie.InvalidGraphError):  # marked twice
        g3.output("r.out")
    with pytest.raises(genie.InvalidArgumentError):
        g3.set_phase("r", "warmup")
    with pytest.raises(genie.NotFoundError):
        g3.set_layer("nope", 1)
    with pytest.raises(genie.ParseError) as e:
        genie.Graph.from_json('{"nodes": [')
    assert e.value.code == capi.GENIE_ERR_PARSE
    with pytest.raises(genie.ParseError):
        ctx.tensor([2], device="gpu:x")
    with pytest.raises(genie.UnsupportedError):
        ctx.tensor([2], device="remote:0")
    with pytest.raises(genie.InvalidArgumentError):
        ctx.tensor([-2])
    with pytest.raises(genie.TooLargeError):
        ctx.tensor([2**40, 2**40])


def test_execution_error_through_future(ctx):
    g = genie.Graph()
    g.input("ids", [3], "i64")
    g.input("w", [4, 2])
    g.node("embedding", "e", ["ids", "w"])
    g.output("e.out")
    with ctx.submit(g, {"ids": np.array([0, 1, 9], np.int64), "w": np.zeros((4, 2), np.float32)}) as f:
        with pytest.raises(genie.InvalidArgumentError) as e:
            f.wait()
        assert e.value.code == -1 and e.value.detail
        with pytest.raises(genie.InvalidArgumentError):
            f.result()


def test_bad_config():
    with pytest.raises(genie.InvalidArgumentError):
        genie.Context(num_threads=-1, use_env=False)
    with pytest.raises(genie.InvalidArgumentError):
        genie.Context("127.0.0.1", 70000, use_env=False)
    with pytest.raises(genie.InvalidArgumentError):
        genie.Context(log_level="loud", use_env=False)


def test_unreachable_server():
    with pytest.raises((genie.ConnectionError, genie.TimeoutError)) as e:
        genie.Context("127.0.0.1", 1, use_env=False, timeout_ms=2000)
    assert e.value.detail and "127.0.0.1" in e.value.detail
