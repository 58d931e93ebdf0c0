#!/usr/bin/env bash
# The header keeps the 0.1 ABI (tests/data/abi-0.1.txt) declared, and every
# function or type added since says "@since X.Y" (scripts/check-header-since.py).
# The checker itself is checked too: a header with a 0.1 function removed,
# or with a new function that has no @since, must fail.
set -euo pipefail
SRC=${GENIE_SOURCE_DIR:-$(dirname "$0")/../..}
/usr/bin/python3 "$SRC/scripts/check-header-since.py"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/include" "$TMP/tests/data" "$TMP/scripts"
cp "$SRC/scripts/check-header-since.py" "$TMP/scripts/"
cp "$SRC/tests/data/abi-0.1.txt" "$TMP/tests/data/"
expect_fail() {  # $1: what the broken header lacks; $2: the message expected
  if out=$(/usr/bin/python3 "$TMP/scripts/check-header-since.py" 2>&1); then
    echo "FAIL: a header $1 passed the check"; exit 1
  fi
  grep -q "$2" <<<"$out" || { echo "FAIL: a header $1: unexpected message: $out"; exit 1; }
}
# A 0.1 function removed.
grep -v 'genie_tensor_device(' "$SRC/include/genie.h" > "$TMP/include/genie.h"
expect_fail "without genie_tensor_device" "genie_tensor_device: in the 0.1 ABI"
# A new function without @since.
{ cat "$SRC/include/genie.h"
  printf '/** A function added later. */\nGENIE_API int genie_added_later(void);\n'; } > "$TMP/include/genie.h"
expect_fail "with an undated function" "genie_added_later: added after 0.1"
echo "header_since_test: the 0.1 ABI is declared and later additions are dated; broken headers are caught"
