"""Genie: semantic GPU disaggregation, from Python.

    import genie, torch
    genie.init(master_addr="gpu-server")         # or: await genie.init(...)
    x = torch.randn(1000, 1000, device="remote_accelerator:0")
    y = (x @ x).cpu()                            # runs on the server
    genie.shutdown()

or, with explicit contexts and graphs:

    import genie
    with genie.Context() as ctx:                 # embedded, or remote from
        w = ctx.from_numpy(weights)              # GENIE_MASTER_ADDR
        g = genie.Graph("mlp")
        ...
        out = ctx.run(g, {"x": x, "w": w})       # {output name: ndarray}

The classes wrap the C API (include/genie.h) one call per method; errors
are genie.errors classes with ``.code`` and ``.detail``. PyTorch capture
lives in genie.torch (imported on demand: torch is optional); the
remote_accelerator device and torch.compile(backend="genie") are registered
when genie.init runs or genie.torch is imported, with torch imported.
"""

import sys as _sys

from . import capi
from .context import Context, Subscription
from .dtypes import dtype_code, dtype_name, numpy_dtype
from .enums import (EVENT_ALL, EVENT_BACKEND_SELECTED, EVENT_GPU_AVAILABLE, EVENT_GPU_OVERHEATED,
                    EVENT_GPU_UNAVAILABLE, EVENT_HEALTH_CHANGED, EVENT_NODE_JOINED, EVENT_NODE_LOST,
                    EVENT_NODE_RECOVERED, HEALTH, MODALITIES, PHASES, ROLES, Event)
from .future import Future
from .graph import Graph, Node
from .library import cluster_members, discover, load_op_library, op_registered, trace_start, trace_stop, unregister_op, version
from .onnx_model import OnnxModel
from .server import Server
from .tensor import Tensor
from . import core  # noqa: F401 (genie.core: the same names, as before the split)
from .cluster import (ClusterConfig, ClusterState, GPUInfo, NodeInfo, get_cluster_state, get_context, init,
                      is_initialized, shutdown)
from .errors import *  # noqa: F401,F403 (the exception classes)
from .errors import GenieError, from_status

__version__ = capi.genie_version_string()
ABI_VERSION = capi.GENIE_ABI_VERSION

__all__ = ["Context", "Future", "Graph", "Node", "OnnxModel", "Server", "Subscription", "Tensor", "Event", "discover",
           "cluster_members", "dtype_code", "dtype_name", "numpy_dtype", "version", "trace_start", "trace_stop", "GenieError", "from_status",
           "PHASES", "MODALITIES", "ROLES", "HEALTH", "ABI_VERSION", "EVENT_NODE_JOINED",
           "EVENT_NODE_LOST", "EVENT_NODE_RECOVERED", "EVENT_GPU_AVAILABLE",
           "EVENT_GPU_UNAVAILABLE", "EVENT_GPU_OVERHEATED", "EVENT_HEALTH_CHANGED",
           "EVENT_BACKEND_SELECTED", "EVENT_ALL", "load_op_library", "op_registered",
           "unregister_op", "init", "shutdown", "is_initialized", "get_cluster_state", "get_context",
           "ClusterConfig", "ClusterState", "NodeInfo", "GPUInfo"] + list(errors.__all__)

from . import errors  # noqa: E402

if "torch" in _sys.modules:  # torch first: its device strings know remote_accelerator now
    try:
        from .torch import device as _device
        _device.register()
    except Exception as _e:  # noqa: BLE001 (another library holds PrivateUse1, an old torch)
        import warnings as _warnings
        _warnings.warn(f"genie: the remote_accelerator device is not registered: {_e}")
