#!/usr/bin/env bash
# The CUDA kernels and the frontends' ops against the op table
# (src/graph/op_table.def; scripts/check-op-table.py says what it checks).
set -euo pipefail
exec /usr/bin/python3 "${GENIE_SOURCE_DIR:-$(dirname "$0")/../..}/scripts/check-op-table.py" "${GENIE_SOURCE_DIR:-$(dirname "$0")/../..}"
