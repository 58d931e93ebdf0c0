"""genie.torch.KVCacheGenerator: greedy decoding of a captured GPT whose KV
cache stays where the graphs run (the server, in remote mode).

The model follows the usual KV-cache convention (HF-style position ids):

    logits, present_kv = model(idx, past_kv=None, pos=None)

idx [B, T] token ids; past_kv a sequence, per layer, of (k, v) tensors with
the cached positions on dimension `cache_dim` (default -2, as in
[B, heads, positions, head_dim]); pos [T] the positions of idx; logits
[B, T, vocab]; present_kv the caches with idx's positions appended.

Prefill runs one captured graph on the prompt. Decode runs a second graph,
captured once with the cache length as a dynamic dimension: the caches are
graph inputs with role kv_cache, bound each step to the caches the previous
step produced, which never leave the device they were produced on. Per step
only the token and its position are written and the last logits row is read.
"""

import json
import time

import numpy as np
import torch

from .. import errors
from ..graph import Graph
from ._emit import _TORCH_TO_GENIE, to_numpy
from ._trace import trace
from .capture import CapturedModule, _map_spec, convert


_GENIE_TO_TORCH = {g: t for t, g in _TORCH_TO_GENIE.items()}


def _leaves(spec):
    out = []
    _map_spec(spec, out.append)
    return out


