"""Exceptions of the genie package: one class per GENIE_ERR_* code, grouped
in families. Every one carries ``.code`` (the negative status), ``.name``
(``"GENIE_ERR_PARSE"``) and ``.detail`` (what was wrong, from
genie_last_error() on the thread that failed).

Families (catch a family to handle all its codes)::

    GenieError
    ├── UsageError        bad input: the call changed nothing
    │   InvalidArgumentError (also ValueError), InvalidHandleError,
    │   DtypeMismatchError (also TypeError), ShapeMismatchError,
    │   SizeMismatchError, UnknownOpError, InvalidAttributeError,
    │   InvalidGraphError, ParseError (also ValueError), TooLargeError,
    │   NotFoundError (also LookupError)
    ├── ResourceError     OutOfMemoryError (also MemoryError),
    │                     UnsupportedError (also NotImplementedError)
    ├── RemoteError       TimeoutError (also builtins.TimeoutError),
    │                     ConnectionError (also builtins.ConnectionError),
    │                     AuthError, ProtocolError, VersionMismatchError
    ├── StateError        ShutdownError, CancelledError
    ├── IoError
    └── InternalError
"""

import builtins


class GenieError(Exception):
    """A Genie call failed. ``code``: the status; ``detail``: why."""

    code = 0
    name = "GENIE_ERROR"

    def __init__(self, detail="", code=None):
        if code is not None:
            self.code = code
        self.detail = detail
        super().__init__(f"{self.name}: {detail}" if detail else self.name)

    def __reduce__(self):
        return (type(self), (self.detail, self.code))


class UsageError(GenieError):
    """Bad input: an argument, handle, graph, shape or dtype was wrong."""


class ResourceError(GenieError):
    """Memory or a feature is not available."""


class RemoteError(GenieError):
    """The server could not be reached, refused us, or spoke wrongly."""


class StateError(GenieError):
    """The context is shut down, or the operation was cancelled."""


def _make(cls_name, code, name, bases, doc):
    cls = type(cls_name, bases, {"code": code, "name": name, "__doc__": doc,
                                 "__module__": __name__})
    return cls


InvalidArgumentError = _make("InvalidArgumentError", -1, "GENIE_ERR_INVALID_ARGUMENT",
                             (UsageError, ValueError), "An argument is NULL or out of range.")
InvalidHandleError = _make("InvalidHandleError", -2, "GENIE_ERR_INVALID_HANDLE", (UsageError,),
                           "A handle is NULL, of the wrong kind, or closed.")
OutOfMemoryError = _make("OutOfMemoryError", -3, "GENIE_ERR_OUT_OF_MEMORY",
                         (ResourceError, MemoryError), "Memory could not be allocated.")
DtypeMismatchError = _make("DtypeMismatchError", -4, "GENIE_ERR_DTYPE_MISMATCH",
                           (UsageError, TypeError), "Element types do not agree.")
ShapeMismatchError = _make("ShapeMismatchError", -5, "GENIE_ERR_SHAPE_MISMATCH", (UsageError,),
                           "Shapes do not agree.")
SizeMismatchError = _make("SizeMismatchError", -6, "GENIE_ERR_SIZE_MISMATCH", (UsageError,),
                          "A buffer's byte size does not match the tensor.")
UnknownOpError = _make("UnknownOpError", -7, "GENIE_ERR_UNKNOWN_OP", (UsageError,),
                       "An operator name is not known.")
InvalidAttributeError = _make("InvalidAttributeError", -8, "GENIE_ERR_INVALID_ATTRIBUTE",
                              (UsageError,), "An attribute is unknown, missing or invalid.")
InvalidGraphError = _make("InvalidGraphError", -9, "GENIE_ERR_INVALID_GRAPH", (UsageError,),
                          "The graph is malformed.")
ParseError = _make("ParseError", -10, "GENIE_ERR_PARSE", (UsageError, ValueError),
                   "Text could not be parsed.")
TooLargeError = _make("TooLargeError", -11, "GENIE_ERR_TOO_LARGE", (UsageError,),
                      "A size overflowed or exceeds a limit.")
NotFoundError = _make("NotFoundError", -12, "GENIE_ERR_NOT_FOUND", (UsageError, LookupError),
                      "A named thing does not exist.")
UnsupportedError = _make("UnsupportedError", -13, "GENIE_ERR_UNSUPPORTED",
                         (ResourceError, NotImplementedError),
                         "The feature or device is not available here.")
TimeoutError = _make("TimeoutError", -14, "GENIE_ERR_TIMEOUT", (RemoteError, builtins.TimeoutError),
                     "A wait ran past its timeout.")
ConnectionError = _make("ConnectionError", -15, "GENIE_ERR_CONNECTION",
                        (RemoteError, builtins.ConnectionError),
                        "A network connection failed or was lost.")
AuthError = _make("AuthError", -16, "GENIE_ERR_AUTH", (RemoteError,),
                  "Authentication with the server failed.")
ProtocolError = _make("ProtocolError", -17, "GENIE_ERR_PROTOCOL", (RemoteError,),
                      "A peer broke the wire protocol.")
VersionMismatchError = _make("VersionMismatchError", -18, "GENIE_ERR_VERSION_MISMATCH",
                             (RemoteError,), "Incompatible versions.")
ShutdownError = _make("ShutdownError", -19, "GENIE_ERR_SHUTDOWN", (StateError,),
                      "The context was shut down.")
IoError = _make("IoError", -20, "GENIE_ERR_IO", (GenieError,),
                "A file or operating-system call failed.")
CancelledError = _make("CancelledError", -21, "GENIE_ERR_CANCELLED", (StateError,),
                       "The operation was cancelled.")
InternalError = _make("InternalError", -22, "GENIE_ERR_INTERNAL", (GenieError,),
                      "A bug in Genie: please report it with the detail.")

#: Exception class of every status code.
BY_CODE = {cls.code: cls for cls in (
    InvalidArgumentError, InvalidHandleError, OutOfMemoryError, DtypeMismatchError,
    ShapeMismatchError, SizeMismatchError, UnknownOpError, InvalidAttributeError,
    InvalidGraphError, ParseError, TooLargeError, NotFoundError, UnsupportedError,
    TimeoutError, ConnectionError, AuthError, ProtocolError, VersionMismatchError,
    ShutdownError, IoError, CancelledError, InternalError)}


def from_status(code, detail=""):
    """The exception instance for status ``code`` (a GenieError with that
    code for one this version does not know)."""
    cls = BY_CODE.get(code)
    if cls is None:
        return GenieError(detail, code)
    return cls(detail)


__all__ = ["GenieError", "UsageError", "ResourceError", "RemoteError", "StateError",
           "from_status", "BY_CODE"] + [c.__name__ for c in BY_CODE.values()]
