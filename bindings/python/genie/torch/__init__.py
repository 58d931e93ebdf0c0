"""PyTorch 2 frontends for Genie:

- the ``remote_accelerator`` device (genie.torch.device): tensors and
  modules on ``device="remote_accelerator:N"`` after genie.init, their
  operations recorded and run as Genie graphs when a value is needed;
- ``torch.compile(model, backend="genie")`` (genie.torch.compile): Genie as
  a TorchDynamo backend;
- capture(module, example_inputs): a module run once on its example inputs
  and recorded as a Genie graph with semantic annotations (module path,
  layer index, phase; weights resident), returned as a callable that runs
  through Genie;
- KVCacheGenerator(model): greedy decoding of a GPT with its KV cache
  resident where the graphs run (the server, in remote mode);
- remote(tensor): a lazy tensor on an explicit genie.Context.

Importing genie.torch registers the device and the backend.
"""

from . import compile, device  # noqa: A004 (genie.torch.compile: the backend module)
from ._emit import UnsupportedOpError
from .capture import CapturedModule, capture, trace
from .compile import genie_backend
from .device import RemoteTensor
from .generate import KVCacheGenerator, greedy_eager
from .lazy import LazyTensor, remote

device.register()
compile.register()

__all__ = ["capture", "trace", "CapturedModule", "UnsupportedOpError", "remote", "LazyTensor",
           "KVCacheGenerator", "greedy_eager", "genie_backend", "RemoteTensor", "device", "compile"]
