"""The ``remote_accelerator`` device: PyTorch's PrivateUse1 backend, renamed.

    import genie, torch
    genie.init(master_addr="gpu-server")
    x = torch.randn(1000, 1000, device="remote_accelerator:0")
    y = x @ x                        # recorded, not run
    print(y.sum().item())            # one Genie graph runs on the server now
    model.to("remote_accelerator:0") # parameters uploaded once, resident

A tensor on the device is a RemoteTensor: a wrapper subclass whose value is
either resident in Genie (on the server in remote mode, on this process's
device embedded), initial values still on the host (factories such as
torch.randn run on the host's generator, so seeds give the values they give
on the CPU, and are uploaded when first used), or an operation recorded
lazily. Reading a value (.cpu(), .numpy(), .item(), .tolist(), printing,
bool()) runs one Genie graph of everything recorded on that context whose
result is still referenced from Python: those results stay resident where
they were computed (a KV cache grown by torch.cat stays on the server), the
one asked for is read back.

Operations map onto Genie operators by the same table as genie.torch.capture
(docs/operators.md); each node carries the module path and layer of the
nn.Module that called it. An operation Genie has no operator for raises
genie.torch.UnsupportedOpError naming the op and the module path: there is
no silent fallback to the CPU (initialising tensors is the one thing done on
the host). Inference only: ``.backward()`` raises genie.UnsupportedError.
In-place operations rebind the tensor they are called on; views made
before an in-place change (detach, slicing) keep the value they had.

``remote_accelerator:N`` is the N-th device of the server in remote mode
(genie "remote:N"); embedded, 0 is this process's default device and N > 0
local GPU N-1.
"""

import itertools
import threading
import warnings
import weakref

import torch
import torch.nn as nn

from .. import errors
from ._emit import Emitter, GV, UnsupportedOpError, canonical_function, canonical_method, to_numpy
from ._trace import _leaves, fn_name
from .capture import _map

DEVICE = "remote_accelerator"

_lock = threading.RLock()
_registered = False
class _State(threading.local):
    def __init__(self):
        self.stack = []  # module paths of the running forward calls


_state = _State()
_module_names = weakref.WeakKeyDictionary()
_pending = set()  # _Node with a recorded op, not yet run (until the next run on its context)
_sequence = itertools.count()
_uploads = weakref.WeakKeyDictionary()  # Context -> {id(torch tensor): (weakref, genie.Tensor)}
_checked_devices = weakref.WeakKeyDictionary()  # Context -> {index: genie device string}


# ---------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------

class _Node:
    """One value on the device: resident (source), host-initialised (host)
    or recorded (op, args)."""

    __slots__ = ("ctx", "device", "meta", "mkey", "op", "args", "kwargs", "source", "host", "module",
                 "refs", "seq", "__weakref__")

    def __init__(self, ctx, device, meta, op=None, args=(), kwargs=None, source=None, host=None):
        self.ctx, self.device, self.meta = ctx, device, meta
        self.mkey = ("t", tuple(meta.shape), meta.dtype) if isinstance(meta, torch.Tensor) else None
        self.op, self.args, self.kwargs = op, args, kwargs or {}
        self.source, self.host = source, host
        self.module = _current_module() if op is not None else None
        self.refs = []  # weak references of the RemoteTensors showing this value
        if op is not None:
            self.seq = next(_sequence)  # recording order: graphs are built in it
            _pending.add(self)

    def referenced(self):
        """Whether a live RemoteTensor still shows this value (one rebound
        by an in-place op shows another)."""
        live = []
        for r in self.refs:
            t = r()
            if t is not None and t._gnode is self:
                live.append(r)
        self.refs = live
        return bool(live)


class RemoteTensor(torch.Tensor):
    """A tensor on the remote_accelerator device (see the module's doc)."""

    @staticmethod
    def __new__(cls, node, requires_grad=False):
        meta = node.meta
        r = torch.Tensor._make_wrapper_subclass(cls, meta.shape, dtype=meta.dtype, device=node.device,
                                                requires_grad=requires_grad)
        r._gnode = node
        node.refs.append(weakref.ref(r))
        return r

    def _rebind(self, node):
        self._gnode = node
        node.refs.append(weakref.ref(self))

    __torch_function__ = None  # set below
    __torch_dispatch__ = None

    def __repr__(self, *, tensor_contents=None):
        return _materialised_repr(self)


