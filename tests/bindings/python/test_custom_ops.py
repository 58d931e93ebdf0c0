"""Custom ops from Python (docs/custom-ops.md, "Python"): a graph built in
Python uses an op registered by a C op library (genie.load_op_library), in
embedded mode and on a `genie serve --op-library` server; a server without
the library refuses the graph naming the op; bad libraries and unknown ops
raise the documented errors."""

import os
import re
import subprocess
import time

import numpy as np
import pytest

import genie

OP = "testlib.add_scalar"


@pytest.fixture(scope="module")
def op_library():
    b = os.environ.get("GENIE_BUILD_DIR")
    path = os.path.join(b, "tests", "libgenie_test_ops.so") if b else None
    if not path or not os.path.exists(path):
        pytest.skip("the test op library (GENIE_BUILD_DIR/tests/libgenie_test_ops.so) is not built")
    genie.load_op_library(path)
    return path


def add_graph(c=0.5):
    g = genie.Graph("custom")
    g.input("x", [2, 3])
    g.node(OP, "add", ["x"], ["y"], attrs={"c": c})
    g.output("y")
    return g


def test_unknown_custom_op_names_it():
    g = genie.Graph("nope")
    g.input("x", [2])
    with pytest.raises(genie.UnknownOpError, match=r"vendor\.not_loaded.*custom-ops"):
        g.node("vendor.not_loaded", "n", ["x"])


def test_bad_libraries_raise(tmp_path):
    with pytest.raises(genie.IoError, match="missing.so"):
        genie.load_op_library(tmp_path / "missing.so")
    with pytest.raises(genie.InvalidArgumentError):
        genie.load_op_library("")


def test_graph_from_python_runs_the_library_op(ctx, op_library):
    assert genie.op_registered(OP)
    assert not genie.op_registered("relu")
    genie.load_op_library(op_library)  # again: nothing happens
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = ctx.run(add_graph(0.5), {"x": x})["y"]
    np.testing.assert_array_equal(y, x + 0.5)
    # The inference callback's error reaches Python with the node and op.
    g = genie.Graph("bad")
    g.input("x", [2], dtype="i32")
    g.node(OP, "add", ["x"], ["y"])
    g.output("y")
    with pytest.raises(genie.DtypeMismatchError, match=r"node 'add' \(testlib\.add_scalar\).*x must be f32"):
        g.validate()


def start_serve(genie_bin, log, *args):
    with open(log, "w") as out:
        proc = subprocess.Popen([genie_bin, "serve", "--port", "0", *args], stdout=out, stderr=subprocess.STDOUT)
    for _ in range(600):
        m = re.search(r"^genie serve listening on 127\.0\.0\.1:(\d+)$", log.read_text(), re.M)
        if m:
            return proc, int(m.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"genie serve did not print its port: {log.read_text()}")


@pytest.mark.parametrize("with_library", [True, False])
def test_remote_needs_the_library_on_the_server(genie_bin, op_library, tmp_path, with_library):
    args = ["--op-library", op_library] if with_library else []
    proc, port = start_serve(genie_bin, tmp_path / "serve.out", *args)
    try:
        with genie.Context(master_addr="127.0.0.1", port=port, use_env=False) as rc:
            x = np.ones((2, 3), dtype=np.float32)
            if with_library:
                np.testing.assert_array_equal(rc.run(add_graph(2.0), {"x": x})["y"], x + 2.0)
            else:
                with pytest.raises(genie.UnknownOpError, match=r"testlib\.add_scalar"):
                    rc.run(add_graph(), {"x": x})
    finally:
        proc.terminate()
        proc.wait(20)
