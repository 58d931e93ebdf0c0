"""Future: the result of a submission (genie_future_t)."""

from . import errors
from ._handle import _Handle
from ._lib import capi
from .tensor import Tensor


class Future(_Handle):
    """Result of a submission (genie_future_t). Thread-safe."""

    _token = None

    def __init__(self, handle, ctx, output_names):
        self._h = handle
        self._ctx = ctx
        self.output_names = list(output_names)

    def _destroy(self, h):
        capi.genie_future_destroy(h)  # the callback never runs after this
        token, self._token = self._token, None
        if token is not None:
            capi.genie_py_callback_release(token)

    def close(self):
        h, self._h = self._h, None
        if h is not None:
            self._destroy(h)

    def done(self):
        """True once the graph completed (successfully or not)."""
        return capi.genie_future_poll(self._h) != capi.GENIE_IN_PROGRESS

    def wait(self, timeout=None):
        """Waits for completion (`timeout` seconds, None: no limit); raises
        the execution error, or TimeoutError if still running."""
        if timeout is not None:
            capi.genie_future_wait(self._h, max(0, int(timeout * 1000)))
            return
        while True:  # slices, so Ctrl-C is seen between them
            try:
                capi.genie_future_wait(self._h, 200)
                return
            except errors.TimeoutError:
                continue

    def output(self, key):
        """Output `key` (index or value name) as a Tensor handle of its own."""
        if isinstance(key, str):
            return Tensor(capi.genie_future_output_by_name(self._h, key), self._ctx)
        return Tensor(capi.genie_future_output(self._h, int(key)), self._ctx)

    def result(self, timeout=None):
        """Waits, then returns the outputs as Tensors (still resident where
        they were produced: read them with .numpy())."""
        self.wait(timeout)
        n = capi.genie_future_num_outputs(self._h)
        return [self.output(i) for i in range(n)]

    def numpy(self, timeout=None):
        """Waits, then reads every output: {output name: ndarray}."""
        out = {}
        for name, t in zip(self.output_names, self.result(timeout)):
            with t:
                out[name] = t.read()
        return out

    def add_done_callback(self, fn):
        """Calls fn(future) once the graph completes, on a Genie thread
        holding the GIL (or now, if it already completed). One per future.
        fn must not close this future or shut its context down."""
        ref = self

        def trampoline(status):
            fn(ref)

        self._token = capi.genie_py_future_set_callback(self._h, trampoline)

    @property
    def exec_ns(self):
        """Execution time of the completed graph in nanoseconds."""
        return capi.genie_future_exec_ns(self._h)

    def __repr__(self):
        if self._h is None:
            return "<genie.Future closed>"
        return f"<genie.Future {'done' if self.done() else 'running'} outputs={self.output_names}>"
