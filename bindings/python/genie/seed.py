"""Deterministic values and checksums shared with the C samples
(include/genie_seed.h), reimplemented exactly: the values of a tensor are a
pure function of its value name, dtype and shape, so the same program in C,
Python, Go and Rust prints the same checksum.

    state  = FNV-1a 64 of the name's UTF-8 bytes
    next() = splitmix64(state)
    f32    = (((next() >> 40) / 2**24) * 2 - 1) * scale, scale = 1/sqrt(last dim)
    i32/i64 = next() % 16;  bool = next() & 1;  f16 = f32 rounded
"""

import math

import numpy as np

from .dtypes import dtype_name, dtype_code

_M64 = (1 << 64) - 1


def fnv1a64(name):
    h = 0xcbf29ce484222325
    for b in name.encode():
        h ^= b
        h = (h * 0x100000001b3) & _M64
    return h


def _splitmix(state, n):
    """The first n outputs of splitmix64 from `state`, as a uint64 array."""
    i = np.arange(1, n + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64(state) + i * np.uint64(0x9e3779b97f4a7c15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
        return z ^ (z >> np.uint64(31))


def values(name, shape, dtype="f32"):
    """The seeded values of value `name` as a numpy array (bf16 as raw
    uint16 bits), bit-identical to genie_seed_fill."""
    shape = tuple(int(d) for d in shape)
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    r = _splitmix(fnv1a64(name), n)
    kind = dtype_name(dtype_code(dtype))
    if kind in ("i32", "i64"):
        return (r % np.uint64(16)).astype(np.int32 if kind == "i32" else np.int64).reshape(shape)
    if kind == "bool":
        return (r & np.uint64(1)).astype(np.bool_).reshape(shape)
    scale = 1.0 / math.sqrt(shape[-1]) if shape and shape[-1] > 0 else 1.0
    f = ((((r >> np.uint64(40)).astype(np.float64) / 16777216.0) * 2.0 - 1.0) * scale).astype(np.float32)
    if kind == "f32":
        return f.reshape(shape)
    if kind == "f16":
        return f.astype(np.float16).reshape(shape)
    # bf16: round to nearest even on the f32 bits (NaN cannot occur here).
    u = f.view(np.uint32).astype(np.uint64)
    u = (u + np.uint64(0x7fff) + ((u >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)
    return u.astype(np.uint16).reshape(shape)


def checksum(array):
    """Every element as a double, summed in index order (as genie_checksum)."""
    a = np.ascontiguousarray(array)
    if a.dtype == np.uint16:  # bf16 bits
        a = (a.astype(np.uint32) << np.uint32(16)).view(np.float32)
    s = 0.0
    for v in a.ravel().tolist():
        s += float(v)
    return s
