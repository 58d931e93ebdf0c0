"""The base of every object that owns one C handle."""


class _Handle:
    """Owns one C handle; subclasses name the destroy function."""

    _h = None

    def close(self):
        h, self._h = self._h, None
        if h is not None:
            self._destroy(h)

    @property
    def closed(self):
        return self._h is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
