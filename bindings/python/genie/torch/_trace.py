"""Concrete tracing: a module's forward run once, eagerly, on its example
inputs, recording every operation that touches them.

The example inputs are wrapped in a torch.Tensor subclass (_Traced) that
takes part in torch's __torch_function__ protocol. Each torch function,
Tensor method or operator with a traced argument runs for real and, when it
returns tensors, is recorded as a node of a torch.fx Graph whose result is
traced in turn. Everything else is plain eager PyTorch: shapes are ints
(``B, T, C = x.size()``, ``x.shape[-1] // n``), ``torch.arange(T)``,
``torch.zeros``, ``torch.tril(...)``, ``self.mask[:, :, :T, :T] == 0``,
slices of parameters and embeddings of constant positions are computed once
and become constants of the graph. The graph is therefore specialised to the
example inputs' shapes, which is what a Genie graph with static shapes is.

Leaf modules that Genie maps as a whole (nn.Linear, nn.Conv2d, nn.BatchNorm
...: _emit.LEAF_MODULES) are recorded as one call_module node; module paths
come from forward hooks, so every node knows the module that created it.

What cannot be specialised is refused with UnsupportedOpError: reading a
traced value into Python (``bool(x)``, ``x.item()``, ``x.tolist()``: control
flow on tensor values), writing a traced value into a constant tensor or
in place into a view of another traced tensor.
"""

import inspect
import operator

import torch
import torch.fx as fx

from ._emit import LEAF_MODULES, UnsupportedOpError

# Reading these from a traced tensor would bake the example's values in.
_DATA_DEPENDENT = {"item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__",
                   "__complex__", "__array__", "__nonzero__"}
# Tensor-returning, but from shapes and dtypes only: constants.
_SHAPE_ONLY = {"new_zeros", "new_ones", "new_full", "new_empty", "new_tensor", "zeros_like",
               "ones_like", "full_like", "empty_like"}
# Ops whose result shares storage with their input (in place after them is refused).
_VIEWS = {"view", "reshape", "transpose", "permute", "t", "T", "mT", "__getitem__", "getitem",
          "split", "chunk", "unsqueeze", "squeeze", "flatten", "expand", "narrow", "select",
          "view_as", "reshape_as", "unflatten", "as_strided", "detach", "contiguous"}


def fn_name(fn):
    """Public name of a torch function: torch.cumsum, torch.nn.functional.
    unfold, operator.floordiv ..."""
    import torch.nn.functional as F
    name = getattr(fn, "__name__", repr(fn))
    for mod, prefix in ((torch, "torch"), (F, "torch.nn.functional"), (operator, "operator"),
                        (torch.fft, "torch.fft"), (torch.linalg, "torch.linalg")):
        if getattr(mod, name, None) is fn:
            return f"{prefix}.{name}"
    mod = getattr(fn, "__module__", None) or ""
    return f"{mod}.{getattr(fn, '__qualname__', name)}".lstrip(".")


def method_name(func):
    """The Tensor method, operator or property name of `func`, or None when
    it is a function (torch.*, torch.nn.functional.*)."""
    name = getattr(func, "__name__", "")
    if name == "__get__":  # a property: Tensor.T.__get__, Tensor.shape.__get__
        return getattr(getattr(func, "__self__", None), "__name__", name)
    if getattr(torch.Tensor, name, None) is func or name.startswith("__"):
        return name
    return None


