#!/usr/bin/env bash
# tests/capi/header_errors_table.h is what scripts/gen-header-errors.py makes
# of include/genie.h: a function added to the header, or an Errors: line
# changed, without regenerating the table fails here.
set -euo pipefail
exec /usr/bin/python3 "${GENIE_SOURCE_DIR:-$(dirname "$0")/../..}/scripts/gen-header-errors.py" --check
