"""The process-wide front door: genie.init / genie.shutdown.

    import genie
    state = genie.init(master_addr="gpu-server", master_port=5555)  # or: await genie.init(...)
    print(state.nodes, state.gpus)
    ...
    genie.shutdown()                                                # or: await genie.shutdown()

genie.init creates one process-wide Context (a client of `genie serve`, or
embedded when no master address is given anywhere) that the PyTorch
frontends use by default (the ``remote_accelerator`` device,
``torch.compile(backend="genie")``, genie.torch.capture). With
``node_role="server"`` it serves this process's devices instead, as
`genie serve` does, until genie.shutdown().

Precedence of every setting: an argument given to init (or a field of the
ClusterConfig passed as ``config``) wins over the environment
(GENIE_MASTER_ADDR, GENIE_MASTER_PORT, GENIE_NODE_ID, GENIE_NODE_ROLE,
GENIE_BACKEND, GENIE_HEARTBEAT_INTERVAL, GENIE_HEARTBEAT_TIMEOUT,
GENIE_GPU_POLL_INTERVAL, GENIE_HEALTH_INTERVAL, GENIE_TIMEOUT), which wins
over the defaults. Intervals are in seconds here (the environment and the
C API use milliseconds).

Both functions do their work before they return; what they return can also
be awaited (``await genie.init(...)`` gives the same ClusterState), so code
written for either form runs.
"""

import dataclasses
import os
import socket
import sys
import threading
import time

from . import capi, errors
from .context import Context
from .enums import BACKENDS as _BACKEND_CODES
from .server import Server

__all__ = ["ClusterConfig", "ClusterState", "NodeInfo", "GPUInfo", "init", "shutdown",
           "is_initialized", "get_cluster_state", "get_context"]

BACKENDS = tuple(_BACKEND_CODES)
ROLES = ("client", "server", "worker")
_MAX_INTERVAL_S = 86400.0  # the library's bound on every cluster interval (one day)


def _env_num(name, scale=1.0):
    v = os.environ.get(name)
    if v is None or v == "":
        return None
    try:
        return float(v) * scale
    except ValueError:
        raise errors.InvalidArgumentError(f"{name}={v!r} is not a number") from None


