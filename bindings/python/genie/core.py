"""The names genie.core has always offered, now defined by type in their own
modules: context (Context, Subscription), tensor, graph (Graph, Node),
onnx_model, future, server, dtypes, enums (phases, roles, events ...) and
library (version, trace, custom ops, discover). Kept so that code importing
from genie.core goes on working; new code imports from genie.
"""

from ._config import build_config as _config  # noqa: F401
from ._handle import _Handle  # noqa: F401
from ._lib import capi  # noqa: F401
from .context import Context, Subscription, _live_contexts, _live_lock, _shutdown_all  # noqa: F401
from .dtypes import _DTYPE_NAMES, _DTYPES, _NP_TO_NAME, _np_dtype_name, dtype_code, dtype_name, numpy_dtype  # noqa: F401
from .enums import (BACKENDS, EVENT_ALL, EVENT_BACKEND_SELECTED, EVENT_GPU_AVAILABLE,  # noqa: F401
                    EVENT_GPU_OVERHEATED, EVENT_GPU_UNAVAILABLE, EVENT_HEALTH_CHANGED, EVENT_NODE_JOINED,
                    EVENT_NODE_LOST, EVENT_NODE_RECOVERED, HEALTH, LOG_LEVELS, MODALITIES, PHASES, ROLES, Event,
                    _enum, _name_of)
from .future import Future  # noqa: F401
from .graph import Graph, Node  # noqa: F401
from .library import cluster_members, discover, load_op_library, op_registered, trace_start, trace_stop, unregister_op, version  # noqa: F401
from .onnx_model import OnnxModel  # noqa: F401
from .server import Server  # noqa: F401
from .tensor import Tensor  # noqa: F401
from . import errors  # noqa: F401
