"""genie.torch.capture: a PyTorch nn.Module as a Genie graph.

The module runs once, eagerly, on the example inputs, and every operation
on them is recorded (genie.torch._trace: module paths included) and mapped
onto a Genie operator. Values that do not depend on the inputs' values
(parameters, buffers, masks sliced from them, Python ints from ``x.shape``,
``torch.arange(T)`` and what is computed from it) are constants: parameters
and buffers are uploaded once as resident tensors (role weight) named by
their qualified names, other constants once per signature, and shapes are
static, specialised to the inputs' shapes (a call with other shapes traces
again, once per signature).
"""

import threading

import torch
import torch.fx as fx

from ..context import Context
from ._emit import Emitter, GV, UnsupportedOpError, canonical_function, canonical_method, to_numpy
from ._trace import Trace, fn_name as _fn_name, trace

def _has_tensor(v):
    if isinstance(v, torch.Tensor):
        return True
    if isinstance(v, (tuple, list)):
        return any(_has_tensor(x) for x in v)
    if isinstance(v, dict):
        return any(_has_tensor(x) for x in v.values())
    return False


def _map(v, fn):
    if isinstance(v, (tuple, list)):
        return type(v)(_map(x, fn) for x in v)
    if isinstance(v, dict):
        return {k: _map(x, fn) for k, x in v.items()}
    return fn(v)


def _node_key(n, modules):
    if n.op == "call_function":
        return canonical_function(n.target)
    if n.op == "call_method":
        return canonical_method(n.target)
    if n.op == "call_module":
        mod = modules.get(n.target)
        if isinstance(mod, (torch.nn.Dropout, torch.nn.Identity)):
            return "identity"
        if isinstance(mod, torch.nn.Softmax):
            return "softmax_module"
    return None


def _find_attention(graph, dynamic, modules):
    """Scaled dot-product attention written out by hand,

        s = (q @ k.transpose(-2, -1)) * scale      (or / d, or no scale)
        s = s.masked_fill(mask, float("-inf"))     (optional; mask constant)
        or s = s + mask                            (optional; additive float mask)
        p = softmax(s, dim=-1); p = dropout(p)     (dropout optional)
        y = p @ v

    is one Genie `attention` node (causal when the mask is the causal one).
    Returns {final matmul node: parts} and the nodes folded into them; each
    folded node must have no other user."""
    fused, folded = {}, set()
    val = lambda n: n.meta.get("genie_val")  # noqa: E731
    one_user = lambda n: isinstance(n, fx.Node) and n in dynamic and len(n.users) == 1  # noqa: E731
    for n in graph.nodes:
        if _node_key(n, modules) != "matmul" or n not in dynamic or len(n.args) != 2:
            continue
        p, v = n.args
        chain = []
        if one_user(p) and _node_key(p, modules) == "identity":
            chain.append(p)
            p = p.args[0]
        key = _node_key(p, modules) if one_user(p) else None
        if key == "softmax":
            dim = p.args[1] if len(p.args) > 1 else p.kwargs.get("dim")
        elif key == "softmax_module":
            dim = modules[p.target].dim
        else:
            continue
        if dim is None or dim not in (-1, val(p).dim() - 1):
            continue
        chain.append(p)
        s = p.args[0]
        mask = None
        if one_user(s) and _node_key(s, modules) == "masked_fill":
            mask = s.args[1] if len(s.args) > 1 else s.kwargs.get("mask")
            fill = s.args[2] if len(s.args) > 2 else s.kwargs.get("value")
            if isinstance(fill, torch.Tensor) and fill.dim() == 0:
                fill = fill.item()
            if (isinstance(mask, fx.Node) and mask in dynamic) or fill != float("-inf"):
                continue
            chain.append(s)
            s = s.args[0]
        add_mask = None
        if mask is None and one_user(s) and _node_key(s, modules) == "add" and len(s.args) == 2 \
                and not s.kwargs:
            # An additive mask (BERT's padding mask: 0 or a large negative).
            for sc, mk in (s.args, s.args[::-1]):
                mv = val(mk) if isinstance(mk, fx.Node) else mk
                if isinstance(sc, fx.Node) and one_user(sc) and \
                        _node_key(sc, modules) in ("mul", "div", "matmul") and \
                        isinstance(mv, torch.Tensor) and mv.dtype == val(sc).dtype and \
                        tuple(val(s).shape) == tuple(val(sc).shape):
                    add_mask = mk
                    chain.append(s)
                    s = sc
                    break
        scale = (None, "mul")
        if one_user(s) and _node_key(s, modules) in ("mul", "div") and len(s.args) == 2:
            a, b = s.args
            if _node_key(s, modules) == "mul" and not (isinstance(b, fx.Node) and b in dynamic):
                scale, s2 = (b, "mul"), a
            elif _node_key(s, modules) == "mul" and not (isinstance(a, fx.Node) and a in dynamic):
                scale, s2 = (a, "mul"), b
            elif _node_key(s, modules) == "div" and not (isinstance(b, fx.Node) and b in dynamic):
                scale, s2 = (b, "div"), a
            else:
                continue
            chain.append(s)
            s = s2
        if not (one_user(s) and _node_key(s, modules) == "matmul" and len(s.args) == 2):
            continue
        q, kt = s.args
        if not (one_user(kt) and _node_key(kt, modules) == "transpose"):
            continue
        r = val(kt).dim()
        dims = [d % r for d in kt.args[1:3]] if len(kt.args) >= 3 else None
        if dims is None or sorted(dims) != [r - 2, r - 1]:
            continue
        k = kt.args[0]
        qv, kv, vv = val(q), val(k), val(v)
        if not all(isinstance(t, torch.Tensor) and t.dim() == r and t.is_floating_point()
                   for t in (qv, kv, vv)) or not (qv.shape[:-2] == kv.shape[:-2] == vv.shape[:-2]):
            continue
        fused[n] = {"q": q, "k": k, "v": v, "scale": scale, "mask": mask, "add_mask": add_mask}
        folded.update(chain + [s, kt])
    return fused, folded


