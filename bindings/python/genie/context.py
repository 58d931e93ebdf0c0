"""Context (genie_init / genie_shutdown) and its event Subscriptions."""

import atexit
import json
import os
import threading
import weakref

import numpy as np

from . import errors
from ._config import build_config
from ._handle import _Handle
from ._lib import capi
from .dtypes import _np_dtype_name, dtype_code
from .enums import Event
from .future import Future
from .graph import Graph
from .onnx_model import OnnxModel
from .tensor import Tensor

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

    Any other client setting of docs/configuration.md is set by name in
    ``settings`` (``{"timeout_ms": 2000, "graph_deltas": False}``); an
    unknown name, a server's setting or a value out of bounds raises
    InvalidArgumentError naming it.
    """

    def __init__(self, master_addr=None, port=None, *, timeout_ms=None, num_threads=None,
                 log_level=None, auth_token=None, node_id=None, use_env=True,
                 heartbeat_interval_ms=None, heartbeat_timeout_ms=None,
                 gpu_poll_interval_ms=None, health_interval_ms=None, graph_deltas=None,
                 semantics=None, tls_ca=None, tls_cert=None, tls_key=None, tls_server_name=None,
                 backend=None, etcd_endpoints=None, cluster=None, settings=None):
        self._subs = set()
        cfg = build_config(master_addr, port, timeout_ms, num_threads, log_level, auth_token,
                           node_id, use_env, heartbeat_interval_ms=heartbeat_interval_ms,
                           heartbeat_timeout_ms=heartbeat_timeout_ms,
                           gpu_poll_interval_ms=gpu_poll_interval_ms,
                           health_interval_ms=health_interval_ms, graph_deltas=graph_deltas,
                           semantics=semantics, tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key,
                           tls_server_name=tls_server_name, backend=backend,
                           etcd_endpoints=etcd_endpoints, cluster=cluster, settings=settings)
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

    def lost_tensors(self):
        """The tensors lost with this context's server (genie_context_lost_tensors),
        as a dict: "server", "address", "session" ("connected", "reconnecting",
        "lost"; "embedded"), "tensors" (each "name", "id", "server", "device",
        "dtype", "shape", "nbytes"). A lost tensor's next use raises a
        ConnectionError naming it; genie.init() again reaches another server."""
        return json.loads(capi.genie_context_lost_tensors(self._h))

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
