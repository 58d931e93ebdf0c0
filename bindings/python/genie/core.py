"""Context, Tensor, Graph, Future and Server: the idiomatic layer over the
SWIG module genie.capi (one C call per method, handles owned by objects).

Every failing call raises the genie.errors class of its status, carrying
``.code`` and ``.detail``. Objects are context managers; ``close()`` releases
the handle at once (a closed object's calls fail with InvalidHandleError),
and garbage collection releases what was not closed.
"""

import atexit
import collections
import enum
import json
import os
import threading
import weakref

import numpy as np

from . import capi as _proxy  # noqa: F401 (genie.capi: the SWIG proxy module, for users)
from . import _capi as capi  # the same functions without the proxy's Python wrapper call
from . import errors

capi.genie_py_set_error_factory(errors.from_status)

# ---------------------------------------------------------------------------
# Enumerations
# ---------------------------------------------------------------------------

#: numpy dtype of each Genie dtype (bf16 is exchanged as its raw uint16 bits).
_DTYPES = {
    "f32": (capi.GENIE_DTYPE_F32, np.dtype(np.float32)),
    "f16": (capi.GENIE_DTYPE_F16, np.dtype(np.float16)),
    "bf16": (capi.GENIE_DTYPE_BF16, np.dtype(np.uint16)),
    "i32": (capi.GENIE_DTYPE_I32, np.dtype(np.int32)),
    "i64": (capi.GENIE_DTYPE_I64, np.dtype(np.int64)),
    "bool": (capi.GENIE_DTYPE_BOOL, np.dtype(np.bool_)),
}
_DTYPE_NAMES = {code: name for name, (code, _) in _DTYPES.items()}
_NP_TO_NAME = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16", np.dtype(np.int32): "i32",
               np.dtype(np.int64): "i64", np.dtype(np.bool_): "bool"}

PHASES = {"unknown": 0, "prefill": 1, "decode": 2, "forward": 3, "backward": 4}
MODALITIES = {"unknown": 0, "text": 1, "vision": 2, "audio": 3}
ROLES = {
    "unspecified": capi.GENIE_TENSOR_ROLE_UNSPECIFIED,
    "weight": capi.GENIE_TENSOR_ROLE_WEIGHT,
    "activation": capi.GENIE_TENSOR_ROLE_ACTIVATION,
    "kv_cache": capi.GENIE_TENSOR_ROLE_KV_CACHE,
    "input": capi.GENIE_TENSOR_ROLE_INPUT,
    "output": capi.GENIE_TENSOR_ROLE_OUTPUT,
}
LOG_LEVELS = {"off": 0, "error": 1, "warn": 2, "info": 3, "debug": 4, "trace": 5}
#: What a user selects as the data plane (genie_backend_t).
BACKENDS = {"auto": capi.GENIE_BACKEND_AUTO, "tcp": capi.GENIE_BACKEND_TCP, "rdma": capi.GENIE_BACKEND_RDMA,
            "dpdk": capi.GENIE_BACKEND_DPDK, "dpdk_gpudev": capi.GENIE_BACKEND_DPDK_GPUDEV,
            "ucx": capi.GENIE_BACKEND_UCX}


class Event(enum.IntFlag):
    """Cluster event types (genie_event_type_t), one bit each: combine them
    into a subscription mask (Context.subscribe)."""
    NODE_JOINED = capi.GENIE_EVENT_NODE_JOINED
    NODE_LOST = capi.GENIE_EVENT_NODE_LOST
    NODE_RECOVERED = capi.GENIE_EVENT_NODE_RECOVERED
    GPU_AVAILABLE = capi.GENIE_EVENT_GPU_AVAILABLE
    GPU_UNAVAILABLE = capi.GENIE_EVENT_GPU_UNAVAILABLE
    GPU_OVERHEATED = capi.GENIE_EVENT_GPU_OVERHEATED
    HEALTH_CHANGED = capi.GENIE_EVENT_HEALTH_CHANGED
    BACKEND_SELECTED = capi.GENIE_EVENT_BACKEND_SELECTED
    ALL = capi.GENIE_EVENT_ALL


EVENT_NODE_JOINED = Event.NODE_JOINED
EVENT_NODE_LOST = Event.NODE_LOST
EVENT_NODE_RECOVERED = Event.NODE_RECOVERED
EVENT_GPU_AVAILABLE = Event.GPU_AVAILABLE
EVENT_GPU_UNAVAILABLE = Event.GPU_UNAVAILABLE
EVENT_GPU_OVERHEATED = Event.GPU_OVERHEATED
EVENT_HEALTH_CHANGED = Event.HEALTH_CHANGED
EVENT_BACKEND_SELECTED = Event.BACKEND_SELECTED
EVENT_ALL = Event.ALL

