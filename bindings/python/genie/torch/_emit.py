"""Maps PyTorch operations onto Genie operators (docs/operators.md).

Shared by capture (torch.fx nodes) and the lazy remote tensor (recorded
__torch_function__ calls): both hand each operation to Emitter.emit with
its arguments already mapped — Genie values (GV) for traced tensors,
torch tensors for constants (parameters, buffers, folded values), Python
objects for everything else — and the example output, which gives every
shape statically.
"""

import math
import operator
import re

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .. import errors
from ..graph import Graph


class UnsupportedOpError(errors.UnsupportedError):
    """A PyTorch operation has no Genie operator. ``.op`` names it and
    ``.module_path`` says where in the model it was called."""

    def __init__(self, detail="", code=None, op=None, module_path=None):
        super().__init__(detail, code)
        self.op = op
        self.module_path = module_path


class GV:
    """A Genie value: its name in the graph, shape and torch dtype."""

    __slots__ = ("name", "shape", "dtype")

    def __init__(self, name, shape, dtype):
        self.name = name
        self.shape = tuple(shape)
        self.dtype = dtype

    def __repr__(self):
        return f"GV({self.name}, {list(self.shape)}, {self.dtype})"


_TORCH_TO_GENIE = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
                   torch.int32: "i32", torch.int64: "i64", torch.bool: "bool"}


def genie_dtype(dt):
    try:
        return _TORCH_TO_GENIE[dt]
    except KeyError:
        raise errors.DtypeMismatchError(f"torch dtype {dt} has no Genie element type") from None


