"""Enumerations of the C API by name: phases, modalities, tensor roles, log
levels, backends, health levels and cluster event types."""

import enum

from . import errors
from ._lib import capi

PHASES = {"unknown": 0, "prefill": 1, "decode": 2, "forward": 3, "backward": 4}
MODALITIES = {"unknown": 0, "text": 1, "vision": 2, "audio": 3}
ROLES = {
    "unspecified": capi.GENIE_TENSOR_ROLE_UNSPECIFIED,
    "weight": capi.GENIE_TENSOR_ROLE_WEIGHT,
    "activation": capi.GENIE_TENSOR_ROLE_ACTIVATION,
    "kv_cache": capi.GENIE_TENSOR_ROLE_KV_CACHE,
    "input": capi.GENIE_TENSOR_ROLE_INPUT,
    "output": capi.GENIE_TENSOR_ROLE_OUTPUT,
}
LOG_LEVELS = {"off": 0, "error": 1, "warn": 2, "info": 3, "debug": 4, "trace": 5}
#: What a user selects as the data plane (genie_backend_t).
BACKENDS = {"auto": capi.GENIE_BACKEND_AUTO, "tcp": capi.GENIE_BACKEND_TCP, "rdma": capi.GENIE_BACKEND_RDMA,
            "dpdk": capi.GENIE_BACKEND_DPDK, "dpdk_gpudev": capi.GENIE_BACKEND_DPDK_GPUDEV,
            "ucx": capi.GENIE_BACKEND_UCX}


class Event(enum.IntFlag):
    """Cluster event types (genie_event_type_t), one bit each: combine them
    into a subscription mask (Context.subscribe)."""
    NODE_JOINED = capi.GENIE_EVENT_NODE_JOINED
    NODE_LOST = capi.GENIE_EVENT_NODE_LOST
    NODE_RECOVERED = capi.GENIE_EVENT_NODE_RECOVERED
    GPU_AVAILABLE = capi.GENIE_EVENT_GPU_AVAILABLE
    GPU_UNAVAILABLE = capi.GENIE_EVENT_GPU_UNAVAILABLE
    GPU_OVERHEATED = capi.GENIE_EVENT_GPU_OVERHEATED
    HEALTH_CHANGED = capi.GENIE_EVENT_HEALTH_CHANGED
    BACKEND_SELECTED = capi.GENIE_EVENT_BACKEND_SELECTED
    ALL = capi.GENIE_EVENT_ALL


EVENT_NODE_JOINED = Event.NODE_JOINED
EVENT_NODE_LOST = Event.NODE_LOST
EVENT_NODE_RECOVERED = Event.NODE_RECOVERED
EVENT_GPU_AVAILABLE = Event.GPU_AVAILABLE
EVENT_GPU_UNAVAILABLE = Event.GPU_UNAVAILABLE
EVENT_GPU_OVERHEATED = Event.GPU_OVERHEATED
EVENT_HEALTH_CHANGED = Event.HEALTH_CHANGED
EVENT_BACKEND_SELECTED = Event.BACKEND_SELECTED
EVENT_ALL = Event.ALL

#: Health levels (genie_health_t), as named in the cluster JSON.
HEALTH = {"HEALTHY": 0, "DEGRADED": 1, "UNHEALTHY": 2, "CRITICAL": 3}


def _name_of(table, value):
    for name, v in table.items():
        if v == value:
            return name
    return value


def _enum(table, value, what):
    if isinstance(value, str):
        try:
            return table[value.lower()]
        except KeyError:
            raise errors.InvalidArgumentError(
                f"{what} '{value}' is not one of {', '.join(table)}") from None
    return int(value)
