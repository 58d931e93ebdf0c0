"""Tensor: a tensor resident on a device (genie_tensor_t)."""

import numpy as np

from . import errors
from ._handle import _Handle
from ._lib import capi
from .dtypes import _DTYPES, dtype_name
from .enums import PHASES, ROLES, _enum, _name_of


class Tensor(_Handle):
    """A tensor resident on a device until closed (genie_tensor_t). Create
    with Context.tensor or Context.from_numpy. Thread-safe."""

    def __init__(self, handle, ctx):
        self._h = handle
        self._ctx = ctx  # keeps the context alive while the tensor is
        code, shape, nbytes = capi.genie_tensor_info(handle)
        self.dtype = dtype_name(code)
        self.shape = tuple(shape)
        self.nbytes = nbytes
        self._np_dtype = _DTYPES[self.dtype][1]

    @staticmethod
    def _destroy(h):
        capi.genie_tensor_destroy(h)

    @property
    def device(self):
        d = capi.genie_tensor_device(self._h)
        if d is None:
            raise errors.InvalidHandleError("tensor is closed")
        return d

    @property
    def semantics(self):
        """What the tensor is (genie_tensor_set_semantics): a tuple
        (phase, role, layer), e.g. ("decode", "kv_cache", 3); ("unknown",
        "unspecified", -1) while not annotated."""
        phase, role, layer = capi.genie_tensor_get_semantics(self._h)
        return (_name_of(PHASES, phase), _name_of(ROLES, role), layer)

    def set_semantics(self, phase="unknown", role="unspecified", layer=-1):
        """Annotates the tensor (names or genie_phase_t / genie_tensor_role_t
        values; layer -1 unknown): its writes and reads to a server carry
        this semantic tag. All defaults clear it. Bad values raise
        InvalidArgumentError and change nothing."""
        capi.genie_tensor_set_semantics(self._h, _enum(PHASES, phase, "phase"),
                                        _enum(ROLES, role, "role"), int(layer))

    @property
    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def write(self, data, offset=0):
        """Writes `data` at byte `offset`, straight from its buffer. A numpy
        array must have the tensor's dtype (else DtypeMismatchError); any
        C-contiguous buffer (bytes, memoryview ...) is taken as raw bytes.
        Its byte size must fit the tensor (else SizeMismatchError)."""
        if isinstance(data, np.ndarray):
            if data.dtype != self._np_dtype:
                raise errors.DtypeMismatchError(
                    f"array of dtype {data.dtype} written to a {self.dtype} tensor "
                    f"(expected {self._np_dtype})")
            if offset == 0 and data.size != self.size:
                raise errors.SizeMismatchError(
                    f"array of {data.size} elements {list(data.shape)} written to a tensor of "
                    f"{self.size} elements {list(self.shape)} (pass offset= for a partial write)")
            if not data.flags.c_contiguous:
                data = np.ascontiguousarray(data)
        capi.genie_tensor_write(self._h, offset, data)

    def read(self, out=None):
        """Reads the whole tensor into a new numpy array of its dtype and
        shape (or into `out`, a writable C-contiguous array of the same byte
        size), straight into the array's buffer."""
        if out is None:
            out = np.empty(self.shape, self._np_dtype)
        else:
            if isinstance(out, np.ndarray) and out.dtype != self._np_dtype:
                raise errors.DtypeMismatchError(
                    f"reading a {self.dtype} tensor into an array of dtype {out.dtype}")
            n = memoryview(out).nbytes
            if n != self.nbytes:
                raise errors.SizeMismatchError(
                    f"reading a tensor of {self.nbytes} bytes into a buffer of {n} bytes")
        capi.genie_tensor_read(self._h, 0, out)
        return out

    numpy = read

    def __array__(self, dtype=None):
        a = self.read()
        return a if dtype is None else a.astype(dtype)

    def __repr__(self):
        state = "closed" if self._h is None else self.device
        return f"<genie.Tensor {self.dtype}{list(self.shape)} {state}>"
