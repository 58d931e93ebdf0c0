"""Element types: Genie dtype codes, their names and the numpy dtypes
exchanged with tensors of each."""

import numpy as np

from . import errors
from ._lib import capi

#: numpy dtype of each Genie dtype (bf16 is exchanged as its raw uint16 bits).
_DTYPES = {
    "f32": (capi.GENIE_DTYPE_F32, np.dtype(np.float32)),
    "f16": (capi.GENIE_DTYPE_F16, np.dtype(np.float16)),
    "bf16": (capi.GENIE_DTYPE_BF16, np.dtype(np.uint16)),
    "i32": (capi.GENIE_DTYPE_I32, np.dtype(np.int32)),
    "i64": (capi.GENIE_DTYPE_I64, np.dtype(np.int64)),
    "bool": (capi.GENIE_DTYPE_BOOL, np.dtype(np.bool_)),
}
_DTYPE_NAMES = {code: name for name, (code, _) in _DTYPES.items()}
_NP_TO_NAME = {np.dtype(np.float32): "f32", np.dtype(np.float16): "f16", np.dtype(np.int32): "i32",
               np.dtype(np.int64): "i64", np.dtype(np.bool_): "bool"}


def dtype_code(dtype):
    """Genie dtype code of a name ("f32"), a numpy dtype, or a code."""
    if isinstance(dtype, str) and dtype in _DTYPES:
        return _DTYPES[dtype][0]
    if isinstance(dtype, (int, np.integer)) and not isinstance(dtype, bool):
        return int(dtype)
    try:
        npd = np.dtype(dtype)
    except TypeError:
        npd = None
    if npd in _NP_TO_NAME:
        return _DTYPES[_NP_TO_NAME[npd]][0]
    raise errors.DtypeMismatchError(f"dtype {dtype!r} has no Genie element type "
                                    f"(use {', '.join(_DTYPES)})")


def dtype_name(code):
    return _DTYPE_NAMES.get(code, "invalid")


def numpy_dtype(dtype):
    """numpy dtype exchanged with Genie tensors of `dtype`."""
    return _DTYPES[dtype_name(dtype_code(dtype))][1]


def _np_dtype_name(npd):
    name = _NP_TO_NAME.get(np.dtype(npd))
    if name is None:
        raise errors.DtypeMismatchError(f"numpy dtype {np.dtype(npd)} has no Genie element type "
                                        f"(float32, float16, int32, int64, bool)")
    return name