#: Health levels (genie_health_t), as named in the cluster JSON.
HEALTH = {"HEALTHY": 0, "DEGRADED": 1, "UNHEALTHY": 2, "CRITICAL": 3}


def _name_of(table, value):
    for name, v in table.items():
        if v == value:
            return name
    return value


def _enum(table, value, what):
    if isinstance(value, str):
        try:
            return table[value.lower()]
        except KeyError:
            raise errors.InvalidArgumentError(
                f"{what} '{value}' is not one of {', '.join(table)}") from None
    return int(value)


def dtype_code(dtype):
    """Genie dtype code of a name ("f32"), a numpy dtype, or a code."""
    if isinstance(dtype, str) and dtype in _DTYPES:
        return _DTYPES[dtype][0]
    if isinstance(dtype, (int, np.integer)) and not isinstance(dtype, bool):
        return int(dtype)
    try:
        npd = np.dtype(dtype)
    except TypeError:
        npd = None
    if npd in _NP_TO_NAME:
        return _DTYPES[_NP_TO_NAME[npd]][0]
    raise errors.DtypeMismatchError(f"dtype {dtype!r} has no Genie element type "
                                    f"(use {', '.join(_DTYPES)})")


def dtype_name(code):
    return _DTYPE_NAMES.get(code, "invalid")


def numpy_dtype(dtype):
    """numpy dtype exchanged with Genie tensors of `dtype`."""
    return _DTYPES[dtype_name(dtype_code(dtype))][1]


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
# Configuration (shared by Context and Server)
# ---------------------------------------------------------------------------

def _config(master_addr=None, port=None, timeout_ms=None, num_threads=None, log_level=None,
            auth_token=None, node_id=None, use_env=True, session_grace_ms=None,
            max_message_bytes=None, heartbeat_interval_ms=None, heartbeat_timeout_ms=None,
            gpu_poll_interval_ms=None, health_interval_ms=None, graph_deltas=None,
            semantics=None, dpdk_probe=None, allow_insecure=None, tls_ca=None, tls_cert=None, tls_key=None,
            tls_server_name=None, backend=None, etcd_endpoints=None, cluster=None,
            etcd_lease_ttl_ms=None):
    cfg = capi.genie_config_create()
    try:
        capi.genie_config_set_use_env(cfg, 1 if use_env else 0)
        if master_addr:
            host, sep, p = str(master_addr).rpartition(":")
            if sep and p.isdigit() and port is None:
                master_addr, port = host, int(p)
            capi.genie_config_set_master_addr(cfg, master_addr)
        if port is not None:
            capi.genie_config_set_master_port(cfg, int(port))
        if timeout_ms is not None:
            capi.genie_config_set_timeout_ms(cfg, int(timeout_ms))
        if num_threads is not None:
            capi.genie_config_set_num_threads(cfg, int(num_threads))
        if log_level is not None:
            capi.genie_config_set_log_level(cfg, _enum(LOG_LEVELS, log_level, "log level"))
        if auth_token is not None:
            capi.genie_config_set_auth_token(cfg, auth_token)
        if node_id is not None:
            capi.genie_config_set_node_id(cfg, node_id)
        if session_grace_ms is not None:
            capi.genie_config_set_session_grace_ms(cfg, int(session_grace_ms))
        if max_message_bytes is not None:
            capi.genie_config_set_max_message_bytes(cfg, int(max_message_bytes))
        for setter, value in ((capi.genie_config_set_heartbeat_interval_ms, heartbeat_interval_ms),
                              (capi.genie_config_set_heartbeat_timeout_ms, heartbeat_timeout_ms),
                              (capi.genie_config_set_gpu_poll_interval_ms, gpu_poll_interval_ms),
                              (capi.genie_config_set_health_interval_ms, health_interval_ms)):
            if value is not None:
                setter(cfg, int(value))
        if graph_deltas is not None:
            capi.genie_config_set_graph_deltas(cfg, 1 if graph_deltas else 0)
        if semantics is not None:
            capi.genie_config_set_semantics(cfg, 1 if semantics else 0)
        if dpdk_probe is not None:
            capi.genie_config_set_dpdk_probe(cfg, 1 if dpdk_probe else 0)
        if allow_insecure is not None:
            capi.genie_config_set_allow_insecure(cfg, 1 if allow_insecure else 0)
        if tls_ca is not None:
            capi.genie_config_set_tls_ca(cfg, str(tls_ca))
        if tls_cert is not None or tls_key is not None:
            capi.genie_config_set_tls_cert(cfg, None if tls_cert is None else str(tls_cert),
                                           None if tls_key is None else str(tls_key))
        if tls_server_name is not None:
            capi.genie_config_set_tls_server_name(cfg, tls_server_name)
        if backend is not None:
            capi.genie_config_set_backend(cfg, _enum(BACKENDS, backend, "backend"))
        if etcd_endpoints is not None:
            if not isinstance(etcd_endpoints, str):
                etcd_endpoints = ",".join(etcd_endpoints)
            capi.genie_config_set_etcd_endpoints(cfg, etcd_endpoints)
        if cluster is not None:
            capi.genie_config_set_cluster(cfg, cluster)
        if etcd_lease_ttl_ms is not None:
            capi.genie_config_set_etcd_lease_ttl_ms(cfg, int(etcd_lease_ttl_ms))
    except BaseException:
        capi.genie_config_destroy(cfg)
        raise
    return cfg