def _emit_attention(em, n, parts, env, base):
    def get(x):
        return env[x] if isinstance(x, fx.Node) else x

    q, k, v = get(parts["q"]), get(parts["k"]), get(parts["v"])
    scale_arg, how = parts["scale"]
    scale = 1.0
    if scale_arg is not None:
        c = get(scale_arg)
        c = c.item() if isinstance(c, torch.Tensor) else float(c)
        scale = c if how == "mul" else 1.0 / c
    attrs = {"scale": float(scale), "causal": 0}
    ins = [q, k, v]
    if parts["mask"] is not None:
        masked = get(parts["mask"]).to(torch.bool)
        sq, sk = q.shape[-2], k.shape[-2]
        causal = torch.ones(sq, sk, dtype=torch.bool).triu(1 + sk - sq)
        if masked.dim() >= 2 and masked.shape[-2:] == (sq, sk) and bool((masked == causal).all()):
            attrs["causal"] = 1
        else:
            ins.append(em.static((~masked).contiguous(), base + ".attend"))
    elif parts["add_mask"] is not None:
        ins.append(em.val(get(parts["add_mask"])))
    out = n.meta["genie_val"]
    return em.node("attention", base, ins, out, attrs)


def convert(tr, name="captured", phase="forward", modality=None, fuse=True, extra_static_names=None):
    """Maps a Trace onto a Genie graph (with `fuse`, hand-written attention
    becomes one attention node). Returns (emitter, output spec). Placeholders
    marked ``genie_const`` hold their value (a parameter lifted to an input)
    and become resident weights, named by `extra_static_names` (id -> name)."""
    root = tr.module
    em = Emitter(name, phase, modality)
    qualnames = {}
    for qn, p in root.named_parameters():
        qualnames[id(p)] = qn
    for qn, b in root.named_buffers():
        qualnames.setdefault(id(b), qn)
    qualnames.update(extra_static_names or {})
    em.static_names = qualnames
    em.static_names_set = set(qualnames.values())
    modules = dict(root.named_modules())
    dynamic = set()
    for n in tr.graph.nodes:
        if n.op == "placeholder":
            if isinstance(n.meta.get("genie_val"), torch.Tensor) and not n.meta.get("genie_const"):
                dynamic.add(n)
        elif n.op not in ("output", "get_attr") and _has_tensor(n.meta.get("genie_val")) and \
                any(a in dynamic for a in n.all_input_nodes):
            dynamic.add(n)
    fused, folded = _find_attention(tr.graph, dynamic, modules) if fuse else ({}, set())
    env = {}
    out_spec = None
    for n in tr.graph.nodes:
        if n in folded:
            continue
        val = n.meta.get("genie_val")
        em.module = n.meta.get("genie_module", "")
        mod = modules.get(em.module)
        em.module_type = type(mod).__name__ if mod is not None and em.module else None
        em.where = f"traced node '{n.name}'"
        if n.op == "placeholder":
            if isinstance(val, torch.Tensor) and not n.meta.get("genie_const"):
                env[n] = em.add_input(n.target, val, role="input")
            else:
                env[n] = val
            continue
        if n.op == "output":
            out_spec = n.args[0]
            break
        if n not in dynamic:
            env[n] = val  # a constant: computed once, here
            continue
        if n in fused:
            env[n] = _emit_attention(em, n, fused[n], env, n.name)
            continue
        args = fx.node.map_arg(n.args, lambda a: env[a])
        kwargs = fx.node.map_arg(n.kwargs, lambda a: env[a])
        if n.op == "call_module":
            mod = modules[n.target]
            em.where = f"module '{n.target}' ({type(mod).__name__})"
            em.module_type = None
            env[n] = em.emit_module(mod, args, kwargs, val, n.name)
        elif n.op == "call_function":
            env[n] = em.emit(canonical_function(n.target), args, kwargs, val, n.name,
                             f"torch function {_fn_name(n.target)}")
        elif n.op == "call_method":
            env[n] = em.emit(canonical_method(n.target), args, kwargs, val, n.name,
                             f"Tensor.{n.target}")
        else:
            em.unsupported(f"fx node kind {n.op}")
    marked = {}

    def leaf(v):
        v = env[v] if isinstance(v, fx.Node) else v
        if isinstance(v, GV):
            if v.name not in marked:
                if v.name in em.inputs or v.name in em.resident:  # returned unchanged
                    return ("input", v.name)
                marked[v.name] = len(marked)
                em.output(v)
            return ("out", marked[v.name])
        return ("const", v)

    spec = _map(out_spec, leaf)
    return em, spec