def _wrap(node):
    if not _hooked:
        _hook_modules()
    return RemoteTensor(node)


def _current_module():
    stack = _state.stack
    return stack[-1] if stack else None


def _meta_of(v):
    if isinstance(v, RemoteTensor):
        return v._gnode.meta
    if isinstance(v, torch.Tensor):
        return torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device="meta") \
            if v.device.type != "meta" else v
    if isinstance(v, torch.device) and v.type == DEVICE:
        return torch.device("meta")
    return v


def _node_arg(v):
    return v._gnode if isinstance(v, RemoteTensor) else v


# ---------------------------------------------------------------------------
# The context and its devices
# ---------------------------------------------------------------------------

def _context():
    from .. import cluster
    if not cluster.is_initialized():
        raise errors.StateError(f"the {DEVICE} device needs genie.init() first (it runs on the "
                                f"context genie.init makes)")
    return cluster.get_context()


def _genie_device(ctx, index):
    """The genie device string of remote_accelerator:index (checked once)."""
    index = 0 if index is None else int(index)
    seen = _checked_devices.setdefault(ctx, {})
    dev = seen.get(index)
    if dev is not None:
        return dev
    if ctx.embedded:
        dev = None if index == 0 else f"gpu:{index - 1}"
    else:
        dev = f"remote:{index}"
    try:
        ctx.tensor([1], "f32", dev).close()  # the library says what exists
    except errors.GenieError as e:
        raise type(e)(f"{DEVICE}:{index} is not a device here: {e.detail or e}", e.code) from None
    seen[index] = dev
    return dev


def device_count():
    """Devices the context can place tensors on (0 before genie.init)."""
    from .. import cluster
    if not cluster.is_initialized():
        return 0
    ctx = cluster.get_context()
    n = 0
    while n < 64:
        try:
            _genie_device(ctx, n)
        except errors.GenieError:
            break
        n += 1
    return n


def _upload(node):
    """Makes node's value resident (host-initialised values go up now)."""
    if node.source is None and node.host is not None:
        ctx = node.ctx
        node.source = ctx.from_numpy(to_numpy(node.host), _genie_device(ctx, node.device.index))
        node.host = None
    return node.source


def _uploaded_constant(ctx, t):
    """A host torch tensor used as a constant (a weight left on the CPU, a
    mask): uploaded once per context while it lives, by identity and
    version."""
    table = _uploads.setdefault(ctx, {})
    entry = table.get(id(t))
    if entry is not None and entry[0]() is t and entry[1] == t._version:
        return entry[2]
    gt = ctx.from_numpy(to_numpy(t))
    key = id(t)
    table[key] = (weakref.ref(t, lambda _r, k=key: table.pop(k, None)), t._version, gt)
    return gt


def _forget(ctx):
    """genie.shutdown: drops what this module keeps for `ctx`."""
    _uploads.pop(ctx, None)
    _checked_devices.pop(ctx, None)
    for n in list(_pending):
        if n.ctx is ctx:
            n.op, n.args, n.kwargs = None, (), {}
            _pending.discard(n)


# ---------------------------------------------------------------------------
# Running what was recorded
# ---------------------------------------------------------------------------

class _Plan:
    """A built graph for one shape of recorded work (see _sync)."""

    __slots__ = ("graph", "leaf_names", "const_names", "root_out")

    def __init__(self, graph, leaf_names, const_names, root_out):
        self.graph = graph
        self.leaf_names = leaf_names  # graph input name of each leaf, in walk order
        self.const_names = const_names  # [(graph input name, index into the constants)]
        self.root_out = root_out  # per root: ("out", output index) or ("leaf", leaf index)


_PLANS_MAX = 64
_plans = {}  # signature -> _Plan (per process: signatures name no context)