class _Handle:
    """Owns one C handle; subclasses name the destroy function."""

    _h = None

    def close(self):
        h, self._h = self._h, None
        if h is not None:
            self._destroy(h)

    @property
    def closed(self):
        return self._h is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


# ---------------------------------------------------------------------------
# Context
# ---------------------------------------------------------------------------

_live_contexts = weakref.WeakSet()
_live_lock = threading.Lock()


@atexit.register
def _shutdown_all():
    # Callbacks must not run into a finalising interpreter: shut every
    # context still open (which waits for its graphs) before exit.
    with _live_lock:
        ctxs = list(_live_contexts)
    for c in ctxs:
        try:
            c.close()
        except Exception:
            pass


class Context(_Handle):
    """A running Genie instance (genie_init / genie_shutdown).

    Without a master address the context runs graphs in this process
    (embedded mode). ``master_addr`` ("host" or "host:port") or the
    GENIE_MASTER_ADDR / GENIE_MASTER_PORT environment variables connect it to
    a ``genie serve`` (remote mode); nothing else changes for the caller.
    Thread-safe. Use as ``with genie.Context() as ctx: ...``.

    Cluster options (milliseconds, 10..86400000; None: the library default,
    docs/cluster.md): ``heartbeat_interval_ms``, ``heartbeat_timeout_ms``,
    ``gpu_poll_interval_ms``, ``health_interval_ms``. ``graph_deltas``
    (remote mode): send a graph submitted again as its changes only.
    ``semantics=False`` (remote mode): blind mode, semantics-blind
    disaggregation for comparison (genie_config_set_semantics).

    TLS 1.3 (docs/security.md): ``tls_ca`` (PEM file) turns it on and
    verifies the server; ``tls_cert``/``tls_key`` are a client certificate
    for servers that require one; ``tls_server_name`` the name the server's
    certificate must carry (default: the host connected to).

    A cluster on etcd (docs/cluster.md): ``etcd_endpoints`` (a list of
    client URLs, or one comma-separated string) and no master address enter
    the cluster through a server registered there; ``cluster`` names its
    namespace (default "default").
    """

    def __init__(self, master_addr=None, port=None, *, timeout_ms=None, num_threads=None,
                 log_level=None, auth_token=None, node_id=None, use_env=True,
                 heartbeat_interval_ms=None, heartbeat_timeout_ms=None,
                 gpu_poll_interval_ms=None, health_interval_ms=None, graph_deltas=None,
                 semantics=None, tls_ca=None, tls_cert=None, tls_key=None, tls_server_name=None,
                 backend=None, etcd_endpoints=None, cluster=None):
        self._subs = set()
        cfg = _config(master_addr, port, timeout_ms, num_threads, log_level, auth_token,
                      node_id, use_env, heartbeat_interval_ms=heartbeat_interval_ms,
                      heartbeat_timeout_ms=heartbeat_timeout_ms,
                      gpu_poll_interval_ms=gpu_poll_interval_ms,
                      health_interval_ms=health_interval_ms, graph_deltas=graph_deltas,
                      semantics=semantics, tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key,
                      tls_server_name=tls_server_name, backend=backend,
                      etcd_endpoints=etcd_endpoints, cluster=cluster)
        try:
            self._h = capi.genie_init_abi(capi.GENIE_ABI_VERSION, cfg)
        finally:
            capi.genie_config_destroy(cfg)
        with _live_lock:
            _live_contexts.add(self)

    @staticmethod
    def _destroy(h):
        capi.genie_shutdown(h)

    @property
    def embedded(self):
        """True in embedded mode, False when connected to a server."""
        r = capi.genie_context_is_embedded(self._h)
        if r < 0:
            raise errors.InvalidHandleError("context is closed")
        return bool(r)

    @property
    def node_id(self):
        return capi.genie_context_node_id(self._h)

    @property
    def connected(self):
        """True while calls reach where graphs run: always in embedded mode;
        in remote mode while the connection to the server is up (False while
        it is lost and the context reconnects, or after it gave up)."""
        return capi.genie_context_is_connected(self._h)

    def server_info(self):
        """Statistics of the connected server as a dict (remote mode)."""
        return json.loads(capi.genie_context_server_info(self._h))

    def cluster_state(self):
        """The cluster as this context sees it, as a dict (docs/cluster.md):
        "mode", "node" (this node), "nodes", "master" (None embedded),
        "backend" ({"selected", "reason", ...}), "discovery",
        "init_phases", "health", "intervals", "counters"."""
        return json.loads(capi.genie_cluster_state(self._h))

    def plan_explain(self, graph, inputs=None):
        """Plans `graph` as a submission would, without running it, and
        returns the plan as a dict (docs/scheduler.md): "nodes" in execution
        order, each with its "device", the "rule" that decided and "why";
        "devices", "transfers", the analysis and the predicted time. Without
        `inputs`, inputs are planned as not yet resident, so they need static
        shapes. With `inputs` (as for submit: name -> Tensor, or numpy array)
        the plan is the one that submission gets: each input where its
        tensor lives, dynamic dimensions at the bound sizes; no bytes move.
        The graph itself is not changed."""
        if not inputs:
            return json.loads(capi.genie_plan_explain(self._h, graph._h))
        pairs, temps = self._bind(inputs, write=False)
        try:
            return json.loads(capi.genie_plan_explain_bound(self._h, graph._h, pairs))
        finally:
            for t in temps:
                t.close()

    def _bind(self, inputs, write):
        """(name, handle) pairs for `inputs`, and the temporary tensors made
        for numpy values (host memory: filled only when `write`); the caller
        closes those."""
        pairs, temps = [], []
        try:
            for name, value in inputs.items():
                if not isinstance(value, Tensor):
                    array = np.asarray(value)
                    value = (self.from_numpy(array, "cpu") if write
                             else self.tensor(array.shape, _np_dtype_name(array.dtype), "cpu"))
                    temps.append(value)
                pairs.append((name, value._h))
        except BaseException:
            for t in temps:
                t.close()
            raise
        return pairs, temps

    def subscribe(self, fn, mask=Event.ALL):
        """Calls fn(event_type, event) for each cluster event whose bit is in
        `mask` (Event flags; Event.ALL by default): `event_type` is an Event,
        `event` the event's dict (docs/cluster.md: "type", "time_ms", ...).
        fn runs on the context's loop thread holding the GIL, one event at a
        time; keep it short. An exception it raises is reported through
        sys.unraisablehook and delivery goes on. With BACKEND_SELECTED in the
        mask, the backend selected at init is delivered once right away.
        Returns a Subscription (a context manager): it lasts until its
        unsubscribe() (or the end of its ``with`` block) or the context's
        close(). Raises InvalidArgumentError for a mask of 0 or with unknown
        bits, InvalidHandleError on a closed context."""
        if not callable(fn):
            raise TypeError("subscribe: fn must be callable as fn(event_type, event)")

        def deliver(code, text):
            try:
                etype = Event(code)
            except ValueError:
                etype = code
            fn(etype, json.loads(text))

        mask = int(mask)
        if not 0 <= mask <= 0xFFFFFFFF:
            raise errors.InvalidArgumentError(f"event mask {mask:#x} is not a 32-bit set of Event bits")
        sub_id, token = capi.genie_py_subscribe(self._h, mask, deliver)
        sub = Subscription(self, sub_id, token, Event(mask & int(Event.ALL)))
        with _live_lock:
            self._subs.add(sub)
        return sub

    def tensor(self, shape, dtype="f32", device=None):
        """Allocates a zero-filled tensor resident on `device` (None: the
        context's default device: host memory embedded, the server remote)."""
        h = capi.genie_tensor_alloc(self._h, dtype_code(dtype), [int(d) for d in shape], device)
        return Tensor(h, self)

    def from_numpy(self, array, device=None):
        """Allocates a tensor of the array's dtype and shape and writes the
        array into it (straight from its buffer)."""
        array = np.asarray(array)
        t = self.tensor(array.shape, _np_dtype_name(array.dtype), device)
        try:
            t.write(array)
        except BaseException:
            t.close()
            raise
        return t

    def submit(self, graph, inputs=None):
        """Submits `graph` binding each graph input by name (a dict of
        name -> Tensor, or numpy array: uploaded for this submission only).
        Returns a Future at once; execution errors arrive through it."""
        pairs, temps = self._bind(inputs or {}, write=True)
        try:
            h = capi.genie_graph_submit(self._h, graph._h, pairs)
        finally:
            for t in temps:  # the submission holds its own reference
                t.close()
        return Future(h, self, graph.outputs)

    def run(self, graph, inputs=None, timeout=None):
        """Submits, waits and reads every output: {output name: ndarray}."""
        with self.submit(graph, inputs) as fut:
            return fut.numpy(timeout)

    def import_onnx(self, model, device=None):
        """Imports an ONNX model (genie_graph_import_onnx; docs/frontends.md
        lists the operators): `model` is the bytes of a .onnx file, a path to
        one, or an object with SerializeToString() (onnx.ModelProto). Its
        initializers are uploaded once to `device` (None: the context's
        default device) and stay resident. Returns an OnnxModel; raises
        UnsupportedError naming the first node Genie cannot map, ParseError
        for bytes that are not an ONNX model."""
        if hasattr(model, "SerializeToString"):
            model = model.SerializeToString()
        elif isinstance(model, (str, os.PathLike)):
            with open(model, "rb") as f:
                model = f.read()
        graph_h, weight_hs = capi.genie_graph_import_onnx(self._h, model, device)
        graph, weights = Graph(_handle=graph_h), {}
        try:
            names = graph.inputs[len(graph.inputs) - len(weight_hs):]
            for n, h in zip(names, weight_hs):
                weights[n] = Tensor(h, self)
        except BaseException:  # nothing owned yet is left behind
            for h in weight_hs[len(weights):]:
                capi.genie_tensor_destroy(h)
            for t in weights.values():
                t.close()
            graph.close()
            raise
        return OnnxModel(self, graph, weights)

    def close(self):
        """Shuts the context down (waits for graphs still running). Tensors
        and futures of the context must still be closed (or collected)."""
        with _live_lock:
            _live_contexts.discard(self)
            subs, self._subs = list(getattr(self, "_subs", ())), set()
        super().close()
        for sub in subs:  # ended with the context: only the tokens remain
            sub._release()

    def __repr__(self):
        if self._h is None:
            return "<genie.Context closed>"
        return f"<genie.Context {'embedded' if self.embedded else 'remote'} node={self.node_id}>"


