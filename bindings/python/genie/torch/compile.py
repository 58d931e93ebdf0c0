"""torch.compile(model, backend="genie"): Genie as a TorchDynamo backend.

    compiled = torch.compile(model, backend="genie")
    y = compiled(x)                     # runs as a Genie graph

Dynamo hands over an FX graph of torch-level operations; it maps onto Genie
operators by the same table as genie.torch.capture (docs/operators.md),
with the module path and layer of every node taken from Dynamo's
``nn_module_stack``. Parameters and buffers (graph inputs that Dynamo
lifted from the module) become resident weights, uploaded once per
context and again only when their value changes (their version counter);
the other inputs are written for each call. Shapes are specialised: each
new input signature builds (and caches) its graph, which is how Genie plans
them. Guards and recompiles are Dynamo's, as with any backend.

It runs on the context genie.init made, else on ``options={"context": ctx}``,
else on a shared genie.Context (remote when GENIE_MASTER_ADDR is set).
Operations Genie has no operator for raise genie.torch.UnsupportedOpError
at the first call, naming the op and the module path.
"""

import re
import threading

import torch
import torch.fx as fx

from ..context import Context
from ._emit import to_numpy
from .capture import _Variant, _signature, convert

_default_ctx = None
_default_lock = threading.Lock()


def _context(options):
    from .. import cluster
    ctx = (options or {}).get("context")
    if ctx is not None:
        return ctx
    if cluster.is_initialized():
        return cluster.get_context()
    global _default_ctx
    with _default_lock:
        if _default_ctx is None or _default_ctx.closed:
            _default_ctx = Context()
        return _default_ctx


_KEY = re.compile(r"\['([^']*)'\]|\[(\d+)\]|\.([A-Za-z0-9_]+)")


def _qualified(source):
    """'L['self']._modules['h']._modules['0']._parameters['weight']' or
    "L['self'].h[0].attn" -> 'h.0.weight' / 'h.0.attn'."""
    parts = [a or b or c for a, b, c in _KEY.findall(source or "")]
    parts = [p for p in parts if p not in ("self", "_modules", "_parameters", "_buffers")]
    if parts and parts[0] == "L":
        parts = parts[1:]
    return ".".join(parts)


def _module_path(node):
    stack = node.meta.get("nn_module_stack")
    if not stack:
        return ""
    path = list(stack.values())[-1]
    path = path[0] if isinstance(path, tuple) else path
    return _qualified(path if isinstance(path, str) else "")


def _source_name(node):
    arg = node.meta.get("grapharg")
    src = getattr(arg, "source", None)
    name = getattr(src, "name", "") if src is not None else ""
    try:
        return name() if callable(name) else str(name)  # a method in older torch
    except Exception:  # noqa: BLE001 (a source kind without a name)
        return ""


def _get_attr(mod, target):
    for part in target.split("."):
        mod = getattr(mod, part)
    return mod


class _Trace:
    """What genie.torch.capture.convert reads: an FX graph whose nodes carry
    genie_val (example values, on the meta device where they depend on the
    inputs) and genie_module."""

    def __init__(self, graph, module):
        self.graph = graph
        self.module = module


class _Compiled:
    def __init__(self, gm, example_inputs, options):
        self.gm = gm
        self.options = options or {}
        self.ctx = _context(self.options)
        self.placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        # Lifted parameters and buffers: resident weights.
        self.const = []
        for n, ex in zip(self.placeholders, example_inputs):
            src = _source_name(n)
            is_const = isinstance(ex, torch.nn.Parameter) or "_parameters" in src or "_buffers" in src
            self.const.append((_qualified(src) or n.target) if is_const else None)
        self._lock = threading.Lock()
        self._variants = {}
        self._weights = {}  # qualified name -> resident genie.Tensor
        self._versions = {}  # qualified name -> the parameter's version when it was uploaded

    def _variant(self, args):
        key = tuple(("w", id(a)) if c else _signature(a) for a, c in zip(args, self.const))
        v = self._variants.get(key)
        if v is None:
            v = self._build(args)
            self._variants[key] = v
        return v

    def _build(self, args):
        g = self.gm.graph
        dynamic = set()
        names = {}
        for n, a, c in zip(self.placeholders, args, self.const):
            n.meta["genie_val"] = a if c or not isinstance(a, torch.Tensor) else \
                torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device="meta")
            n.meta["genie_const"] = c is not None
            n.meta["genie_module"] = ""
            if c is not None:
                names[id(a)] = c
            elif isinstance(a, torch.Tensor):
                dynamic.add(n)
        env = {n: n.meta["genie_val"] for n in self.placeholders}
        meta = lambda v: torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="meta") \
            if isinstance(v, torch.Tensor) and v.device.type != "meta" else v  # noqa: E731
        for n in g.nodes:
            if n.op in ("placeholder", "output"):
                continue
            n.meta["genie_module"] = _module_path(n)
            dyn = any(a in dynamic for a in n.all_input_nodes)
            conv = (lambda a: meta(env[a])) if dyn else (lambda a: env[a])
            a = fx.node.map_arg(n.args, conv)
            k = fx.node.map_arg(n.kwargs, conv)
            if n.op == "call_function":
                val = n.target(*a, **k)
            elif n.op == "call_method":
                val = getattr(a[0], n.target)(*a[1:], **k)
            elif n.op == "call_module":
                val = self.gm.get_submodule(n.target)(*a, **k)
            else:  # get_attr: a constant of the graph module
                val = _get_attr(self.gm, n.target)
            env[n] = val
            n.meta["genie_val"] = val
            if dyn:
                dynamic.add(n)
        em, spec = convert(_Trace(g, self.gm), "compiled", extra_static_names=names)
        return _Variant(em, spec, self.ctx, self._weights)

    def __call__(self, *args):
        with self._lock:
            v = self._variant(args)
            for a, c in zip(args, self.const):  # weights changed since their upload go up again
                if c is not None:
                    seen = self._versions.setdefault(c, a._version)
                    if seen != a._version:
                        self._weights[c].write(to_numpy(a))
                        self._versions[c] = a._version
            flat = [a for a, c in zip(args, self.const) if c is None and isinstance(a, torch.Tensor)]
            arrays = v.run(self.ctx, flat)
        return v.unflatten(arrays, flat, lambda name: next(a for a, c in zip(args, self.const) if c == name))


def genie_backend(gm, example_inputs, options=None, **kwargs):
    """The TorchDynamo backend: returns a callable that runs `gm` through
    Genie (see the module's doc)."""
    opts = dict(options or {}, **kwargs)
    return _Compiled(gm, example_inputs, opts)


def register():
    """Registers backend="genie" with TorchDynamo (idempotent)."""
    from torch._dynamo.backends import registry
    if "genie" not in registry._COMPILER_FNS:
        registry.register_backend(genie_backend, name="genie")


__all__ = ["genie_backend", "register"]