def _walk(roots):
    """Post-order of the recorded work under `roots` (no recursion: chains
    are long), its leaves, the host constants it uses, and a signature that
    is equal exactly when the same graph would be built."""
    order, index, leaves, consts, const_index = [], {}, [], [], {}

    def enc(v):
        if isinstance(v, _Node):
            return ("n", index[id(v)])
        if isinstance(v, torch.Tensor):
            k = const_index.get(id(v))
            if k is None:
                k = const_index[id(v)] = len(consts)
                consts.append(v)
            return ("c", k, tuple(v.shape), v.dtype)
        if isinstance(v, (tuple, list)):
            return (type(v).__name__,) + tuple(enc(x) for x in v)
        if isinstance(v, dict):
            return ("d",) + tuple((k, enc(x)) for k, x in sorted(v.items()))
        if isinstance(v, slice):
            return ("s", v.start, v.stop, v.step)
        return v if isinstance(v, (int, float, bool, str, type(None), torch.dtype)) else ("r", repr(v))

    sig = []
    for root in roots:
        stack = [(root, False)]
        while stack:
            node, ready = stack.pop()
            if id(node) in index:
                continue
            if node.op is None:
                index[id(node)] = len(order)
                order.append(node)
                leaves.append(node)
                sig.append(("in", tuple(node.meta.shape), node.meta.dtype))
                continue
            if not ready:
                stack.append((node, True))
                stack.extend((d, False) for d in _leaves((node.args, node.kwargs))
                             if isinstance(d, _Node) and id(d) not in index)
                continue
            index[id(node)] = len(order)
            order.append(node)
            meta = node.meta
            shape = tuple((tuple(m.shape), m.dtype) for m in meta) if isinstance(meta, tuple) else \
                (tuple(meta.shape), meta.dtype)
            sig.append((node.op[0], enc(node.args), enc(node.kwargs), shape, node.module))
    sig.append(tuple(index[id(r)] for r in roots))
    return order, index, leaves, consts, tuple(sig)


def _build(order, index, leaves, consts, roots):
    em = Emitter(DEVICE)
    em.where = f"a {DEVICE} computation"
    env = {}
    leaf_names = []
    for node in order:
        if node.op is None:
            gv = em.add_input("x", node.meta, role="input")
            leaf_names.append(gv.name)
            env[id(node)] = gv
            continue
        key, desc = node.op
        conv = lambda a: env[id(a)] if isinstance(a, _Node) else a  # noqa: E731
        args, kwargs = _map(node.args, conv), _map(node.kwargs, conv)
        em.module = node.module
        em.module_type = None
        if key == "getitem" and isinstance(args[0], tuple):
            env[id(node)] = args[0][args[1]]
            continue
        env[id(node)] = em.emit(key, args, kwargs, node.meta, key, desc)
    by_id = {id(t): k for k, t in enumerate(consts)}
    const_names = [(name, by_id[id(t)]) for name, t in em.resident.items()]
    leaf_of = {name: k for k, name in enumerate(leaf_names)}
    resident = {name for name, _ in const_names}
    root_out, outputs = [], []
    for root in roots:
        gv = env[id(root)]
        if not isinstance(gv, GV):
            raise TypeError(f"the recorded {root.op[1]} does not produce a tensor")
        if gv.name in leaf_of:
            root_out.append(("leaf", leaf_of[gv.name]))
        elif gv.name in resident:
            root_out.append(("const", next(k for n, k in const_names if n == gv.name)))
        else:
            if gv.name not in outputs:
                em.output(gv)
                outputs.append(gv.name)
            root_out.append(("out", outputs.index(gv.name)))
    return _Plan(em.graph, leaf_names, const_names, root_out)


def _sync(ctx, want=()):
    """Runs everything recorded on ctx that is still referenced (and the
    nodes in `want`) as one graph; results stay resident. The graph built
    for a signature of work is kept and reused when the same work comes
    again (a decode step), with new inputs bound."""
    with _lock:
        mine = [n for n in _pending if n.ctx is ctx]
        _pending.difference_update(mine)  # what is not referenced now never will be
        roots = [n for n in mine if n.op is not None and n.referenced()]
        for n in want:
            if n.op is not None and n not in roots:
                roots.append(n)
        if not roots:
            return
        roots.sort(key=lambda n: n.seq)
        try:
            _run(ctx, roots)
        except BaseException:
            _pending.update(n for n in roots if n.op is not None)
            raise