class Subscription:
    """A subscription to cluster events (Context.subscribe). unsubscribe()
    ends it: once it returns, the callback never runs again (it waits for a
    delivery in progress, except when called from the callback itself).
    Ending twice, or after the context closed, does nothing."""

    def __init__(self, ctx, sub_id, token, mask):
        self._ctx = ctx
        self.id = sub_id
        self.mask = mask
        self._token = token

    @property
    def active(self):
        return self._token is not None

    def unsubscribe(self):
        ctx = self._ctx
        with _live_lock:
            if self not in ctx._subs:
                return
            ctx._subs.discard(self)
        try:
            if ctx._h is not None:
                capi.genie_unsubscribe(ctx._h, self.id)
        finally:
            self._release()

    close = unsubscribe

    def _release(self):
        token, self._token = self._token, None
        if token is not None:
            capi.genie_py_callback_release(token)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.unsubscribe()

    def __repr__(self):
        return f"<genie.Subscription {self.id} {self.mask!r} {'active' if self.active else 'ended'}>"


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
    cfg = _config(timeout_ms=timeout_ms, use_env=use_env, dpdk_probe=bool(dpdk_probe))
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
    cfg = _config(timeout_ms=timeout_ms, use_env=use_env, etcd_endpoints=etcd_endpoints, cluster=cluster)
    try:
        return json.loads(capi.genie_cluster_members(cfg))
    finally:
        capi.genie_config_destroy(cfg)


