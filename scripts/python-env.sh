#!/usr/bin/env bash
# The project's Python environment for the PyTorch frontends: a virtual
# environment made from Debian's /usr/bin/python3 (with its site packages:
# numpy, pytest), plus what bindings/python/requirements-torch.txt pins,
# from PyPI (PyPI's Linux torch is a CUDA build of a few GB; it runs on the
# CPU where there is no GPU). Made once per set of pins and reused: it lives
# outside the source tree, in $GENIE_PYENV or
# ${XDG_CACHE_HOME:-~/.cache}/genie/pyenv-<hash of the pins>.
#
#   scripts/python-env.sh          makes it if missing; prints its python
#   scripts/python-env.sh --path   prints where its python is (made or not)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
REQ=$SRC/bindings/python/requirements-torch.txt
HASH=$(sha256sum "$REQ" | cut -c1-12)
VENV=${GENIE_PYENV:-${XDG_CACHE_HOME:-$HOME/.cache}/genie/pyenv-$HASH}
if [ "${1:-}" = "--path" ]; then echo "$VENV/bin/python"; exit 0; fi
if [ ! -f "$VENV/.complete" ]; then
  echo "python-env: installing $(grep -v '^#' "$REQ" | tr '\n' ' ')into $VENV (from PyPI)" >&2
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  /usr/bin/python3 -m venv --system-site-packages "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$REQ" >&2
  cp "$REQ" "$VENV/.complete"
fi
echo "$VENV/bin/python"