class _Traced(torch.Tensor):
    """A real tensor (the example's value) that records what is done to it."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        rec = None
        for a in _leaves((args, kwargs)):
            if isinstance(a, _Traced):
                rec = a.__dict__.get("_g_rec")
                if rec is not None:
                    break
        if rec is None:
            with torch._C.DisableTorchFunction():
                return func(*args, **kwargs)
        return rec.call(func, args, kwargs)


def _leaves(v, out=None):
    out = [] if out is None else out
    if isinstance(v, (tuple, list)):
        for x in v:
            _leaves(x, out)
    elif isinstance(v, dict):
        for x in v.values():
            _leaves(x, out)
    elif isinstance(v, slice):
        _leaves((v.start, v.stop, v.step), out)
    else:
        out.append(v)
    return out


def _map(v, fn):
    if isinstance(v, (tuple, list)):
        items = [_map(x, fn) for x in v]
        if type(v) in (tuple, list):
            return type(v)(items)
        try:  # named tuples, torch.return_types
            return type(v)(items) if not hasattr(v, "_fields") else type(v)(*items)
        except TypeError:
            return tuple(items)
    if isinstance(v, dict):
        return type(v)((k, _map(x, fn)) for k, x in v.items())
    if isinstance(v, slice):
        return slice(_map(v.start, fn), _map(v.stop, fn), _map(v.step, fn))
    return fn(v)


def _plain(t):
    return t.as_subclass(torch.Tensor) if isinstance(t, _Traced) else t


class Trace:
    """The recorded forward: `graph` (a torch.fx Graph whose nodes carry
    meta["genie_val"], the example value, and meta["genie_module"], the
    module path), the root `module`, `inputs` (placeholder names, in order)
    and `output` (the forward's result, traced tensors as nodes)."""

    def __init__(self, module):
        self.module = module
        self.graph = fx.Graph()
        self.inputs = []
        self.output = None
        self._stack = [("", None)]  # (module path, leaf call or None)
        self._suspended = 0  # inside a leaf module: run, do not record
        self._names = {id(m): n for n, m in module.named_modules()}

    # -- nodes ---------------------------------------------------------------

    def _node(self, op, target, args, kwargs, val, name, module=None):
        node = self.graph.create_node(op, target, args, kwargs, name=name)
        node.meta["genie_val"] = val
        node.meta["genie_module"] = self._stack[-1][0] if module is None else module
        return node

    def _wrap(self, t, node):
        if not isinstance(t, _Traced):
            t = t.as_subclass(_Traced)
        t.__dict__["_g_rec"] = self
        t.__dict__["_g_node"] = node
        return t

    def _arg(self, a):
        return a.__dict__["_g_node"] if isinstance(a, _Traced) and a.__dict__.get("_g_rec") is self else a

    def placeholder(self, name, value):
        node = self._node("placeholder", name, (), {}, value, name)
        self.inputs.append(name)
        return self._wrap(value.detach().clone(), node)

    def unsupported(self, what, detail):
        path = self._stack[-1][0]
        where = f"module '{path or '<root>'}'"
        raise UnsupportedOpError(f"{what} {detail} (in {where}); capture specialises the model to "
                                 f"the example inputs' shapes, not their values", op=what,
                                 module_path=path)

    # -- the protocol ----------------------------------------------------------

    def call(self, func, args, kwargs):
        mname = method_name(func)
        name = mname or getattr(func, "__name__", "")
        desc = f"Tensor.{mname}" if mname else f"torch function {fn_name(func)}"
        leaves = _leaves((args, kwargs))
        traced = [a for a in leaves if isinstance(a, _Traced) and a.__dict__.get("_g_rec") is self]
        if self._suspended:
            with torch._C.DisableTorchFunction():
                return func(*args, **kwargs)
        if name == "__iter__" and traced and args and args[0] is traced[0]:
            x = args[0]
            return iter([x[i] for i in range(x.shape[0])])
        if name in _DATA_DEPENDENT and traced:
            self.unsupported(desc, "reads a traced tensor's value into Python (control flow or "
                                   "arithmetic on tensor values)")
        mutates = _mutates(name, mname, kwargs)
        if mutates and traced:
            target = args[0] if args else None
            if name == "__setitem__" or not any(target is t for t in traced):
                self.unsupported(desc, "writes a traced value into another tensor")
            node = target.__dict__["_g_node"]
            if _is_view(node) or any(_is_view(u) for u in node.users):
                self.unsupported(desc, "changes in place a tensor that shares storage with a view")
        with torch._C.DisableTorchFunction():
            out = func(*args, **kwargs)
        if not traced or name in _SHAPE_ONLY:
            return _map(out, _plain)
        if isinstance(out, torch.Tensor):
            val = out.detach().clone() if mutates else _plain(out)
            node = self._record(func, mname, args, kwargs, val)
            return self._wrap(out, node)
        if isinstance(out, (tuple, list)) and out and all(isinstance(o, torch.Tensor) for o in out):
            node = self._record(func, mname, args, kwargs, tuple(_plain(o) for o in out))
            items = [self._wrap(o, self._node("call_function", operator.getitem, (node, i), {},
                                             _plain(o), f"{node.name}_{i}"))
                     for i, o in enumerate(out)]
            return _map(out, lambda o: items[[id(x) for x in out].index(id(o))])
        if any(isinstance(x, torch.Tensor) for x in _leaves(out)):
            self.unsupported(desc, "returns tensors in a structure capture does not follow")
        return out

    def _record(self, func, mname, args, kwargs, val):
        args, kwargs = _map(args, self._arg), _map(kwargs, self._arg)
        if mname is not None:
            if mname.endswith("_") and not mname.startswith("__"):
                mname = mname[:-1]  # in place: the result rebinds the tensor
            base = mname.strip("_") or "op"
            return self._node("call_method", mname, tuple(args), dict(kwargs), val, base)
        return self._node("call_function", func, tuple(args), dict(kwargs), val,
                          getattr(func, "__name__", "op").strip("_") or "op")

    # -- module hooks ------------------------------------------------------------

    def pre_hook(self, mod, inputs):
        path = self._names.get(id(mod), "")
        leaf = None
        if type(mod) in LEAF_MODULES and not self._suspended and any(
                isinstance(a, _Traced) and a.__dict__.get("_g_rec") is self for a in _leaves(inputs)):
            leaf = _map(inputs, self._arg)
            self._suspended += 1
        self._stack.append((path, leaf))

    def post_hook(self, mod, inputs, output):
        path, leaf = self._stack.pop()
        if leaf is None:
            return None
        self._suspended -= 1
        if not isinstance(output, torch.Tensor):
            return None
        node = self._node("call_module", path, tuple(leaf), {}, _plain(output), path.replace(".", "_") or "root",
                          module=path)
        return self._wrap(output, node)


def _mutates(name, mname, kwargs):
    if kwargs.get("out") is not None or kwargs.get("inplace") is True:
        return True
    if name == "__setitem__" or (name.startswith("__i") and name.endswith("__") and name not in (
            "__iter__", "__index__", "__int__", "__invert__")):
        return True
    return mname is not None and mname.endswith("_") and not mname.startswith("__")


def _is_view(node):
    if node.op == "call_method":
        return node.target in _VIEWS
    if node.op == "call_function":
        return node.target is operator.getitem or getattr(node.target, "__name__", "") in _VIEWS
    return False


def _input_names(module, n):
    try:
        params = [p for p in inspect.signature(module.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[i].name if i < len(params) else f"input{i}" for i in range(n)]


def trace(module, example_inputs):
    """Runs `module` on `example_inputs` (a tuple: tensors, possibly nested
    in tuples, lists and dicts, and Python values) and returns the Trace."""
    tr = Trace(module)
    names = _input_names(module, len(example_inputs))

    def wrap_inputs(v, name):
        if isinstance(v, torch.Tensor):
            return tr.placeholder(name, v)
        if isinstance(v, (tuple, list)):
            return type(v)(wrap_inputs(x, f"{name}.{i}") for i, x in enumerate(v))
        if isinstance(v, dict):
            return {k: wrap_inputs(x, f"{name}.{k}") for k, x in v.items()}
        return v

    args = [wrap_inputs(v, n) for v, n in zip(example_inputs, names)]
    handles = []
    try:
        for m in module.modules():
            handles.append(m.register_forward_pre_hook(tr.pre_hook))
            handles.append(m.register_forward_hook(tr.post_hook))
        with torch.no_grad():
            out = module(*args)
    finally:
        for h in handles:
            h.remove()
    tr.output = _map(out, tr._arg)
    tr.graph.output(tr.output)
    return tr
