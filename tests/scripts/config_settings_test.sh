#!/usr/bin/env bash
# docs/configuration.md's settings table is what scripts/gen-config-settings.py
# makes of src/core/config_settings.def: a setting added, removed or changed
# without regenerating the reference fails here.
set -euo pipefail
exec /usr/bin/python3 "${GENIE_SOURCE_DIR:-$(dirname "$0")/../..}/scripts/gen-config-settings.py" --check
