"""genie.torch.remote: a lazy tensor.

    x = genie.torch.remote(torch.randn(4, 64))     # uploaded once, resident
    y = torch.relu(x @ w + b).sum(-1)              # recorded, not run
    y.cpu()                                        # one Genie graph, run now

LazyTensor takes part in torch's __torch_function__ protocol: torch
functions, Tensor methods, operators and nn.Modules called on it are
recorded (shapes and dtypes are worked out on the "meta" device, so nothing
is computed). Materialising (.cpu(), .numpy(), .item(), .tolist()) builds
one graph of everything recorded, submits it to the tensor's context (a
server when GENIE_MASTER_ADDR is set) and reads the result; the result then
stays resident there, so further work on it does not recompute. Ordinary
torch tensors mixed in (weights) are uploaded once per context.
"""

import threading
import weakref

import torch

from ..context import Context
from .capture import _fn_name
from ._emit import Emitter, GV, UnsupportedOpError, canonical_function, canonical_method, to_numpy

_default_ctx = None
_default_lock = threading.Lock()


def _default_context():
    global _default_ctx
    with _default_lock:
        if _default_ctx is None or _default_ctx.closed:
            _default_ctx = Context()
        return _default_ctx


class _Uploads:
    """Torch tensors uploaded to one context, by identity, while they live."""

    def __init__(self):
        self.by_id = {}

    def get(self, ctx, t):
        entry = self.by_id.get(id(t))
        if entry is not None and entry[0]() is t:
            return entry[1]
        gt = ctx.from_numpy(to_numpy(t))
        key = id(t)
        self.by_id[key] = (weakref.ref(t, lambda _r, k=key: self.by_id.pop(k, None)), gt)
        return gt


_uploads = weakref.WeakKeyDictionary()  # Context -> _Uploads


def _unwrap(v, fn):
    if isinstance(v, (tuple, list)):
        return type(v)(_unwrap(x, fn) for x in v)
    if isinstance(v, dict):
        return {k: _unwrap(x, fn) for k, x in v.items()}
    return fn(v)


def _to_meta(v):
    if isinstance(v, LazyTensor):
        return v._meta
    if isinstance(v, torch.Tensor):
        return v.detach().to("meta")
    return v