def _np_dtype_name(npd):
    name = _NP_TO_NAME.get(np.dtype(npd))
    if name is None:
        raise errors.DtypeMismatchError(f"numpy dtype {np.dtype(npd)} has no Genie element type "
                                        f"(float32, float16, int32, int64, bool)")
    return name


# ---------------------------------------------------------------------------
# Tensor
# ---------------------------------------------------------------------------

class Tensor(_Handle):
    """A tensor resident on a device until closed (genie_tensor_t). Create
    with Context.tensor or Context.from_numpy. Thread-safe."""

    def __init__(self, handle, ctx):
        self._h = handle
        self._ctx = ctx  # keeps the context alive while the tensor is
        code, shape, nbytes = capi.genie_tensor_info(handle)
        self.dtype = dtype_name(code)
        self.shape = tuple(shape)
        self.nbytes = nbytes
        self._np_dtype = _DTYPES[self.dtype][1]

    @staticmethod
    def _destroy(h):
        capi.genie_tensor_destroy(h)

    @property
    def device(self):
        d = capi.genie_tensor_device(self._h)
        if d is None:
            raise errors.InvalidHandleError("tensor is closed")
        return d

    @property
    def semantics(self):
        """What the tensor is (genie_tensor_set_semantics): a tuple
        (phase, role, layer), e.g. ("decode", "kv_cache", 3); ("unknown",
        "unspecified", -1) while not annotated."""
        phase, role, layer = capi.genie_tensor_get_semantics(self._h)
        return (_name_of(PHASES, phase), _name_of(ROLES, role), layer)

    def set_semantics(self, phase="unknown", role="unspecified", layer=-1):
        """Annotates the tensor (names or genie_phase_t / genie_tensor_role_t
        values; layer -1 unknown): its writes and reads to a server carry
        this semantic tag. All defaults clear it. Bad values raise
        InvalidArgumentError and change nothing."""
        capi.genie_tensor_set_semantics(self._h, _enum(PHASES, phase, "phase"),
                                        _enum(ROLES, role, "role"), int(layer))

    @property
    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def write(self, data, offset=0):
        """Writes `data` at byte `offset`, straight from its buffer. A numpy
        array must have the tensor's dtype (else DtypeMismatchError); any
        C-contiguous buffer (bytes, memoryview ...) is taken as raw bytes.
        Its byte size must fit the tensor (else SizeMismatchError)."""
        if isinstance(data, np.ndarray):
            if data.dtype != self._np_dtype:
                raise errors.DtypeMismatchError(
                    f"array of dtype {data.dtype} written to a {self.dtype} tensor "
                    f"(expected {self._np_dtype})")
            if offset == 0 and data.size != self.size:
                raise errors.SizeMismatchError(
                    f"array of {data.size} elements {list(data.shape)} written to a tensor of "
                    f"{self.size} elements {list(self.shape)} (pass offset= for a partial write)")
            if not data.flags.c_contiguous:
                data = np.ascontiguousarray(data)
        capi.genie_tensor_write(self._h, offset, data)

    def read(self, out=None):
        """Reads the whole tensor into a new numpy array of its dtype and
        shape (or into `out`, a writable C-contiguous array of the same byte
        size), straight into the array's buffer."""
        if out is None:
            out = np.empty(self.shape, self._np_dtype)
        else:
            if isinstance(out, np.ndarray) and out.dtype != self._np_dtype:
                raise errors.DtypeMismatchError(
                    f"reading a {self.dtype} tensor into an array of dtype {out.dtype}")
            n = memoryview(out).nbytes
            if n != self.nbytes:
                raise errors.SizeMismatchError(
                    f"reading a tensor of {self.nbytes} bytes into a buffer of {n} bytes")
        capi.genie_tensor_read(self._h, 0, out)
        return out

    numpy = read

    def __array__(self, dtype=None):
        a = self.read()
        return a if dtype is None else a.astype(dtype)

    def __repr__(self):
        state = "closed" if self._h is None else self.device
        return f"<genie.Tensor {self.dtype}{list(self.shape)} {state}>"


