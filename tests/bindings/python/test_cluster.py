"""The cluster API from Python: state, discovery, plan explanation, event
subscriptions (delivered on the loop thread, holding the GIL) and their bad
input."""

import sys
import threading
import time

import numpy as np
import pytest

import genie


def test_cluster_members_needs_etcd_and_names_an_unreachable_one():
    with pytest.raises(genie.InvalidArgumentError) as e:
        genie.cluster_members(use_env=False)
    assert "etcd" in e.value.detail
    dead = "http://127.0.0.1:1"
    try:
        genie.cluster_members([dead], cluster="c", use_env=False, timeout_ms=1000)
    except genie.UnsupportedError as e:
        pytest.skip(f"the etcd store plugin is not installed here: {e.detail}")
    except genie.ConnectionError as e:
        assert dead in e.detail, e.detail
    else:
        pytest.fail("a dead etcd was listed")


def _mlp():
    g = genie.Graph("explain")
    g.input("x", [4, 8])
    g.constant("w", np.ones((8, 8), np.float32), role="weight")
    h = g.node("matmul", "mm", ["x", "w"], outputs="h", phase="prefill", module="mlp.fc", layer=0)
    g.node("relu", "act", [h], outputs="y", module="mlp.act", layer=0)
    g.output("y")
    return g


def test_cluster_state_embedded(ctx):
    st = ctx.cluster_state()
    assert st["mode"] == "embedded"
    assert st["master"] is None
    assert st["node"]["id"] == ctx.node_id
    assert [n["id"] for n in st["nodes"]] == [ctx.node_id]
    assert st["backend"]["selected"] == "tcp"
    assert st["backend"]["reason"]
    assert st["health"]["level"] in genie.HEALTH
    assert [p["name"] for p in st["init_phases"]][0] == "config"


def test_context_cluster_options_reach_the_state():
    with genie.Context(use_env=False, heartbeat_interval_ms=1234, heartbeat_timeout_ms=5678,
                       gpu_poll_interval_ms=910, health_interval_ms=1112,
                       graph_deltas=False) as c:
        assert c.cluster_state()["intervals"] == {
            "heartbeat_interval_ms": 1234, "heartbeat_timeout_ms": 5678,
            "gpu_poll_interval_ms": 910, "health_interval_ms": 1112}


def test_discover_without_and_with_a_host():
    d = genie.discover()
    assert d["tcp"] is None
    for probe in ("rdma", "dpdk", "gpus"):
        assert "available" in d[probe] and d[probe]["reason"], probe
    assert d["selection"]["selected"] == "tcp"
    assert not d["dpdk"].get("probed", False)  # dpdk_probe=False: libraries only
    with genie.Server(port=0, node_id="disc-master", use_env=False) as srv:
        d = genie.discover(f"127.0.0.1:{srv.port}")
        assert d["tcp"]["reachable"] is True, d["tcp"]
        assert d["tcp"]["server_node_id"] == "disc-master"
    # A closed port is reported, not raised.
    d = genie.discover("127.0.0.1", 1)
    assert d["tcp"]["reachable"] is False and d["tcp"]["reason"]


def test_plan_explain_names_every_node(ctx):
    with _mlp() as g:
        plan = ctx.plan_explain(g)
        names = {n["name"]: n for n in plan["nodes"]}
        assert set(names) == {"mm", "act"}
        for n in names.values():
            assert n["device"].split("/")[-1].startswith("cpu"), n  # "NODE/cpu:0"
            assert n["rule"] and n["why"], n
        assert [n["name"] for n in plan["nodes"]] == ["mm", "act"]  # execution order
        # The handle is not changed: still submittable, and the result is right.
        y = ctx.run(g, {"x": np.ones((4, 8), np.float32)})["y"]
        np.testing.assert_allclose(y, np.full((4, 8), 8.0))


def test_plan_explain_bound_takes_the_bound_shapes(ctx):
    with genie.Graph("dyn-bound") as g:
        g.input("x", [-1, 4])
        g.node("relu", "r", ["x"], outputs="y")
        g.output("y")
        small = ctx.plan_explain(g, {"x": np.zeros((3, 4), np.float32)})
        with ctx.from_numpy(np.zeros((1000, 4), np.float32)) as big_t:
            big = ctx.plan_explain(g, {"x": big_t})
        (ns,), (nb,) = small["nodes"], big["nodes"]
        assert ns["name"] == nb["name"] == "r"
        assert ns["bytes"] == 2 * 3 * 4 * 4 and nb["bytes"] == 2 * 1000 * 4 * 4
        with pytest.raises(genie.DtypeMismatchError) as e:
            ctx.plan_explain(g, {"x": np.zeros((3, 4), np.int32)})
        assert e.value.detail
        with pytest.raises(genie.InvalidGraphError):
            ctx.plan_explain(g, {"nope": np.zeros((3, 4), np.float32)})