class KVCacheGenerator:
    """Prefill and decode graphs of `model` on `context` (a genie.Context;
    default: a new one, remote when GENIE_MASTER_ADDR is set). Weights are
    uploaded once and shared by both graphs. Close it (or use ``with``)."""

    def __init__(self, model, context=None, name=None, cache_dim=-2):
        self.model = model
        self.cache_dim = cache_dim
        self.name = name or type(model).__name__
        self._cap = None
        self._context = context
        self._decode = None  # (graph, bindings, input names, spec, owned tensors)

    @property
    def context(self):
        return self._cap.context if self._cap is not None else self._context

    # -- graphs ------------------------------------------------------------------

    def _prefill(self, idx, pos):
        inputs = (idx, None, pos)
        if self._cap is None:
            self._cap = CapturedModule(self.model, inputs, self._context, phase="prefill",
                                       modality="text", name=self.name + ".prefill")
        return self._cap._variant(inputs)

    def _decode_graph(self, past, batch):
        """The decode-step graph for caches like `past` (a list of (k, v)
        example tensors), with the cache length dynamic."""
        if self._decode is not None:
            return self._decode
        tok = torch.zeros(batch, 1, dtype=torch.long)
        docs, ems = [], []
        for extra in (0, 1):  # two cache lengths: what differs is the dynamic dimension
            ex = [tuple(_grow(t, self.cache_dim, extra) for t in kv) for kv in past]
            p = ex[0][0].shape[self.cache_dim]
            em, spec = convert(trace(self.model, (tok, ex, torch.tensor([p]))), self.name + ".decode",
                               phase="decode", modality="text")
            doc = json.loads(em.graph.to_json())
            for inp in doc["inputs"]:
                if inp["name"].startswith("past_kv."):
                    inp["shape"][self.cache_dim] = -1
                    doc.setdefault("roles", {})[inp["name"]] = "kv_cache"
            # The new caches stay where they are made; only the logits are
            # what the caller reads (a remote step then carries them back
            # inside its completion).
            for s in _leaves(spec)[1:]:
                doc.setdefault("roles", {})[doc["outputs"][s[1]]] = "kv_cache"
            docs.append(doc)
            ems.append((em, spec))
        (em, spec), (em2, _) = ems
        same = docs[0] == docs[1] and set(em.resident) == set(em2.resident) and all(
            torch.equal(em.resident[n], em2.resident[n]) for n in em.resident)
        if not same:
            em.graph.close()
            em2.graph.close()
            raise errors.UnsupportedError(
                "the decode step's graph depends on the cache length beyond the cache's own "
                "dimension (a constant computed from it, e.g. positions from torch.arange: pass "
                "`pos` through to the embedding instead)")
        em2.graph.close()
        graph = Graph.from_json(json.dumps(docs[0]))
        em.graph.close()
        ctx = self.context
        shared = self._cap._weights
        bindings, owned = {}, []
        for n, t in em.resident.items():
            if n in em.static_names_set:
                if n not in shared:
                    shared[n] = ctx.from_numpy(to_numpy(t))
                bindings[n] = shared[n]
            else:
                bindings[n] = ctx.from_numpy(to_numpy(t))
                owned.append(bindings[n])
        names = list(em.inputs)
        for n in (names[0], names[-1]):  # the token and its position: written each step
            dt, shape = graph.value_info(n)
            # In host memory: a remote step carries them inside its submission.
            bindings[n] = ctx.tensor(shape, dt, device="cpu")
            owned.append(bindings[n])
        self._decode = (graph, bindings, names, spec, owned)
        return self._decode

    # -- decoding ------------------------------------------------------------------

    def generate(self, idx, max_new_tokens, on_step=None):
        """Greedy decoding: `max_new_tokens` tokens after the prompt `idx`
        [B, T]. Returns (tokens [B, T + max_new_tokens], stats): stats is a
        dict with "prefill_ms", "decode_ms" (per step), "bytes_per_step"
        (per step, remote: the client's counters: "graph" submission bytes
        on the wire, the token and position inside them; "written" by
        transfers of their own; "read", of which "returned" came back inside
        the step's completion) and "server_tensor_bytes" (what the server holds after each
        step, caches included; None embedded). on_step(i, stats) is called
        after each decode step."""
        B, T = idx.shape
        pos0 = torch.arange(T)
        t0 = time.perf_counter()
        v = self._prefill(idx, pos0)
        ctx = self._cap.context
        remote = not ctx.embedded
        for name, x in zip(v.input_names, (idx, pos0)):
            v.inputs[name].write(to_numpy(x))
        with ctx.submit(v.graph, v.bindings) as fut:
            outs = fut.result()
        logits_spec, *kv_specs = _leaves(v.spec)
        logits_t = outs[logits_spec[1]]
        caches = [outs[s[1]] for s in kv_specs]
        for i, t in enumerate(outs):
            if i != logits_spec[1] and t not in caches:
                t.close()
        with logits_t:
            last = logits_t.read()[:, -1]
        stats = {"prefill_ms": (time.perf_counter() - t0) * 1e3, "decode_ms": [],
                 "bytes_per_step": [], "server_tensor_bytes": []}
        tokens = [idx]
        nxt = torch.from_numpy(last.argmax(-1)).view(B, 1)
        tokens.append(nxt)
        try:
            for step in range(max_new_tokens - 1):
                graph, bindings, names, spec, _ = self._decode_graph(
                    _example_past(caches), B)
                before = ctx.server_info()["client"] if remote else None
                t1 = time.perf_counter()
                tok_np = to_numpy(nxt)
                pos_np = np.array([T + step], dtype=np.int64)
                bindings[names[0]].write(tok_np)
                bindings[names[-1]].write(pos_np)
                for n, c in zip(names[1:-1], caches):
                    bindings[n] = c
                with ctx.submit(graph, bindings) as fut:
                    outs = fut.result()
                lspec, *kspecs = _leaves(spec)
                with outs[lspec[1]] as lt:
                    last = lt.read()[:, -1]
                new_caches = [outs[s[1]] for s in kspecs]
                for c in caches:
                    c.close()
                caches = new_caches
                nxt = torch.from_numpy(last.argmax(-1)).view(B, 1)
                stats["decode_ms"].append((time.perf_counter() - t1) * 1e3)
                tokens.append(nxt)
                info = ctx.server_info() if remote else None
                if remote:
                    # The client's counters: the token and its position go
                    # inside the submission, the logits come back inside its
                    # completion ("returned", part of "read").
                    now = info["client"]
                    delta = {k: now.get(k, 0) - before.get(k, 0) for k in
                             ("graph_bytes_sent", "tensor_bytes_written", "tensor_bytes_read",
                              "inline_output_bytes")}
                    stats["bytes_per_step"].append({
                        "graph": delta["graph_bytes_sent"],
                        "written": delta["tensor_bytes_written"],
                        "read": delta["tensor_bytes_read"] + delta["inline_output_bytes"],
                        "returned": delta["inline_output_bytes"]})
                else:
                    stats["bytes_per_step"].append({"graph": 0, "written": tok_np.nbytes + pos_np.nbytes,
                                                    "read": last.nbytes, "returned": 0})
                stats["server_tensor_bytes"].append(info["tensor_bytes"] if remote else None)
                if on_step is not None:
                    on_step(step, stats)
        finally:
            for c in caches:
                c.close()
        return torch.cat(tokens, dim=1), stats

    def close(self):
        if self._decode is not None:
            graph, _, _, _, owned = self._decode
            for t in owned:
                t.close()
            graph.close()
            self._decode = None
        if self._cap is not None:
            self._cap.close()
            self._cap = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _grow(t, dim, extra):
    shape = list(t.shape)
    shape[dim] += extra
    return torch.zeros(shape, dtype=t.dtype)


def _example_past(caches):
    """Zero tensors shaped like the resident caches, as (k, v) per layer."""
    ex = [torch.zeros(c.shape, dtype=_GENIE_TO_TORCH[c.dtype]) for c in caches]
    return [tuple(ex[i:i + 2]) for i in range(0, len(ex), 2)]


def greedy_eager(model, idx, max_new_tokens):
    """The reference: greedy decoding with torch eager, the whole sequence
    recomputed each step (no cache)."""
    with torch.no_grad():
        for _ in range(max_new_tokens):
            out = model(idx)
            logits = out[0] if isinstance(out, (tuple, list)) else out
            idx = torch.cat([idx, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    return idx