# ---------------------------------------------------------------------------
# Graph
# ---------------------------------------------------------------------------

Node = collections.namedtuple("Node", ["name", "op"])
Node.__doc__ = "A node of a Graph: its name and its operator (Graph.nodes)."


class Graph(_Handle):
    """A graph of tensor operations under construction (genie_graph_t).
    Not thread-safe while being built; submit it from any thread."""

    def __init__(self, name=None, _handle=None):
        self._h = _handle if _handle is not None else capi.genie_graph_create(name)

    @staticmethod
    def _destroy(h):
        capi.genie_graph_destroy(h)

    @classmethod
    def from_json(cls, text):
        """Builds a graph from its JSON form (docs/graph-format.md)."""
        return cls(_handle=capi.genie_graph_from_json(text))

    def to_json(self):
        return capi.genie_graph_to_json(self._h)

    def input(self, name, shape, dtype="f32", role=None):
        """Declares graph input `name` (-1 dims are dynamic). Returns name."""
        capi.genie_graph_add_input(self._h, name, dtype_code(dtype), [int(d) for d in shape])
        if role is not None:
            self.set_role(name, role)
        return name

    def constant(self, name, array, role=None):
        """Adds a constant whose bytes are copied from `array`. Returns name."""
        array = np.ascontiguousarray(array)
        capi.genie_graph_add_constant(self._h, name, dtype_code(array.dtype),
                                      list(array.shape), array)
        if role is not None:
            self.set_role(name, role)
        return name

    def node(self, op, name, inputs, outputs=None, attrs=None, *, phase=None, module=None,
             layer=None, modality=None):
        """Adds node `name` applying `op` to the values named in `inputs`
        (None for an omitted optional input). `outputs` defaults to
        [name + ".out"]. Sets `attrs` and the given annotations. Returns the
        output name (or the list of names for several outputs)."""
        if outputs is None:
            outputs = [name + ".out"]
        elif isinstance(outputs, str):
            outputs = [outputs]
        if isinstance(inputs, str):
            inputs = [inputs]
        capi.genie_graph_add_node(self._h, op, name, list(inputs), list(outputs))
        for k, v in (attrs or {}).items():
            self.set_attr(name, k, v)
        if phase is not None:
            self.set_phase(name, phase)
        if module is not None:
            self.set_module(name, module)
        if layer is not None:
            self.set_layer(name, layer)
        if modality is not None:
            self.set_modality(name, modality)
        return outputs[0] if len(outputs) == 1 else list(outputs)

    def set_attr(self, node, key, value):
        """Sets an attribute; its type follows the Python value: int/bool,
        float, str, a sequence of ints, a sequence of floats."""
        if isinstance(value, (bool, int, np.integer)):
            capi.genie_graph_set_attr_int(self._h, node, key, int(value))
        elif isinstance(value, (float, np.floating)):
            capi.genie_graph_set_attr_float(self._h, node, key, float(value))
        elif isinstance(value, str):
            capi.genie_graph_set_attr_string(self._h, node, key, value)
        elif isinstance(value, (list, tuple, np.ndarray)):
            vals = list(value)
            if any(isinstance(v, (float, np.floating)) for v in vals):
                capi.genie_graph_set_attr_floats(self._h, node, key, [float(v) for v in vals])
            else:
                capi.genie_graph_set_attr_ints(self._h, node, key, [int(v) for v in vals])
        else:
            raise errors.InvalidAttributeError(
                f"attribute '{key}' of node '{node}': unsupported Python type {type(value).__name__}")

    def set_phase(self, node, phase):
        capi.genie_graph_set_phase(self._h, node, _enum(PHASES, phase, "phase"))

    def set_module(self, node, module_path):
        capi.genie_graph_set_module(self._h, node, module_path)

    def set_layer(self, node, layer):
        capi.genie_graph_set_layer(self._h, node, int(layer))

    def set_modality(self, node, modality):
        capi.genie_graph_set_modality(self._h, node, _enum(MODALITIES, modality, "modality"))

    def set_role(self, value, role):
        capi.genie_graph_set_role(self._h, value, _enum(ROLES, role, "role"))

    def output(self, *values):
        """Marks values as graph outputs, in order."""
        self._outputs = None
        for v in values:
            capi.genie_graph_mark_output(self._h, v)

    def validate(self):
        capi.genie_graph_validate(self._h)
        return self

    @property
    def num_nodes(self):
        return capi.genie_graph_num_nodes(self._h)

    @property
    def nodes(self):
        """The nodes as (name, op) pairs, in the order they were added."""
        n = capi.genie_graph_num_nodes(self._h)
        return [Node(capi.genie_graph_node_name(self._h, i), capi.genie_graph_node_op(self._h, i)) for i in range(n)]

    @property
    def inputs(self):
        n = capi.genie_graph_num_inputs(self._h)
        return [capi.genie_graph_input_name(self._h, i) for i in range(n)]

    _outputs = None

    @property
    def outputs(self):
        """Output names in mark order (the order of a future's outputs)."""
        if self._outputs is None or self._h is None:
            n = capi.genie_graph_num_outputs(self._h)
            self._outputs = [capi.genie_graph_output_name(self._h, i) for i in range(n)]
        return list(self._outputs)

    def value_info(self, value):
        """(dtype name, shape) of a value (validate first for node outputs)."""
        code, shape = capi.genie_graph_value_info(self._h, value)
        return dtype_name(code), tuple(shape)

    @property
    def hash(self):
        """Structural hash (equal structure, equal hash, across processes)."""
        return capi.genie_graph_hash(self._h)

    def __repr__(self):
        if self._h is None:
            return "<genie.Graph closed>"
        return f"<genie.Graph nodes={self.num_nodes} inputs={self.inputs} outputs={self.outputs}>"