# ---------------------------------------------------------------------------
# The captured module
# ---------------------------------------------------------------------------

class _Variant:
    """The graph for one input signature, with its resident tensors."""

    def __init__(self, em, spec, ctx, shared):
        self.graph = em.graph
        self.spec = spec
        self.input_names = list(em.inputs)
        self.outputs = self.graph.outputs
        self.bindings = {}
        self.owned = []
        for name, t in em.resident.items():
            tensor = shared.get(name) if name in getattr(em, "static_names_set", ()) else None
            if tensor is None or tensor.shape != tuple(t.shape):
                tensor = ctx.from_numpy(to_numpy(t))
                if name in getattr(em, "static_names_set", ()):
                    shared[name] = tensor
                else:
                    self.owned.append(tensor)
            self.bindings[name] = tensor
        self.inputs = {}
        for name in self.input_names:
            gdt, shape = self.graph.value_info(name)
            t = ctx.tensor(shape, gdt)
            self.inputs[name] = t
            self.owned.append(t)
            self.bindings[name] = t

    def run(self, ctx, flat):
        """Writes the runtime inputs (torch tensors, in input order), runs
        the graph on ctx and returns its outputs as numpy arrays."""
        for name, x in zip(self.input_names, flat):
            self.inputs[name].write(to_numpy(x))
        with ctx.submit(self.graph, self.bindings) as fut:
            arrays = []
            for t in fut.result():
                with t:
                    arrays.append(t.read())
        return arrays

    def unflatten(self, arrays, flat, named=None):
        """The outputs in the traced output structure: torch tensors, inputs
        returned unchanged (`named(name)` for one that is not a runtime input;
        default: its resident genie.Tensor) and constants."""
        def leaf(s):
            kind, x = s
            if kind == "out":
                return torch.from_numpy(arrays[x])
            if kind == "input":
                if x in self.input_names:
                    return flat[self.input_names.index(x)]
                return named(x) if named is not None else self.bindings[x]
            return x

        return _map_spec(self.spec, leaf)

    def close(self):
        for t in self.owned:
            t.close()
        self.graph.close()