def _run(ctx, roots):
    order, index, leaves, consts, sig = _walk(roots)
    plan = _plans.get(sig)
    if plan is None:
        plan = _build(order, index, leaves, consts, roots)
        if len(_plans) >= _PLANS_MAX:
            _plans.pop(next(iter(_plans))).graph.close()
        _plans[sig] = plan
    bindings = {name: _upload(node) for name, node in zip(plan.leaf_names, leaves)}
    for name, k in plan.const_names:
        bindings[name] = _uploaded_constant(ctx, consts[k])
    results = []
    if any(kind == "out" for kind, _ in plan.root_out):
        with ctx.submit(plan.graph, bindings) as fut:
            results = fut.result()
    for root, (kind, k) in zip(roots, plan.root_out):
        src = results[k] if kind == "out" else leaves[k].source if kind == "leaf" else \
            _uploaded_constant(ctx, consts[k])
        root.source, root.op, root.args, root.kwargs = src, None, (), {}


def _value(t):
    """The host torch tensor of a RemoteTensor."""
    node = t._gnode
    if node.host is not None:
        return node.host.clone()
    if node.op is not None:
        _sync(node.ctx, [node])
    arr = node.source.read()
    out = torch.from_numpy(arr)
    if node.meta.dtype == torch.bfloat16:
        out = out.view(torch.bfloat16)
    return out.reshape(node.meta.shape)


def synchronize(device=None):
    """Runs everything recorded on the device (torch.remote_accelerator.synchronize)."""
    from .. import cluster
    if cluster.is_initialized():
        _sync(cluster.get_context())


def _materialised_repr(t):
    text = repr(_value(t))
    return text[:-1] + f", device='{t.device}')" if text.endswith(")") else text


# ---------------------------------------------------------------------------
# torch function protocol: recording
# ---------------------------------------------------------------------------

_READ = {"cpu", "numpy", "item", "tolist", "__bool__", "__float__", "__int__", "__index__",
         "__array__", "__complex__", "__format__", "__str__", "__repr__"}
_PASS = {"size", "dim", "numel", "stride", "is_contiguous", "element_size", "__len__", "nelement",
         "ndimension", "is_floating_point", "is_complex", "get_device", "storage_offset",
         "requires_grad_", "__hash__", "__setstate__", "__dir__", "__sizeof__", "has_names",
         "is_signed", "dim_order", "is_inference", "__reduce_ex__", "retain_grad", "register_hook",
         "is_pinned", "is_shared", "__iter__"}
_VIEW_PROPS = {"T": "T", "mT": "mT", "data": "identity"}
_FACTORY_LIKE = {"zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
                 "randint_like", "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"}
#: Names handled before recording (never on the fast path).
_SPECIAL = _READ | _PASS | _FACTORY_LIKE | {"to", "cuda", DEVICE, "type", "detach", "clone", "contiguous",
                                            "detach_", "__setitem__", "backward", "__get__", "__set__",
                                            "__delete__", "__setattr__"}


def _is_device_arg(v):
    try:
        return torch.device(v).type == DEVICE
    except (TypeError, RuntimeError):
        return False


_fast = {}  # func -> (key, desc, function recorded, in place): operations seen before


