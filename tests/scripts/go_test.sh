#!/usr/bin/env bash
# The Go binding (bindings/go) with Debian's Go toolchain, offline: installs
# this build into a temporary prefix (as a user would), lets `go` find it
# through pkg-config (genie.pc), and runs `go vet` and `go test` on the
# package; `go build` runs SWIG on internal/capi/capi.swig itself, so the
# generated wrapper goes to the Go build cache under the build directory.
# Against a sanitized library (GENIE_SANITIZE=1) the test binary is built
# first and run with the ASan/UBSan runtimes preloaded: Go programs are not
# built with ASan, but libgenie is. Exit 0 pass, 77 skip (no Go or SWIG).
set -euo pipefail
B=${GENIE_BUILD_DIR:?GENIE_BUILD_DIR is not set}
SRC=${GENIE_SOURCE_DIR:?GENIE_SOURCE_DIR is not set}
for tool in go swig pkg-config; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool not installed (scripts/install-deps.sh installs golang-go swig pkg-config)"; exit 77; }
done

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cmake --install "$B" --prefix "$TMP/prefix" >/dev/null
export PKG_CONFIG_PATH=$(dirname "$(find "$TMP/prefix" -name genie.pc | head -n 1)")
libdir=$(dirname "$(find "$TMP/prefix" -name 'libgenie.so.1' | head -n 1)")

# Offline, reproducible Go: no proxy, no checksum database, and a fresh
# build cache: go's cache key does not include pkg-config's output, so a
# cache shared with a build against another prefix would link against it.
export GOPROXY=off GOFLAGS=-mod=mod GOSUMDB=off GO111MODULE=on
export GOCACHE="$TMP/gocache" GOPATH="$TMP/gopath" CGO_ENABLED=1
echo "go_test: $(go version), $(swig -version | sed -n 's/^SWIG Version /SWIG /p')"

cd "$SRC/bindings/go"
go vet .  # the package; internal/capi is SWIG's generated code
go test -c -o "$TMP/genie.test" .

run_env=(env LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
if [ "${GENIE_SANITIZE:-0}" = "1" ]; then
  run_env+=(LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
            ASAN_OPTIONS="detect_leaks=0:verify_asan_link_order=0:abort_on_error=1")
  echo "go_test: sanitized libgenie: running with the ASan/UBSan runtimes preloaded (leak checks off: Go's heap)"
fi
# The tests run in the package directory (go test does the same).
set +e
"${run_env[@]}" "$TMP/genie.test" -test.v -test.count=1 -test.timeout=240s > "$TMP/out.txt" 2>&1
status=$?
set -e
cat "$TMP/out.txt"
[ "$status" -eq 0 ] || { echo "FAIL: go test exited $status"; exit 1; }
# Every test ran (a test file that compiled to nothing would pass silently).
ran=$(grep -c '^--- PASS' "$TMP/out.txt" || true)
[ "$ran" -ge 10 ] || { echo "FAIL: only $ran Go tests passed"; exit 1; }
echo "go_test: $ran Go tests passed"
