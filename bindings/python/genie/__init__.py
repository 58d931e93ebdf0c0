"""Genie: semantic GPU disaggregation, from Python.

    import genie
    with genie.Context() as ctx:                 # embedded, or remote from
        w = ctx.from_numpy(weights)              # GENIE_MASTER_ADDR
        g = genie.Graph("mlp")
        ...
        out = ctx.run(g, {"x": x, "w": w})       # {output name: ndarray}

The classes wrap the C API (include/genie.h) one call per method; errors
are genie.errors classes with ``.code`` and ``.detail``. PyTorch capture
lives in genie.torch (imported on demand: torch is optional).
"""

from . import capi
from .core import (Context, Future, Graph, Node, OnnxModel, Server, Subscription, Tensor, Event, discover,
                   dtype_code, dtype_name, numpy_dtype, version, PHASES, MODALITIES, ROLES, HEALTH,
                   EVENT_NODE_JOINED, EVENT_NODE_LOST, EVENT_NODE_RECOVERED, EVENT_GPU_AVAILABLE,
                   EVENT_GPU_UNAVAILABLE, EVENT_GPU_OVERHEATED, EVENT_HEALTH_CHANGED,
                   EVENT_BACKEND_SELECTED, EVENT_ALL, load_op_library, op_registered, unregister_op)
from .errors import *  # noqa: F401,F403 (the exception classes)
from .errors import GenieError, from_status

__version__ = capi.genie_version_string()
ABI_VERSION = capi.GENIE_ABI_VERSION

__all__ = ["Context", "Future", "Graph", "Node", "OnnxModel", "Server", "Subscription", "Tensor", "Event", "discover",
           "dtype_code", "dtype_name", "numpy_dtype", "version", "GenieError", "from_status",
           "PHASES", "MODALITIES", "ROLES", "HEALTH", "ABI_VERSION", "EVENT_NODE_JOINED",
           "EVENT_NODE_LOST", "EVENT_NODE_RECOVERED", "EVENT_GPU_AVAILABLE",
           "EVENT_GPU_UNAVAILABLE", "EVENT_GPU_OVERHEATED", "EVENT_HEALTH_CHANGED",
           "EVENT_BACKEND_SELECTED", "EVENT_ALL", "load_op_library", "op_registered",
           "unregister_op"] + list(errors.__all__)

from . import errors  # noqa: E402