def _torch_function(cls, func, types, args=(), kwargs=None):
    kwargs = kwargs or {}
    fast = _fast.get(func)
    if fast is not None:
        out = _record(fast[0], fast[1], fast[2], args, kwargs)
        if fast[3]:
            return _inplace(args[0], out, fast[1])
        return out
    name = getattr(func, "__name__", "")
    if name == "__get__":
        prop = getattr(getattr(func, "__self__", None), "__name__", "")
        if prop in _VIEW_PROPS:
            return _record(_VIEW_PROPS[prop], f"Tensor.{prop}", func, args, kwargs)
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)
    if name in _PASS or name in ("__set__", "__delete__", "__setattr__"):
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)
    if name == "backward" or func is torch.autograd.backward:
        raise errors.UnsupportedError(f"backward on the {DEVICE} device: Genie runs inference "
                                      f"here (move the model to the CPU to train it)")
    self = args[0] if args else None
    if name in _READ and isinstance(self, RemoteTensor):
        host = _value(self)
        if name == "__repr__":
            return _materialised_repr(self)
        if name == "cpu":
            return host
        return getattr(host, name)(*args[1:], **kwargs)
    if name in ("to", "cuda", DEVICE, "type") and isinstance(self, RemoteTensor):
        return _to(self, name, args[1:], kwargs)
    if name in ("detach", "clone", "contiguous", "detach_"):
        if isinstance(self, RemoteTensor):
            return self if name == "detach_" else _wrap(self._gnode)
    if name in _FACTORY_LIKE:
        return _host_factory(func, name, args, kwargs)
    if name == "__setitem__":
        raise UnsupportedOpError(f"indexed assignment (x[...] = v) on the {DEVICE} device has no "
                                 f"Genie operator; build the value with torch.cat instead",
                                 op="Tensor.__setitem__", module_path=_current_module())
    inplace = name.endswith("_") and not name.endswith("__")
    base = name[:-1] if inplace else name
    if getattr(torch.Tensor, name, None) is func or name.startswith("__") or inplace:
        key, desc = canonical_method(base), f"Tensor.{name}"
    else:
        key, desc = canonical_function(func), f"torch function {fn_name(func)}"
    if key is None:
        # Not one of Genie's operators: a query (sizes, flags) runs as it is;
        # anything that computes reaches the device's kernels, which refuse
        # it unless it only initialises host-side values.
        try:
            with torch._C.DisableTorchFunctionSubclass():
                return func(*args, **kwargs)
        except UnsupportedOpError as e:
            raise UnsupportedOpError(f"{desc} has no Genie operator{_where_text(e.module_path)}; "
                                     f"docs/operators.md lists the operators (the {DEVICE} device "
                                     f"runs only what Genie can run)", op=desc,
                                     module_path=e.module_path) from None
    recorded = func if not inplace else getattr(torch.Tensor, base)
    out = _record(key, desc, recorded, args, kwargs)
    if name not in _SPECIAL:
        try:
            _fast[func] = (key, desc, recorded, inplace)
        except TypeError:  # not hashable
            pass
    return _inplace(self, out, desc) if inplace else out


def _inplace(self, out, desc):
    if not isinstance(out, RemoteTensor) or not isinstance(self, RemoteTensor):
        raise UnsupportedOpError(f"{desc} on the {DEVICE} device", op=desc, module_path=_current_module())
    self._rebind(out._gnode)
    return self


def _where_text(where):
    return f" (in module '{where or '<root>'}')" if where is not None else ""


def _device_of(args, kwargs):
    for a in args:
        if type(a) is RemoteTensor:
            return a._gnode.ctx, a._gnode.device
    for a in _leaves((args, kwargs)):
        if isinstance(a, RemoteTensor):
            return a._gnode.ctx, a._gnode.device
    return None, None


class _Uncacheable(Exception):
    pass


def _meta_enc(v):
    t = type(v)
    if t is RemoteTensor:
        return v._gnode.mkey
    if t is float or t is int or t is bool:
        return (t, v)
    if t is tuple:
        return tuple(_meta_enc(x) for x in v)
    if isinstance(v, RemoteTensor):
        return v._gnode.mkey
    if isinstance(v, torch.Tensor):
        return ("h", tuple(v.shape), v.dtype, v.device.type)
    if isinstance(v, (tuple, list)):
        return (type(v).__name__,) + tuple(_meta_enc(x) for x in v)
    if isinstance(v, dict):
        return ("d",) + tuple((k, _meta_enc(x)) for k, x in sorted(v.items()))
    if isinstance(v, slice):
        return ("s", _meta_enc(v.start), _meta_enc(v.stop), _meta_enc(v.step))
    if isinstance(v, (int, float, bool, str, type(None), torch.dtype, torch.device)) or v is Ellipsis:
        return (type(v).__name__, v)
    raise _Uncacheable


_META_MAX = 4096
_metas = {}  # (func, encoded arguments) -> example output on the meta device