class LazyTensor:
    """A tensor whose value is computed by Genie when first needed."""

    def __init__(self, meta, ctx, op=None, args=(), kwargs=None, source=None, index=None):
        self._meta = meta  # shape and dtype, on the meta device
        self._ctx = ctx
        self._op = op  # (key, description) of the recorded operation
        self._args = args
        self._kwargs = kwargs or {}
        self._source = source  # resident genie.Tensor once known
        self._index = index  # output index of a multi-output operation
        self._value = None

    # -- the protocol -------------------------------------------------------

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in ("cpu", "numpy", "tolist", "item") and isinstance(args[0], LazyTensor):
            return getattr(args[0], name)(*args[1:], **kwargs)
        if getattr(torch.Tensor, name, None) is func or name.startswith("__"):
            key, desc = canonical_method(name), f"Tensor.{name}"
        else:
            key, desc = canonical_function(func), f"torch function {_fn_name(func)}"
        ctx = next(a._ctx for a in _flat(args, kwargs) if isinstance(a, LazyTensor))
        out = func(*_unwrap(args, _to_meta), **_unwrap(kwargs, _to_meta))
        if key is None and (isinstance(out, torch.Tensor) or (isinstance(out, (tuple, list)) and out
                                                             and isinstance(out[0], torch.Tensor))):
            raise UnsupportedOpError(f"{desc} has no Genie operator (recorded on a "
                                     f"genie.torch.remote tensor); docs/operators.md lists the "
                                     f"operators", op=desc)
        if isinstance(out, torch.Tensor):
            return cls(out, ctx, (key, desc), args, kwargs)
        if isinstance(out, (tuple, list)) and out and all(isinstance(o, torch.Tensor) for o in out):
            parent = cls(tuple(out), ctx, (key, desc), args, kwargs)
            return tuple(cls(o, ctx, ("getitem", "getitem"), (parent, i), {}) for i, o in enumerate(out))
        return out  # sizes, dims ...: known without running anything

    def _call(self, method, *args, **kwargs):
        return LazyTensor.__torch_function__(getattr(torch.Tensor, method), (LazyTensor,),
                                             (self,) + args, kwargs)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        if name in ("shape", "dtype", "ndim", "is_floating_point"):
            return getattr(self._meta, name)
        if callable(getattr(torch.Tensor, name, None)):
            return lambda *a, **k: self._call(name, *a, **k)
        raise AttributeError(f"LazyTensor has no attribute '{name}'")

    def size(self, dim=None):
        return self._meta.size() if dim is None else self._meta.size(dim)

    def dim(self):
        return self._meta.dim()

    @property
    def device(self):
        return torch.device("cpu")

    def __len__(self):
        return len(self._meta)

    def __repr__(self):
        state = "materialised" if self._value is not None else "lazy"
        return f"LazyTensor(shape={list(self._meta.shape)}, dtype={self._meta.dtype}, {state})"

    __hash__ = object.__hash__

    # -- materialising --------------------------------------------------------

    def cpu(self):
        """Runs everything recorded up to this tensor through Genie and
        returns the value as a torch tensor."""
        if self._value is None:
            self._materialise()
        return self._value

    def numpy(self):
        return self.cpu().numpy()

    def tolist(self):
        return self.cpu().tolist()

    def item(self):
        return self.cpu().item()

    def to(self, *args, **kwargs):
        if args and (args[0] == "cpu" or args[0] == torch.device("cpu")) and len(args) == 1 and not kwargs:
            return self.cpu()
        return self._call("to", *args, **kwargs)

    def _materialise(self):
        ctx = self._ctx
        uploads = _uploads.setdefault(ctx, _Uploads())
        em = Emitter("lazy")
        em.where = "a genie.torch.remote computation"
        bindings, env = {}, {}

        def value(lt):
            if id(lt) in env:
                return env[id(lt)]
            if lt._source is not None:
                gv = em.add_input("x", lt._meta, role="input")
                bindings[gv.name] = lt._source
            else:
                key, desc = lt._op
                args = _unwrap(lt._args, lambda a: value(a) if isinstance(a, LazyTensor) else a)
                kwargs = _unwrap(lt._kwargs, lambda a: value(a) if isinstance(a, LazyTensor) else a)
                gv = em.emit(key, args, kwargs, lt._meta, key or "op", desc)
            env[id(lt)] = gv
            return gv

        gv = value(self)
        if not isinstance(gv, GV):
            raise TypeError("the recorded computation does not produce a tensor")
        if gv.name in bindings:  # a leaf: read it
            out = bindings[gv.name]
            self._value = torch.from_numpy(out.read())
            return
        em.output(gv)
        for name, t in em.resident.items():
            bindings[name] = uploads.get(ctx, t)
        with em.graph, ctx.submit(em.graph, bindings) as fut:
            fut.wait()
            out = fut.output(0)
        self._value = torch.from_numpy(out.read())
        # The result stays resident: later work starts from it.
        self._source, self._op, self._args, self._kwargs = out, None, (), {}


def _flat(args, kwargs):
    out = []
    _unwrap((args, kwargs), out.append)
    return out


def _dunder(name):
    def op(self, *args):
        return self._call(name, *args)
    op.__name__ = name
    return op


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
              "__rtruediv__", "__matmul__", "__rmatmul__", "__neg__", "__pow__", "__getitem__",
              "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"):
    setattr(LazyTensor, _name, _dunder(_name))


def remote(tensor, context=None, device=None):
    """A LazyTensor holding `tensor`, uploaded now to `context` (default: a
    shared genie.Context, remote when GENIE_MASTER_ADDR is set) on `device`
    (default: where the context runs graphs), where it stays resident."""
    ctx = context if context is not None else _default_context()
    src = ctx.from_numpy(to_numpy(tensor), device)
    meta = torch.empty(tensor.shape, dtype=tensor.dtype, device="meta")
    return LazyTensor(meta, ctx, source=src)
