"""The process-wide front door: genie.init / shutdown / is_initialized /
get_cluster_state, sync and awaited, embedded, against a real `genie serve`,
and as a server; the environment; bad input."""

import asyncio
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import genie


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    for var in ("GENIE_MASTER_ADDR", "GENIE_MASTER_PORT", "GENIE_NODE_ID", "GENIE_NODE_ROLE",
                "GENIE_BACKEND", "GENIE_HEARTBEAT_INTERVAL"):
        monkeypatch.delenv(var, raising=False)
    genie.shutdown()
    yield
    genie.shutdown()


def run_relu(ctx):
    g = genie.Graph("relu")
    g.input("x", [4])
    g.node("relu", "r", ["x"], outputs="y")
    g.output("y")
    with g:
        return ctx.run(g, {"x": np.array([-1, 2, -3, 4], np.float32)})["y"].tolist()


def test_init_embedded_sync():
    assert not genie.is_initialized()
    state = genie.init()
    assert isinstance(state, genie.ClusterState)
    assert genie.is_initialized() and state.mode == "embedded"
    assert [n.node_id for n in state.nodes] == [state.node_id] and state.node_id
    assert run_relu(genie.get_context()) == [0, 2, 0, 4]
    assert genie.init() .node_id == state.node_id  # the same settings again: the same state
    genie.shutdown()
    assert not genie.is_initialized()
    with pytest.raises(genie.StateError):
        genie.get_cluster_state()


def test_init_awaited(serve):
    async def main():
        state = await genie.init(master_addr="127.0.0.1", master_port=serve, timeout=10)
        assert state.mode == "remote" and genie.is_initialized()
        roles = sorted(n.role for n in state.nodes)
        assert "server" in roles and "client" in roles
        master = next(n for n in state.nodes if n.role == "server")
        assert master.hostname and master.status == "alive"
        assert state.master["address"].endswith(f":{serve}")
        assert run_relu(genie.get_context()) == [0, 2, 0, 4]
        await genie.shutdown()
        assert not genie.is_initialized()
    asyncio.run(main())


def test_state_is_live(serve):
    genie.init(master_addr=f"127.0.0.1:{serve}", heartbeat_interval=0.05, heartbeat_timeout=1.0,
               node_id="front-door-live")
    first = genie.get_cluster_state()
    assert first.node_id == "front-door-live" and first.config.heartbeat_interval == 0.05
    sent = first.counters["heartbeats_sent"]
    deadline = time.time() + 10
    while genie.get_cluster_state().counters["heartbeats_sent"] < sent + 3 and time.time() < deadline:
        time.sleep(0.05)
    now = genie.get_cluster_state()
    assert now.counters["heartbeats_sent"] >= sent + 3
    me = next(n for n in now.nodes if n.node_id == "front-door-live")
    assert me.last_heartbeat > time.time() - 60 and me.role == "client"