def _record(key, desc, func, args, kwargs):
    ctx, device = _device_of(args, kwargs)
    try:
        mkey = (func, _meta_enc(args), _meta_enc(kwargs))
    except _Uncacheable:
        mkey = None
    out = _metas.get(mkey) if mkey is not None else None
    if out is None:
        # Shapes and dtypes from PyTorch's own meta kernels (slow: in Python
        # for many ops), kept for the same operation on the same shapes.
        with torch._C.DisableTorchFunctionSubclass():
            margs, mkwargs = _map(args, _meta_of), _map(kwargs, _meta_of)
            try:
                out = func(*margs, **mkwargs)
            except NotImplementedError as e:
                out = e
        if mkey is not None and not isinstance(out, Exception):
            if len(_metas) >= _META_MAX:
                _metas.clear()
            _metas[mkey] = out
    has_tensor = isinstance(out, torch.Tensor) or (
        isinstance(out, (tuple, list)) and out and all(isinstance(o, torch.Tensor) for o in out))
    if isinstance(out, Exception):
        where = _current_module()
        raise UnsupportedOpError(f"{desc} with these arguments has no Genie operator{_where_text(where)}: "
                                 f"{out}", op=desc, module_path=where)
    if not has_tensor:
        return out  # sizes, dims: known without running anything
    nargs, nkwargs = _map(args, _node_arg), _map(kwargs, _node_arg)
    if isinstance(out, torch.Tensor):
        return _wrap(_Node(ctx, device, out, (key, desc), nargs, nkwargs))
    parent = _Node(ctx, device, tuple(out), (key, desc), nargs, nkwargs)
    kids = tuple(_wrap(_Node(ctx, device, o, ("getitem", "getitem"), (parent, i))) for i, o in enumerate(out))
    return type(out)(kids) if isinstance(out, list) else kids


def _to(t, name, args, kwargs):
    """Tensor.to / .cuda / .remote_accelerator / .type on the device."""
    if name == "cuda":
        raise errors.UnsupportedError(f"a {DEVICE} tensor cannot move to CUDA directly: "
                                      f"use .cpu() first")
    if name == "type":
        if not args and not kwargs:
            return f"torch.{DEVICE}.{str(t.dtype).split('.')[-1]}"
        raise errors.UnsupportedError(f"Tensor.type(...) on the {DEVICE} device: use .to(dtype)")
    device, dtype = None, kwargs.get("dtype")
    if name == DEVICE:
        device = torch.device(DEVICE, args[0] if args and args[0] is not None else 0)
    for a in list(args) + [kwargs.get("device")]:
        if isinstance(a, torch.dtype):
            dtype = a
        elif isinstance(a, torch.Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, (str, torch.device, int)) and a is not None:
            device = torch.device(a) if not isinstance(a, int) else torch.device(DEVICE, a)
    if device is not None and device.type == "cpu":
        host = _value(t)
        return host.to(dtype) if dtype is not None else host
    if device is not None and device.type != DEVICE:
        raise errors.UnsupportedError(f"a {DEVICE} tensor cannot move to {device} directly: "
                                      f"use .cpu() first")
    if device is not None and (device.index or 0) != (t.device.index or 0):
        out = _wrap(_Node(t._gnode.ctx, torch.device(DEVICE, device.index or 0), t._gnode.meta,
                          host=_value(t)))
        t = out
    if dtype is not None and dtype != t.dtype:
        return _record("cast", "Tensor.to", torch.Tensor.to, (t, dtype), {})
    return t


def _host_factory(func, name, args, kwargs):
    """zeros_like / new_ones / randn_like ...: made on the host (the host's
    generator), uploaded when first used; on the device unless `device`
    says otherwise."""
    src = args[0]
    ctx, device = _device_of(args, kwargs)
    dev_kw = kwargs.get("device")
    ours = dev_kw is None or _is_device_arg(dev_kw)
    kw = {k: v for k, v in kwargs.items() if k != "device" or not ours}
    with torch._C.DisableTorchFunctionSubclass():
        if name.endswith("_like"):
            host = getattr(torch, name)(torch.empty(src.shape, dtype=src.dtype), *args[1:], **kw)
        else:
            host = getattr(torch.empty(0, dtype=src.dtype), name)(*args[1:], **kw)
    if not ours:
        return host
    if dev_kw is not None:
        device = torch.device(dev_kw)
        device = torch.device(DEVICE, device.index or 0)
    if ctx is None:
        ctx = _context()
    _genie_device(ctx, device.index)
    meta = torch.empty(host.shape, dtype=host.dtype, device="meta")
    return _wrap(_Node(ctx, device, meta, host=host))


# ---------------------------------------------------------------------------
# torch dispatch: factories and copies that reach the device's kernels
# ---------------------------------------------------------------------------