class CapturedModule:
    """A module captured as a Genie graph; call it like the module. Inputs
    are torch tensors (positional); outputs come back as torch tensors in
    the module's output structure. Parameters are uploaded at capture
    (snapshot): call refresh_weights() after changing them."""

    def __init__(self, module, example_inputs, context=None, phase="forward", modality=None,
                 name=None, fuse_attention=True):
        self.module = module
        self.fuse_attention = fuse_attention
        self.name = name or type(module).__name__
        self.phase, self.modality = phase, modality
        self._own_ctx = context is None
        self.context = context if context is not None else Context()
        self._lock = threading.Lock()
        self._weights = {}  # qualified name -> resident Tensor, shared by variants
        self._variants = {}
        self._variant(tuple(example_inputs))

    def _variant(self, inputs):
        key = _signature(inputs)
        v = self._variants.get(key)
        if v is None:
            em, spec = convert(trace(self.module, inputs), self.name, self.phase, self.modality,
                               self.fuse_attention)
            v = _Variant(em, spec, self.context, self._weights)
            self._variants[key] = v
        return v

    @property
    def graph(self):
        """The Genie graph of the example inputs' signature."""
        return next(iter(self._variants.values())).graph

    @property
    def weights(self):
        """{qualified name: resident genie.Tensor} of parameters and buffers."""
        return dict(self._weights)

    def refresh_weights(self):
        """Uploads the module's current parameter and buffer values."""
        state = dict(self.module.named_parameters())
        state.update(dict(self.module.named_buffers()))
        for name, t in self._weights.items():
            t.write(to_numpy(state[name]))

    def __call__(self, *inputs):
        with self._lock:
            v = self._variant(inputs)
            flat = _tensors(inputs)
            arrays = v.run(self.context, flat)
        return v.unflatten(arrays, flat)

    def close(self):
        for v in self._variants.values():
            v.close()
        self._variants.clear()
        for t in self._weights.values():
            t.close()
        self._weights.clear()
        if self._own_ctx:
            self.context.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<genie.torch.CapturedModule {self.name}: {self.graph.num_nodes} Genie nodes>"


def _tensors(v, out=None):
    """The tensors of a (nested) input structure, in trace order."""
    out = [] if out is None else out
    if isinstance(v, torch.Tensor):
        out.append(v)
    elif isinstance(v, (tuple, list)):
        for x in v:
            _tensors(x, out)
    elif isinstance(v, dict):
        for x in v.values():
            _tensors(x, out)
    return out


def _signature(v):
    """Variant key of an input structure: shapes and dtypes of tensors,
    values of everything else."""
    if isinstance(v, torch.Tensor):
        return ("t", tuple(v.shape), v.dtype)
    if isinstance(v, (tuple, list)):
        return (type(v).__name__,) + tuple(_signature(x) for x in v)
    if isinstance(v, dict):
        return ("dict",) + tuple((k, _signature(x)) for k, x in v.items())
    return ("py", repr(v))


def _map_spec(spec, fn):
    if isinstance(spec, tuple) and len(spec) == 2 and spec[0] in ("out", "input", "const"):
        return fn(spec)
    if isinstance(spec, (tuple, list)):
        return type(spec)(_map_spec(s, fn) for s in spec)
    if isinstance(spec, dict):
        return {k: _map_spec(s, fn) for k, s in spec.items()}
    return spec


def capture(module, example_inputs, context=None, phase="forward", modality=None, name=None,
            fuse_attention=True):
    """Captures `module` (an nn.Module) as a Genie graph and returns a
    callable CapturedModule that runs it through Genie.

    example_inputs: a tensor or a tuple of the forward's positional inputs.
    context: a genie.Context to run on (default: a new one, embedded, or
    remote when GENIE_MASTER_ADDR is set). phase, modality: annotations for
    every node (module path and layer index come from the module tree).
    fuse_attention: attention written out by hand (q @ k^T, scale, mask,
    softmax, @ v) becomes one Genie attention node.
    Raises genie.torch.UnsupportedOpError naming the op and module path of
    any operation Genie has no operator for."""
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    return CapturedModule(module, tuple(example_inputs), context, phase, modality, name,
                          fuse_attention)


__all__ = ["capture", "trace", "convert", "CapturedModule", "UnsupportedOpError"]