class OnnxModel:
    """An imported ONNX model (Context.import_onnx): ``graph``, and
    ``weights`` (graph input name -> Tensor, resident until closed).
    ``inputs`` are the names the caller binds: the model's own inputs.
    submit() and run() bind the weights with the caller's inputs. A context
    manager; close() releases the graph and the weights."""

    def __init__(self, ctx, graph, weights):
        self._ctx = ctx
        self.graph = graph
        self.weights = weights
        self.inputs = [n for n in graph.inputs if n not in weights]
        self.outputs = graph.outputs

    def submit(self, inputs):
        """Submits the graph with `inputs` (name -> Tensor or numpy array)
        and the resident weights; returns a Future."""
        return self._ctx.submit(self.graph, {**self.weights, **inputs})

    def run(self, inputs, timeout=None):
        """Runs and reads every output: {output name: ndarray}."""
        with self.submit(inputs) as fut:
            return fut.numpy(timeout)

    def close(self):
        for t in self.weights.values():
            t.close()
        self.graph.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return (f"<genie.OnnxModel nodes={self.graph.num_nodes} inputs={self.inputs} "
                f"outputs={self.outputs} weights={len(self.weights)}>")


# ---------------------------------------------------------------------------
# Future
# ---------------------------------------------------------------------------

class Future(_Handle):
    """Result of a submission (genie_future_t). Thread-safe."""

    _token = None

    def __init__(self, handle, ctx, output_names):
        self._h = handle
        self._ctx = ctx
        self.output_names = list(output_names)

    def _destroy(self, h):
        capi.genie_future_destroy(h)  # the callback never runs after this
        token, self._token = self._token, None
        if token is not None:
            capi.genie_py_callback_release(token)

    def close(self):
        h, self._h = self._h, None
        if h is not None:
            self._destroy(h)

    def done(self):
        """True once the graph completed (successfully or not)."""
        return capi.genie_future_poll(self._h) != capi.GENIE_IN_PROGRESS

    def wait(self, timeout=None):
        """Waits for completion (`timeout` seconds, None: no limit); raises
        the execution error, or TimeoutError if still running."""
        if timeout is not None:
            capi.genie_future_wait(self._h, max(0, int(timeout * 1000)))
            return
        while True:  # slices, so Ctrl-C is seen between them
            try:
                capi.genie_future_wait(self._h, 200)
                return
            except errors.TimeoutError:
                continue

    def output(self, key):
        """Output `key` (index or value name) as a Tensor handle of its own."""
        if isinstance(key, str):
            return Tensor(capi.genie_future_output_by_name(self._h, key), self._ctx)
        return Tensor(capi.genie_future_output(self._h, int(key)), self._ctx)

    def result(self, timeout=None):
        """Waits, then returns the outputs as Tensors (still resident where
        they were produced: read them with .numpy())."""
        self.wait(timeout)
        n = capi.genie_future_num_outputs(self._h)
        return [self.output(i) for i in range(n)]

    def numpy(self, timeout=None):
        """Waits, then reads every output: {output name: ndarray}."""
        out = {}
        for name, t in zip(self.output_names, self.result(timeout)):
            with t:
                out[name] = t.read()
        return out

    def add_done_callback(self, fn):
        """Calls fn(future) once the graph completes, on a Genie thread
        holding the GIL (or now, if it already completed). One per future.
        fn must not close this future or shut its context down."""
        ref = self

        def trampoline(status):
            fn(ref)

        self._token = capi.genie_py_future_set_callback(self._h, trampoline)

    @property
    def exec_ns(self):
        """Execution time of the completed graph in nanoseconds."""
        return capi.genie_future_exec_ns(self._h)

    def __repr__(self):
        if self._h is None:
            return "<genie.Future closed>"
        return f"<genie.Future {'done' if self.done() else 'running'} outputs={self.output_names}>"