def _host_of(t):
    """The host tensor a RemoteTensor's value is initialised in (made host-
    side: the value is read back when it was resident or recorded)."""
    node = t._gnode
    if node.host is None:
        host = _value(t).clone()
        new = _Node(node.ctx, node.device, node.meta, host=host)
        t._rebind(new)
        node = new
    return node.host


def _torch_dispatch(cls, func, types, args=(), kwargs=None):
    kwargs = kwargs or {}
    name = func.overloadpacket.__name__
    if name in ("detach", "alias", "clone", "lift_fresh"):
        return _wrap(args[0]._gnode)
    if name == "copy_":
        dst, src = args[0], args[1]
        if isinstance(src, RemoteTensor):
            if tuple(src.shape) == tuple(dst.shape) and src.dtype == dst.dtype and \
                    (src.device.index or 0) == (dst.device.index or 0):
                dst._rebind(src._gnode)
                return dst
            src = _value(src)
        host = src.detach().to(dst.dtype).expand(dst.shape).contiguous().clone()
        dst._rebind(_Node(dst._gnode.ctx, dst._gnode.device, dst._gnode.meta, host=host))
        return dst
    if name == "_to_copy":
        dev = kwargs.get("device")
        if dev is not None and torch.device(dev).type == "cpu":
            return _value(args[0]).to(kwargs.get("dtype") or args[0].dtype)
    # Everything else (torch.randn's normal_, torch.zeros's zero_, arange's
    # out= variant ...) initialises a host-side value: run it on the host.
    remote = [a for a in _leaves((args, kwargs)) if isinstance(a, RemoteTensor)]
    if any(a._gnode.host is None for a in remote) and name not in _HOST_OK:
        where = _current_module()
        raise UnsupportedOpError(f"aten.{name} has no Genie operator on the {DEVICE} device"
                                 f"{_where_text(where)}", op=f"aten.{name}", module_path=where)
    hosts = {id(a): _host_of(a) for a in remote}
    out = func(*_map(args, lambda a: hosts[id(a)] if isinstance(a, RemoteTensor) else a),
               **_map(kwargs, lambda a: hosts[id(a)] if isinstance(a, RemoteTensor) else a))
    if isinstance(out, torch.Tensor) and any(out is h for h in hosts.values()):
        return next(a for a in remote if hosts[id(a)] is out)
    if isinstance(out, torch.Tensor):
        ctx, device = remote[0]._gnode.ctx, remote[0]._gnode.device
        return _wrap(_Node(ctx, device, torch.empty(out.shape, dtype=out.dtype, device="meta"), host=out))
    return out


#: aten ops that may read a resident value back to initialise another (a
#: copy on the host is what the user asked for).
_HOST_OK = {"fill_", "zero_", "normal_", "uniform_", "random_", "bernoulli_", "exponential_",
            "geometric_", "cauchy_", "log_normal_"}