def test_environment_and_arguments(serve, monkeypatch):
    monkeypatch.setenv("GENIE_MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("GENIE_MASTER_PORT", str(serve))
    monkeypatch.setenv("GENIE_NODE_ID", "from-env")
    state = genie.init()
    assert state.mode == "remote" and state.node_id == "from-env"
    genie.shutdown()
    # An argument wins over the environment.
    state = genie.init(node_id="from-arg")
    assert state.node_id == "from-arg"
    genie.shutdown()
    monkeypatch.setenv("GENIE_MASTER_PORT", "not-a-port")
    with pytest.raises(genie.InvalidArgumentError):
        genie.init()


def test_gpu_monitoring_reaches_the_state(tmp_path):
    lib = os.environ.get("GENIE_TEST_NVML_LIBRARY")
    if not lib:
        pytest.fail("GENIE_TEST_NVML_LIBRARY is not set (run through ctest)")
    gpus = tmp_path / "gpus"
    gpus.write_text("GPU-T 10 40 8192 512\n")
    code = f"""
import sys, time, genie
s = genie.init(gpu_poll_interval=0.05)
g = s.node.gpus
assert len(g) == 1 and g[0].name == "GPU-T" and g[0].utilization == 10 and g[0].available, g
open(sys.argv[1] + ".new", "w").write("GPU-T 97 41 8192 512\\n")
import os; os.replace(sys.argv[1] + ".new", sys.argv[1])
for _ in range(200):
    g = genie.get_cluster_state().node.gpus[0]
    if g.utilization == 97:
        break
    time.sleep(0.05)
assert g.utilization == 97 and not g.available and g.temperature == 41, g
assert g.memory_total > 0 and g.memory_used > 0
genie.shutdown()
print("gpu-ok")
"""
    env = dict(os.environ, GENIE_NVML_LIBRARY=lib, GENIE_TEST_NVML_FILE=str(gpus))
    out = subprocess.run([sys.executable, "-c", code, str(gpus)], env=env, capture_output=True,
                         text=True, timeout=60)
    assert "gpu-ok" in out.stdout, out.stdout + out.stderr


def test_server_mode():
    state = genie.init(node_role="server", master_port=0, heartbeat_interval=0.1)
    assert state.mode == "server" and state.node.role == "server" and state.node.port > 0
    with genie.Context("127.0.0.1", state.node.port, use_env=False) as client:
        assert not client.embedded
        assert run_relu(client) == [0, 2, 0, 4]
        deadline = time.time() + 10
        while len(genie.get_cluster_state().nodes) < 3 and time.time() < deadline:
            time.sleep(0.05)
        assert len(genie.get_cluster_state().nodes) >= 3  # the server, our view, the client
    port = state.node.port
    genie.shutdown()
    with pytest.raises(genie.ConnectionError):
        genie.Context("127.0.0.1", port, use_env=False, timeout_ms=2000)


def test_bad_input(serve):
    with pytest.raises(genie.InvalidArgumentError):
        genie.init(node_role="boss")
    with pytest.raises(genie.InvalidArgumentError):
        genie.init(backend="carrier-pigeon")
    with pytest.raises(genie.InvalidArgumentError):
        genie.init(master_port=70000)
    with pytest.raises(genie.InvalidArgumentError):
        genie.init(heartbeat_interval=0.0001)
    assert not genie.is_initialized()
    t0 = time.time()
    with pytest.raises((genie.ConnectionError, genie.TimeoutError)):
        genie.init(master_addr="127.0.0.1", master_port=1, timeout=2)
    assert time.time() - t0 < 10 and not genie.is_initialized()
    genie.init(master_addr="127.0.0.1", master_port=serve)
    with pytest.raises(genie.StateError) as e:
        genie.init()  # embedded now: other settings
    assert "shutdown" in e.value.detail
    with pytest.raises(genie.StateError):
        genie.init(master_addr="127.0.0.2", master_port=serve)
    assert genie.is_initialized()


def test_server_lost_mid_call(genie_bin, tmp_path):
    log = tmp_path / "serve.out"
    with open(log, "w") as out:
        proc = subprocess.Popen([genie_bin, "serve", "--port", "0"], stdout=out, stderr=subprocess.STDOUT)
    try:
        port = None
        for _ in range(600):
            text = log.read_text()
            if "listening on 127.0.0.1:" in text:
                port = int(text.split("listening on 127.0.0.1:")[1].split()[0])
                break
            time.sleep(0.05)
        assert port, log.read_text()
        genie.init(master_addr="127.0.0.1", master_port=port, timeout=3)
        ctx = genie.get_context()
        assert run_relu(ctx) == [0, 2, 0, 4]
        proc.kill()
        proc.wait()
        t0 = time.time()
        with pytest.raises((genie.ConnectionError, genie.TimeoutError, genie.ShutdownError)):
            for _ in range(50):
                run_relu(ctx)
                time.sleep(0.05)
        assert time.time() - t0 < 30
    finally:
        if proc.poll() is None:
            proc.kill()