# ---------------------------------------------------------------------------
# Server
# ---------------------------------------------------------------------------

class Server(_Handle):
    """A server in this process (what `genie serve` runs): serves remote
    contexts on `host`:`port` (port 0 picks a free one, see .port). A host
    other than loopback needs an auth_token (at least 16 bytes) or client
    certificates (tls_ca), or allow_insecure=True on a trusted network.
    With tls_cert and tls_key it speaks only TLS 1.3; with tls_ca as well,
    clients must present a certificate chained to it. With
    ``etcd_endpoints`` it registers in that etcd under ``cluster`` with a
    lease of ``etcd_lease_ttl_ms`` (docs/cluster.md)."""

    def __init__(self, host=None, port=0, *, auth_token=None, num_threads=None,
                 session_grace_ms=None, max_message_bytes=None, log_level=None, use_env=True,
                 heartbeat_interval_ms=None, heartbeat_timeout_ms=None, node_id=None,
                 allow_insecure=None, tls_cert=None, tls_key=None, tls_ca=None,
                 etcd_endpoints=None, cluster=None, etcd_lease_ttl_ms=None):
        cfg = _config(num_threads=num_threads, etcd_endpoints=etcd_endpoints, cluster=cluster,
                      etcd_lease_ttl_ms=etcd_lease_ttl_ms, log_level=log_level, auth_token=auth_token,
                      tls_cert=tls_cert, tls_key=tls_key, tls_ca=tls_ca,
                      use_env=use_env, session_grace_ms=session_grace_ms,
                      max_message_bytes=max_message_bytes, node_id=node_id,
                      heartbeat_interval_ms=heartbeat_interval_ms,
                      heartbeat_timeout_ms=heartbeat_timeout_ms, allow_insecure=allow_insecure)
        try:
            self._h = capi.genie_server_create(cfg, host, int(port))
        finally:
            capi.genie_config_destroy(cfg)

    @staticmethod
    def _destroy(h):
        capi.genie_server_destroy(h)

    @property
    def port(self):
        return capi.genie_server_port(self._h)

    def stop(self):
        capi.genie_server_stop(self._h)