@dataclasses.dataclass
class ClusterConfig:
    """Everything genie.init takes. Times are in seconds. ``None`` means
    "from the environment, else the library's default" (docs/cluster.md).
    ``enable_heartbeat``, ``enable_gpu_monitoring`` and
    ``enable_health_checks`` set to False stretch that interval to the
    library's maximum (one day): the monitor then never runs in practice."""

    master_addr: str = None
    master_port: int = None
    node_id: str = None
    node_role: str = "client"
    backend: str = "auto"
    enable_heartbeat: bool = True
    heartbeat_interval: float = None
    heartbeat_timeout: float = None
    enable_gpu_monitoring: bool = True
    gpu_poll_interval: float = None
    enable_health_checks: bool = True
    health_check_interval: float = None
    timeout: float = 30.0
    #: Further genie.Context / genie.Server options (auth_token, tls_ca, ...).
    extra: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def from_env(cls, **overrides):
        """A config from the GENIE_* environment, with `overrides` (not None)
        on top."""
        cfg = cls(master_addr=os.environ.get("GENIE_MASTER_ADDR") or None,
                  master_port=_env_num("GENIE_MASTER_PORT"),
                  node_id=os.environ.get("GENIE_NODE_ID") or None,
                  node_role=os.environ.get("GENIE_NODE_ROLE") or "client",
                  backend=os.environ.get("GENIE_BACKEND") or "auto",
                  heartbeat_interval=_env_num("GENIE_HEARTBEAT_INTERVAL", 1e-3),
                  heartbeat_timeout=_env_num("GENIE_HEARTBEAT_TIMEOUT", 1e-3),
                  gpu_poll_interval=_env_num("GENIE_GPU_POLL_INTERVAL", 1e-3),
                  health_check_interval=_env_num("GENIE_HEALTH_INTERVAL", 1e-3),
                  timeout=_env_num("GENIE_TIMEOUT", 1e-3) or 30.0)
        for k, v in overrides.items():
            if v is not None:
                setattr(cfg, k, v)
        cfg.validate()
        return cfg

    def validate(self):
        if self.node_role not in ROLES:
            raise errors.InvalidArgumentError(f"node_role {self.node_role!r}: expected one of {ROLES}")
        if self.backend not in BACKENDS:
            raise errors.InvalidArgumentError(f"backend {self.backend!r}: expected one of {BACKENDS}")
        if self.master_port is not None:
            p = self.master_port
            if isinstance(p, bool) or int(p) != p or not 0 <= int(p) <= 65535:
                raise errors.InvalidArgumentError(f"master_port {p!r} is outside 0..65535")
            self.master_port = int(p)
        if self.master_addr is not None:
            host, sep, port = str(self.master_addr).rpartition(":")
            if sep and port.isdigit() and "]" not in port:
                self.master_addr = host
                if self.master_port is None:
                    self.master_port = int(port)
        for name in ("heartbeat_interval", "heartbeat_timeout", "gpu_poll_interval",
                     "health_check_interval", "timeout"):
            v = getattr(self, name)
            if v is not None and not (0.01 <= float(v) <= _MAX_INTERVAL_S):
                raise errors.InvalidArgumentError(f"{name} {v!r} s is outside 0.01..86400 s")

    def _ms(self, enabled, value):
        if not enabled:
            return int(_MAX_INTERVAL_S * 1000)
        return None if value is None else int(round(float(value) * 1000))

    def _options(self):
        """Keyword arguments of genie.Context / genie.Server."""
        opts = dict(backend=self.backend, heartbeat_interval_ms=self._ms(self.enable_heartbeat, self.heartbeat_interval),
                    heartbeat_timeout_ms=None if self.heartbeat_timeout is None
                    else int(round(self.heartbeat_timeout * 1000)),
                    node_id=self.node_id)
        if not self.enable_heartbeat and opts["heartbeat_timeout_ms"] is None:
            opts["heartbeat_timeout_ms"] = int(_MAX_INTERVAL_S * 1000)
        # Settings init does not model come from the environment as the C
        # library reads them (the context is made with use_env=False so that
        # init's own arguments win).
        env = os.environ.get
        for key, var in (("auth_token", "GENIE_AUTH_TOKEN"), ("tls_ca", "GENIE_TLS_CA"),
                         ("tls_cert", "GENIE_TLS_CERT"), ("tls_key", "GENIE_TLS_KEY"),
                         ("log_level", "GENIE_LOG_LEVEL")):
            if env(var):
                opts[key] = env(var)
        opts.update(self.extra)
        return opts


@dataclasses.dataclass
class GPUInfo:
    """One GPU of a node, as its GPU monitor (NVML) last saw it."""
    index: int
    name: str
    memory_total: int  # bytes
    memory_used: int  # bytes
    utilization: int  # percent
    temperature: int  # degrees Celsius
    available: bool
    overheated: bool = False

    @property
    def memory_free(self):
        return max(0, self.memory_total - self.memory_used)

    @classmethod
    def _from(cls, d):
        return cls(index=int(d.get("index", 0)), name=d.get("name", ""),
                   memory_total=int(d.get("memory_total", 0)), memory_used=int(d.get("memory_used", 0)),
                   utilization=int(d.get("utilization", 0)), temperature=int(d.get("temperature_c", 0)),
                   available=bool(d.get("available", False)), overheated=bool(d.get("overheated", False)))


@dataclasses.dataclass
class NodeInfo:
    """One node of the cluster (docs/cluster.md, "NODE")."""
    node_id: str
    hostname: str
    role: str  # client, server (the master) or worker
    host: str  # where it is reached (its listen address for a worker)
    port: int
    network_backend: str
    status: str  # alive, lost ...
    last_heartbeat: float  # Unix seconds of the last heartbeat, 0.0 never
    health: str
    gpus: list = dataclasses.field(default_factory=list)
    gpu_reason: str = ""
    devices: list = dataclasses.field(default_factory=list)

    @classmethod
    def _from(cls, d):
        addr = d.get("listen") or d.get("address") or ""
        host, _, port = addr.rpartition(":")
        return cls(node_id=d.get("id", ""), hostname=d.get("host", ""), role=d.get("role", ""),
                   host=host.strip("[]"), port=int(port) if port.isdigit() else 0,
                   network_backend=d.get("backend", ""), status=d.get("status", ""),
                   last_heartbeat=int(d.get("last_heartbeat_ms", 0)) / 1000.0,
                   health=d.get("health", ""), gpus=[GPUInfo._from(g) for g in d.get("gpus", [])],
                   gpu_reason=d.get("gpu_reason", ""), devices=list(d.get("devices", [])))


