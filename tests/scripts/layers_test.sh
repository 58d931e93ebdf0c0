#!/usr/bin/env bash
# The layer order of docs/architecture.md holds in the sources.
set -euo pipefail
exec /usr/bin/python3 "${GENIE_SOURCE_DIR:-$(dirname "$0")/../..}/scripts/check-layers.py" "${GENIE_SOURCE_DIR:-$(dirname "$0")/../..}"
