"""Fixtures of the Python binding's tests. Run by tests/scripts/python_test.sh
with PYTHONPATH=<build>/bindings/python and GENIE_BUILD_DIR set."""

import os
import re
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # models.py

import genie  # noqa: E402


@pytest.fixture
def ctx():
    # Embedded whatever the environment says (use_env=False).
    with genie.Context(use_env=False) as c:
        yield c


@pytest.fixture(scope="session")
def genie_bin():
    b = os.environ.get("GENIE_BUILD_DIR")
    path = os.path.join(b, "genie") if b else None
    if not path or not os.access(path, os.X_OK):
        pytest.skip("GENIE_BUILD_DIR/genie not built")
    return path


@pytest.fixture(scope="module")
def serve(genie_bin, tmp_path_factory):
    """A real `genie serve --port 0` on 127.0.0.1; yields its port."""
    log = tmp_path_factory.mktemp("serve") / "serve.out"
    with open(log, "w") as out:
        proc = subprocess.Popen([genie_bin, "serve", "--port", "0", "--grace-ms", "200"],
                                stdout=out, stderr=subprocess.STDOUT)
    port = None
    for _ in range(600):
        m = re.search(r"^genie serve listening on 127\.0\.0\.1:(\d+)$", log.read_text(), re.M)
        if m:
            port = int(m.group(1))
            break
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    if port is None:
        proc.kill()
        pytest.fail(f"genie serve did not print its port: {log.read_text()}")
    yield port
    proc.terminate()
    try:
        assert proc.wait(20) == 0, "genie serve did not exit cleanly on SIGTERM"
    finally:
        if proc.poll() is None:
            proc.kill()
