#!/usr/bin/env bash
# The Rust binding (bindings/rust) with Debian's cargo and rustc (never a
# rustup toolchain earlier on PATH), offline, no registry crates:
#   1. src/ffi.rs is exactly what bindgen makes of include/genie.h now
#      (regen-ffi.sh --check: regenerates into a temporary file, diffs);
#   2. `cargo test --offline`: the safe API's tests, the same drift check,
#      and the doc tests (Graph is not Sync);
# against this build installed into a temporary prefix and found by build.rs
# through pkg-config (genie.pc). Against a sanitized library
# (GENIE_SANITIZE=1) the test binaries run with the ASan/UBSan runtimes
# preloaded (cargo's target runner), leak checks included. Exit 0 pass, 77
# skip (no toolchain).
set -euo pipefail
B=${GENIE_BUILD_DIR:?GENIE_BUILD_DIR is not set}
SRC=${GENIE_SOURCE_DIR:?GENIE_SOURCE_DIR is not set}
CARGO=/usr/bin/cargo
for tool in $CARGO /usr/bin/rustc /usr/bin/rustfmt bindgen pkg-config; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed (scripts/install-deps.sh installs cargo rustc rustfmt bindgen)"; exit 77; }
done

# 1. The checked-in FFI declarations match the header.
bash "$SRC/bindings/rust/regen-ffi.sh" --check

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cmake --install "$B" --prefix "$TMP/prefix" >/dev/null
export PKG_CONFIG_PATH=$(dirname "$(find "$TMP/prefix" -name genie.pc | head -n 1)")
libdir=$(dirname "$(find "$TMP/prefix" -name 'libgenie.so.1' | head -n 1)")
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

export RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc
export CARGO_HOME="$B/bindings/rust/cargo-home" CARGO_TARGET_DIR="$B/bindings/rust/target-test"
export CARGO_NET_OFFLINE=true CARGO_TERM_COLOR=never
if [ "${GENIE_SANITIZE:-0}" = "1" ]; then
  # Rust allocates with malloc, so LeakSanitizer sees every allocation:
  # a handle that Drop failed to release is reported as a leak.
  export CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="env LD_PRELOAD=$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so) ASAN_OPTIONS=detect_leaks=1:verify_asan_link_order=0:abort_on_error=1"
  echo "rust_test: sanitized libgenie: test binaries run with the ASan/UBSan/LSan runtimes preloaded"
fi
echo "rust_test: $($CARGO --version), $(/usr/bin/rustc --version), $(bindgen --version)"

# 2. cargo test.
cd "$SRC/bindings/rust"
set +e
$CARGO test --offline --locked 2>&1 | tee "$TMP/out.txt"
status=${PIPESTATUS[0]}
set -e
[ "$status" -eq 0 ] || { echo "FAIL: cargo test exited $status"; exit 1; }
passed=$(awk '/^test result: ok\./ { n += $4 } END { print n + 0 }' "$TMP/out.txt")
[ "$passed" -ge 12 ] || { echo "FAIL: only $passed Rust tests passed"; exit 1; }
grep -q "^test ffi_matches_header ... ok" "$TMP/out.txt" || { echo "FAIL: the FFI drift test did not run"; exit 1; }
echo "rust_test: $passed Rust tests passed"
