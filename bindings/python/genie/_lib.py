"""The C functions the idiomatic layer calls: genie._capi, the SWIG module
without its proxy's Python wrapper call, raising the genie.errors class of a
failing status (with ``.code`` and ``.detail``)."""

from . import capi as _proxy  # noqa: F401 (genie.capi: the SWIG proxy module, for users)
from . import _capi as capi  # the same functions without the proxy's Python wrapper call
from . import errors

capi.genie_py_set_error_factory(errors.from_status)

__all__ = ["capi"]