def to_numpy(t):
    """A host numpy view of a torch tensor (bf16 as its uint16 bits); copies
    only what is not already a contiguous CPU tensor."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def layer_of(path):
    """Layer index of a module path: its first numeric component
    ("h.3.attn" -> 3, "blocks.0" -> 0), or None."""
    for part in (path or "").split("."):
        if part.isdigit():
            return int(part)
    return None


# Canonical names of call_function targets and Tensor methods.
_FUNCS = {
    torch.matmul: "matmul", operator.matmul: "matmul", torch.bmm: "matmul", torch.mm: "matmul",
    operator.add: "add", torch.add: "add", operator.iadd: "add",
    operator.sub: "sub", torch.sub: "sub", operator.isub: "sub",
    operator.mul: "mul", torch.mul: "mul", operator.imul: "mul",
    operator.truediv: "div", torch.div: "div", torch.true_divide: "div", operator.itruediv: "div",
    operator.neg: "neg", torch.neg: "neg", torch.abs: "abs", operator.abs: "abs",
    torch.relu: "relu", F.relu: "relu", F.gelu: "gelu", F.silu: "silu", torch.tanh: "tanh",
    F.tanh: "tanh", torch.sigmoid: "sigmoid", F.sigmoid: "sigmoid", torch.exp: "exp",
    torch.log: "log", torch.sqrt: "sqrt", torch.rsqrt: "rsqrt", torch.pow: "pow", operator.pow: "pow",
    F.softmax: "softmax", torch.softmax: "softmax", F.layer_norm: "layer_norm", F.linear: "linear",
    F.dropout: "dropout", torch.flatten: "reshape", torch.reshape: "reshape",
    torch.unsqueeze: "reshape", torch.squeeze: "reshape",
    torch.cat: "cat", torch.concat: "cat", torch.split: "split", torch.chunk: "split",
    torch.transpose: "transpose", torch.permute: "permute", torch.t: "t",
    operator.getitem: "getitem", F.conv2d: "conv2d", F.max_pool2d: "max_pool2d",
    F.avg_pool2d: "avg_pool2d", F.adaptive_avg_pool2d: "adaptive_avg_pool2d",
    F.adaptive_max_pool2d: "adaptive_max_pool2d", torch.sum: "sum", torch.mean: "mean",
    torch.amax: "amax", torch.where: "where", torch.masked_fill: "masked_fill",
    F.embedding: "embedding", operator.eq: "eq", operator.ne: "ne", operator.lt: "lt",
    operator.le: "le", operator.gt: "gt", operator.ge: "ge", torch.eq: "eq", torch.ne: "ne",
    torch.lt: "lt", torch.le: "le", torch.gt: "gt", torch.ge: "ge", torch.clone: "identity",
    torch.detach: "identity", F.scaled_dot_product_attention if hasattr(
        F, "scaled_dot_product_attention") else None: "sdpa",
}
# The C-level functions TorchDynamo records in place of their Python wrappers.
for _mod, _fname, _key in ((torch._C._nn, "linear", "linear"), (torch._C._nn, "gelu", "gelu"),
                           (torch._C._nn, "silu", "silu"), (torch._C._nn, "silu_", "silu"),
                           (torch._C._nn, "scaled_dot_product_attention", "sdpa"),
                           (torch, "_C._nn.relu", "relu"), (torch, "softmax", "softmax"),
                           (torch.nn.functional, "relu_", "relu")):
    _f = getattr(_mod, _fname, None)
    if _f is not None:
        _FUNCS.setdefault(_f, _key)
_FUNCS.pop(None, None)

_METHODS = {
    "matmul": "matmul", "bmm": "matmul", "mm": "matmul", "add": "add", "sub": "sub", "mul": "mul",
    "div": "div", "truediv": "div", "neg": "neg", "abs": "abs", "relu": "relu", "tanh": "tanh",
    "sigmoid": "sigmoid", "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "pow": "pow",
    "softmax": "softmax", "view": "reshape", "reshape": "reshape", "flatten": "reshape",
    "unsqueeze": "reshape", "squeeze": "reshape", "view_as": "reshape", "reshape_as": "reshape",
    "transpose": "transpose", "permute": "permute", "t": "t", "contiguous": "identity",
    "clone": "identity", "detach": "identity", "split": "split", "chunk": "split",
    "masked_fill": "masked_fill", "sum": "sum", "mean": "mean", "amax": "amax", "eq": "eq",
    "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "float": "cast", "half": "cast",
    "int": "cast", "long": "cast", "bool": "cast", "to": "cast", "type_as": "cast",
    "__getitem__": "getitem", "__add__": "add", "__radd__": "radd", "__iadd__": "add",
    "__sub__": "sub", "__rsub__": "rsub", "__mul__": "mul", "__rmul__": "rmul",
    "__truediv__": "div", "__rtruediv__": "rdiv", "__matmul__": "matmul", "__rmatmul__": "rmatmul",
    "__neg__": "neg", "__pow__": "pow", "__eq__": "eq", "__ne__": "ne", "__lt__": "lt",
    "__le__": "le", "__gt__": "gt", "__ge__": "ge", "__rdiv__": "rdiv", "__itruediv__": "div",
    "__isub__": "sub", "__imul__": "mul", "T": "T", "mT": "mT", "data": "identity",
    "type": "cast", "double": "cast",
}

#: Module types mapped as a whole (Emitter.emit_module); capture records a
#: call of one as a single node and does not look inside.
LEAF_MODULES = {nn.Linear, nn.Conv2d, nn.LayerNorm, nn.BatchNorm1d, nn.BatchNorm2d, nn.ReLU, nn.Tanh,
                nn.Sigmoid, nn.SiLU, nn.GELU, nn.Dropout, nn.Identity, nn.Softmax, nn.Flatten,
                nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d, nn.Embedding}

_UNARY = {"relu", "tanh", "sigmoid", "exp", "log", "sqrt", "neg", "abs", "silu"}
_BINARY = {"add", "sub", "mul", "div"}
_COMPARE = {"eq", "ne", "lt", "le", "gt", "ge"}

# The Genie operators this emitter produces: Emitter.node refuses any other,
# and scripts/check-op-table.py checks each against the op table
# (src/graph/op_table.def), so an op the library drops or renames fails there.
EMITTED_OPS = frozenset(_UNARY | _BINARY | _COMPARE | {
    "matmul", "linear", "gelu", "softmax", "layer_norm", "dropout", "reshape", "transpose",
    "permute", "split", "concat", "masked_fill", "where", "reduce_sum", "reduce_mean",
    "reduce_max", "cast", "embedding", "conv2d", "max_pool2d", "avg_pool2d",
    "adaptive_avg_pool2d", "adaptive_max_pool2d", "attention", "slice"})


def canonical_function(fn):
    return _FUNCS.get(fn)


def canonical_method(name):
    return _METHODS.get(name)


def _arg(args, kwargs, i, name, default=None):
    if len(args) > i:
        return args[i]
    return kwargs.get(name, default)


def _pair(v):
    if isinstance(v, (tuple, list)):
        return [int(v[0]), int(v[1])] if len(v) == 2 else [int(v[0])] * 2
    return [int(v), int(v)]


class Emitter:
    """Builds one Genie graph. Values are named after the traced nodes;
    every node carries the annotations current at emit time (module path,
    layer, phase, modality)."""

    def __init__(self, name, phase="forward", modality=None):
        self.graph = Graph(name)
        self.phase = phase
        self.modality = modality
        self.module = None  # current module path ("" is the root)
        self.where = ""  # description for error messages
        self.module_type = None  # class name of the module at self.module
        self._used = set()
        self._consts = {}
        self._statics = {}  # id(tensor) -> GV
        self.static_names = {}  # id(tensor) -> name (qualified names of parameters)
        #: name -> torch tensor: inputs to upload once and keep resident.
        self.resident = {}
        self.inputs = []  # declared runtime inputs, in order

    # -- names and values ------------------------------------------------

    def fresh(self, base):
        base = re.sub(r"[^A-Za-z0-9_.\-]", "_", base) or "v"
        name, i = base, 1
        while name in self._used:
            i += 1
            name = f"{base}_{i}"
        self._used.add(name)
        return name

    def add_input(self, name, example, role="input"):
        name = self.fresh(name)
        self.graph.input(name, list(example.shape), genie_dtype(example.dtype), role=role)
        if role == "input":
            self.inputs.append(name)
        return GV(name, example.shape, example.dtype)

    def static(self, t, name=None):
        """A constant tensor (parameter, buffer, folded value) as a resident
        input with role weight."""
        gv = self._statics.get(id(t))
        if gv is None:
            gv = self.add_input(self.static_names.get(id(t)) or name or "const", t, role="weight")
            self.resident[gv.name] = t
            self._statics[id(t)] = gv
        return gv

    def scalar(self, value, dtype):
        key = (float(value), dtype)
        gv = self._consts.get(key)
        if gv is None:
            name = self.fresh("scalar")
            arr = np.array(value, dtype=torch.empty((), dtype=dtype).numpy().dtype)
            self.graph.constant(name, arr)
            gv = GV(name, (), dtype)
            self._consts[key] = gv
        return gv

    def val(self, x, like=None):
        """Genie value of an argument: GV, constant tensor or Python number
        (a scalar of `like`'s dtype)."""
        if isinstance(x, GV):
            return x
        if isinstance(x, torch.Tensor):
            if x.dim() == 0 and like is not None and not isinstance(x, nn.Parameter):
                return self.scalar(x.item(), like.dtype)
            return self.static(x)
        if isinstance(x, (bool, int, float)):
            return self.scalar(x, like.dtype if like is not None else torch.float32)
        self.unsupported(f"argument {x!r}")

    # -- nodes -------------------------------------------------------------

    def node(self, op, base, inputs, out, attrs=None, n_out=1):
        """Adds one Genie node; `out` is the example output (a tensor, or a
        sequence of tensors for several outputs). Returns GV(s)."""
        if op not in EMITTED_OPS:
            raise AssertionError(f"emitter: '{op}' is not in EMITTED_OPS")
        name = self.fresh(base)
        outs = [f"{name}:{i}" for i in range(n_out)]
        self.graph.node(op, name, [None if i is None else i.name for i in inputs], outs, attrs,
                        phase=self.phase, module=self.module or None,
                        layer=layer_of(self.module), modality=self.modality)
        if n_out == 1:
            return GV(outs[0], out.shape, out.dtype)
        return tuple(GV(o, t.shape, t.dtype) for o, t in zip(outs, out))

    def output(self, gv):
        self.graph.set_role(gv.name, "output")
        self.graph.output(gv.name)

    def unsupported(self, what):
        where = self.where or "the model"
        if self.module is not None:
            where += f", module '{self.module or '<root>'}'"
            if self.module_type:
                where += f" ({self.module_type})"
        raise UnsupportedOpError(
            f"{what} has no Genie operator (in {where}); docs/operators.md lists the operators",
            op=what, module_path=self.module)

    # -- dispatch ------------------------------------------------------------

    def emit_module(self, mod, args, kwargs, out, base):
        """A leaf nn.Module call. Its parameters become resident weights named
        by the module path."""
        path = self.module or base
        p = lambda n: self.static(getattr(mod, n), f"{path}.{n}")  # noqa: E731
        x = args[0] if args else None
        if isinstance(mod, nn.Linear):
            ins = [x, p("weight")] + ([p("bias")] if mod.bias is not None else [])
            return self.node("linear", base, ins, out)
        if isinstance(mod, nn.Conv2d):
            if isinstance(mod.padding, str) or mod.padding_mode != "zeros":
                self.unsupported(f"nn.Conv2d(padding={mod.padding!r}, padding_mode={mod.padding_mode!r})")
            ins = [x, p("weight")] + ([p("bias")] if mod.bias is not None else [])
            return self.node("conv2d", base, ins, out, {
                "stride": _pair(mod.stride), "padding": _pair(mod.padding),
                "dilation": _pair(mod.dilation), "groups": mod.groups})
        if isinstance(mod, nn.LayerNorm):
            if len(mod.normalized_shape) != 1:
                self.unsupported(f"nn.LayerNorm over {len(mod.normalized_shape)} dims")
            ins = [x] + ([p("weight"), p("bias")] if mod.elementwise_affine else [])
            return self.node("layer_norm", base, ins, out, {"eps": float(mod.eps)})
        if isinstance(mod, (nn.BatchNorm2d, nn.BatchNorm1d)) and mod.training:
            self.unsupported(f"{type(mod).__name__} in training mode (capture is for inference: "
                             f"call .eval() first)")
        if isinstance(mod, (nn.BatchNorm2d, nn.BatchNorm1d)):
            # Inference: y = x * scale + shift, folded per channel.
            with torch.no_grad():
                scale = 1.0 / torch.sqrt(mod.running_var + mod.eps)
                shift = -mod.running_mean * scale
                if mod.affine:
                    scale = scale * mod.weight
                    shift = shift * mod.weight + mod.bias
                bshape = [-1] + [1] * (len(x.shape) - 2)
                scale = scale.reshape(bshape).detach().clone()
                shift = shift.reshape(bshape).detach().clone()
            m = self.node("mul", base + "_scale", [x, self.static(scale, f"{path}.scale")], out)
            return self.node("add", base, [m, self.static(shift, f"{path}.shift")], out)
        simple = {nn.ReLU: "relu", nn.Tanh: "tanh", nn.Sigmoid: "sigmoid", nn.SiLU: "silu"}
        for cls, op in simple.items():
            if type(mod) is cls:
                return self.node(op, base, [x], out)
        if isinstance(mod, nn.GELU):
            return self.node("gelu", base, [x], out, {"approximate": mod.approximate})
        if isinstance(mod, (nn.Dropout, nn.Identity)):
            return x
        if isinstance(mod, nn.Softmax):
            return self.node("softmax", base, [x], out, {"axis": -1 if mod.dim is None else mod.dim})
        if isinstance(mod, nn.Flatten):
            return self._reshape(x, out, base)
        if isinstance(mod, nn.MaxPool2d):
            if mod.dilation not in (1, (1, 1)) or mod.ceil_mode or mod.return_indices:
                self.unsupported("nn.MaxPool2d with dilation, ceil_mode or return_indices")
            return self._pool("max_pool2d", base, x, out, mod.kernel_size, mod.stride, mod.padding)
        if isinstance(mod, nn.AvgPool2d):
            if mod.ceil_mode or not mod.count_include_pad or mod.divisor_override:
                self.unsupported("nn.AvgPool2d with ceil_mode, count_include_pad=False or divisor_override")
            return self._pool("avg_pool2d", base, x, out, mod.kernel_size, mod.stride, mod.padding)
        if isinstance(mod, (nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d)):
            op = "adaptive_avg_pool2d" if isinstance(mod, nn.AdaptiveAvgPool2d) else "adaptive_max_pool2d"
            return self.node(op, base, [x], out, {"output_size": list(out.shape[-2:])})
        if isinstance(mod, nn.Embedding):
            return self.node("embedding", base, [x, p("weight")], out)
        self.unsupported(f"module {type(mod).__module__}.{type(mod).__name__}")

    def emit(self, key, args, kwargs, out, base, desc):
        """One torch operation by canonical key (canonical_function /
        canonical_method). `desc` names it in errors."""
        if key is None:
            self.unsupported(desc)
        a0 = args[0] if args else None
        if key == "identity":
            return a0
        if key == "dropout":
            if _arg(args, kwargs, 2, "training", True) and _arg(args, kwargs, 1, "p", 0.5) > 0:
                self.unsupported(f"{desc} in training mode (pass training=self.training and "
                                 f"call .eval() first)")
            return a0
        if key == "T":
            if len(a0.shape) < 2:
                return a0
            return self.node("permute", base, [a0], out, {"perm": list(range(len(a0.shape)))[::-1]})
        if key == "mT":
            return self.node("transpose", base, [a0], out, {"dim0": -2, "dim1": -1})
        if key in ("radd", "rsub", "rmul", "rdiv", "rmatmul"):
            key, args = key[1:] if key != "rdiv" else "div", (args[1], args[0]) + tuple(args[2:])
        if key in _BINARY:
            a, b = args[0], args[1]
            if key in ("add", "sub") and kwargs.get("alpha", 1) != 1:
                self.unsupported(f"{desc} with alpha")
            if kwargs.get("rounding_mode") is not None:
                self.unsupported(f"{desc} with rounding_mode")
            like = a if isinstance(a, GV) else b
            return self.node(key, base, [self.val(a, like), self.val(b, like)], out)
        if key in _COMPARE:
            a, b = args[0], args[1]
            like = a if isinstance(a, GV) else b
            return self.node(key, base, [self.val(a, like), self.val(b, like)], out)
        if key in _UNARY:
            return self.node(key, base, [a0], out)
        if key == "rsqrt":
            s = self.node("sqrt", base + "_sqrt", [a0], out)
            return self.node("div", base, [self.scalar(1.0, out.dtype), s], out)
        if key == "pow":
            e = args[1]
            if e == 2 or e == 3:
                sq = self.node("mul", base + "_sq", [a0, a0], out)
                return sq if e == 2 else self.node("mul", base, [sq, a0], out)
            if e == 0.5:
                return self.node("sqrt", base, [a0], out)
            self.unsupported(f"{desc} with exponent {e!r}")
        if key == "gelu":
            return self.node("gelu", base, [a0], out,
                             {"approximate": kwargs.get("approximate", "none")})
        if key == "softmax":
            dim = _arg(args, kwargs, 1, "dim")
            return self.node("softmax", base, [a0], out, {"axis": -1 if dim is None else dim})
        if key == "matmul":
            return self.node("matmul", base, [self.val(args[0]), self.val(args[1])], out)
        if key == "linear":
            w, b = args[1], _arg(args, kwargs, 2, "bias")
            ins = [a0, self.val(w)] + ([self.val(b)] if b is not None else [])
            return self.node("linear", base, ins, out)
        if key == "layer_norm":
            shape = _arg(args, kwargs, 1, "normalized_shape")
            w, b = _arg(args, kwargs, 2, "weight"), _arg(args, kwargs, 3, "bias")
            eps = _arg(args, kwargs, 4, "eps", 1e-5)
            if len(shape) != 1:
                self.unsupported(f"{desc} over {len(shape)} dims")
            ins = [a0] + ([self.val(w)] if w is not None else []) + ([self.val(b)] if b is not None else [])
            if w is None and b is not None:
                self.unsupported(f"{desc} with a bias but no weight")
            return self.node("layer_norm", base, ins, out, {"eps": float(eps)})
        if key == "reshape":
            return self._reshape(a0, out, base)
        if key == "transpose":
            return self.node("transpose", base, [a0], out, {"dim0": int(_arg(args, kwargs, 1, "dim0")),
                                                           "dim1": int(_arg(args, kwargs, 2, "dim1"))})
        if key == "t":
            if len(a0.shape) < 2:
                return a0
            return self.node("transpose", base, [a0], out, {"dim0": 0, "dim1": 1})
        if key == "permute":
            dims = args[1:] if len(args) > 2 or not isinstance(_arg(args, kwargs, 1, "dims"), (list, tuple)) \
                else _arg(args, kwargs, 1, "dims")
            return self.node("permute", base, [a0], out, {"perm": [int(d) % len(a0.shape) for d in dims]})
        if key == "split":
            dim = _arg(args, kwargs, 2, "dim", 0)
            sizes = [t.shape[dim] for t in out]
            return self.node("split", base, [a0], list(out), {"axis": int(dim), "sizes": sizes},
                             n_out=len(out))
        if key == "cat":
            tensors = args[0]
            dim = _arg(args, kwargs, 1, "dim", 0)
            return self.node("concat", base, [self.val(t) for t in tensors], out, {"axis": int(dim)})
        if key == "masked_fill":
            mask, value = _arg(args, kwargs, 1, "mask"), _arg(args, kwargs, 2, "value")
            if isinstance(value, torch.Tensor):
                value = value.item()
            return self.node("masked_fill", base, [a0, self.val(mask)], out, {"value": float(value)})
        if key == "where":
            cond, a, b = args[0], args[1], args[2]
            like = a if isinstance(a, GV) else b
            return self.node("where", base, [self.val(cond), self.val(a, like), self.val(b, like)], out)
        if key in ("sum", "mean", "amax"):
            dims = _arg(args, kwargs, 1, "dim")
            keep = bool(_arg(args, kwargs, 2, "keepdim", False))
            if kwargs.get("dtype") is not None:
                self.unsupported(f"{desc} with dtype")
            attrs = {"keepdims": int(keep)}
            if dims is not None:
                attrs["axes"] = [int(d) for d in (dims if isinstance(dims, (list, tuple)) else [dims])]
            op = {"sum": "reduce_sum", "mean": "reduce_mean", "amax": "reduce_max"}[key]
            return self.node(op, base, [a0], out, attrs)
        if key == "cast":
            if out.dtype == a0.dtype:
                return a0
            return self.node("cast", base, [a0], out, {"dtype": genie_dtype(out.dtype)})
        if key == "embedding":
            return self.node("embedding", base, [a0, self.val(args[1])], out)
        if key == "conv2d":
            w, b = args[1], _arg(args, kwargs, 2, "bias")
            pad = _arg(args, kwargs, 4, "padding", 0)
            if isinstance(pad, str):
                self.unsupported(f"{desc} with padding={pad!r}")
            ins = [a0, self.val(w)] + ([self.val(b)] if b is not None else [])
            return self.node("conv2d", base, ins, out, {
                "stride": _pair(_arg(args, kwargs, 3, "stride", 1)), "padding": _pair(pad),
                "dilation": _pair(_arg(args, kwargs, 5, "dilation", 1)),
                "groups": int(_arg(args, kwargs, 6, "groups", 1))})
        if key in ("max_pool2d", "avg_pool2d"):
            k = _arg(args, kwargs, 1, "kernel_size")
            s = _arg(args, kwargs, 2, "stride")
            pd = _arg(args, kwargs, 3, "padding", 0)
            if kwargs.get("ceil_mode") or (key == "max_pool2d" and _arg(args, kwargs, 4, "dilation", 1) not in (1, (1, 1))):
                self.unsupported(f"{desc} with ceil_mode or dilation")
            return self._pool(key, base, a0, out, k, s, pd)
        if key in ("adaptive_avg_pool2d", "adaptive_max_pool2d"):
            return self.node(key, base, [a0], out, {"output_size": list(out.shape[-2:])})
        if key == "getitem":
            return self._getitem(args[0], args[1], out, base, desc)
        if key == "sdpa":
            q, k, v = args[0], args[1], args[2]
            mask = _arg(args, kwargs, 3, "attn_mask")
            if _arg(args, kwargs, 4, "dropout_p", 0.0):
                self.unsupported(f"{desc} with dropout_p > 0 (inference only)")
            attrs = {"causal": int(bool(_arg(args, kwargs, 5, "is_causal", False)))}
            if kwargs.get("scale") is not None:
                attrs["scale"] = float(kwargs["scale"])
            return self.node("attention", base, [q, k, v] + ([self.val(mask)] if mask is not None else []),
                             out, attrs)
        self.unsupported(desc)

    # -- helpers -------------------------------------------------------------

    def _reshape(self, x, out, base):
        if tuple(x.shape) == tuple(out.shape):
            return x
        return self.node("reshape", base, [x], out, {"shape": list(out.shape)})

    def _pool(self, op, base, x, out, k, s, pd):
        k = _pair(k)
        s = _pair(s) if s is not None and s != [] and s != () else k
        return self.node(op, base, [x], out, {"kernel": k, "stride": s, "padding": _pair(pd)})

    def _getitem(self, x, idx, out, base, desc):
        if isinstance(x, (tuple, list)):
            return x[idx]
        if not isinstance(x, GV):
            self.unsupported(desc)
        if not isinstance(idx, tuple):
            idx = (idx,)
        if any(i is Ellipsis for i in idx):
            pos = idx.index(Ellipsis)
            fill = len(x.shape) - (len(idx) - 1 - sum(i is None for i in idx))
            idx = idx[:pos] + (slice(None),) * fill + idx[pos + 1:]
        cur, axis = x, 0
        shape = list(x.shape)
        for i in idx:
            if i is None:
                continue
            if isinstance(i, int):
                n = shape[axis]
                start = i % n if n else 0
                shape[axis] = 1
                ex = torch.empty(shape, dtype=x.dtype, device="meta")
                cur = self.node("slice", base + "_sl", [cur], ex,
                                {"axis": axis, "start": start, "end": start + 1})
                axis += 1
            elif isinstance(i, slice):
                if i == slice(None):
                    axis += 1
                    continue
                start, stop, step = i.indices(shape[axis])
                if step <= 0:
                    self.unsupported(f"{desc} with a negative step")
                attrs = {"axis": axis, "start": start, "end": stop, "step": step}
                shape[axis] = len(range(start, stop, step))
                ex = torch.empty(shape, dtype=x.dtype, device="meta")
                cur = self.node("slice", base + "_sl", [cur], ex, attrs)
                axis += 1
            else:
                self.unsupported(f"{desc} with index {type(i).__name__}")
        return self._reshape(cur, out, base)