class ClusterState:
    """The cluster as this process sees it when asked (genie.get_cluster_state
    reads it anew each time: heartbeats and GPU monitoring are live).

    Awaiting it gives itself, so ``await genie.init(...)`` works as well as
    ``genie.init(...)``."""

    def __init__(self, raw, config):
        self.raw = raw  #: the whole cluster-state document (docs/cluster.md)
        self.config = config
        self.mode = raw.get("mode", "")  # "embedded", "remote" or "server"
        self.node = NodeInfo._from(raw.get("node") or {})
        self.nodes = [NodeInfo._from(n) for n in raw.get("nodes") or []]
        self.master = raw.get("master")
        self.backend = (raw.get("backend") or {}).get("selected", "")
        self.health = (raw.get("health") or {}).get("level", "")
        self.counters = dict(raw.get("counters") or {})
        self.timestamp = time.time()

    @property
    def node_id(self):
        return self.node.node_id

    @property
    def gpus(self):
        """Every GPU of every node."""
        return [g for n in self.nodes for g in n.gpus]

    def __await__(self):
        return self
        yield  # noqa: unreachable: makes this a generator, finished at once

    def __repr__(self):
        return (f"<genie.ClusterState mode={self.mode} node={self.node_id!r} nodes={len(self.nodes)} "
                f"backend={self.backend!r} health={self.health}>")


class _Done:
    """What shutdown returns: nothing to wait for, but awaitable."""

    def __await__(self):
        return None
        yield  # noqa: unreachable

    def __repr__(self):
        return "<genie.shutdown: done>"


class _Runtime:
    def __init__(self, config, context, server=None):
        self.config = config
        self.context = context
        self.server = server


_lock = threading.RLock()
_rt = None


def _address(cfg):
    return (cfg.master_addr, cfg.master_port if cfg.master_port is not None else 5555)


def init(master_addr=None, master_port=None, backend=None, node_id=None, node_role=None,
         timeout=None, config=None, **kwargs):
    """Starts Genie for this process and returns the ClusterState.

    ``master_addr`` ("host" or "host:port"; default GENIE_MASTER_ADDR)
    connects to a `genie serve` master on ``master_port`` (default
    GENIE_MASTER_PORT, else 5555); with no address anywhere Genie runs
    embedded, in this process. ``node_role="server"`` serves this process's
    devices on ``master_addr`` (default 127.0.0.1) : ``master_port`` instead
    (port 0 picks a free one: ClusterState.node.port). ``backend``: "auto",
    "tcp", "rdma", "dpdk", "dpdk_gpudev" or "ucx". ``timeout`` (seconds)
    bounds connecting and each call. Other keyword arguments are
    ClusterConfig fields (enable_heartbeat, heartbeat_interval, ...) or
    genie.Context options (auth_token, tls_ca, ...).

    Calling init again with the same settings returns the current state;
    with different ones raises genie.StateError (call shutdown first).
    Errors: InvalidArgumentError for bad settings, ConnectionError /
    TimeoutError / AuthError when the master cannot be reached."""
    global _rt
    fields = {f.name for f in dataclasses.fields(ClusterConfig)} - {"extra"}
    unknown = {k: v for k, v in kwargs.items() if k not in fields}
    known = {k: v for k, v in kwargs.items() if k in fields}
    if config is not None:
        if not isinstance(config, ClusterConfig):
            raise errors.InvalidArgumentError("config must be a genie.ClusterConfig")
        cfg = dataclasses.replace(config, extra=dict(config.extra))
        for k, v in dict(master_addr=master_addr, master_port=master_port, backend=backend,
                         node_id=node_id, node_role=node_role, timeout=timeout, **known).items():
            if v is not None:
                setattr(cfg, k, v)
        cfg.validate()
    else:
        cfg = ClusterConfig.from_env(master_addr=master_addr, master_port=master_port,
                                     backend=backend, node_id=node_id, node_role=node_role,
                                     timeout=timeout, **known)
    cfg.extra.update(unknown)
    with _lock:
        if _rt is not None:
            old = _rt.config
            if (old.node_role, _address(old), old.backend) == (cfg.node_role, _address(cfg), cfg.backend) \
                    and (cfg.node_id is None or cfg.node_id == old.node_id):
                return get_cluster_state()
            raise errors.StateError(
                f"genie is already initialised ({old.node_role} of {_address(old)[0] or 'embedded'}"
                f":{_address(old)[1]}); call genie.shutdown() before init with other settings")
        _rt = _start(cfg)
    _after_init()
    return get_cluster_state()


