#!/usr/bin/env bash
# The libFuzzer harnesses (fuzz/), briefly: built with clang into their own
# directory, each run over its committed seeds (every regression seed
# among them) and for 2000 mutations, with ASan and UBSan. Skips (77) where
# clang with libFuzzer is not installed. `make fuzz` runs them for longer.
# The clang build lives where `make fuzz` keeps it (build-fuzz in the source
# tree, or GENIE_FUZZ_BUILD), so that `make test`, `make test-release` and
# `make fuzz` compile it once between them.
# Env: GENIE_SOURCE_DIR (set by ctest), GENIE_FUZZ_BUILD (optional).
set -uo pipefail
SRC=${GENIE_SOURCE_DIR:?GENIE_SOURCE_DIR is not set}
# The harnesses carry their own sanitizers: the options of the sanitized
# test build must not reach them.
unset ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS
exec "$SRC/scripts/fuzz.sh" "${GENIE_FUZZ_BUILD:-$SRC/build-fuzz}" brief