def test_subscribe_delivers_backend_selected_and_unsubscribe_ends_it(ctx):
    got = []
    on_loop = []
    done = threading.Event()

    def cb(etype, event):
        got.append((etype, event))
        on_loop.append(threading.current_thread() is not threading.main_thread())
        done.set()

    base = ctx.cluster_state()["counters"]["subscriptions"]
    with ctx.subscribe(cb, genie.EVENT_BACKEND_SELECTED | genie.EVENT_NODE_LOST) as sub:
        assert sub.active and sub.mask == genie.Event.BACKEND_SELECTED | genie.Event.NODE_LOST
        assert done.wait(10), "BACKEND_SELECTED was not delivered after subscribing"
        assert ctx.cluster_state()["counters"]["subscriptions"] == base + 1
    assert not sub.active
    assert ctx.cluster_state()["counters"]["subscriptions"] == base
    etype, event = got[0]
    assert etype is genie.Event.BACKEND_SELECTED
    assert event["type"] == "BACKEND_SELECTED" and event["backend"] == "tcp" and event["reason"]
    assert event["time_ms"] > 0
    assert on_loop == [True]
    sub.unsubscribe()  # ending twice does nothing
    assert len(got) == 1


def test_callback_exception_is_reported_and_delivery_goes_on(ctx, monkeypatch):
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u.exc_value))
    good = threading.Event()

    def bad(etype, event):
        raise ValueError("callback failed on purpose")

    s1 = ctx.subscribe(bad, genie.EVENT_BACKEND_SELECTED)
    s2 = ctx.subscribe(lambda t, e: good.set(), genie.EVENT_BACKEND_SELECTED)
    assert good.wait(10)
    deadline = time.monotonic() + 10
    while not reported and time.monotonic() < deadline:
        time.sleep(0.01)
    assert any(isinstance(e, ValueError) and "on purpose" in str(e) for e in reported), reported
    s1.unsubscribe()
    s2.unsubscribe()
    assert ctx.cluster_state()["node"]["id"] == ctx.node_id  # still alive


def test_unsubscribe_from_its_own_callback(ctx):
    calls = []
    box = {}
    assigned, ready = threading.Event(), threading.Event()

    def cb(etype, event):
        calls.append(etype)
        assigned.wait(10)  # the callback may run before subscribe() returned
        box["sub"].unsubscribe()
        ready.set()

    box["sub"] = ctx.subscribe(cb, genie.EVENT_BACKEND_SELECTED)
    assigned.set()
    assert ready.wait(10)
    assert calls == [genie.Event.BACKEND_SELECTED] and not box["sub"].active


def test_node_lost_when_the_master_stops():
    srv = genie.Server(port=0, node_id="py-master", use_env=False,
                       heartbeat_interval_ms=50, heartbeat_timeout_ms=200)
    lost = threading.Event()
    events = []

    def cb(etype, event):
        events.append(event)
        if etype == genie.EVENT_NODE_LOST:
            lost.set()

    try:
        with genie.Context(f"127.0.0.1:{srv.port}", use_env=False, timeout_ms=5000,
                           heartbeat_interval_ms=50, heartbeat_timeout_ms=200) as c:
            st = c.cluster_state()
            assert st["mode"] == "remote" and st["master"]["node_id"] == "py-master"
            with c.subscribe(cb, genie.EVENT_NODE_LOST) as sub:
                assert not lost.wait(0.6), f"NODE_LOST while the master is up: {events}"
                assert c.connected is True
                srv.close()
                assert lost.wait(20), f"no NODE_LOST after the master stopped: {events}"
                assert c.connected is False
                ev = [e for e in events if e["type"] == "NODE_LOST"][0]
                assert ev["node"]["id"] == "py-master" and ev["reason"]
            assert not sub.active
    finally:
        srv.close()


def test_cluster_bad_input():
    c = genie.Context(use_env=False)
    for mask in (0, 1 << 9):
        with pytest.raises(genie.InvalidArgumentError) as e:
            c.subscribe(lambda t, ev: None, mask)
        assert e.value.code == genie.InvalidArgumentError.code and e.value.detail
    with pytest.raises(genie.InvalidArgumentError):
        c.subscribe(lambda t, ev: None, -1)
    with pytest.raises(TypeError):
        c.subscribe("not callable")
    g = genie.Graph("dyn")
    g.input("x", [-1, 4])
    g.node("relu", "r", ["x"], outputs="y")
    g.output("y")
    with pytest.raises(genie.InvalidGraphError) as e:
        c.plan_explain(g)
    assert e.value.detail
    g.close()
    with pytest.raises(genie.InvalidHandleError):
        c.plan_explain(g)
    sub = c.subscribe(lambda t, ev: None)
    c.close()
    assert not sub.active  # ended with the context
    sub.unsubscribe()
    with pytest.raises(genie.InvalidHandleError) as e:
        c.cluster_state()
    assert e.value.code == genie.InvalidHandleError.code and e.value.detail
    with pytest.raises(genie.InvalidHandleError):
        c.subscribe(lambda t, ev: None)
    with pytest.raises(genie.InvalidArgumentError) as e:
        genie.Context(use_env=False, heartbeat_interval_ms=5)
    assert "heartbeat" in e.value.detail.lower() or e.value.detail
    with pytest.raises(genie.InvalidArgumentError):
        genie.discover("127.0.0.1", 70000)