def _start(cfg):
    opts = cfg._options()
    timeout_ms = int(round(cfg.timeout * 1000))
    try:
        if cfg.node_role == "server":
            host = cfg.master_addr or "127.0.0.1"
            port = cfg.master_port if cfg.master_port is not None else 5555
            srv_opts = {k: v for k, v in opts.items() if k not in ("tls_server_name", "backend")}
            server = Server(host, port, use_env=False, **srv_opts)
            # The server's own view of the cluster comes from a client of it
            # on loopback (as `genie top` reads it).
            client_host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
            ctx = Context(client_host, server.port, use_env=False, timeout_ms=timeout_ms,
                          auth_token=opts.get("auth_token"), tls_ca=opts.get("tls_ca"),
                          tls_cert=opts.get("tls_cert"), tls_key=opts.get("tls_key"))
            return _Runtime(cfg, ctx, server)
        ctx = Context(cfg.master_addr, cfg.master_port if cfg.master_addr else None, use_env=False,
                      timeout_ms=timeout_ms, **opts)
        return _Runtime(cfg, ctx)
    except errors.GenieError:
        raise
    except (TypeError, ValueError) as e:
        raise errors.InvalidArgumentError(str(e)) from e


def _after_init():
    """Registers the PyTorch integrations when this process uses torch (it
    was imported): the remote_accelerator device, backend="genie"."""
    if "torch" not in sys.modules:
        return
    from .torch import device as _device, compile as _compile
    _device.register()
    _compile.register()


def shutdown():
    """Stops what init started: waits for this process's graphs, frees its
    tensors (remote ones on the server too) and closes the connection, or
    stops the server. A no-op when not initialised. Returns an awaitable."""
    global _rt
    with _lock:
        rt, _rt = _rt, None
    if rt is not None:
        try:
            from .torch import device as _device
            _device._forget(rt.context)
        except ImportError:
            pass
        try:
            rt.context.close()
        finally:
            if rt.server is not None:
                rt.server.stop()
                rt.server.close()
    return _Done()


def is_initialized():
    """True between init and shutdown."""
    with _lock:
        return _rt is not None and not _rt.context.closed


def get_context():
    """The Context init made (genie.StateError before init)."""
    with _lock:
        if _rt is None or _rt.context.closed:
            raise errors.StateError("genie is not initialised: call genie.init() first")
        return _rt.context


def get_cluster_state():
    """The cluster as of now: nodes, their GPUs, heartbeats and health
    (genie.StateError before init)."""
    with _lock:
        if _rt is None:
            raise errors.StateError("genie is not initialised: call genie.init() first")
        rt = _rt
    raw = rt.context.cluster_state()
    if rt.server is not None:
        raw = dict(raw, mode="server")
        nodes = raw.get("nodes") or []
        own = next((n for n in nodes if n.get("role") == "server"), None)
        me = dict(own or raw.get("node") or {}, role="server",
                  listen=f"{rt.config.master_addr or '127.0.0.1'}:{rt.server.port}")
        me.setdefault("host", socket.gethostname())
        raw["node"] = me
    return ClusterState(raw, rt.config)
