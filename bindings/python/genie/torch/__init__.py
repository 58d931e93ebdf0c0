"""PyTorch frontends for Genie (torch 1.13+):

- capture(module, example_inputs): a module run once on its example inputs
  and recorded as a Genie graph with semantic annotations (module path,
  layer index, phase; weights resident), returned as a callable that runs
  through Genie;
- KVCacheGenerator(model): greedy decoding of a GPT with its KV cache
  resident where the graphs run (the server, in remote mode);
- remote(tensor): a lazy tensor; torch operations on it are recorded and run
  through Genie when the result is materialised with .cpu() / .numpy().
"""

from ._emit import UnsupportedOpError
from .capture import CapturedModule, capture, trace
from .generate import KVCacheGenerator, greedy_eager
from .lazy import LazyTensor, remote

__all__ = ["capture", "trace", "CapturedModule", "UnsupportedOpError", "remote", "LazyTensor",
           "KVCacheGenerator", "greedy_eager"]
