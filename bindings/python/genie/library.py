"""Process-wide calls that need no context: the library version, the
execution trace, vendors' custom ops and network discovery."""

import json
import os

from ._config import build_config
from ._lib import capi


def version():
    """Run-time library version string, e.g. "0.1.0"."""
    return capi.genie_version_string()


def trace_start(path):
    """Records every graph this process executes, the scheduler's decisions
    and the transfers, and writes them to `path` as Chrome / Perfetto
    trace-event JSON when trace_stop() is called (genie_trace_start). One
    trace per process: the same path again does nothing, another one raises
    InvalidArgumentError."""
    capi.genie_trace_start(os.fspath(path))


def trace_stop():
    """Writes the trace trace_start() began and stops recording; nothing when
    none is recorded (genie_trace_stop)."""
    capi.genie_trace_stop()


# ---------------------------------------------------------------------------


def load_op_library(path):
    """Loads a vendor's op library (genie_op_library_load): a shared object
    exporting genie_op_library_init, which registers its custom ops for this
    process; graphs built afterwards use them by name, e.g.
    ``g.node("acme.swish", "sw", ["x"])``. Loading a library twice does
    nothing. Remote servers need the library too (``genie serve
    --op-library``). docs/custom-ops.md."""
    capi.genie_op_library_load(os.fspath(path))


def op_registered(name):
    """Whether custom op `name` is registered in this process."""
    return bool(capi.genie_op_is_registered(str(name)))


def unregister_op(name):
    """Removes custom op `name` (genie_op_unregister); NotFoundError if none."""
    capi.genie_op_unregister(str(name))


def discover(host=None, port=None, dpdk_probe=False, *, timeout_ms=None, use_env=True):
    """Network discovery without a context (genie_discover), as a dict:
    "rdma", "dpdk", "dpdk_gpudev", "gpus", "tcp" (with `host`: whether the
    Genie server at host:port, "host:port" also accepted, port 5555 by
    default, answers, its round-trip time and its backends) and the backend
    that would be selected, each probe with "available" and a "reason".
    ``dpdk_probe=True`` runs the full DPDK probe (EAL in a forked child,
    about half a second). An unreachable host is reported, not raised."""
    if host:
        h, sep, p = str(host).rpartition(":")
        if sep and p.isdigit() and port is None:
            host, port = h, int(p)
        if port is None:
            port = 5555
    cfg = build_config(timeout_ms=timeout_ms, use_env=use_env, dpdk_probe=bool(dpdk_probe))
    try:
        return json.loads(capi.genie_discover(cfg, host or None, int(port or 0)))
    finally:
        capi.genie_config_destroy(cfg)


def cluster_members(etcd_endpoints=None, cluster=None, *, timeout_ms=None, use_env=True):
    """The live members of a cluster on etcd (genie_cluster_members), as a
    dict: "store", "cluster", "revision" and "members" (each the status the
    member registered: id, role, listen, devices, gpus, health, backends).
    ``etcd_endpoints``: a list of client URLs or a comma-separated string
    (None: GENIE_ETCD_ENDPOINTS); ``cluster`` its namespace (docs/cluster.md,
    "A cluster on etcd"). Raises ConnectionError naming the endpoints when
    no etcd answers."""
    cfg = build_config(timeout_ms=timeout_ms, use_env=use_env, etcd_endpoints=etcd_endpoints, cluster=cluster)
    try:
        return json.loads(capi.genie_cluster_members(cfg))
    finally:
        capi.genie_config_destroy(cfg)
