#!/usr/bin/env bash
# The libFuzzer harnesses (fuzz/), briefly: built with clang into their own
# directory, each run over its committed seeds (every regression seed
# among them) and for 2000 mutations, with ASan and UBSan. Skips (77) where
# clang with libFuzzer is not installed. `make fuzz` runs them for longer.
# Env: GENIE_BUILD_DIR, GENIE_SOURCE_DIR (set by ctest).
set -uo pipefail
B=${GENIE_BUILD_DIR:?GENIE_BUILD_DIR is not set}
SRC=${GENIE_SOURCE_DIR:?GENIE_SOURCE_DIR is not set}
# The harnesses carry their own sanitizers: the options of the sanitized
# test build must not reach them.
unset ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS
exec "$SRC/scripts/fuzz.sh" "$B/fuzz" brief