def _empty(size, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    ctx = _context()
    dev = torch.device(device) if device is not None else torch.device(DEVICE, 0)
    if dev.index is None:
        dev = torch.device(DEVICE, 0)
    _genie_device(ctx, dev.index)
    dtype = dtype or torch.get_default_dtype()
    host = torch.empty(size, dtype=dtype)
    return _wrap(_Node(ctx, dev, torch.empty(size, dtype=dtype, device="meta"), host=host))


def _empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
    return _empty(size, dtype, layout, device, pin_memory)


def _on_host(factory):
    """A factory whose composite kernel resizes the tensor it made (arange):
    the whole result is made on the host instead."""
    def kernel(*args, dtype=None, layout=None, device=None, pin_memory=None, **kwargs):
        host = factory(*args, dtype=dtype, **kwargs)
        out = _empty(host.shape, host.dtype, None, device)
        out._gnode.host = host
        return out
    return kernel


RemoteTensor.__torch_function__ = classmethod(_torch_function)
RemoteTensor.__torch_dispatch__ = classmethod(_torch_dispatch)


# ---------------------------------------------------------------------------
# Module paths for annotations and errors
# ---------------------------------------------------------------------------

def _pre_hook(mod, _inputs):
    if torch.compiler.is_compiling():
        return
    stack = _state.stack
    name = _module_names.get(mod)
    if name is None:
        if not stack:
            for n, m in mod.named_modules():
                _module_names.setdefault(m, n)
            name = _module_names.get(mod, "")
        else:
            name = f"{stack[-1]}.{type(mod).__name__}" if stack[-1] else type(mod).__name__
    stack.append(name)


def _post_hook(mod, _inputs, _output):
    if torch.compiler.is_compiling():
        return
    stack = _state.stack
    if stack:
        stack.pop()


# ---------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------

class _DeviceModule:
    """torch.remote_accelerator"""

    @staticmethod
    def is_available():
        from .. import cluster
        return cluster.is_initialized()

    device_count = staticmethod(device_count)
    synchronize = staticmethod(synchronize)

    @staticmethod
    def current_device():
        return 0

    @staticmethod
    def set_device(index):
        if int(index) != 0:
            _genie_device(_context(), int(index))

    @staticmethod
    def is_initialized():
        from .. import cluster
        return cluster.is_initialized()

    @staticmethod
    def _is_in_bad_fork():
        return False

    @staticmethod
    def manual_seed_all(seed):
        """Nothing to seed: random values are made by the host's generator,
        which torch.manual_seed seeds."""

    manual_seed = manual_seed_all

    @staticmethod
    def get_rng_state(device=None):
        return torch.get_rng_state()

    @staticmethod
    def set_rng_state(state, device=None):
        torch.set_rng_state(state)

    @staticmethod
    def get_amp_supported_dtype():
        return [torch.float16, torch.bfloat16]


def _hooks_class(acc):
    class Hooks(acc.PrivateUse1Hooks):
        def is_available(self):
            return True

        def has_primary_context(self, dev_id):
            return True

        def is_built(self):
            return True

    return Hooks


def _guard_class(acc):
    class Guard(acc.DeviceGuard):
        def type_(self):
            return torch._C._autograd.DeviceType.PrivateUse1

    return Guard


def register():
    """Names PyTorch's PrivateUse1 backend remote_accelerator and installs
    its kernels (idempotent; genie.init and `import genie.torch` call it).
    Raises genie.UnsupportedError when another library took PrivateUse1."""
    global _registered, _lib
    with _lock:
        if _registered:
            return
        current = torch._C._get_privateuse1_backend_name()
        if current != DEVICE:
            if current != "privateuseone":
                raise errors.UnsupportedError(
                    f"PyTorch's PrivateUse1 backend is already named {current!r} by another "
                    f"library: the {DEVICE} device cannot be registered in this process")
            torch.utils.rename_privateuse1_backend(DEVICE)
        torch._register_device_module(DEVICE, _DeviceModule)
        acc = getattr(torch._C, "_acc", None)
        if acc is not None and hasattr(acc, "register_python_privateuseone_device_guard"):
            # What PyTorch expects of a registered backend's C++ side (a device
            # guard, backend hooks), given from Python: torch.accelerator and
            # TorchDynamo query them once the device exists.
            acc.register_python_privateuseone_hook(_hooks_class(acc)())
            acc.register_python_privateuseone_device_guard(_guard_class(acc)())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.utils.generate_methods_for_privateuse1_backend(
                for_tensor=True, for_module=True, for_packed_sequence=False, for_storage=False)
        _lib = torch.library.Library("aten", "IMPL")
        _lib.impl("empty.memory_format", _empty, "PrivateUse1")
        _lib.impl("empty_strided", _empty_strided, "PrivateUse1")
        for overload in ("arange", "arange.start", "arange.start_step"):
            _lib.impl(overload, _on_host(torch.arange), "PrivateUse1")
        _registered = True


_hooked = False


def _hook_modules():
    """Module paths for annotations and errors come from global module
    hooks, installed when the first tensor is put on the device (so that a
    process using only torch.compile has none)."""
    global _hooked
    if _hooked:
        return
    with _lock:
        if not _hooked:
            nn.modules.module.register_module_forward_pre_hook(_pre_hook)
            nn.modules.module.register_module_forward_hook(_post_hook, always_call=True)
            # torch.compile warns that global hooks also fire for its wrapper
            # module: these only track the module path, so that is harmless.
            warnings.filterwarnings("ignore", category=UserWarning,
                                    message=r"Using `torch.compile\(module\)` when there are global hooks")
            _hooked = True


_lib = None

__all__ = ["DEVICE", "RemoteTensor", "register", "device_count", "synchronize"]
